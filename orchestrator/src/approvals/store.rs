//! Where approvals are kept: in memory, or in Redis (shared by replicas,
//! kept across restarts).

use std::collections::HashMap;
use std::sync::Mutex;

use futures::FutureExt;
use futures::future::BoxFuture;
use time::OffsetDateTime;

use super::record::Approval;

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis did not answer.
    #[error("the approval store (Redis) is unavailable: {0}")]
    Unavailable(String),
    /// A stored approval could not be read.
    #[error("approval `{id}` in the store is not readable: {reason}")]
    Corrupt {
        /// The approval's id.
        id: String,
        /// The parser's message.
        reason: String,
    },
}

/// Approvals by id; a record is dropped at its `drop_at` time.
pub trait ApprovalStore: Send + Sync {
    /// Stores (or replaces) `approval` until `drop_at`.
    fn put<'a>(&'a self, approval: &'a Approval, drop_at: OffsetDateTime) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The approval `id`, if kept.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>>;
    /// Every kept approval.
    fn list(&self) -> BoxFuture<'_, Result<Vec<Approval>, StoreError>>;
    /// Claims the one decision of `id`: true for the first caller only,
    /// across replicas, so an approval runs at most once.
    fn claim<'a>(&'a self, id: &'a str, drop_at: OffsetDateTime) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// `memory` or `redis`, for logs.
    fn kind(&self) -> &'static str;
}

/// Approvals of one process.
#[derive(Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, (Approval, OffsetDateTime, bool)>>,
}

impl MemoryStore {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Approval, OffsetDateTime, bool)>> {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = OffsetDateTime::now_utc();
        entries.retain(|_, (_, drop_at, _)| *drop_at > now);
        entries
    }
}

impl ApprovalStore for MemoryStore {
    fn put<'a>(&'a self, approval: &'a Approval, drop_at: OffsetDateTime) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut entries = self.locked();
        let claimed = entries.get(&approval.id).is_some_and(|(_, _, claimed)| *claimed);
        entries.insert(approval.id.clone(), (approval.clone(), drop_at, claimed));
        futures::future::ready(Ok(())).boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        let found = self.locked().get(id).map(|(approval, _, _)| approval.clone());
        futures::future::ready(Ok(found)).boxed()
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Approval>, StoreError>> {
        let all = self.locked().values().map(|(approval, _, _)| approval.clone()).collect();
        futures::future::ready(Ok(all)).boxed()
    }

    fn claim<'a>(&'a self, id: &'a str, _drop_at: OffsetDateTime) -> BoxFuture<'a, Result<bool, StoreError>> {
        let won = match self.locked().get_mut(id) {
            Some((_, _, claimed)) if !*claimed => {
                *claimed = true;
                true
            }
            _ => false,
        };
        futures::future::ready(Ok(won)).boxed()
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::approvals::record::ApprovalStatus;
    use module_sdk::Permission;
    use std::time::Duration;

    /// A pending approval `id` of ada's, expiring in `expires_in`.
    pub(crate) fn approval(id: &str, expires_in: Duration) -> Approval {
        let now = OffsetDateTime::now_utc();
        Approval {
            id: id.into(),
            tool_name: "m.t".into(),
            arguments: serde_json::Map::new(),
            user_id: Some("ada".into()),
            permission: Permission::User,
            modules: None,
            requested_by: "key:ada".into(),
            created_at: now,
            expires_at: now + expires_in,
            status: ApprovalStatus::Pending,
            decided_by: None,
            decided_at: None,
            reason: None,
            result: None,
            call: None,
        }
    }

    #[tokio::test]
    async fn one_claim_wins_and_dropped_records_are_gone() {
        let store = MemoryStore::default();
        let live = approval("live", Duration::from_secs(60));
        store.put(&live, live.expires_at).await.unwrap();
        assert!(store.claim("live", live.expires_at).await.unwrap());
        assert!(!store.claim("live", live.expires_at).await.unwrap(), "a second claim loses");
        store.put(&live, live.expires_at).await.unwrap();
        assert!(!store.claim("live", live.expires_at).await.unwrap(), "storing the decision keeps the claim");
        assert!(!store.claim("unknown", live.expires_at).await.unwrap());

        let old = approval("old", Duration::ZERO);
        assert_eq!(old.status_at(OffsetDateTime::now_utc()), ApprovalStatus::Expired);
        store.put(&old, OffsetDateTime::now_utc() - Duration::from_secs(1)).await.unwrap();
        assert!(store.get("old").await.unwrap().is_none());
        assert_eq!(store.list().await.unwrap().len(), 1);
    }
}
