//! Watching `SKILLS_DIR`: changes, debounced, reload the tool set.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::catalog::SKILL_FILE;
use crate::serve::LiveRouter;
use crate::settings::Settings;

/// Watches `settings.skills_dir` and its skill directories, and reloads
/// `live` at most once per debounce period while changes come in; for the
/// life of the process.
pub fn watch(settings: Settings, live: LiveRouter) -> Result<(), String> {
    // One pending reload at most: a change seen while one is pending is in it.
    let (changed, mut changes) = mpsc::channel::<()>(1);
    let root = settings.skills_dir.canonicalize().unwrap_or_else(|_| settings.skills_dir.clone());
    let events_root = root.clone();
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<Event>| match result {
        Ok(event) => {
            if changes_the_catalog(&events_root, &event) {
                let _ = changed.try_send(());
            }
        }
        Err(error) => tracing::warn!(%error, "watching SKILLS_DIR"),
    })
    .map_err(|error| format!("cannot watch: {error}"))?;
    watcher
        .watch(&root, RecursiveMode::NonRecursive)
        .map_err(|error| format!("cannot watch {}: {error}", settings.skills_dir.display()))?;
    let mut watched = Watched { watcher, root, skills: BTreeSet::new() };
    watched.sync();
    let watched = Arc::new(Mutex::new(watched));
    tokio::spawn(async move {
        while changes.recv().await.is_some() {
            // The rest of the burst, before the files are read.
            tokio::time::sleep(settings.debounce()).await;
            let _ = changes.try_recv();
            let (settings, live, watched) = (settings.clone(), live.clone(), watched.clone());
            // Listing directories, reading files and building schemas is blocking work.
            let _ = tokio::task::spawn_blocking(move || {
                // Before the files are read: a SKILL.toml written into a new
                // skill directory after this is seen by its watch.
                watched.lock().unwrap_or_else(PoisonError::into_inner).sync();
                live.reload(&settings);
            })
            .await;
        }
    });
    Ok(())
}

/// The directories watched, each without what is below it: `SKILLS_DIR`,
/// for skill directories coming and going, and every directory in it, for
/// its `SKILL.toml`. Not recursive: a skill's own tree (a virtualenv,
/// `node_modules`, what its scripts write) would cost an inotify watch per
/// directory, out of a budget shared by every process of the user.
struct Watched {
    watcher: RecommendedWatcher,
    root: PathBuf,
    skills: BTreeSet<PathBuf>,
}

impl Watched {
    /// Watches every directory now in the root, and no longer those gone.
    fn sync(&mut self) {
        let now: BTreeSet<PathBuf> = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries.filter_map(Result::ok).map(|entry| entry.path()).filter(|p| p.is_dir()).collect(),
            Err(_) => BTreeSet::new(),
        };
        for gone in self.skills.difference(&now) {
            let _ = self.watcher.unwatch(gone);
        }
        let mut watched = BTreeSet::new();
        for directory in now {
            if !self.skills.contains(&directory)
                && let Err(error) = self.watcher.watch(&directory, RecursiveMode::NonRecursive)
            {
                // Left out, so that the next reload tries again.
                tracing::warn!(%error, directory = %directory.display(), "cannot watch a skill directory: a change to its SKILL.toml is seen at the next reload");
                continue;
            }
            watched.insert(directory);
        }
        self.skills = watched;
    }
}

/// Whether `event` can change the tool set: anything but a read (an open,
/// or a close without writing: the reload's own reading of the files would
/// otherwise start the next reload) at a path that concerns the catalog, or
/// events the watcher lost.
fn changes_the_catalog(root: &Path, event: &Event) -> bool {
    let read = matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write));
    event.need_rescan() || (!read && event.paths.iter().any(|path| concerns_the_catalog(root, path)))
}

/// Whether a change at `path` can change the tool set: a `SKILL.toml`, or a
/// skill directory itself (created, removed, renamed). Files the scripts
/// write while they run do not trigger reloads.
fn concerns_the_catalog(root: &Path, path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == SKILL_FILE) || path.parent() == Some(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, Flag, ModifyKind};

    #[test]
    fn only_skill_files_and_skill_directories_reload() {
        let root = Path::new("/skills");
        assert!(concerns_the_catalog(root, Path::new("/skills/a/SKILL.toml")));
        assert!(concerns_the_catalog(root, Path::new("/skills/a")));
        assert!(!concerns_the_catalog(root, Path::new("/skills/a/scripts/out.txt")));
        assert!(!concerns_the_catalog(root, Path::new("/skills/a/child.pid")));
    }

    #[test]
    fn reading_a_skill_file_is_no_change() {
        let root = Path::new("/skills");
        let at = |kind| Event::new(kind).add_path("/skills/a/SKILL.toml".into());
        assert!(changes_the_catalog(root, &at(EventKind::Modify(ModifyKind::Any))));
        assert!(changes_the_catalog(root, &at(EventKind::Create(CreateKind::File))));
        assert!(!changes_the_catalog(root, &at(EventKind::Access(AccessKind::Open(AccessMode::Any)))));
        assert!(!changes_the_catalog(root, &at(EventKind::Access(AccessKind::Close(AccessMode::Read)))));
        assert!(changes_the_catalog(root, &at(EventKind::Access(AccessKind::Close(AccessMode::Write)))));
        let lost = Event::new(EventKind::Other).set_flag(Flag::Rescan);
        assert!(changes_the_catalog(root, &lost));
    }
}
