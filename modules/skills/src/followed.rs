//! What `SKILLS_DIR` is now, and the names whose replacement would make it
//! another directory: the path as set and every symbolic link met on the
//! way (a symlinked release swapped with `ln -sfn`, Kubernetes' `..data`
//! link renamed over on every ConfigMap update).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::catalog::SKILL_FILE;

/// The most symbolic links followed in one path, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Where `SKILLS_DIR` leads now; compared with each change seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followed {
    /// The directory read, without links; `None` while there is none.
    pub root: Option<PathBuf>,
    /// Each entry whose rename, removal or creation changes what the
    /// directory is: the links on the way to it, then the directory itself,
    /// each as its resolved parent joined with its own name.
    pub names: Vec<PathBuf>,
}

impl Followed {
    /// Resolves `skills_dir` (relative to the working directory) as the
    /// kernel would, noting every link on the way.
    pub fn resolve(skills_dir: &Path) -> Self {
        let Ok(absolute) = std::path::absolute(skills_dir) else { return Self::default() };
        let mut names = Vec::new();
        let mut resolved = PathBuf::from("/");
        let mut pending: Vec<OsString> = Vec::new();
        push_components(&mut pending, &absolute);
        let mut links = 0;
        while let Some(component) = pending.pop() {
            if component == ".." {
                resolved.pop();
                continue;
            }
            let next = resolved.join(&component);
            match std::fs::read_link(&next) {
                Ok(target) => {
                    names.push(next);
                    links += 1;
                    if links > MAX_LINKS {
                        return Self { root: None, names };
                    }
                    if target.is_absolute() {
                        resolved = PathBuf::from("/");
                    }
                    push_components(&mut pending, &target);
                }
                // Not a link, or not there (yet): the rest is as written.
                Err(_) => resolved = next,
            }
        }
        names.push(resolved.clone());
        let root = std::fs::metadata(&resolved).is_ok_and(|metadata| metadata.is_dir()).then_some(resolved);
        Self { root, names }
    }

    /// The directories to watch for these names: each one's parent.
    pub fn parents(&self) -> impl Iterator<Item = &Path> {
        self.names.iter().filter_map(|name| name.parent())
    }

    /// Whether a change at `path` can change the tool set: a `SKILL.toml`,
    /// an entry of the directory (a skill directory created, removed,
    /// renamed), or one of the names on the way to it. Files the scripts
    /// write while they run do not trigger reloads.
    pub fn concerns(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|name| name == SKILL_FILE)
            || (self.root.is_some() && path.parent() == self.root.as_deref())
            || self.names.iter().any(|name| name == path)
    }
}

/// Pushes `path`'s components onto `pending`, last first, so that they pop
/// in order; `.` is dropped, the root is the resolution's start.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    for component in path.components().rev() {
        match component {
            Component::Normal(name) => pending.push(name.to_owned()),
            Component::ParentDir => pending.push("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn only_skill_files_entries_and_the_names_on_the_way_reload() {
        let followed = Followed {
            root: Some(PathBuf::from("/srv/releases/1")),
            names: vec![PathBuf::from("/srv/skills"), PathBuf::from("/srv/releases/1")],
        };
        assert!(followed.concerns(Path::new("/srv/releases/1/a/SKILL.toml")));
        assert!(followed.concerns(Path::new("/srv/releases/1/a")));
        assert!(followed.concerns(Path::new("/srv/skills")));
        assert!(followed.concerns(Path::new("/srv/releases/1")));
        assert!(!followed.concerns(Path::new("/srv/releases/1/a/scripts/out.txt")));
        assert!(!followed.concerns(Path::new("/srv/releases/1/a/child.pid")));
        assert!(!followed.concerns(Path::new("/srv/other")));
        assert!(!followed.concerns(Path::new("/srv/releases/2")));
    }

    #[test]
    fn links_on_the_way_are_noted_as_the_kernel_follows_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("volume/..2026_1/skills")).unwrap();
        symlink("..2026_1", top.join("volume/..data")).unwrap();
        symlink("..data/skills", top.join("volume/skills")).unwrap();
        // An absolute link, then `..` after it: the parent of its target.
        symlink(top.join("volume/..2026_1/skills"), top.join("absolute")).unwrap();
        let followed = Followed::resolve(&top.join("volume/skills"));
        assert_eq!(followed.root, Some(top.join("volume/..2026_1/skills")));
        let names = [top.join("volume/skills"), top.join("volume/..data"), top.join("volume/..2026_1/skills")];
        assert_eq!(followed.names, names);
        let parent = Followed::resolve(&top.join("absolute/../skills/./"));
        assert_eq!(parent.root, Some(top.join("volume/..2026_1/skills")));
        assert_eq!(parent.names, [top.join("absolute"), top.join("volume/..2026_1/skills")]);
        // Missing: no directory, its name still followed.
        let missing = Followed::resolve(&top.join("missing"));
        assert_eq!((missing.root, missing.names), (None, vec![top.join("missing")]));
        // A loop ends.
        symlink("loop", top.join("loop")).unwrap();
        assert_eq!(Followed::resolve(&top.join("loop")).root, None);
    }
}
