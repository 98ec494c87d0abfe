//! Creating `modules/<name>/` from the templates, after checking that the
//! name is valid and free.

use std::fs;
use std::path::PathBuf;

use module_sdk::contract::is_valid_name;

use crate::error::ScaffoldError;
use crate::template::{TEMPLATES, Vars, render};
use crate::workspace::Workspace;

/// A request to create one module.
#[derive(Debug, Clone)]
pub struct Scaffold {
    /// The module's name: crate, binary, directory and tool-name prefix.
    pub name: String,
    /// One line for a person and a model; `None` writes a generic one.
    pub description: Option<String>,
}

/// What [`Scaffold::create`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scaffolded {
    /// The new module's directory.
    pub dir: PathBuf,
    /// The files written, relative to `dir`.
    pub files: Vec<&'static str>,
    /// Whether the root manifest's `members` had to be extended (false when a glob such as `modules/*` covers it).
    pub added_member: bool,
}

impl Scaffold {
    /// Checks the name and writes `modules/<name>/` into `workspace`,
    /// adding it to the workspace members when no entry covers it yet.
    /// Nothing is left behind when it fails.
    pub fn create(&self, workspace: &mut Workspace) -> Result<Scaffolded, ScaffoldError> {
        let name = self.name.as_str();
        if !is_valid_name(name) {
            return Err(ScaffoldError::InvalidName(name.to_owned()));
        }
        let description = match &self.description {
            Some(text) => text.trim().to_owned(),
            None => format!("Tools of the {name} module."),
        };
        if description.is_empty() || description.chars().any(char::is_control) {
            return Err(ScaffoldError::InvalidDescription);
        }
        let relative = format!("modules/{name}");
        let dir = workspace.root().join(&relative);
        let taken = |reason: String| ScaffoldError::NameTaken { name: name.to_owned(), reason };
        if dir.symlink_metadata().is_ok() {
            return Err(taken(format!("{} already exists", dir.display())));
        }
        // `-p <name>` must name one package, and `a-b` and `a_b` are the same crate name.
        if let Some(package) =
            workspace.locked_package_names()?.into_iter().find(|package| package.replace('-', "_") == name)
        {
            return Err(taken(format!(
                "Cargo.lock already has a package named `{package}` (a workspace crate or a dependency)"
            )));
        }

        let modules = workspace.root().join("modules");
        fs::create_dir_all(&modules).map_err(ScaffoldError::io("create", &modules))?;
        fs::create_dir(&dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => taken(format!("{} already exists", dir.display())),
            _ => ScaffoldError::io("create", &dir)(e),
        })?;
        let written = write_files(&dir, &Vars { name, description: &description });
        if let Err(error) = written {
            // Best effort: the error that matters is the one that stopped the writing.
            let _ = fs::remove_dir_all(&dir);
            return Err(error);
        }
        let added_member = !workspace.has_member(&relative)?;
        if added_member {
            workspace.add_member(&relative)?;
        }
        Ok(Scaffolded { dir, files: TEMPLATES.iter().map(|t| t.path).collect(), added_member })
    }
}

/// Renders every template into `dir`.
fn write_files(dir: &std::path::Path, vars: &Vars<'_>) -> Result<(), ScaffoldError> {
    for template in TEMPLATES {
        let path = dir.join(template.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(ScaffoldError::io("create", parent))?;
        }
        fs::write(&path, render(template.text, vars)).map_err(ScaffoldError::io("write", &path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(members: &str) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("Cargo.toml"), format!("[workspace]\nmembers = {members}\n")).unwrap();
        fs::write(dir.path().join("Cargo.lock"), "version = 4\n[[package]]\nname = \"new-module\"\n").unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        (dir, workspace)
    }

    fn scaffold(name: &str) -> Scaffold {
        Scaffold { name: name.to_owned(), description: None }
    }

    #[test]
    fn creates_every_file_under_a_covering_glob() {
        let (dir, mut ws) = workspace(r#"["modules/*"]"#);
        let made = scaffold("weather").create(&mut ws).unwrap();
        assert_eq!(made.dir, dir.path().join("modules/weather"));
        assert!(!made.added_member);
        for file in &made.files {
            let text = fs::read_to_string(made.dir.join(file)).unwrap();
            assert!(text.contains("weather"), "{file}");
        }
        assert_eq!(
            made.files,
            ["Cargo.toml", "src/main.rs", "README.md", "Containerfile", "kubernetes/kustomization.yaml"]
        );
        let manifest = fs::read_to_string(dir.path().join("Cargo.toml")).unwrap();
        assert!(!manifest.contains("modules/weather"), "a glob already covers it:\n{manifest}");
    }

    #[test]
    fn adds_itself_to_members_when_nothing_covers_it() {
        let (dir, mut ws) = workspace(r#"["orchestrator"]"#);
        let made = scaffold("weather").create(&mut ws).unwrap();
        assert!(made.added_member);
        let reopened = Workspace::open(dir.path()).unwrap();
        assert!(reopened.has_member("modules/weather").unwrap());
    }

    #[test]
    fn refuses_invalid_names_and_writes_nothing() {
        let (dir, mut ws) = workspace(r#"["modules/*"]"#);
        for bad in ["Weather", "9lives", "web-search", "", "a_very_long_module_name_that_goes_past_forty"] {
            let error = scaffold(bad).create(&mut ws).unwrap_err();
            assert!(matches!(error, ScaffoldError::InvalidName(_)), "{bad}: {error}");
        }
        assert!(!dir.path().join("modules").exists());
    }

    #[test]
    fn refuses_a_taken_name() {
        let (dir, mut ws) = workspace(r#"["modules/*"]"#);
        scaffold("weather").create(&mut ws).unwrap();
        let again = scaffold("weather").create(&mut ws).unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
        let locked = scaffold("new_module").create(&mut ws).unwrap_err();
        assert!(locked.to_string().contains("Cargo.lock already has a package named `new-module`"), "{locked}");
        assert!(!dir.path().join("modules/new_module").exists());
    }

    #[test]
    fn refuses_a_multi_line_description() {
        let (_dir, mut ws) = workspace(r#"["modules/*"]"#);
        let request = Scaffold { name: "weather".into(), description: Some("one\ntwo".into()) };
        assert!(matches!(request.create(&mut ws), Err(ScaffoldError::InvalidDescription)));
    }
}
