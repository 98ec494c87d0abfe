//! Whole `GET /tools` answers kept as ready-to-send bytes, per registry
//! generation, permission, module set and format, so a repeated listing is
//! a lookup. Answers of older generations are dropped when a newer one is
//! first stored; the total size, answers and their keys, stays within
//! `LISTING_CACHE_BYTES`.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use axum::body::Bytes;
use module_sdk::Permission;

use crate::caller::Caller;
use crate::providers::ToolFormat;

/// The default [`ListingCache`] size bound, `LISTING_CACHE_BYTES`: 32 MiB.
pub const DEFAULT_LISTING_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// What one listing answer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListingKey {
    /// The registry snapshot's generation it was made from.
    pub generation: u64,
    /// The caller's permission.
    pub permission: Permission,
    /// The caller's allowed modules, sorted and without repeats (`None`: all).
    pub modules: Option<Vec<String>>,
    /// The answer's format.
    pub format: ToolFormat,
    /// Variants of one caller's answer beyond the format, e.g. a listing
    /// that also holds a meta-tool: each its own entry.
    pub variant: ListingVariant,
}

/// A variant of one caller's listing in one format; part of [`ListingKey`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ListingVariant {
    /// The answer also lists the `tools__search` meta-tool.
    pub with_search_tool: bool,
}

impl ListingKey {
    /// The bytes this key holds on the heap: its module names. Counted with
    /// its answer, so that callers naming thousands of modules (unknown ones
    /// included) cannot grow the cache past its bound with tiny answers.
    fn heap_bytes(&self) -> usize {
        self.modules
            .as_ref()
            .map_or(0, |modules| modules.iter().map(|name| size_of::<String>() + name.len()).sum::<usize>())
    }

    /// The key of `caller`'s listing in `format` at `generation`.
    pub fn new(generation: u64, caller: &Caller, format: ToolFormat, variant: ListingVariant) -> Self {
        let modules = caller.modules.as_ref().map(|modules| {
            let mut modules = modules.clone();
            modules.sort_unstable();
            modules.dedup();
            // The repeats' room too, or it would be held uncounted.
            modules.shrink_to_fit();
            modules
        });
        Self { generation, permission: caller.permission, modules, format, variant }
    }
}

#[derive(Default)]
struct Entries {
    /// The newest generation stored; entries of older ones are gone.
    generation: u64,
    answers: HashMap<ListingKey, Bytes>,
    /// The sum of the entries' [`cost`]s.
    bytes: usize,
}

/// Listing answers by [`ListingKey`], at most `max_bytes` in total. Safe to share between threads.
pub struct ListingCache {
    max_bytes: usize,
    entries: RwLock<Entries>,
}

