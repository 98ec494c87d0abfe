//! The shared manifest cache in Redis (`module_manifest:{module_name}`,
//! TTL one hour), reconnecting by itself when Redis comes back.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use module_sdk::contract::ModuleManifest;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::cache::{CacheError, MANIFEST_TTL, ManifestCache, manifest_key};

/// How long one Redis connection attempt or command may take: a Redis that
/// is away must slow nothing down.
const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

/// Manifests in Redis, shared by replicas and restarts.
#[derive(Clone)]
pub struct RedisCache {
    connection: ConnectionManager,
}

impl RedisCache {
    /// A cache at `url`; connects lazily, so a Redis that is down at
    /// start-up only makes the first commands fail.
    pub fn new(url: &str) -> Result<Self, CacheError> {
        let client = redis::Client::open(url).map_err(|e| CacheError::Unavailable(e.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(REDIS_TIMEOUT);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| CacheError::Unavailable(e.to_string()))?;
        Ok(Self { connection })
    }
}

impl ManifestCache for RedisCache {
    fn load<'a>(&'a self, module: &'a str) -> BoxFuture<'a, Result<Option<ModuleManifest>, CacheError>> {
        async move {
            let key = manifest_key(module);
            let mut connection = self.connection.clone();
            let stored: Option<String> =
                connection.get(&key).await.map_err(|e| CacheError::Unavailable(e.to_string()))?;
            stored
                .map(|text| serde_json::from_str(&text).map_err(|e| CacheError::Corrupt { key, reason: e.to_string() }))
                .transpose()
        }
        .boxed()
    }

    fn store<'a>(&'a self, manifest: &'a ModuleManifest) -> BoxFuture<'a, Result<(), CacheError>> {
        async move {
            let text = serde_json::to_string(manifest).expect("a manifest always serializes");
            let mut connection = self.connection.clone();
            connection
                .set_ex::<_, _, ()>(manifest_key(&manifest.module_name), text, MANIFEST_TTL.as_secs())
                .await
                .map_err(|e| CacheError::Unavailable(e.to_string()))
        }
        .boxed()
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}
