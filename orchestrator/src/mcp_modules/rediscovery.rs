//! Discovering an MCP module again on its server's word: a
//! `notifications/tools/list_changed`, or its session ending or coming
//! back. A module is discovered again at most once per
//! [`REDISCOVERY_INTERVAL`]; what arrives meanwhile is merged into one
//! discovery at the end of it, so a server sending thousands of
//! notifications a second costs one `tools/list` a second (and its
//! callers on `/mcp` at most one `list_changed` a second), and none is lost.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::registry::Registry;

/// The shortest time between two discoveries of one module on its server's word.
pub const REDISCOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// The modules waiting to be discovered again, each once however often it is asked for.
#[derive(Debug, Default)]
pub struct Changes {
    waiting: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl Changes {
    /// Asks for `module` to be discovered again.
    pub fn mark(&self, module: &str) {
        let mut waiting = self.waiting();
        if !waiting.contains(module) {
            waiting.insert(module.to_owned());
            drop(waiting);
            self.wake.notify_one();
        }
    }

    fn waiting(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Discovers the modules asked for in `registry`, each at most once per
    /// [`REDISCOVERY_INTERVAL`], one after the other, for as long as the runtime lasts.
    pub async fn follow(&self, registry: &Registry) {
        let mut schedule = Schedule::default();
        loop {
            schedule.waiting.append(&mut self.waiting());
            let due = schedule.due(Instant::now());
            for module in &due {
                // A failure is recorded in the registry (GET /modules).
                let _ = registry.discover(module).await;
            }
            if !due.is_empty() {
                continue;
            }
            match schedule.next() {
                Some(at) => tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = self.wake.notified() => {}
                },
                None => self.wake.notified().await,
            }
        }
    }
}

/// Which waiting modules may be discovered again, and when the others may.
#[derive(Debug, Default)]
struct Schedule {
    waiting: BTreeSet<String>,
    /// When each module was last discovered on its server's word.
    last: HashMap<String, Instant>,
}

impl Schedule {
    /// The waiting modules not discovered within [`REDISCOVERY_INTERVAL`]
    /// before `now`, taken out of the waiting ones as discovered at `now`.
    fn due(&mut self, now: Instant) -> Vec<String> {
        let last = &self.last;
        let due: Vec<String> = self
            .waiting
            .iter()
            .filter(|module| last.get(*module).is_none_or(|at| now >= *at + REDISCOVERY_INTERVAL))
            .cloned()
            .collect();
        for module in &due {
            self.waiting.remove(module);
            self.last.insert(module.clone(), now);
        }
        due
    }

    /// When the first of the waiting modules is due.
    fn next(&self) -> Option<Instant> {
        self.waiting.iter().filter_map(|module| self.last.get(module)).map(|at| *at + REDISCOVERY_INTERVAL).min()
    }
}

/// Starts following `changes` for `registry` in a task.
pub fn spawn(changes: Arc<Changes>, registry: Arc<Registry>) {
    tokio::spawn(async move { changes.follow(&registry).await });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_asked_for_again_within_the_interval_waits_for_its_end_once() {
        let start = Instant::now();
        let mut schedule = Schedule::default();
        schedule.waiting.extend(["a".to_owned(), "b".to_owned()]);
        assert_eq!(schedule.due(start), ["a", "b"], "the first time at once");
        assert_eq!(schedule.next(), None);
        // Asked for three times meanwhile: still one waiting discovery.
        for _ in 0..3 {
            schedule.waiting.insert("a".to_owned());
        }
        let soon = start + REDISCOVERY_INTERVAL / 2;
        assert!(schedule.due(soon).is_empty());
        assert_eq!(schedule.next(), Some(start + REDISCOVERY_INTERVAL));
        assert_eq!(schedule.due(start + REDISCOVERY_INTERVAL), ["a"]);
        assert!(schedule.waiting.is_empty() && schedule.next().is_none());
    }

    #[tokio::test]
    async fn marks_are_kept_once_and_wake_the_follower() {
        let changes = Changes::default();
        changes.mark("a");
        changes.mark("a");
        changes.mark("b");
        assert_eq!(changes.waiting().len(), 2);
        // The permit of the first mark is waiting.
        tokio::time::timeout(Duration::from_secs(1), changes.wake.notified()).await.unwrap();
    }
}
