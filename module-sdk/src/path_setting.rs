//! A module's settings that name a path of its own (a database file, a data
//! directory): made absolute before use, so that an error names the place
//! it really is and the setting to change. An MCP client starts a module
//! with `--stdio` in a working directory of its own choosing (often `/`),
//! where a relative default such as `./data/notes.db` lands somewhere
//! surprising.

use std::path::{Path, PathBuf};

/// What a module does with the path a [`PathSetting`] names, for the
/// advice in its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    /// The module creates it (and the directories above it) when missing,
    /// and writes it: a database file, a data directory.
    Create,
    /// It is a directory that must exist already, which the module reads.
    ReadDirectory,
}

/// A setting naming a path, read by clap as `#[arg(long, env = NAME)]`:
/// the environment variable `NAME`, or the flag of the same name in lower
/// case with dashes (`NOTES_DB`, `--notes-db`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSetting {
    /// The environment variable, e.g. `NOTES_DB`.
    pub name: &'static str,
    /// What the path is, as errors name it, e.g. `the database`.
    pub what: &'static str,
    /// What the module does with it.
    pub usage: PathUse,
}

/// Why the path a [`PathSetting`] names cannot be used; each message names
/// the setting and says to set it to an absolute path.
#[derive(Debug, thiserror::Error)]
pub enum PathSettingError {
    /// The path is relative and the working directory cannot be read (it
    /// was removed, say), so there is no place it names.
    #[error(
        "cannot use {}={}: it is relative, and the working directory cannot be read ({source}); {}",
        setting.name,
        given.display(),
        setting.advice()
    )]
    WorkingDirectory {
        /// The setting.
        setting: PathSetting,
        /// The path as given.
        given: PathBuf,
        /// Why the working directory cannot be read.
        source: std::io::Error,
    },
    /// The module could not create, open or read the path.
    #[error(
        "cannot use {} {} ({}={}): {reason}; {}",
        setting.what,
        path.display(),
        setting.name,
        given.display(),
        setting.advice()
    )]
    Unusable {
        /// The setting.
        setting: PathSetting,
        /// The path as given.
        given: PathBuf,
        /// The absolute path that was tried.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
}

impl PathSetting {
    /// `given` as an absolute path (a relative one is taken from the working
    /// directory, without resolving symbolic links), for the module to use
    /// and its errors to name.
    pub fn absolute(&self, given: &Path) -> Result<PathBuf, PathSettingError> {
        std::path::absolute(given).map_err(|source| PathSettingError::WorkingDirectory {
            setting: *self,
            given: given.to_owned(),
            source,
        })
    }

    /// The error for `path` (the [`absolute`](Self::absolute) form of
    /// `given`) that cannot be used for `reason`.
    pub fn unusable(&self, given: &Path, path: &Path, reason: impl std::fmt::Display) -> PathSettingError {
        PathSettingError::Unusable {
            setting: *self,
            given: given.to_owned(),
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// What to do about a path that cannot be used.
    fn advice(&self) -> String {
        let flag = self.name.to_ascii_lowercase().replace('_', "-");
        let place = match self.usage {
            PathUse::Create => "in a directory this process may create and write",
            PathUse::ReadDirectory => "of a directory that exists and this process may read",
        };
        format!(
            "set {} (or --{flag}) to an absolute path {place} (MCP clients start a module with --stdio in a working \
             directory of their own, often /)",
            self.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: PathSetting = PathSetting { name: "NOTES_DB", what: "the database", usage: PathUse::Create };

    #[test]
    fn a_relative_path_is_taken_from_the_working_directory() {
        let working = std::env::current_dir().unwrap();
        assert_eq!(DB.absolute(Path::new("./data/notes.db")).unwrap(), working.join("data/notes.db"));
        assert_eq!(DB.absolute(Path::new("/var/notes.db")).unwrap(), Path::new("/var/notes.db"));
    }

    #[test]
    fn errors_name_the_absolute_path_the_setting_and_its_flag() {
        let error = DB.unusable(Path::new("data/n.db"), Path::new("/w/data/n.db"), "denied").to_string();
        assert_eq!(
            error,
            "cannot use the database /w/data/n.db (NOTES_DB=data/n.db): denied; set NOTES_DB (or --notes-db) to an \
             absolute path in a directory this process may create and write (MCP clients start a module with \
             --stdio in a working directory of their own, often /)"
        );
        let skills = PathSetting { name: "SKILLS_DIR", what: "the skills directory", usage: PathUse::ReadDirectory };
        let error = skills.unusable(Path::new("s"), Path::new("/s"), "missing").to_string();
        assert!(error.contains("set SKILLS_DIR (or --skills-dir) to an absolute path of a directory that exists"));
    }
}
