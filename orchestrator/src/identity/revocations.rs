//! Revoked API keys, shared by every orchestrator on one Redis: the key ids
//! in the set `api_keys:revoked`, written by `orchestrator revoke-key` and
//! `restore-key`, read by each replica every `REVOCATION_REFRESH_SECONDS`
//! into memory (never a Redis round trip per request). When Redis cannot
//! be reached the last set read is kept.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionManager;

use crate::redis_cache::connection_manager;

/// The Redis set of revoked key ids.
pub const REVOKED_KEYS: &str = "api_keys:revoked";
/// The default of `REVOCATION_REFRESH_SECONDS`.
pub const DEFAULT_REVOCATION_REFRESH_SECONDS: f64 = 2.0;

/// Why the revoked keys could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RevocationError {
    /// No `REDIS_URL`: revocations are not shared, the keys file is the only list.
    #[error(
        "REDIS_URL is not set: revoked keys are shared through Redis; without it, remove the key from \
         [[api_keys]] / API_KEYS_FILE and restart the orchestrator"
    )]
    NotShared,
    /// Redis refused the URL or could not be reached.
    #[error("cannot reach Redis for the revoked API keys: {0}")]
    Unavailable(String),
}

fn unavailable(error: redis::RedisError) -> RevocationError {
    RevocationError::Unavailable(error.to_string())
}

/// The revoked key ids in Redis.
#[derive(Clone)]
pub struct RevocationStore {
    connection: ConnectionManager,
}

impl RevocationStore {
    /// A store at `url`, connecting lazily like the manifest cache.
    pub fn new(url: &str) -> Result<Self, RevocationError> {
        Ok(Self { connection: connection_manager(url).map_err(unavailable)? })
    }

    /// Revokes `id`; `false` when it was revoked already.
    pub async fn revoke(&self, id: &str) -> Result<bool, RevocationError> {
        let added: usize = self.connection.clone().sadd(REVOKED_KEYS, id).await.map_err(unavailable)?;
        Ok(added > 0)
    }

    /// Restores `id`; `false` when it was not revoked.
    pub async fn restore(&self, id: &str) -> Result<bool, RevocationError> {
        let removed: usize = self.connection.clone().srem(REVOKED_KEYS, id).await.map_err(unavailable)?;
        Ok(removed > 0)
    }

    /// Every revoked key id.
    pub async fn load(&self) -> Result<HashSet<String>, RevocationError> {
        self.connection.clone().smembers(REVOKED_KEYS).await.map_err(unavailable)
    }
}

/// This process's copy of the revoked key ids, and the store it is read from
/// (none without `REDIS_URL`: then nothing is ever revoked).
pub struct Revocations {
    revoked: RwLock<Arc<HashSet<String>>>,
    store: Option<RevocationStore>,
    refresh: Duration,
}

impl Revocations {
    /// Revocations read from the Redis at `redis_url` every `refresh`, or none.
    pub fn new(redis_url: Option<&str>, refresh: Duration) -> Result<Self, RevocationError> {
        Ok(Self { revoked: RwLock::default(), store: redis_url.map(RevocationStore::new).transpose()?, refresh })
    }

    /// Whether the key `id` was revoked, as last read.
    pub fn is_revoked(&self, id: &str) -> bool {
        self.revoked.read().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(id)
    }

    /// Revokes (`revoked`) or restores the key `id` for every orchestrator on
    /// this Redis, and at once for this one; `false` when nothing changed.
    pub async fn set(&self, id: &str, revoked: bool) -> Result<bool, RevocationError> {
        let store = self.store.as_ref().ok_or(RevocationError::NotShared)?;
        let changed = if revoked { store.revoke(id).await? } else { store.restore(id).await? };
        self.reload().await;
        Ok(changed)
    }

    /// Reads the revoked ids once, keeping the previous set (with a warning)
    /// when Redis cannot be reached.
    pub async fn reload(&self) {
        let Some(store) = &self.store else { return };
        match store.load().await {
            Ok(ids) => self.replace(ids),
            Err(error) => tracing::warn!(%error, "keeping the last known revoked API keys"),
        }
    }

    /// Takes `ids` as the revoked keys.
    pub(crate) fn replace(&self, ids: HashSet<String>) {
        let mut revoked = self.revoked.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if **revoked != ids {
            tracing::info!(revoked = ids.len(), "revoked API keys updated");
            *revoked = Arc::new(ids);
        }
    }

    /// Reads the revoked ids now and then every refresh interval, in the background.
    pub async fn start(self: &Arc<Self>) {
        if self.store.is_none() {
            return;
        }
        self.reload().await;
        let revocations = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(revocations.refresh).await;
                revocations.reload().await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_set_is_what_is_revoked() {
        let revocations = Revocations::new(None, Duration::from_secs(2)).unwrap();
        assert!(!revocations.is_revoked("k"));
        revocations.replace(HashSet::from(["k".to_owned()]));
        assert!(revocations.is_revoked("k") && !revocations.is_revoked("other"));
        revocations.replace(HashSet::new());
        assert!(!revocations.is_revoked("k"));
    }

    #[tokio::test]
    async fn an_unreachable_redis_keeps_the_last_set() {
        // Nothing listens on port 1: every read fails.
        let revocations = Revocations::new(Some("redis://127.0.0.1:1"), Duration::from_secs(2)).unwrap();
        revocations.replace(HashSet::from(["k".to_owned()]));
        revocations.reload().await;
        assert!(revocations.is_revoked("k"));
    }

    #[tokio::test]
    async fn without_redis_nothing_can_be_revoked() {
        let revocations = Revocations::new(None, Duration::from_secs(2)).unwrap();
        assert!(matches!(revocations.set("k", true).await, Err(RevocationError::NotShared)));
    }
}
