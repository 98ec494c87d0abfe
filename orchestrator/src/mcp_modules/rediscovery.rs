//! Discovering an MCP module again on its server's word: a
//! `notifications/tools/list_changed`, or its session ending or coming
//! back. A module is discovered again at most once per
//! [`REDISCOVERY_INTERVAL`]; what arrives meanwhile is merged into one
//! discovery at the end of it, so a server sending thousands of
//! notifications a second costs one `tools/list` a second (and its
//! callers on `/mcp` at most one `list_changed` a second), and none is lost.
//!
//! Each discovery runs in a task of its own, at most
//! [`MAX_CONCURRENT_REDISCOVERIES`] at a time and one per module: a server
//! that hangs until `DISCOVERY_TIMEOUT` delays only its own module, and a
//! discovery that panics is logged and the module can be discovered again.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use crate::registry::Registry;

/// The shortest time between two discoveries of one module on its server's word.
pub const REDISCOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// The most modules discovered again at one time; the others wait for a free slot.
pub const MAX_CONCURRENT_REDISCOVERIES: usize = 16;

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
    /// [`REDISCOVERY_INTERVAL`], for as long as the runtime lasts.
    pub async fn follow(&self, registry: &Arc<Registry>) {
        self.follow_with(|module| {
            let registry = Arc::clone(registry);
            // A failure is recorded in the registry (GET /modules).
            async move { drop(registry.discover(&module).await) }
        })
        .await;
    }

    /// Runs `discover` for each module asked for, each in a task of its own,
    /// at most once per [`REDISCOVERY_INTERVAL`] and one at a time per
    /// module, at most [`MAX_CONCURRENT_REDISCOVERIES`] at once, for as long
    /// as the runtime lasts. A task that panics is logged.
    async fn follow_with<F, D>(&self, discover: D)
    where
        D: Fn(String) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let mut schedule = Schedule::default();
        let mut running = JoinSet::new();
        let mut modules: HashMap<Id, String> = HashMap::new();
        loop {
            schedule.waiting.append(&mut self.waiting());
            let free = MAX_CONCURRENT_REDISCOVERIES.saturating_sub(running.len());
            for module in schedule.due(Instant::now(), free) {
                let task = running.spawn(discover(module.clone()));
                modules.insert(task.id(), module);
            }
            // With every slot taken, only a task's end or a mark can change anything.
            let next = if running.len() < MAX_CONCURRENT_REDISCOVERIES { schedule.next() } else { None };
            tokio::select! {
                Some(ended) = running.join_next_with_id() => {
                    let (id, panic) = match ended {
                        Ok((id, ())) => (id, None),
                        Err(error) => (error.id(), Some(error)),
                    };
                    let module = modules.remove(&id).unwrap_or_default();
                    if let Some(error) = panic {
                        tracing::error!(module, %error, "module rediscovery panicked; it will be discovered again when asked");
                    }
                    schedule.running.remove(&module);
                }
                () = sleep_until(next) => {}
                () = self.wake.notified() => {}
            }
        }
    }
}

/// Sleeps until `at`, or forever.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Which waiting modules may be discovered again, and when the others may.
#[derive(Debug, Default)]
struct Schedule {
    waiting: BTreeSet<String>,
    /// The modules being discovered.
    running: BTreeSet<String>,
    /// When each module's last discovery on its server's word started.
    last: HashMap<String, Instant>,
}

impl Schedule {
    /// Up to `free` waiting modules, not being discovered and not discovered
    /// within [`REDISCOVERY_INTERVAL`] before `now`, the longest undiscovered
    /// first, taken out of the waiting ones as being discovered from `now`.
    fn due(&mut self, now: Instant, free: usize) -> Vec<String> {
        let (last, running) = (&self.last, &self.running);
        let mut due: Vec<String> = self
            .waiting
            .iter()
            .filter(|module| !running.contains(*module))
            .filter(|module| last.get(*module).is_none_or(|at| now >= *at + REDISCOVERY_INTERVAL))
            .cloned()
            .collect();
        due.sort_by_key(|module| last.get(module).copied());
        due.truncate(free);
        for module in &due {
            self.waiting.remove(module);
            self.running.insert(module.clone());
            self.last.insert(module.clone(), now);
        }
        due
    }

