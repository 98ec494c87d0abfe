//! `new-module <name>`: scaffolds `modules/<name>/` in this workspace.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use new_module::{Scaffold, ScaffoldError, Workspace};

/// Create a new tool module crate under modules/ in this Cargo workspace.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    /// The module's name: ^[a-z][a-z0-9_]{0,39}$ (e.g. `weather`); also the crate, binary and tool-name prefix.
    name: String,
    /// One line describing the module's tools, for a person and a model.
    #[arg(long)]
    description: Option<String>,
    /// The workspace root; by default the nearest directory at or above the
    /// current one whose Cargo.toml has a [workspace] table.
    #[arg(long)]
    root: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("new-module: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), ScaffoldError> {
    let mut workspace = match &cli.root {
        Some(root) => Workspace::open(root)?,
        None => {
            let here = std::env::current_dir().map_err(|e| ScaffoldError::Io {
                action: "read",
                path: ".".into(),
                source: e,
            })?;
            Workspace::discover(&here)?
        }
    };
    let name = cli.name.clone();
    let made = Scaffold { name: cli.name, description: cli.description }.create(&mut workspace)?;
    println!("Created {}:", made.dir.display());
    for file in &made.files {
        println!("  {file}");
    }
    if made.added_member {
        println!("Added modules/{name} to the workspace members in Cargo.toml.");
    }
    println!("Next: `cargo test -p {name}`, then `PORT=8000 cargo run -p {name}`.");
    Ok(())
}
