//! Converting one listing's new definitions on several threads at once: a
//! fresh orchestrator's first listing converts every tool (1,000 tools take
//! 4 to 17 ms on one core, depending on the format), work the machine's
//! other cores can share.
//!
//! The calling thread converts too, and work is claimed a few items at a
//! time, so a helper that starts late (a busy machine) only takes what is
//! left: a listing is never much slower than on its own thread.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Items claimed at a time (a few tools: tens of µs of work).
const CHUNK: usize = 8;

/// Items per helper thread wanted at least: starting a thread costs about
/// as much as converting a handful of tools.
const ITEMS_PER_HELPER: usize = 64;

/// The most threads [`ConversionThreads::default`] uses for one listing.
const MAX_DEFAULT_THREADS: usize = 8;

/// The threads one listing may convert on, its own included, and the
/// helper threads every listing of one cache has running at once: never
/// more than `threads - 1` together, however many listings are cold at once.
#[derive(Debug)]
pub struct ConversionThreads {
    max_helpers: usize,
    busy_helpers: AtomicUsize,
}

impl Default for ConversionThreads {
    /// As many threads as the machine has cores, at most 8.
    fn default() -> Self {
        Self::new(Self::default_count())
    }
}

impl ConversionThreads {
    /// At most `threads` threads per listing, the caller's own included:
    /// `1` (or `0`) converts on the caller's thread only.
    pub fn new(threads: usize) -> Self {
        Self { max_helpers: threads.saturating_sub(1), busy_helpers: AtomicUsize::new(0) }
    }

    /// The default thread count: the machine's cores, at most 8.
    pub fn default_count() -> usize {
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get).min(MAX_DEFAULT_THREADS)
    }

    /// `f` of each of `items`, in order, computed on the calling thread and
    /// on the helper threads free now. A helper that cannot be started
    /// leaves its share to the others; a panic in `f` reaches the caller.
    pub fn map<T: Sync, R: Send>(&self, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        let helpers = self.reserve(items.len() / ITEMS_PER_HELPER);
        if helpers.count == 0 {
            return items.iter().map(f).collect();
        }
        let next = AtomicUsize::new(0);
        let work = || {
            let mut done = Vec::new();
            loop {
                let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                if start >= items.len() {
                    return done;
                }
                let end = (start + CHUNK).min(items.len());
                done.push((start, items[start..end].iter().map(&f).collect::<Vec<R>>()));
            }
        };
        let mut parts = std::thread::scope(|scope| {
            let started: Vec<_> = (0..helpers.count)
                .filter_map(|_| {
                    std::thread::Builder::new().name("tool-conversion".into()).spawn_scoped(scope, work).ok()
                })
                .collect();
            let mut parts = work();
            for helper in started {
                match helper.join() {
                    Ok(done) => parts.extend(done),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            parts
        });
        parts.sort_unstable_by_key(|(start, _)| *start);
        parts.into_iter().flat_map(|(_, done)| done).collect()
    }

    /// Up to `wanted` helpers, as many as are free now; given back when the
    /// returned reservation drops.
    fn reserve(&self, wanted: usize) -> Reserved<'_> {
        let mut busy = self.busy_helpers.load(Ordering::Relaxed);
        loop {
            let count = wanted.min(self.max_helpers.saturating_sub(busy));
            if count == 0 {
                return Reserved { threads: self, count: 0 };
            }
            match self.busy_helpers.compare_exchange_weak(busy, busy + count, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Reserved { threads: self, count },
                Err(now) => busy = now,
            }
        }
    }
}

/// Helper threads taken from a [`ConversionThreads`] budget.
struct Reserved<'a> {
    threads: &'a ConversionThreads,
    count: usize,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.threads.busy_helpers.fetch_sub(self.count, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    #[test]
    fn results_keep_the_items_order_whatever_thread_made_them() {
        let items: Vec<usize> = (0..256).collect();
        let seen = Mutex::new(HashSet::new());
        let threads = ConversionThreads::new(4);
        let doubled = threads.map(&items, |item| {
            seen.lock().unwrap().insert(std::thread::current().id());
            // 50 ms of work on one thread: long enough for every helper to start and take some.
            std::thread::sleep(std::time::Duration::from_micros(200));
            item * 2
        });
        assert_eq!(doubled, items.iter().map(|item| item * 2).collect::<Vec<_>>());
        assert_eq!(threads.busy_helpers.load(Ordering::Relaxed), 0, "helpers are given back");
        assert!(seen.lock().unwrap().len() > 1, "helpers converted some items");
    }

    #[test]
    fn few_items_or_one_thread_stay_on_the_callers_thread() {
        let caller = std::thread::current().id();
        let on_caller = |threads: usize, items: usize| {
            let items: Vec<usize> = (0..items).collect();
            ConversionThreads::new(threads)
                .map(&items, |_| std::thread::current().id())
                .into_iter()
                .all(|id| id == caller)
        };
        assert!(on_caller(4, ITEMS_PER_HELPER - 1));
        assert!(on_caller(1, 10_000));
        assert!(on_caller(0, 10_000));
        assert!(ConversionThreads::new(1).map(&[] as &[u8], |_| 0u8).is_empty());
    }

    #[test]
    fn helpers_are_shared_by_every_listing_at_once() {
        let threads = ConversionThreads::new(3);
        let first = threads.reserve(5);
        assert_eq!(first.count, 2, "at most threads - 1 helpers");
        assert_eq!(threads.reserve(5).count, 0, "none left while the first listing holds them");
        drop(first);
        assert_eq!(threads.reserve(1).count, 1);
    }

    #[test]
    fn a_panic_while_converting_reaches_the_caller_and_frees_the_helpers() {
        let threads = ConversionThreads::new(2);
        let items: Vec<usize> = (0..1000).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            threads.map(&items, |item| if *item == 999 { panic!("bad tool") } else { *item })
        }));
        assert!(outcome.is_err());
        assert_eq!(threads.busy_helpers.load(Ordering::Relaxed), 0);
    }
}