    /// When the first of the waiting modules not being discovered is due
    /// (one being discovered is due when its discovery ends).
    fn next(&self) -> Option<Instant> {
        self.waiting
            .iter()
            .filter(|module| !self.running.contains(*module))
            .filter_map(|module| self.last.get(module))
            .map(|at| *at + REDISCOVERY_INTERVAL)
            .min()
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
        assert_eq!(schedule.due(start, 16), ["a", "b"], "the first time at once");
        schedule.running.clear();
        assert_eq!(schedule.next(), None);
        // Asked for three times meanwhile: still one waiting discovery.
        for _ in 0..3 {
            schedule.waiting.insert("a".to_owned());
        }
        let soon = start + REDISCOVERY_INTERVAL / 2;
        assert!(schedule.due(soon, 16).is_empty());
        assert_eq!(schedule.next(), Some(start + REDISCOVERY_INTERVAL));
        assert_eq!(schedule.due(start + REDISCOVERY_INTERVAL, 16), ["a"]);
        assert!(schedule.waiting.is_empty() && schedule.next().is_none());
    }

    #[test]
    fn a_module_being_discovered_waits_for_its_discovery_to_end_and_slots_are_bounded() {
        let start = Instant::now();
        let mut schedule = Schedule::default();
        schedule.waiting.extend(["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        assert_eq!(schedule.due(start, 2), ["a", "b"]);
        schedule.waiting.insert("a".to_owned());
        let later = start + REDISCOVERY_INTERVAL * 2;
        assert_eq!(schedule.due(later, 2), ["c"], "a still runs");
        assert_eq!(schedule.next(), None, "a is due when its discovery ends");
        schedule.running.remove("a");
        assert_eq!(schedule.due(later, 2), ["a"]);
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

    /// Follows `changes` with a discovery that records each module, then
    /// never ends for `hung` and panics for `panicking`.
    fn follow(changes: &Arc<Changes>, seen: &Arc<Mutex<Vec<String>>>) {
        let (changes, seen) = (Arc::clone(changes), Arc::clone(seen));
        tokio::spawn(async move {
            changes
                .follow_with(move |module| {
                    let seen = Arc::clone(&seen);
                    async move {
                        seen.lock().unwrap().push(module.clone());
                        match module.as_str() {
                            "hung" => std::future::pending().await,
                            "panicking" => panic!("a discovery that panics"),
                            _ => {}
                        }
                    }
                })
                .await;
        });
    }

    /// Waits (10 s at most) until `seen` holds `count` discoveries of `module`.
    async fn wait_for(seen: &Mutex<Vec<String>>, module: &str, count: usize) {
        for _ in 0..1000 {
            if seen.lock().unwrap().iter().filter(|seen| *seen == module).count() >= count {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{module} was not discovered {count} times: {:?}", seen.lock().unwrap());
    }

    #[tokio::test]
    async fn a_hung_discovery_delays_no_other_module() {
        let (changes, seen) = (Arc::new(Changes::default()), Arc::default());
        follow(&changes, &seen);
        changes.mark("hung");
        wait_for(&seen, "hung", 1).await;
        changes.mark("other");
        wait_for(&seen, "other", 1).await;
        changes.mark("hung");
        changes.mark("other");
        wait_for(&seen, "other", 2).await;
        assert_eq!(seen.lock().unwrap().iter().filter(|seen| *seen == "hung").count(), 1, "hung still runs");
    }

    #[tokio::test]
    async fn a_discovery_that_panics_is_survived() {
        let (changes, seen) = (Arc::new(Changes::default()), Arc::default());
        follow(&changes, &seen);
        changes.mark("panicking");
        wait_for(&seen, "panicking", 1).await;
        changes.mark("other");
        wait_for(&seen, "other", 1).await;
        changes.mark("panicking");
        wait_for(&seen, "panicking", 2).await;
    }
}
