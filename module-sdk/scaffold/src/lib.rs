//! Scaffolds a new tool module crate in this workspace: `modules/<name>/`
//! with a manifest, one documented example tool and its in-process test, a
//! README and a Containerfile, ready to build, test and pass the contract
//! tests without an edit.

mod error;
mod scaffold;
mod template;
mod workspace;

pub use error::ScaffoldError;
pub use scaffold::{Scaffold, Scaffolded};
pub use template::{TEMPLATES, Template, Vars, render};
pub use workspace::Workspace;
