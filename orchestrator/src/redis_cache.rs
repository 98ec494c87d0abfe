//! The shared manifest cache in Redis (`module_manifest:{module_name}`,
//! TTL one hour), reconnecting by itself when Redis comes back, and the
//! replicas' discovery claims (`module_discovery:{module_name}`, one
//! `SET NX PX` per module and lease; README "Replicas").

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use module_sdk::contract::ModuleManifest;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::cache::{CacheError, MANIFEST_TTL, ManifestCache, discovery_key, manifest_key};

/// How long one Redis connection attempt or command may take: a Redis that
/// is away must slow nothing down.
const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

/// Deletes a discovery claim only if this process still holds it (its
/// lease may have run out and another replica claimed it since).
const RELEASE_CLAIM: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// Manifests in Redis, shared by replicas and restarts.
#[derive(Clone)]
pub struct RedisCache {
    connection: ConnectionManager,
    /// This process's mark on the discovery claims it holds.
    owner: String,
    /// `MAX_MANIFEST_BYTES`: a cached manifest larger than this is not read,
    /// as one fetched from the module would not be, nor written.
    max_manifest_bytes: usize,
}

impl RedisCache {
    /// A cache at `url` that reads manifests of at most `max_manifest_bytes`
    /// (`MAX_MANIFEST_BYTES`); connects lazily, so a Redis that is down at
    /// start-up only makes the first commands fail.
    pub fn new(url: &str, max_manifest_bytes: usize) -> Result<Self, CacheError> {
        let connection = connection_manager(url).map_err(|e| CacheError::Unavailable(e.to_string()))?;
        Ok(Self { connection, owner: process_mark(), max_manifest_bytes })
    }
}

