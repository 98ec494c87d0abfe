//! Watching `SKILLS_DIR`: changes, debounced, reload the tool set.

use std::path::Path;

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

use crate::catalog::SKILL_FILE;
use crate::serve::LiveRouter;
use crate::settings::Settings;

/// The watcher; dropping it stops the watching.
pub type Watcher = RecommendedWatcher;

/// Watches `settings.skills_dir` (recursively) and reloads `live` at most
/// once per debounce period while changes come in.
pub fn watch(settings: Settings, live: LiveRouter) -> Result<Watcher, String> {
    // One pending reload at most: a change seen while one is pending is in it.
    let (changed, mut changes) = mpsc::channel::<()>(1);
    let watched = settings.skills_dir.canonicalize().unwrap_or_else(|_| settings.skills_dir.clone());
    let root = watched.clone();
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<Event>| match result {
        Ok(event) => {
            if changes_the_catalog(&root, &event) {
                let _ = changed.try_send(());
            }
        }
        Err(error) => tracing::warn!(%error, "watching SKILLS_DIR"),
    })
    .map_err(|error| format!("cannot watch: {error}"))?;
    watcher
        .watch(&watched, RecursiveMode::Recursive)
        .map_err(|error| format!("cannot watch {}: {error}", settings.skills_dir.display()))?;
    tokio::spawn(async move {
        while changes.recv().await.is_some() {
            // The rest of the burst, before the files are read.
            tokio::time::sleep(settings.debounce()).await;
            let _ = changes.try_recv();
            let settings = settings.clone();
            let live = live.clone();
            // Reading files and building schemas is blocking work.
            let _ = tokio::task::spawn_blocking(move || live.reload(&settings)).await;
        }
    });
    Ok(watcher)
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
