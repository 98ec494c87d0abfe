//! Where approvals are kept: in memory, or in Redis (shared by replicas,
//! kept across restarts).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use time::OffsetDateTime;

use super::record::{Approval, ApprovalStatus};
use super::settings::ApprovalSettings;

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

/// Whether a new approval was stored, or which budget kept it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It is stored.
    Stored,
    /// The store keeps `MAX_APPROVALS` approvals already.
    Full,
    /// Its user has `MAX_PENDING_APPROVALS` pending approvals already.
    TooManyPending,
    /// Its user has `MAX_APPROVALS_PER_USER` approvals kept already (any state).
    TooManyForUser,
    /// Its counted bytes would take the approvals kept past `MAX_APPROVAL_BYTES`.
    TooManyBytes,
    /// Its counted bytes would take its user's approvals kept (any state)
    /// past `MAX_APPROVAL_BYTES_PER_USER`.
    TooManyBytesForUser,
}

/// What claiming an approval's one decision came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This caller decides it (if it is still pending: see
    /// [`super::Approvals::decide`]), recording its decision with this token.
    Won(ClaimToken),
    /// Another caller holds the claim (or the approval is not kept).
    Taken,
}

/// The mark of one won claim (a random UUID): a decision is recorded, and
/// its claim given up, only while the claim still holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken(String);

impl ClaimToken {
    /// A fresh token.
    pub(super) fn new() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The token as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Approvals by id; a record is dropped at its `drop_at` time.
pub trait ApprovalStore: Send + Sync {
    /// Stores the new pending `approval`, counted as `bytes` (against
    /// `MAX_APPROVAL_BYTES` and its user's `MAX_APPROVAL_BYTES_PER_USER`), until `drop_at` if the budgets of `settings`
    /// allow it, counted in the same step as it is stored (on every
    /// replica), so calls asking at once cannot pass a budget together.
    fn insert<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>>;
    /// Stores (or replaces) `approval` until `drop_at`, counted as `bytes`
    /// instead of what it counted before, in the same step: refused only
    /// when it counts more than before and that would take the approvals
    /// kept past `MAX_APPROVAL_BYTES` ([`Admission::TooManyBytes`]) or its
    /// user's past `MAX_APPROVAL_BYTES_PER_USER`
    /// ([`Admission::TooManyBytesForUser`]).
    fn put<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>>;
    /// Stores the decision `approval` as [`Self::put`] does, but only while
    /// its claim holds `token`, checked in the same step: `None`, storing
    /// nothing, when the claim no longer holds it (its lease lapsed, and
    /// another decision may have claimed it since).
    fn put_claimed<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Admission>, StoreError>>;
    /// The approval `id`, if kept.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>>;
    /// The approval `id`, if kept and its claim still holds `token`, read
    /// in the same step as the claim: what a decision that holds the claim
    /// stored, when the store's answer to storing it was lost.
    fn get_claimed<'a>(
        &'a self,
        id: &'a str,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Approval>, StoreError>>;
    /// The kept approvals of `user` (the calls for that user id), or
    /// every kept approval when `user` is `None`; only those are read.
    fn list<'a>(&'a self, user: Option<&'a str>) -> BoxFuture<'a, Result<Vec<Approval>, StoreError>>;
    /// Claims the one decision of `approval` for `lease`: won by one caller
    /// at a time, across replicas, with a fresh token. In Redis the claim
    /// lapses after `lease`, so one whose replica died before recording the
    /// decision strands nothing; a decision is recorded only with
    /// the token of the claim that holds (see [`Self::put_claimed`]), so a decider
    /// whose lease lapsed records and runs nothing. Whether the approval is
    /// still pending (not decided under an earlier claim, not expired) is
    /// the caller's to check once the claim is won.
    fn claim<'a>(&'a self, approval: &'a Approval, lease: Duration) -> BoxFuture<'a, Result<Claim, StoreError>>;
    /// Gives up the claim of `id` (only while it still holds `token`) when
    /// its decision could not be recorded and nothing ran, so it can be
    /// decided again.
    fn release<'a>(&'a self, id: &'a str, token: &'a ClaimToken) -> BoxFuture<'a, Result<(), StoreError>>;
    /// `memory` or `redis`, for logs.
    fn kind(&self) -> &'static str;
}

