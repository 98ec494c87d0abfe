//! Approvals in Redis: `approval:{id}` (JSON), `approval:{id}:claim` (the
//! one decision, `SET NX`) and the index `approvals` (ids scored by the
//! time they are dropped), each expiring with the record.

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use time::OffsetDateTime;

use super::record::Approval;
use super::store::{ApprovalStore, StoreError};
use crate::redis_cache::connection_manager;

/// The sorted set of approval ids.
const INDEX: &str = "approvals";

fn record_key(id: &str) -> String {
    format!("approval:{id}")
}

fn unavailable(error: redis::RedisError) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// Seconds from now until `at`, at least one (Redis refuses a TTL of 0).
fn ttl(at: OffsetDateTime) -> u64 {
    u64::try_from((at - OffsetDateTime::now_utc()).whole_seconds()).unwrap_or(0).max(1)
}

/// Approvals shared by every orchestrator on the same Redis.
pub struct RedisStore {
    connection: ConnectionManager,
}

impl RedisStore {
    /// A store at `url`, connecting lazily like the manifest cache.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        Ok(Self { connection: connection_manager(url).map_err(unavailable)? })
    }
}

impl ApprovalStore for RedisStore {
    fn put<'a>(&'a self, approval: &'a Approval, drop_at: OffsetDateTime) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let text = serde_json::to_string(approval).expect("an approval always serializes");
            let mut connection = self.connection.clone();
            redis::pipe()
                .set_ex(record_key(&approval.id), text, ttl(drop_at))
                .zadd(INDEX, &approval.id, drop_at.unix_timestamp())
                .exec_async(&mut connection)
                .await
                .map_err(unavailable)
        }
        .boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let text: Option<String> = connection.get(record_key(id)).await.map_err(unavailable)?;
            text.map(|text| {
                serde_json::from_str(&text)
                    .map_err(|e| StoreError::Corrupt { id: id.to_owned(), reason: e.to_string() })
            })
            .transpose()
        }
        .boxed()
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Approval>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let now = OffsetDateTime::now_utc().unix_timestamp();
            let _: () = connection.zrembyscore(INDEX, "-inf", now).await.map_err(unavailable)?;
            let ids: Vec<String> = connection.zrange(INDEX, 0, -1).await.map_err(unavailable)?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let keys: Vec<String> = ids.iter().map(|id| record_key(id)).collect();
            let texts: Vec<Option<String>> = connection.mget(&keys).await.map_err(unavailable)?;
            ids.into_iter()
                .zip(texts)
                .filter_map(|(id, text)| text.map(|text| (id, text)))
                .map(|(id, text)| {
                    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt { id, reason: e.to_string() })
                })
                .collect()
        }
        .boxed()
    }

    fn claim<'a>(&'a self, id: &'a str, drop_at: OffsetDateTime) -> BoxFuture<'a, Result<bool, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let options = redis::SetOptions::default()
                .conditional_set(redis::ExistenceCheck::NX)
                .with_expiration(redis::SetExpiry::EX(ttl(drop_at)));
            let set: Option<String> =
                connection.set_options(format!("approval:{id}:claim"), "1", options).await.map_err(unavailable)?;
            Ok(set.is_some())
        }
        .boxed()
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}
