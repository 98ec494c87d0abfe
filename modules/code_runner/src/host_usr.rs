//! What of the host's `/usr` a run does not see: `/usr` is mounted whole
//! (the interpreter and its libraries live there), then the directories
//! that hold a host's own programs, configuration and sources are covered
//! with empty read-only file systems, keeping what Python needs of them.

use std::path::{Path, PathBuf};

/// The directories of `/usr` covered when the host has them: locally
/// installed programs (module binaries among them) and their
/// configuration, `/usr/etc`, and sources.
const COVERED: [&str; 3] = ["/usr/local", "/usr/etc", "/usr/src"];

/// bubblewrap's arguments that cover [`COVERED`] (those that exist), after
/// `/usr` is bound: an empty tmpfs on each, then, read-only, the Python
/// packages installed there (`lib/python3*`) and, for an interpreter
/// installed there (`/usr/local/bin/python3.12` in the official Python
/// image), the interpreter and its prefix's `lib` (the prefix Python
/// derives from its executable's place), then the tmpfs made read-only.
pub fn cover_arguments(python: &Path) -> Vec<String> {
    let real_python = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
    let mut args = Vec::new();
    for covered in COVERED.map(Path::new).into_iter().filter(|dir| dir.is_dir()) {
        let mut kept = python_packages(&covered.join("lib"));
        if real_python.starts_with(covered) {
            let prefix_lib = real_python.parent().and_then(Path::parent).map(|prefix| prefix.join("lib"));
            kept.extend(prefix_lib.filter(|lib| lib.is_dir()));
            kept.push(real_python.clone());
        }
        if python.starts_with(covered) && python != real_python {
            kept.push(python.to_path_buf());
        }
        args.extend(arguments_for(covered, &kept, &real_python));
    }
    args
}

/// The `lib/python3*` directories under `lib`.
fn python_packages(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3"))
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    found.sort();
    found
}

/// Covers `covered`, binds each of `kept` back read-only (the configured
/// interpreter path, a link on the host, gets `real_python`'s file), and
/// makes the cover read-only.
fn arguments_for(covered: &Path, kept: &[PathBuf], real_python: &Path) -> Vec<String> {
    let text = |path: &Path| path.to_string_lossy().into_owned();
    let mut args = vec!["--tmpfs".to_owned(), text(covered)];
    for path in kept {
        let source = if path.is_symlink() { real_python } else { path };
        args.extend(["--ro-bind".to_owned(), text(source), text(path)]);
    }
    args.extend(["--remount-ro".to_owned(), text(covered)]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_covered_directory_keeps_only_the_python_kept_in_it() {
        let kept = [PathBuf::from("/usr/local/lib"), PathBuf::from("/usr/local/bin/python3.12")];
        let args = arguments_for(Path::new("/usr/local"), &kept, Path::new("/usr/local/bin/python3.12"));
        assert_eq!(
            args,
            [
                "--tmpfs",
                "/usr/local",
                "--ro-bind",
                "/usr/local/lib",
                "/usr/local/lib",
                "--ro-bind",
                "/usr/local/bin/python3.12",
                "/usr/local/bin/python3.12",
                "--remount-ro",
                "/usr/local"
            ]
        );
    }

    #[test]
    fn the_default_interpreter_is_not_kept_where_it_is_not() {
        let args = cover_arguments(Path::new("/usr/bin/python3"));
        assert!(!args.iter().any(|arg| arg.starts_with("/usr/bin")), "{args:?}");
        if Path::new("/usr/local").is_dir() {
            let cover = args.iter().position(|arg| arg == "/usr/local").unwrap();
            assert_eq!(args[cover - 1], "--tmpfs");
        }
    }
}