/// One approval kept in memory.
struct Entry {
    approval: Approval,
    /// When it is dropped.
    drop_at: OffsetDateTime,
    /// The token of the claim of its one decision, if claimed. A claim in
    /// memory has no lease: only a decision of this process holds it, and
    /// no other process can take it over.
    claim: Option<ClaimToken>,
    /// Its counted bytes, against `MAX_APPROVAL_BYTES`.
    bytes: usize,
}

/// The counted bytes of all `entries`, and of those of `user` but `id`.
fn kept_bytes(entries: &HashMap<String, Entry>, user: Option<&str>, id: &str) -> (usize, usize) {
    let all = entries.values().map(|entry| entry.bytes).sum();
    let users = entries
        .iter()
        .filter(|(kept, entry)| entry.approval.user_id.as_deref() == user && *kept != id)
        .map(|(_, entry)| entry.bytes)
        .sum();
    (all, users)
}

/// [`ApprovalStore::put`] into `entries`: stores `approval` (keeping its
/// claim) unless its bytes grow past a budget of `settings`.
fn put_in(
    entries: &mut HashMap<String, Entry>,
    approval: &Approval,
    bytes: usize,
    drop_at: OffsetDateTime,
    settings: &ApprovalSettings,
) -> Admission {
    let (claim, before) = entries.get(&approval.id).map_or((None, 0), |entry| (entry.claim.clone(), entry.bytes));
    let (all_bytes, users_others) = kept_bytes(entries, approval.user_id.as_deref(), &approval.id);
    let others = all_bytes - before;
    if bytes > before && others.saturating_add(bytes) > settings.max_total_bytes {
        Admission::TooManyBytes
    } else if bytes > before && users_others.saturating_add(bytes) > settings.max_bytes_per_user {
        Admission::TooManyBytesForUser
    } else {
        entries.insert(approval.id.clone(), Entry { approval: approval.clone(), drop_at, claim, bytes });
        Admission::Stored
    }
}

/// Approvals of one process.
#[derive(Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Entry>>,
}

impl MemoryStore {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = OffsetDateTime::now_utc();
        entries.retain(|_, entry| entry.drop_at > now);
        entries
    }
}

impl ApprovalStore for MemoryStore {
    fn insert<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>> {
        let mut entries = self.locked();
        let now = OffsetDateTime::now_utc();
        let of_user = |entry: &&Entry| entry.approval.user_id == approval.user_id;
        let pending = || {
            entries.values().filter(of_user).filter(|e| e.approval.status_at(now) == ApprovalStatus::Pending).count()
        };
        let (all_bytes, users_bytes) = kept_bytes(&entries, approval.user_id.as_deref(), &approval.id);
        let admission = if entries.len() >= settings.max_total {
            Admission::Full
        } else if pending() >= settings.max_pending {
            Admission::TooManyPending
        } else if entries.values().filter(of_user).count() >= settings.max_per_user {
            Admission::TooManyForUser
        } else if all_bytes.saturating_add(bytes) > settings.max_total_bytes {
            Admission::TooManyBytes
        } else if users_bytes.saturating_add(bytes) > settings.max_bytes_per_user {
            Admission::TooManyBytesForUser
        } else {
            let entry = Entry { approval: approval.clone(), drop_at, claim: None, bytes };
            entries.insert(approval.id.clone(), entry);
            Admission::Stored
        };
        futures::future::ready(Ok(admission)).boxed()
    }

    fn put<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>> {
        let admission = put_in(&mut self.locked(), approval, bytes, drop_at, settings);
        futures::future::ready(Ok(admission)).boxed()
    }