impl ListingCache {
    /// An empty cache holding at most `max_bytes` of answers (`LISTING_CACHE_BYTES`).
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes, entries: RwLock::default() }
    }

    /// The answer stored under `key`, if any.
    pub fn get(&self, key: &ListingKey) -> Option<Bytes> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner).answers.get(key).cloned()
    }

    /// Stores `answer` under `key`, dropping every answer of an older
    /// generation, and others when the size bound needs room; an answer of
    /// an older generation than the newest stored, or costing more than the
    /// whole bound, is not kept. Says whether `key` started a newer generation.
    pub fn insert(&self, key: ListingKey, answer: Bytes) -> bool {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let newer = key.generation > entries.generation;
        if newer {
            *entries = Entries { generation: key.generation, ..Entries::default() };
        }
        let added = cost(&key, &answer);
        if key.generation < entries.generation || added > self.max_bytes {
            return newer;
        }
        if let Some(replaced) = entries.answers.remove_entry(&key) {
            entries.bytes -= cost(&replaced.0, &replaced.1);
        }
        while entries.bytes + added > self.max_bytes {
            let Some(victim) = entries.answers.keys().next().cloned() else { break };
            if let Some(dropped) = entries.answers.remove_entry(&victim) {
                entries.bytes -= cost(&dropped.0, &dropped.1);
            }
        }
        entries.bytes += added;
        entries.answers.insert(key, answer);
        newer
    }

    /// How many bytes the answers held and their keys take.
    pub fn bytes(&self) -> usize {
        self.entries.read().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

/// What one entry takes: its answer, its key's heap bytes and the map slot.
fn cost(key: &ListingKey, answer: &Bytes) -> usize {
    answer.len() + key.heap_bytes() + size_of::<(ListingKey, Bytes)>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(generation: u64, permission: Option<&str>, modules: Option<Vec<&str>>) -> ListingKey {
        let caller = Caller::new(permission, modules.map(|m| m.into_iter().map(str::to_owned).collect()));
        ListingKey::new(generation, &caller, ToolFormat::Raw, ListingVariant::default())
    }

    /// The cost of an entry without modules holding `len` bytes of answer.
    fn plain(len: usize) -> usize {
        len + size_of::<(ListingKey, Bytes)>()
    }

    #[test]
    fn answers_are_found_by_caller_and_dropped_with_their_generation() {
        let cache = ListingCache::new(1000);
        assert!(cache.insert(key(1, Some("user"), Some(vec!["b", "a", "a"])), Bytes::from_static(b"[1]")));
        assert_eq!(cache.get(&key(1, Some("user"), Some(vec!["a", "b"]))).as_deref(), Some(&b"[1]"[..]));
        assert_eq!(cache.get(&key(1, Some("admin"), Some(vec!["a", "b"]))), None);
        assert_eq!(cache.get(&key(1, Some("user"), None)), None);
        assert!(!cache.insert(key(1, None, None), Bytes::from_static(b"[2]")));
        assert_eq!(cache.bytes(), plain(3) + 2 * (size_of::<String>() + 1) + plain(3));
        // A newer generation drops the older one's answers; an older one is not stored.
        assert!(cache.insert(key(2, None, None), Bytes::from_static(b"[3]")));
        assert_eq!(cache.get(&key(1, None, None)), None);
        assert!(!cache.insert(key(1, None, None), Bytes::from_static(b"[2]")));
        assert_eq!(cache.get(&key(1, None, None)), None);
        assert_eq!(cache.bytes(), plain(3));
        // The same key again replaces its answer.
        cache.insert(key(2, None, None), Bytes::from_static(b"[33]"));
        assert_eq!(cache.bytes(), plain(4));
    }

    #[test]
    fn the_size_bound_holds() {
        let cache = ListingCache::new(plain(10));
        cache.insert(key(1, None, None), Bytes::from(vec![b' '; 6]));
        cache.insert(key(1, Some("user"), None), Bytes::from(vec![b' '; 6]));
        assert_eq!(cache.bytes(), plain(6));
        assert!(cache.get(&key(1, Some("user"), None)).is_some());
        cache.insert(key(1, Some("admin"), None), Bytes::from(vec![b' '; 11]));
        assert_eq!(cache.get(&key(1, Some("admin"), None)), None);
        assert_eq!(cache.bytes(), plain(6));
    }

    #[test]
    fn keys_naming_many_modules_count_against_the_bound() {
        let cache = ListingCache::new(64 * 1024);
        for i in 0..1000 {
            let modules: Vec<String> = (0..200).map(|m| format!("m{i}x{m}")).collect();
            let caller = Caller::new(Some("user"), Some(modules));
            cache.insert(
                ListingKey::new(1, &caller, ToolFormat::Raw, ListingVariant::default()),
                Bytes::from_static(b"[]"),
            );
            assert!(cache.bytes() <= 64 * 1024, "{} bytes after {i} keys", cache.bytes());
        }
        let held = cache.entries.read().unwrap().answers.len();
        assert!(held < 20, "{held} keys of 200 names each held in 64 KiB");
        // Repeated names are counted once and hold no more than that.
        let repeated = Caller::new(Some("user"), Some(vec!["a".to_owned(); 10_000]));
        let key = ListingKey::new(2, &repeated, ToolFormat::Raw, ListingVariant::default());
        assert_eq!((key.heap_bytes(), key.modules.as_ref().unwrap().capacity()), (size_of::<String>() + 1, 1));
    }
}
