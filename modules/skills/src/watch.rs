//! Watching `SKILLS_DIR`: changes, debounced, reload the tool set.

use std::path::Path;

use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use tokio::sync::mpsc;

use crate::catalog::SKILL_FILE;
use crate::serve::LiveRouter;
use crate::settings::Settings;

/// The watcher; dropping it stops the watching.
pub type Watcher = Debouncer<notify_debouncer_mini::notify::RecommendedWatcher>;

/// Watches `settings.skills_dir` (recursively) and reloads `live` after
/// each settled burst of changes.
pub fn watch(settings: Settings, live: LiveRouter) -> Result<Watcher, String> {
    let (changed, mut changes) = mpsc::unbounded_channel::<()>();
    let watched = settings.skills_dir.canonicalize().unwrap_or_else(|_| settings.skills_dir.clone());
    let root = watched.clone();
    let mut debouncer = new_debouncer(settings.debounce(), move |result: DebounceEventResult| match result {
        Ok(events) => {
            if events.iter().any(|event| concerns_the_catalog(&root, &event.path)) {
                let _ = changed.send(());
            }
        }
        Err(error) => tracing::warn!(%error, "watching SKILLS_DIR"),
    })
    .map_err(|error| format!("cannot watch: {error}"))?;
    debouncer
        .watcher()
        .watch(&watched, RecursiveMode::Recursive)
        .map_err(|error| format!("cannot watch {}: {error}", settings.skills_dir.display()))?;
    tokio::spawn(async move {
        while changes.recv().await.is_some() {
            // One reload for everything queued meanwhile.
            while changes.try_recv().is_ok() {}
            let settings = settings.clone();
            let live = live.clone();
            // Reading files and building schemas is blocking work.
            let _ = tokio::task::spawn_blocking(move || live.reload(&settings)).await;
        }
    });
    Ok(debouncer)
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

    #[test]
    fn only_skill_files_and_skill_directories_reload() {
        let root = Path::new("/skills");
        assert!(concerns_the_catalog(root, Path::new("/skills/a/SKILL.toml")));
        assert!(concerns_the_catalog(root, Path::new("/skills/a")));
        assert!(!concerns_the_catalog(root, Path::new("/skills/a/scripts/out.txt")));
        assert!(!concerns_the_catalog(root, Path::new("/skills/a/child.pid")));
    }
}