    fn put_claimed<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Admission>, StoreError>> {
        let mut entries = self.locked();
        let holds = entries.get(&approval.id).is_some_and(|entry| entry.claim.as_ref() == Some(token));
        let admission = holds.then(|| put_in(&mut entries, approval, bytes, drop_at, settings));
        futures::future::ready(Ok(admission)).boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        let found = self.locked().get(id).map(|entry| entry.approval.clone());
        futures::future::ready(Ok(found)).boxed()
    }

    fn get_claimed<'a>(
        &'a self,
        id: &'a str,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        let entries = self.locked();
        let found = entries.get(id).filter(|entry| entry.claim.as_ref() == Some(token));
        futures::future::ready(Ok(found.map(|entry| entry.approval.clone()))).boxed()
    }

    fn list<'a>(&'a self, user: Option<&'a str>) -> BoxFuture<'a, Result<Vec<Approval>, StoreError>> {
        let listed = self
            .locked()
            .values()
            .filter(|entry| user.is_none_or(|user| entry.approval.user_id.as_deref() == Some(user)))
            .map(|entry| entry.approval.clone())
            .collect();
        futures::future::ready(Ok(listed)).boxed()
    }

    /// Memory's claims have no lease (one process: only its own decisions hold them): `_lease` is not used.
    fn claim<'a>(&'a self, approval: &'a Approval, _lease: Duration) -> BoxFuture<'a, Result<Claim, StoreError>> {
        let claim = match self.locked().get_mut(&approval.id) {
            Some(entry) if entry.claim.is_none() => {
                let token = ClaimToken::new();
                entry.claim = Some(token.clone());
                Claim::Won(token)
            }
            _ => Claim::Taken,
        };
        futures::future::ready(Ok(claim)).boxed()
    }

    fn release<'a>(&'a self, id: &'a str, token: &'a ClaimToken) -> BoxFuture<'a, Result<(), StoreError>> {
        if let Some(entry) = self.locked().get_mut(id).filter(|entry| entry.claim.as_ref() == Some(token)) {
            entry.claim = None;
        }
        futures::future::ready(Ok(())).boxed()
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
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

    /// Stores `approval` in `store` until `drop_at`, counted as 10 bytes.
    pub(crate) async fn put(store: &dyn ApprovalStore, approval: &Approval, drop_at: OffsetDateTime) {
        let stored = store.put(approval, 10, drop_at, &ApprovalSettings::default()).await.unwrap();
        assert_eq!(stored, Admission::Stored);
    }

    #[tokio::test]
    async fn one_claim_wins_and_dropped_records_are_gone() {
        let store = MemoryStore::default();
        check_claims(&store).await;
        let unknown = approval("unknown", Duration::from_secs(60));
        assert_eq!(store.claim(&unknown, Duration::from_secs(60)).await.unwrap(), Claim::Taken);

        let old = approval("old", Duration::ZERO);
        assert_eq!(old.status_at(OffsetDateTime::now_utc()), ApprovalStatus::Expired);
        put(&store, &old, OffsetDateTime::now_utc() - Duration::from_secs(1)).await;
        assert!(store.get("old").await.unwrap().is_none());
        assert_eq!(store.list(None).await.unwrap().len(), 1, "`live` is kept");
    }

    /// Checks the claims of `store` on a new approval `live` (kept after):
    /// one claim wins, storing keeps it, a decision is stored and a claim
    /// given up only with the token of the claim that holds, and a claim
    /// given up can be won again.
    pub(crate) async fn check_claims(store: &dyn ApprovalStore) {
        let live = approval("live", Duration::from_secs(60));
        put(store, &live, live.expires_at).await;
        let lease = Duration::from_secs(60);
        let Claim::Won(token) = store.claim(&live, lease).await.unwrap() else { panic!("the first claim wins") };
        assert_eq!(store.claim(&live, lease).await.unwrap(), Claim::Taken, "a second claim loses");
        put(store, &live, live.expires_at).await;
        assert_eq!(store.claim(&live, lease).await.unwrap(), Claim::Taken, "storing the approval keeps the claim");
        store.release("live", &ClaimToken::new()).await.unwrap();
        assert_eq!(store.claim(&live, lease).await.unwrap(), Claim::Taken, "another token gives up nothing");
        let settings = ApprovalSettings::default();
        let other = store.put_claimed(&live, 10, live.expires_at, &settings, &ClaimToken::new()).await.unwrap();
        assert_eq!(other, None, "another token stores nothing");
        let held = store.put_claimed(&live, 10, live.expires_at, &settings, &token).await.unwrap();
        assert_eq!(held, Some(Admission::Stored));
        store.release("live", &token).await.unwrap();
        assert!(matches!(store.claim(&live, lease).await.unwrap(), Claim::Won(_)), "a claim given up is won again");
    }

    #[tokio::test]
    async fn a_users_listing_reads_only_their_approvals_in_memory() {
        check_listing_by_user(&MemoryStore::default()).await;
    }

    /// Checks that `store` lists a user's approvals alone, and every
    /// user's (and those without one) when no user is named.
    pub(crate) async fn check_listing_by_user(store: &dyn ApprovalStore) {
        let settings = ApprovalSettings::default();
        insert_many(store, Some("ada"), 2, &settings).await;
        insert_many(store, Some("bob"), 3, &settings).await;
        insert_many(store, None, 1, &settings).await;
        let users = |listed: Vec<Approval>| {
            let mut users: Vec<Option<String>> = listed.into_iter().map(|a| a.user_id).collect();
            users.sort();
            users
        };
        let ada = Some("ada".to_owned());
        assert_eq!(users(store.list(Some("ada")).await.unwrap()), [ada.clone(), ada.clone()]);
        assert_eq!(store.list(Some("carol")).await.unwrap(), []);
        let bob = Some("bob".to_owned());
        assert_eq!(users(store.list(None).await.unwrap()), [None, ada.clone(), ada, bob.clone(), bob.clone(), bob]);
    }

    /// Inserts `count` pending approvals of `user` into `store` and returns
    /// the admissions.
    pub(crate) async fn insert_many(
        store: &dyn ApprovalStore,
        user: Option<&str>,
        count: usize,
        settings: &ApprovalSettings,
    ) -> Vec<Admission> {
        let mut admissions = Vec::new();
        for n in 0..count {
            let mut new = approval(&format!("{user:?}-{n}"), Duration::from_secs(60));
            new.user_id = user.map(str::to_owned);
            let drop_at = new.expires_at + Duration::from_secs(60);
            admissions.push(store.insert(&new, 100, drop_at, settings).await.unwrap());
        }
        admissions
    }

    /// Checks the budgets of inserting into `store`: three pending per
    /// user, five in all, 1000 bytes in all (each inserted with 100, one
    /// with 600); a decided one no longer counts as pending.
    pub(crate) async fn check_insert_budgets(store: &dyn ApprovalStore) {
        let settings =
            ApprovalSettings { max_pending: 3, max_total: 5, max_total_bytes: 1000, ..ApprovalSettings::default() };
        let ada = insert_many(store, Some("ada"), 4, &settings).await;
        assert_eq!(ada, [Admission::Stored, Admission::Stored, Admission::Stored, Admission::TooManyPending]);
        let mut decided = store.get("Some(\"ada\")-0").await.unwrap().unwrap();
        decided.status = ApprovalStatus::Denied;
        let drop_at = decided.expires_at + Duration::from_secs(60);
        assert_eq!(store.put(&decided, 100, drop_at, &settings).await.unwrap(), Admission::Stored);
        let mut after = approval("ada-after", Duration::from_secs(60));
        after.user_id = Some("ada".into());
        assert_eq!(store.insert(&after, 701, after.expires_at, &settings).await.unwrap(), Admission::TooManyBytes);
        assert_eq!(store.insert(&after, 600, after.expires_at, &settings).await.unwrap(), Admission::Stored);
        let others = insert_many(store, None, 2, &settings).await;
        assert_eq!(others, [Admission::Stored, Admission::Full], "five in all");
    }

    #[tokio::test]
    async fn inserting_keeps_to_the_budgets() {
        check_insert_budgets(&MemoryStore::default()).await;
    }

    /// Checks the budget of one user's kept approvals in `store` (three,
    /// two pending): deciding their own approvals does not let a user keep
    /// more, another user is not held back, and a dropped one leaves room.
    pub(crate) async fn check_per_user_budget(store: &dyn ApprovalStore) {
        let settings = ApprovalSettings { max_pending: 2, max_per_user: 3, ..ApprovalSettings::default() };
        assert_eq!(insert_many(store, Some("ada"), 2, &settings).await, [Admission::Stored; 2]);
        for n in 0..2 {
            let mut decided = store.get(&format!("Some(\"ada\")-{n}")).await.unwrap().unwrap();
            decided.status = ApprovalStatus::Denied;
            let drop_at = decided.expires_at + Duration::from_secs(60);
            assert_eq!(store.put(&decided, 100, drop_at, &settings).await.unwrap(), Admission::Stored);
        }
        assert_eq!(
            insert_of(store, "third", "ada", 100, &settings).await,
            Admission::Stored,
            "two decided, one pending"
        );
        let refused = insert_of(store, "fourth", "ada", 100, &settings).await;
        assert_eq!(refused, Admission::TooManyForUser, "decided ones still count");
        assert_eq!(insert_of(store, "bob", "bob", 100, &settings).await, Admission::Stored, "another user's own share");
        // A lapsed approval (dropped by now) is not counted.
        let lapsed = OffsetDateTime::now_utc() - Duration::from_secs(1);
        let mut first = store.get("Some(\"ada\")-0").await.unwrap().unwrap();
        first.status = ApprovalStatus::Denied;
        assert_eq!(store.put(&first, 100, lapsed, &settings).await.unwrap(), Admission::Stored);
        assert_eq!(
            insert_of(store, "fourth", "ada", 100, &settings).await,
            Admission::Stored,
            "one of ada's was dropped"
        );
    }

    /// Stores a new pending approval `id` of `user` in `store`, counted as `bytes`.
    async fn insert_of(
        store: &dyn ApprovalStore,
        id: &str,
        user: &str,
        bytes: usize,
        settings: &ApprovalSettings,
    ) -> Admission {
        let mut new = approval(id, Duration::from_secs(60));
        new.user_id = Some(user.into());
        store.insert(&new, bytes, new.expires_at + Duration::from_secs(60), settings).await.unwrap()
    }

    #[tokio::test]
    async fn one_user_keeps_at_most_their_share_of_approvals() {
        check_per_user_budget(&MemoryStore::default()).await;
    }

    /// Stores a new pending approval `id` (ada's) in `store`, counted as `bytes`.
    async fn insert(store: &dyn ApprovalStore, id: &str, bytes: usize, settings: &ApprovalSettings) -> Admission {
        insert_of(store, id, "ada", bytes, settings).await
    }

    /// Stores approval `id` again (decided, with its result) in `store`,
    /// counted as `bytes` from then on, until `drop_at`.
    async fn decide(
        store: &dyn ApprovalStore,
        id: &str,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &ApprovalSettings,
    ) -> Admission {
        let mut decided = store.get(id).await.unwrap().expect("the approval is kept");
        decided.status = ApprovalStatus::Approved;
        store.put(&decided, bytes, drop_at, settings).await.unwrap()
    }

    /// Checks the bytes of storing approvals again in `store` (1000 in
    /// all): a decision counts its bytes instead of the former ones, more
    /// only if they fit with the others, fewer always; a dropped approval's
    /// last bytes leave the sum. Leaves 1000 bytes counted: 800 of `b`,
    /// 150 of `c` and 50 of `d`.
    pub(crate) async fn check_put_budgets(store: &dyn ApprovalStore) {
        let settings = ApprovalSettings { max_total_bytes: 1000, ..ApprovalSettings::default() };
        let later = OffsetDateTime::now_utc() + Duration::from_secs(120);
        assert_eq!(insert(store, "a", 300, &settings).await, Admission::Stored);
        assert_eq!(decide(store, "a", 900, later, &settings).await, Admission::Stored, "900 in all");
        assert_eq!(insert(store, "b", 200, &settings).await, Admission::TooManyBytes, "a's result is counted");
        assert_eq!(decide(store, "a", 1001, later, &settings).await, Admission::TooManyBytes);
        assert_eq!(decide(store, "a", 50, later, &settings).await, Admission::Stored);
        assert_eq!(insert(store, "b", 200, &settings).await, Admission::Stored, "a counts 50 now");
        assert_eq!(decide(store, "b", 800, later, &settings).await, Admission::Stored, "850 in all");
        assert_eq!(decide(store, "b", 951, later, &settings).await, Admission::TooManyBytes, "1001 in all");
        assert_eq!(insert(store, "c", 150, &settings).await, Admission::Stored, "a refused put counts nothing");
        let tight = ApprovalSettings { max_total_bytes: 10, ..settings.clone() };
        assert_eq!(decide(store, "c", 150, later, &tight).await, Admission::Stored, "no more than before");
        // `a` lapses: its 50 bytes leave the sum.
        assert_eq!(insert(store, "d", 50, &settings).await, Admission::TooManyBytes);
        let lapsed = OffsetDateTime::now_utc() - Duration::from_secs(1);
        assert_eq!(decide(store, "a", 50, lapsed, &settings).await, Admission::Stored);
        assert_eq!(insert(store, "d", 50, &settings).await, Admission::Stored);
    }

    #[tokio::test]
    async fn storing_again_counts_the_new_bytes_within_the_budget() {
        check_put_budgets(&MemoryStore::default()).await;
    }

    /// Checks the bytes one user's approvals may count in `store` (1000 of
    /// 10000 in all), at insert and when a decision's bytes grow: ada's
    /// decided ones still count, bob's share is his own, a decision counting
    /// no more than before always fits, and a lapsed one leaves room.
    pub(crate) async fn check_per_user_bytes(store: &dyn ApprovalStore) {
        let settings =
            ApprovalSettings { max_total_bytes: 10_000, max_bytes_per_user: 1000, ..ApprovalSettings::default() };
        let later = OffsetDateTime::now_utc() + Duration::from_secs(120);
        assert_eq!(insert(store, "a", 400, &settings).await, Admission::Stored);
        assert_eq!(decide(store, "a", 600, later, &settings).await, Admission::Stored, "600 of ada's");
        assert_eq!(insert(store, "b", 401, &settings).await, Admission::TooManyBytesForUser, "a's result counts");
        assert_eq!(insert(store, "b", 400, &settings).await, Admission::Stored, "1000 of ada's");
        assert_eq!(decide(store, "b", 401, later, &settings).await, Admission::TooManyBytesForUser);
        assert_eq!(decide(store, "b", 400, later, &settings).await, Admission::Stored, "no more than before");
        assert_eq!(insert_of(store, "bobs", "bob", 1000, &settings).await, Admission::Stored, "bob's own share");
        assert_eq!(insert(store, "c", 1, &settings).await, Admission::TooManyBytesForUser);
        // `a` lapses: its 600 bytes leave ada's sum.
        let lapsed = OffsetDateTime::now_utc() - Duration::from_secs(1);
        assert_eq!(decide(store, "a", 600, lapsed, &settings).await, Admission::Stored);
        assert_eq!(insert(store, "c", 600, &settings).await, Admission::Stored);
        assert_eq!(insert(store, "d", 1, &settings).await, Admission::TooManyBytesForUser);
    }

    #[tokio::test]
    async fn one_user_keeps_at_most_their_share_of_bytes() {
        check_per_user_bytes(&MemoryStore::default()).await;
    }
}