/// A lazily connecting, self-reconnecting connection to the Redis at `url`,
/// with the short timeouts above (shared with the approval store).
pub(crate) fn connection_manager(url: &str) -> Result<ConnectionManager, redis::RedisError> {
    let client = redis::Client::open(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(REDIS_TIMEOUT))
        .set_response_timeout(Some(REDIS_TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(REDIS_TIMEOUT);
    ConnectionManager::new_lazy_with_config(client, config)
}

impl ManifestCache for RedisCache {
    fn load<'a>(&'a self, module: &'a str) -> BoxFuture<'a, Result<Option<ModuleManifest>, CacheError>> {
        async move {
            let key = manifest_key(module);
            let max = self.max_manifest_bytes;
            let mut connection = self.connection.clone();
            // At most one byte past the budget, which tells an entry over it
            // without reading the rest (GETRANGE's end counts; a missing key
            // reads as empty, which no manifest is).
            let stored: Vec<u8> = redis::cmd("GETRANGE")
                .arg(&key)
                .arg(0)
                .arg(isize::try_from(max).unwrap_or(isize::MAX))
                .query_async(&mut connection)
                .await
                .map_err(|e| CacheError::Unavailable(e.to_string()))?;
            if stored.is_empty() {
                return Ok(None);
            }
            if stored.len() > max {
                return Err(CacheError::TooLarge { key, max });
            }
            serde_json::from_slice(&stored).map(Some).map_err(|e| CacheError::Corrupt { key, reason: e.to_string() })
        }
        .boxed()
    }

    fn store<'a>(&'a self, manifest: &'a ModuleManifest) -> BoxFuture<'a, Result<(), CacheError>> {
        async move {
            let text = serde_json::to_string(manifest).expect("a manifest always serializes");
            let key = manifest_key(&manifest.module_name);
            let max = self.max_manifest_bytes;
            let mut connection = self.connection.clone();
            if text.len() > max {
                // `load` would refuse it on every replica with this budget;
                // the previous entry goes too, so no replica takes a stale
                // manifest in its place.
                connection.del::<_, ()>(&key).await.map_err(|e| CacheError::Unavailable(e.to_string()))?;
                return Err(CacheError::TooLargeToStore { key, bytes: text.len(), max });
            }
            connection
                .set_ex::<_, _, ()>(key, text, MANIFEST_TTL.as_secs())
                .await
                .map_err(|e| CacheError::Unavailable(e.to_string()))
        }
        .boxed()
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn claim_discovery<'a>(&'a self, module: &'a str, lease: Duration) -> BoxFuture<'a, Result<bool, CacheError>> {
        async move {
            let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
            let mut connection = self.connection.clone();
            let set: Option<String> = redis::cmd("SET")
                .arg(discovery_key(module))
                .arg(&self.owner)
                .arg("NX")
                .arg("PX")
                .arg(lease_ms)
                .query_async(&mut connection)
                .await
                .map_err(|e| CacheError::Unavailable(e.to_string()))?;
            Ok(set.is_some())
        }
        .boxed()
    }

    fn release_discovery<'a>(&'a self, module: &'a str) -> BoxFuture<'a, Result<(), CacheError>> {
        async move {
            let mut connection = self.connection.clone();
            redis::cmd("EVAL")
                .arg(RELEASE_CLAIM)
                .arg(1)
                .arg(discovery_key(module))
                .arg(&self.owner)
                .query_async::<i64>(&mut connection)
                .await
                .map(drop)
                .map_err(|e| CacheError::Unavailable(e.to_string()))
        }
        .boxed()
    }
}

/// A mark telling this process's claims from other replicas': the process
/// id (1 in every container, so not enough alone) and a random number
/// (std's per-process hash seed).
fn process_mark() -> String {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{}-{random:016x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(description: String) -> ModuleManifest {
        ModuleManifest {
            module_name: "m".into(),
            description,
            tools: Vec::new(),
            version: None,
            contract_version: None,
        }
    }

    #[tokio::test]
    async fn a_cached_manifest_over_max_manifest_bytes_is_not_read() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        // Cached by a replica with a larger budget.
        let large = manifest("d".repeat(2000));
        let size = serde_json::to_string(&large).unwrap().len();
        RedisCache::new(&redis.url(), 1 << 20).unwrap().store(&large).await.unwrap();
        let exact = RedisCache::new(&redis.url(), size).unwrap();
        assert_eq!(exact.load("m").await.unwrap(), Some(large), "a manifest at the budget is within it");
        let tight = RedisCache::new(&redis.url(), size - 1).unwrap();
        let error = tight.load("m").await.unwrap_err();
        assert!(matches!(error, CacheError::TooLarge { .. }), "{error}");
        let expected = format!("`module_manifest:m` is over MAX_MANIFEST_BYTES ({} bytes)", size - 1);
        assert!(error.to_string().contains(&expected), "{error}");
        assert!(tight.load("other").await.unwrap().is_none(), "a missing entry is none");
        let mut connection = tight.connection.clone();
        let _: () = connection.set(manifest_key("bad"), "not a manifest").await.unwrap();
        assert!(matches!(tight.load("bad").await, Err(CacheError::Corrupt { .. })));
    }

    #[tokio::test]
    async fn a_manifest_over_max_manifest_bytes_once_serialized_is_not_written() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let large = manifest("d".repeat(2000));
        let size = serde_json::to_string(&large).unwrap().len();
        let exact = RedisCache::new(&redis.url(), size).unwrap();
        exact.store(&large).await.unwrap();
        assert_eq!(exact.load("m").await.unwrap(), Some(large.clone()), "a manifest at the budget is cached");
        let tight = RedisCache::new(&redis.url(), size - 1).unwrap();
        let small = manifest("s".into());
        tight.store(&small).await.unwrap();
        assert_eq!(tight.load("m").await.unwrap(), Some(small));
        let error = tight.store(&large).await.unwrap_err();
        assert!(matches!(error, CacheError::TooLargeToStore { .. }), "{error}");
        let expected = format!(
            "`module_manifest:m` is {size} bytes once serialized, over MAX_MANIFEST_BYTES ({} bytes)",
            size - 1
        );
        assert!(error.to_string().contains(&expected), "{error}");
        assert!(tight.load("m").await.unwrap().is_none(), "nothing was written and the stale entry is gone");
    }
}
