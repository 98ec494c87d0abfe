//! Whole `GET /tools` answers kept as ready-to-send bytes, per registry
//! generation, permission, module set and format, so a repeated listing is
//! a lookup. Answers of older generations are dropped when a newer one is
//! first stored; the total size stays within `LISTING_CACHE_BYTES`.

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
    /// The key of `caller`'s listing in `format` at `generation`.
    pub fn new(generation: u64, caller: &Caller, format: ToolFormat, variant: ListingVariant) -> Self {
        let modules = caller.modules.as_ref().map(|modules| {
            let mut modules = modules.clone();
            modules.sort_unstable();
            modules.dedup();
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
    /// The sum of the answers' lengths.
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
    /// an older generation than the newest stored, or larger than the whole
    /// bound, is not kept. Says whether `key` started a newer generation.
    pub fn insert(&self, key: ListingKey, answer: Bytes) -> bool {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let newer = key.generation > entries.generation;
        if newer {
            *entries = Entries { generation: key.generation, ..Entries::default() };
        }
        if key.generation < entries.generation || answer.len() > self.max_bytes {
            return newer;
        }
        while entries.bytes + answer.len() > self.max_bytes {
            let Some(victim) = entries.answers.keys().next().cloned() else { break };
            if let Some(dropped) = entries.answers.remove(&victim) {
                entries.bytes -= dropped.len();
            }
        }
        entries.bytes += answer.len();
        if let Some(replaced) = entries.answers.insert(key, answer) {
            entries.bytes -= replaced.len();
        }
        newer
    }

    /// How many bytes of answers are held.
    pub fn bytes(&self) -> usize {
        self.entries.read().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(generation: u64, permission: Option<&str>, modules: Option<Vec<&str>>) -> ListingKey {
        let caller = Caller::new(permission, modules.map(|m| m.into_iter().map(str::to_owned).collect()));
        ListingKey::new(generation, &caller, ToolFormat::Raw, ListingVariant::default())
    }

    #[test]
    fn answers_are_found_by_caller_and_dropped_with_their_generation() {
        let cache = ListingCache::new(100);
        assert!(cache.insert(key(1, Some("user"), Some(vec!["b", "a", "a"])), Bytes::from_static(b"[1]")));
        assert_eq!(cache.get(&key(1, Some("user"), Some(vec!["a", "b"]))).as_deref(), Some(&b"[1]"[..]));
        assert_eq!(cache.get(&key(1, Some("admin"), Some(vec!["a", "b"]))), None);
        assert_eq!(cache.get(&key(1, Some("user"), None)), None);
        assert!(!cache.insert(key(1, None, None), Bytes::from_static(b"[2]")));
        assert_eq!(cache.bytes(), 6);
        // A newer generation drops the older one's answers; an older one is not stored.
        assert!(cache.insert(key(2, None, None), Bytes::from_static(b"[3]")));
        assert_eq!(cache.get(&key(1, None, None)), None);
        assert!(!cache.insert(key(1, None, None), Bytes::from_static(b"[2]")));
        assert_eq!(cache.get(&key(1, None, None)), None);
        assert_eq!(cache.bytes(), 3);
    }

    #[test]
    fn the_size_bound_holds() {
        let cache = ListingCache::new(10);
        cache.insert(key(1, None, None), Bytes::from(vec![b' '; 6]));
        cache.insert(key(1, Some("user"), None), Bytes::from(vec![b' '; 6]));
        assert_eq!(cache.bytes(), 6);
        assert!(cache.get(&key(1, Some("user"), None)).is_some());
        cache.insert(key(1, Some("admin"), None), Bytes::from(vec![b' '; 11]));
        assert_eq!(cache.get(&key(1, Some("admin"), None)), None);
        assert_eq!(cache.bytes(), 6);
    }
}
