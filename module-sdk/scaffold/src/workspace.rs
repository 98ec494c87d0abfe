//! The Cargo workspace a module is added to: found by walking up to the
//! `Cargo.toml` that has a `[workspace]` table, as Cargo itself does.

use std::fs;
use std::path::{Path, PathBuf};

use glob::{MatchOptions, Pattern};
use toml_edit::{Array, DocumentMut, Item};

use crate::error::ScaffoldError;

/// A workspace root and its parsed manifest.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    manifest: DocumentMut,
}

impl Workspace {
    /// Finds the workspace whose root manifest is in `start` or the nearest directory above it.
    pub fn discover(start: &Path) -> Result<Self, ScaffoldError> {
        let start = fs::canonicalize(start).map_err(ScaffoldError::io("read", start))?;
        for dir in start.ancestors() {
            match Self::open(dir) {
                Err(ScaffoldError::NoWorkspace(_)) => continue,
                found => return found,
            }
        }
        Err(ScaffoldError::NoWorkspace(start))
    }

    /// Opens the workspace whose root manifest is `root/Cargo.toml`.
    pub fn open(root: &Path) -> Result<Self, ScaffoldError> {
        let path = root.join("Cargo.toml");
        if !path.is_file() {
            return Err(ScaffoldError::NoWorkspace(root.to_owned()));
        }
        let text = fs::read_to_string(&path).map_err(ScaffoldError::io("read", &path))?;
        let manifest: DocumentMut =
            text.parse().map_err(|e| ScaffoldError::BadManifest { path: path.clone(), reason: format!("{e}") })?;
        if !manifest.contains_table("workspace") {
            return Err(ScaffoldError::NoWorkspace(root.to_owned()));
        }
        Ok(Self { root: root.to_owned(), manifest })
    }

    /// The directory holding the root `Cargo.toml`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `workspace.members` (less `workspace.exclude`) covers the
    /// directory `relative` (written with `/`, relative to the root).
    pub fn has_member(&self, relative: &str) -> Result<bool, ScaffoldError> {
        let options = MatchOptions { require_literal_separator: true, ..MatchOptions::new() };
        let matches = |key: &str| -> Result<bool, ScaffoldError> {
            for pattern in self.string_list(key)? {
                let pattern = Pattern::new(pattern.trim_start_matches("./").trim_end_matches('/'))
                    .map_err(|e| self.bad_manifest(format!("`workspace.{key}` entry `{pattern}`: {e}")))?;
                if pattern.matches_with(relative, options) {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        Ok(matches("members")? && !matches("exclude")?)
    }

    /// Appends `relative` to `workspace.members` and saves the manifest,
    /// keeping its formatting and comments.
    pub fn add_member(&mut self, relative: &str) -> Result<(), ScaffoldError> {
        let members = self.manifest["workspace"]
            .as_table_like_mut()
            .expect("checked when opened")
            .entry("members")
            .or_insert_with(|| Item::Value(Array::new().into()));
        let Some(members) = members.as_array_mut() else {
            return Err(self.bad_manifest("`workspace.members` is not an array".to_owned()));
        };
        members.push(relative);
        let path = self.root.join("Cargo.toml");
        fs::write(&path, self.manifest.to_string()).map_err(ScaffoldError::io("write", path))
    }

    /// The names of every package in `Cargo.lock` (workspace crates and
    /// dependencies); empty when there is no lock file yet.
    pub fn locked_package_names(&self) -> Result<Vec<String>, ScaffoldError> {
        let path = self.root.join("Cargo.lock");
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ScaffoldError::io("read", path)(e)),
        };
        let lock: DocumentMut =
            text.parse().map_err(|e| ScaffoldError::BadManifest { path: path.clone(), reason: format!("{e}") })?;
        let names = lock
            .get("package")
            .and_then(Item::as_array_of_tables)
            .into_iter()
            .flatten()
            .filter_map(|package| package.get("name").and_then(Item::as_str).map(str::to_owned))
            .collect();
        Ok(names)
    }

    /// The strings of `workspace.<key>`, or none when it is absent.
    fn string_list(&self, key: &str) -> Result<Vec<&str>, ScaffoldError> {
        let Some(item) = self.manifest["workspace"].get(key) else {
            return Ok(Vec::new());
        };
        let array = item.as_array().ok_or_else(|| self.bad_manifest(format!("`workspace.{key}` is not an array")))?;
        array
            .iter()
            .map(|value| {
                value.as_str().ok_or_else(|| self.bad_manifest(format!("`workspace.{key}` holds a non-string")))
            })
            .collect()
    }

    fn bad_manifest(&self, reason: String) -> ScaffoldError {
        ScaffoldError::BadManifest { path: self.root.join("Cargo.toml"), reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(manifest: &str) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("Cargo.toml"), manifest).unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        (dir, workspace)
    }

    #[test]
    fn discovery_walks_up_past_member_manifests() {
        let (dir, _) = workspace("[workspace]\nmembers = [\"crates/*\"]\n");
        let member = dir.path().join("crates/a/src");
        fs::create_dir_all(&member).unwrap();
        fs::write(dir.path().join("crates/a/Cargo.toml"), "[package]\nname = \"a\"\n").unwrap();
        let found = Workspace::discover(&member).unwrap();
        assert_eq!(found.root(), fs::canonicalize(dir.path()).unwrap());
    }

    #[test]
    fn a_directory_outside_any_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"lonely\"\n").unwrap();
        let error = Workspace::open(dir.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NoWorkspace(_)), "{error}");
        assert!(error.to_string().contains("--root"), "{error}");
    }

    #[test]
    fn members_globs_and_excludes_decide_membership() {
        let (_dir, ws) = workspace("[workspace]\nmembers = [\"modules/*\", \"tools\"]\nexclude = [\"modules/old\"]\n");
        assert!(ws.has_member("modules/weather").unwrap());
        assert!(ws.has_member("tools").unwrap());
        assert!(!ws.has_member("modules/old").unwrap());
        assert!(!ws.has_member("modules/weather/inner").unwrap(), "`*` must not cross a `/`");
        assert!(!ws.has_member("other/weather").unwrap());
    }

    #[test]
    fn adding_a_member_keeps_the_manifest_and_its_comments() {
        let (dir, mut ws) = workspace(
            "# top comment\n[workspace]\nmembers = [\"a\"] # keep me\n\n[workspace.package]\nversion = \"1.0.0\"\n",
        );
        ws.add_member("modules/weather").unwrap();
        let saved = fs::read_to_string(dir.path().join("Cargo.toml")).unwrap();
        assert!(saved.starts_with("# top comment\n"), "{saved}");
        assert!(saved.contains("# keep me"), "{saved}");
        let reopened = Workspace::open(dir.path()).unwrap();
        assert!(reopened.has_member("modules/weather").unwrap());
        assert!(reopened.has_member("a").unwrap());
    }

    #[test]
    fn locked_names_come_from_the_lock_file() {
        let (dir, ws) = workspace("[workspace]\n");
        assert!(ws.locked_package_names().unwrap().is_empty());
        fs::write(
            dir.path().join("Cargo.lock"),
            "version = 4\n[[package]]\nname = \"serde\"\n[[package]]\nname = \"my-crate\"\n",
        )
        .unwrap();
        assert_eq!(ws.locked_package_names().unwrap(), ["serde", "my-crate"]);
    }
}
