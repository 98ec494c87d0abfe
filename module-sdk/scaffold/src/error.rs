//! What can stop a module from being scaffolded.

use std::path::PathBuf;

/// Why a module could not be scaffolded; every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name breaks the contract's rule for module names.
    #[error(
        "`{0}` is not a valid module name: use 1 to 40 characters, lowercase ASCII letters, digits and `_`, starting with a letter (e.g. `weather` or `web_search`)"
    )]
    InvalidName(String),
    /// A module directory, workspace package or dependency already has the name.
    #[error("the name `{name}` is taken: {reason}; choose another name")]
    NameTaken {
        /// The requested name.
        name: String,
        /// What already uses it.
        reason: String,
    },
    /// The description would not fit on one line of the generated files.
    #[error("the description must be one non-empty line of text, without control characters")]
    InvalidDescription,
    /// No `Cargo.toml` with a `[workspace]` table above the start directory.
    #[error("no Cargo workspace found at or above {0}; run from inside the workspace or pass --root <dir>")]
    NoWorkspace(PathBuf),
    /// The root manifest is not valid TOML or has an unusable `members` list.
    #[error("cannot use the workspace manifest {path}: {reason}")]
    BadManifest {
        /// The manifest's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`create`, `read`, `write`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl ScaffoldError {
    /// Wraps an I/O error with what was being done to which path.
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { action, path, source }
    }
}
