//! The per-user locks that serialize one user's writes, kept only while a
//! call holds or waits for them, so memory does not grow with every user
//! id ever seen (550,000 distinct ids once kept 95 MB for good).
//!
//! Each lock guards the user's usage (bytes and files stored), counted from
//! disk on a user's first write. When the last call lets go of a lock, the
//! lock is dropped and the usage moves to a cache of at most
//! [`REMEMBERED_USAGES`] users; a user pushed out of it is counted again
//! from disk on the next write.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Users whose usage is remembered between calls.
pub const REMEMBERED_USAGES: usize = 10_000;

/// Bytes and files a user stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of content.
    pub bytes: u64,
    /// Number of files.
    pub files: u64,
}

/// One user's lock, guarding that user's usage when known.
type AreaLock = Arc<Mutex<Option<Usage>>>;

/// The locks of the users with a call under way, and remembered usages.
#[derive(Debug, Default)]
pub struct AreaLocks {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Locks held or waited for, by area name.
    held: HashMap<String, AreaLock>,
    /// Usages of users without a call under way, at most [`REMEMBERED_USAGES`].
    remembered: HashMap<String, Usage>,
}

impl AreaLocks {
    /// Runs `work` holding the lock of area `name`, with its usage (`None`
    /// when not known: `work` counts it and stores it back).
    pub fn with_area<T>(&self, name: &str, work: impl FnOnce(&mut Option<Usage>) -> T) -> T {
        let lock = {
            let mut state = self.state();
            let State { held, remembered } = &mut *state;
            held.entry(name.to_owned()).or_insert_with(|| Arc::new(Mutex::new(remembered.remove(name)))).clone()
        };
        let result = work(&mut lock_area(&lock));
        self.release(name, lock);
        result
    }

    /// Lets go of `lock`; the last call to do so drops it and remembers its usage.
    fn release(&self, name: &str, lock: AreaLock) {
        let mut state = self.state();
        // The map's reference and ours: no other call holds or waits for it.
        // New references are only taken under `state`, which we hold.
        if Arc::strong_count(&lock) > 2 {
            // Dropped while `state` is held, so the last caller sees it gone.
            drop(lock);
            return;
        }
        state.held.remove(name);
        let usage = *lock_area(&lock);
        if let Some(usage) = usage {
            if state.remembered.len() >= REMEMBERED_USAGES {
                let forgotten = state.remembered.keys().next().cloned();
                if let Some(forgotten) = forgotten {
                    state.remembered.remove(&forgotten);
                }
            }
            state.remembered.insert(name.to_owned(), usage);
        }
    }

    /// How many locks and remembered usages there are (for tests).
    #[cfg(test)]
    fn sizes(&self) -> (usize, usize) {
        let state = self.state();
        (state.held.len(), state.remembered.len())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Locks a user's area; a lock poisoned by a panic forgets the usage, which
/// is then counted again from disk.
fn lock_area(lock: &AreaLock) -> MutexGuard<'_, Option<Usage>> {
    lock.lock().unwrap_or_else(|poisoned| {
        let mut usage = poisoned.into_inner();
        *usage = None;
        usage
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    #[test]
    fn locks_are_dropped_when_no_call_holds_them() {
        let areas = AreaLocks::default();
        for user in 0..(REMEMBERED_USAGES + 500) {
            areas.with_area(&format!("user-{user}"), |usage| *usage = Some(Usage { bytes: 1, files: 1 }));
        }
        assert_eq!(areas.sizes(), (0, REMEMBERED_USAGES), "no lock is kept; the remembered usages are capped");
        areas.with_area("never-written", |usage| assert_eq!(*usage, None));
        assert_eq!(areas.sizes(), (0, REMEMBERED_USAGES), "an area whose usage was never counted is not remembered");
    }

    #[test]
    fn the_usage_survives_between_calls() {
        let areas = AreaLocks::default();
        areas.with_area("a", |usage| *usage = Some(Usage { bytes: 7, files: 2 }));
        areas.with_area("a", |usage| assert_eq!(*usage, Some(Usage { bytes: 7, files: 2 })));
    }

    #[test]
    fn concurrent_calls_of_one_user_share_the_lock_and_leave_nothing_behind() {
        let areas = AreaLocks::default();
        let threads = 8;
        let rounds = 500;
        let barrier = Barrier::new(threads);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    barrier.wait();
                    for _ in 0..rounds {
                        areas.with_area("shared", |usage| {
                            let current = usage.unwrap_or_default();
                            // Not atomic unless the lock serializes the calls.
                            std::thread::yield_now();
                            *usage = Some(Usage { bytes: current.bytes + 1, files: 0 });
                        });
                    }
                });
            }
        });
        assert_eq!(areas.sizes(), (0, 1));
        areas.with_area("shared", |usage| assert_eq!(usage.map(|u| u.bytes), Some((threads * rounds) as u64)));
    }
}
