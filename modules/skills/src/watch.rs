//! Watching `SKILLS_DIR`: changes, debounced, reload the tool set.

use notify_debouncer_mini::notify::RecursiveMode;
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};
use tokio::sync::mpsc;

use crate::serve::LiveRouter;
use crate::settings::Settings;

/// The watcher; dropping it stops the watching.
pub type Watcher = Debouncer<notify_debouncer_mini::notify::RecommendedWatcher>;

/// Watches `settings.skills_dir` (recursively) and reloads `live` after
/// each settled burst of changes.
pub fn watch(settings: Settings, live: LiveRouter) -> Result<Watcher, String> {
    let (changed, mut changes) = mpsc::unbounded_channel::<()>();
    let mut debouncer = new_debouncer(settings.debounce(), move |result: DebounceEventResult| match result {
        Ok(events) if !events.is_empty() => {
            let _ = changed.send(());
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "watching SKILLS_DIR"),
    })
    .map_err(|error| format!("cannot watch: {error}"))?;
    debouncer
        .watcher()
        .watch(&settings.skills_dir, RecursiveMode::Recursive)
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
