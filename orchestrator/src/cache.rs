//! Where discovered manifests are kept between restarts and shared between
//! replicas: one small interface, in memory or in Redis.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use module_sdk::contract::ModuleManifest;

/// How long a cached manifest stays valid: one hour, as the contract says.
pub const MANIFEST_TTL: Duration = Duration::from_secs(3600);

/// The cache key of a module's manifest: `module_manifest:{module_name}`.
pub fn manifest_key(module: &str) -> String {
    format!("module_manifest:{module}")
}

/// The key of a module's discovery claim: `module_discovery:{module_name}`.
pub fn discovery_key(module: &str) -> String {
    format!("module_discovery:{module}")
}

/// Why the cache could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache server could not be reached or refused the command.
    #[error("the manifest cache is unavailable: {0}")]
    Unavailable(String),
    /// A stored entry is not a manifest (written by something else).
    #[error("the cached entry `{key}` is not a manifest: {reason}")]
    Corrupt {
        /// The key read.
        key: String,
        /// The JSON parser's message.
        reason: String,
    },
    /// A stored entry is larger than this process reads: cached by a
    /// replica whose `MAX_MANIFEST_BYTES` is larger.
    #[error("the cached entry `{key}` is over MAX_MANIFEST_BYTES ({max} bytes); it was not read")]
    TooLarge {
        /// The key read.
        key: String,
        /// `MAX_MANIFEST_BYTES`.
        max: usize,
    },
    /// A manifest whose serialized form is over this process's budget, so
    /// it is not written (and the module's previous entry is removed):
    /// every replica would refuse to read it back (the orchestrator's
    /// serialization can be larger than what the module sent).
    #[error(
        "the manifest for `{key}` is {bytes} bytes once serialized, over MAX_MANIFEST_BYTES ({max} bytes); it was not cached"
    )]
    TooLargeToStore {
        /// The key not written.
        key: String,
        /// The serialized manifest's size.
        bytes: usize,
        /// `MAX_MANIFEST_BYTES`.
        max: usize,
    },
}

/// A store of manifests by module name, expiring after [`MANIFEST_TTL`].
pub trait ManifestCache: Send + Sync {
    /// The manifest cached for `module`, if any and not expired.
    fn load<'a>(&'a self, module: &'a str) -> BoxFuture<'a, Result<Option<ModuleManifest>, CacheError>>;

    /// Caches `manifest` under its `module_name`, replacing what was there.
    fn store<'a>(&'a self, manifest: &'a ModuleManifest) -> BoxFuture<'a, Result<(), CacheError>>;

    /// `memory` or `redis`, for status pages and logs.
    fn kind(&self) -> &'static str;

    /// Claims `module`'s next periodic discovery for this process for
    /// `lease`: `true` when this process should fetch the manifest, `false`
    /// when another replica sharing the cache claimed it within the lease
    /// (its fresh manifest is in the cache). A cache of one process always
    /// says `true`.
    fn claim_discovery<'a>(&'a self, _module: &'a str, _lease: Duration) -> BoxFuture<'a, Result<bool, CacheError>> {
        Box::pin(std::future::ready(Ok(true)))
    }

    /// Gives up this process's claim on `module` after a failed discovery,
    /// so another replica tries at once instead of trusting the cache.
    fn release_discovery<'a>(&'a self, _module: &'a str) -> BoxFuture<'a, Result<(), CacheError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Manifests in this process only: the default when no Redis is configured.
#[derive(Debug)]
pub struct MemoryCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, ModuleManifest)>>,
}

impl MemoryCache {
    /// An empty cache whose entries live for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::new(MANIFEST_TTL)
    }
}

impl ManifestCache for MemoryCache {
    fn load<'a>(&'a self, module: &'a str) -> BoxFuture<'a, Result<Option<ModuleManifest>, CacheError>> {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = manifest_key(module);
        let found = match entries.get(&key) {
            Some((stored, manifest)) if stored.elapsed() < self.ttl => Some(manifest.clone()),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        };
        Box::pin(std::future::ready(Ok(found)))
    }

    fn store<'a>(&'a self, manifest: &'a ModuleManifest) -> BoxFuture<'a, Result<(), CacheError>> {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.insert(manifest_key(&manifest.module_name), (Instant::now(), manifest.clone()));
        Box::pin(std::future::ready(Ok(())))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> ModuleManifest {
        ModuleManifest {
            module_name: name.into(),
            description: "d".into(),
            tools: Vec::new(),
            version: None,
            contract_version: None,
        }
    }

    #[tokio::test]
    async fn memory_entries_are_found_by_module_and_expire() {
        let cache = MemoryCache::default();
        cache.store(&manifest("a")).await.unwrap();
        assert_eq!(cache.load("a").await.unwrap(), Some(manifest("a")));
        assert_eq!(cache.load("b").await.unwrap(), None);

        let short = MemoryCache::new(Duration::from_millis(1));
        short.store(&manifest("a")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(short.load("a").await.unwrap(), None);
    }
}
