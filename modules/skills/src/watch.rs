//! Watching `SKILLS_DIR`: changes, debounced, reload the tool set; a
//! directory or link replaced on the way to it is followed.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::followed::Followed;
use crate::serve::LiveRouter;
use crate::settings::Settings;

/// Watches `settings.skills_dir`, its skill directories and the names on
/// the way to it, and reloads `live` at most once per debounce period while
/// changes come in; for the life of the process.
pub fn watch(settings: Settings, live: LiveRouter) -> Result<(), String> {
    // One pending reload at most: a change seen while one is pending is in it.
    let (changed, mut changes) = mpsc::channel::<()>(1);
    // Read by the watcher's thread for every event; written by `sync`
    // between its calls to the watcher, never during one (the watcher waits
    // for its thread).
    let followed = Arc::new(RwLock::new(Followed::default()));
    let events_followed = followed.clone();
    let watcher = notify::recommended_watcher(move |result: notify::Result<Event>| match result {
        Ok(event) => {
            if changes_the_catalog(&events_followed.read().unwrap_or_else(PoisonError::into_inner), &event) {
                let _ = changed.try_send(());
            }
        }
        Err(error) => tracing::warn!(%error, "watching SKILLS_DIR"),
    })
    .map_err(|error| format!("cannot watch: {error}"))?;
    let mut watched = Watched { watcher, skills_dir: settings.skills_dir.clone(), followed, watched: BTreeMap::new() };
    watched.sync().map_err(|error| format!("cannot watch {}: {error}", settings.skills_dir.display()))?;
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
                if let Err(error) = watched.lock().unwrap_or_else(PoisonError::into_inner).sync() {
                    tracing::warn!(%error, "cannot watch SKILLS_DIR: a change in it is seen when a name on the way to it changes");
                }
                live.reload(&settings);
            })
            .await;
        }
    });
    Ok(())
}

/// The directories watched, each without what is below it: `SKILLS_DIR`,
/// for skill directories coming and going; every directory in it, for its
/// `SKILL.toml`; and the parent of each name on the way to it, for a
/// replaced directory or link. Not recursive: a skill's own tree (a
/// virtualenv, `node_modules`, what its scripts write) would cost an
/// inotify watch per directory, out of a budget shared by every process of
/// the user.
struct Watched {
    watcher: RecommendedWatcher,
    skills_dir: PathBuf,
    followed: Arc<RwLock<Followed>>,
    /// Each directory watched, by its resolved path, with the file it was
    /// (device and inode) when watched.
    watched: BTreeMap<PathBuf, (u64, u64)>,
}

impl Watched {
    /// Follows `SKILLS_DIR` to where it leads now and watches what that
    /// needs, and no longer what it needed before. Every directory is
    /// watched again (the watcher drops a watch whose directory was moved
    /// away, and the kernel watches a file, not a path); one replaced by
    /// another at its path loses its old watch first. The error is the
    /// directory's own, when it cannot be watched.
    fn sync(&mut self) -> Result<(), notify::Error> {
        let followed = Followed::resolve(&self.skills_dir);
        let mut wanted: BTreeSet<PathBuf> = followed.parents().map(Path::to_path_buf).collect();
        if let Some(root) = &followed.root {
            wanted.insert(root.clone());
            if let Ok(entries) = std::fs::read_dir(root) {
                wanted
                    .extend(entries.filter_map(|entry| entry.ok()?.path().canonicalize().ok()).filter(|p| p.is_dir()));
            }
        }
        let root = followed.root.clone();
        *self.followed.write().unwrap_or_else(PoisonError::into_inner) = followed;
        let mut now = BTreeMap::new();
        let mut root_error = None;
        for directory in wanted {
            let Ok(metadata) = std::fs::metadata(&directory) else { continue };
            let identity = (metadata.dev(), metadata.ino());
            if self.watched.get(&directory).is_some_and(|was| *was != identity) {
                let _ = self.watcher.unwatch(&directory);
            }
            match self.watcher.watch(&directory, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    now.insert(directory, identity);
                }
                Err(error) if root.as_ref() == Some(&directory) => root_error = Some(error),
                // Tried again at the next reload.
                Err(error) => {
                    tracing::warn!(%error, directory = %directory.display(), "cannot watch a directory: a change in it is seen at the next reload");
                }
            }
        }
        for gone in self.watched.keys().filter(|directory| !now.contains_key(*directory)) {
            let _ = self.watcher.unwatch(gone);
        }
        self.watched = now;
        root_error.map_or(Ok(()), Err)
    }
}

/// Whether `event` can change the tool set: anything but a read (an open,
/// or a close without writing: the reload's own reading of the files would
/// otherwise start the next reload) at a path that concerns the catalog, or
/// events the watcher lost.
fn changes_the_catalog(followed: &Followed, event: &Event) -> bool {
    let read = matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write));
    event.need_rescan() || (!read && event.paths.iter().any(|path| followed.concerns(path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, Flag, ModifyKind};

    #[test]
    fn reading_a_skill_file_is_no_change() {
        let followed = Followed { root: Some(PathBuf::from("/skills")), names: vec![PathBuf::from("/skills")] };
        let at = |kind| Event::new(kind).add_path("/skills/a/SKILL.toml".into());
        assert!(changes_the_catalog(&followed, &at(EventKind::Modify(ModifyKind::Any))));
        assert!(changes_the_catalog(&followed, &at(EventKind::Create(CreateKind::File))));
        assert!(!changes_the_catalog(&followed, &at(EventKind::Access(AccessKind::Open(AccessMode::Any)))));
        assert!(!changes_the_catalog(&followed, &at(EventKind::Access(AccessKind::Close(AccessMode::Read)))));
        assert!(changes_the_catalog(&followed, &at(EventKind::Access(AccessKind::Close(AccessMode::Write)))));
        let lost = Event::new(EventKind::Other).set_flag(Flag::Rescan);
        assert!(changes_the_catalog(&followed, &lost));
    }
}
