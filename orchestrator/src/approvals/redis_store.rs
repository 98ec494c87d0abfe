//! Approvals in Redis: `approval:{id}` (JSON), `approval:{id}:claim` (the
//! one decision: a random token, `SET NX` with a lease; the decision is
//! recorded, and the claim given up, only while it holds that token), the index `approvals` (ids scored by the time
//! they are dropped) and, per user, the pending ones
//! (`approvals:pending:user:{user}`, ids scored by when they expire, in
//! milliseconds), and every kept one (`approvals:user:{user}`, ids scored
//! by when they are dropped), each expiring with the record; and, for
//! `MAX_APPROVAL_BYTES`, each counted approval's bytes (the hash
//! `approvals:bytes`), their sum (`approvals:bytes:total`) and when each
//! leaves the sum (`approvals:bytes:drop`, ids scored like the index), kept
//! by the two scripts that store alone: no other writer (an older replica,
//! a person deleting the index) can leave bytes counted that are gone. A
//! user's bytes (for `MAX_APPROVAL_BYTES_PER_USER`) are the bytes counted of
//! the ids of their kept set, summed by the same scripts, so they leave the
//! sum with the approval as the store's do.

use std::collections::HashMap;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script, ScriptInvocation};
use serde_json::value::RawValue;
use time::OffsetDateTime;

use super::record::Approval;
use super::record::ApprovalStatus;
use super::settings::ApprovalSettings;
use super::store::{Admission, ApprovalStore, Claim, ClaimToken, StoreError};
use crate::redis_cache::connection_manager;

/// The sorted set of approval ids.
const INDEX: &str = "approvals";

fn record_key(id: &str) -> String {
    format!("approval:{id}")
}

fn claim_key(id: &str) -> String {
    format!("approval:{id}:claim")
}

/// The sorted set of the pending approvals of `user` (or of calls without one).
fn pending_key(user: Option<&str>) -> String {
    match user {
        Some(user) => format!("approvals:pending:user:{user}"),
        None => "approvals:pending:none".to_owned(),
    }
}

/// The sorted set of every kept approval of `user` (or of calls without one), any state.
fn user_key(user: Option<&str>) -> String {
    match user {
        Some(user) => format!("approvals:user:{user}"),
        None => "approvals:none".to_owned(),
    }
}

/// The counted bytes of each approval.
const BYTES: &str = "approvals:bytes";
/// The sum of [`BYTES`].
const TOTAL_BYTES: &str = "approvals:bytes:total";
/// When each approval of [`BYTES`] leaves the sum: ids scored by drop time.
const BYTES_DROP: &str = "approvals:bytes:drop";

/// The start of both storing scripts: drops the bytes of the ids lapsed by
/// now (`ARGV[1]`, seconds) from the sum, by the scripts' own drop set, so
/// the sum never drifts; when any of the three byte keys is missing
/// (deleted, evicted) the count starts again from nothing. KEYS: the index,
/// the user's pending set, the record, the bytes hash, the sum, the drop set.
macro_rules! drop_lapsed_bytes {
    () => {
        r"
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', ARGV[1])) do
        local bytes = redis.call('HGET', KEYS[4], id)
        if bytes then
            redis.call('HDEL', KEYS[4], id)
            redis.call('DECRBY', KEYS[5], bytes)
        end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', ARGV[1])
    if redis.call('ZCARD', KEYS[6]) == 0 or redis.call('HLEN', KEYS[4]) == 0 or redis.call('EXISTS', KEYS[5]) == 0 then
        redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
    end
"
    };
}

/// Sets `user_bytes` to the counted bytes of the approvals of the user's
/// kept set (`KEYS[7]`, its lapsed ids dropped) but the id `$own`: each
/// one's bytes of the scripts' own hash, so the sum never drifts from what
/// is counted in all. The set is bounded by `MAX_APPROVALS_PER_USER`.
macro_rules! user_bytes {
    ($own:literal) => {
        concat!(
            r"
    redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', ARGV[1])
    local user_bytes = 0
    for _, id in ipairs(redis.call('ZRANGE', KEYS[7], 0, -1)) do
        if id ~= ",
            $own,
            r" then user_bytes = user_bytes + tonumber(redis.call('HGET', KEYS[4], id) or '0') end
    end
"
        )
    };
}

/// Stores a new pending approval if the budgets allow, in one step (Redis
/// runs a script alone): drops the lapsed bytes ([`drop_lapsed_bytes`]),
/// the lapsed ids of the index and of the user's pending and kept sets;
/// then answers 1 when the index holds `max_total` ids, 2 when the user has
/// `max_pending` pending ones, 4 when the user has `max_per_user` kept
/// ones, 3 when its bytes would take the sum past `max_total_bytes`, 5 when
/// they would take the user's ([`user_bytes`]) past `max_bytes_per_user`,
/// and otherwise stores the record, indexes it and counts its bytes (0).
/// The user's sets' TTLs are only ever lengthened.
/// KEYS: as [`drop_lapsed_bytes`], then the user's kept set. ARGV: now
/// (seconds), now (milliseconds), max_total, max_pending, id, drop_at
/// (seconds), expires_at (milliseconds), the record's JSON, its TTL
/// (seconds), max_total_bytes, its bytes, max_per_user, max_bytes_per_user.
const INSERT: &str = concat!(
    drop_lapsed_bytes!(),
    r"
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
    if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 1 end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
    if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 2 end
",
    user_bytes!("ARGV[5]"),
    r"
    if redis.call('ZCARD', KEYS[7]) >= tonumber(ARGV[12]) then return 4 end
    if tonumber(redis.call('GET', KEYS[5]) or '0') + tonumber(ARGV[11]) > tonumber(ARGV[10]) then return 3 end
    if user_bytes + tonumber(ARGV[11]) > tonumber(ARGV[13]) then return 5 end
    redis.call('SET', KEYS[3], ARGV[8], 'EX', ARGV[9])
    redis.call('ZADD', KEYS[1], ARGV[6], ARGV[5])
    redis.call('ZADD', KEYS[2], ARGV[7], ARGV[5])
    if redis.call('TTL', KEYS[2]) < tonumber(ARGV[9]) then redis.call('EXPIRE', KEYS[2], ARGV[9]) end
    redis.call('ZADD', KEYS[7], ARGV[6], ARGV[5])
    if redis.call('TTL', KEYS[7]) < tonumber(ARGV[9]) then redis.call('EXPIRE', KEYS[7], ARGV[9]) end
    redis.call('HSET', KEYS[4], ARGV[5], ARGV[11])
    redis.call('INCRBY', KEYS[5], ARGV[11])
    redis.call('ZADD', KEYS[6], ARGV[6], ARGV[5])
    return 0
"
);

/// Stores (or replaces) an approval, in one step: answers 3, storing
/// nothing, when a claim token is given and the approval's claim does not
/// hold it (its lease lapsed: another decision may have claimed it); drops
/// the lapsed bytes ([`drop_lapsed_bytes`]); answers 1 when its bytes are more than it
/// counted before (nothing if it was not counted) and would take the sum
/// past `max_total_bytes`, 2 when they would take its user's ([`user_bytes`])
/// past `max_bytes_per_user`; otherwise stores and indexes the record,
/// takes a decided one out of its user's pending set, adds it to its user's
/// kept set (or moves its drop time there; one an older replica stored
/// without adding it is counted from then on), lengthening the set's TTL
/// to its own, and counts its bytes instead of its former ones, until it
/// is dropped (0).
/// KEYS: as [`INSERT`], then the approval's claim. ARGV: now (seconds), id,
/// drop_at (seconds), the record's JSON, its TTL (seconds),
/// max_total_bytes, its bytes, 1 when it is decided (0 when pending),
/// max_bytes_per_user, the claim's token (empty: stored whatever holds the claim).
const PUT: &str = concat!(
    r"
    if ARGV[10] ~= '' and redis.call('GET', KEYS[8]) ~= ARGV[10] then return 3 end
",
    drop_lapsed_bytes!(),
    user_bytes!("ARGV[2]"),
    r"
    local before = tonumber(redis.call('HGET', KEYS[4], ARGV[2]) or '0')
    local bytes = tonumber(ARGV[7])
    if bytes > before and tonumber(redis.call('GET', KEYS[5]) or '0') - before + bytes > tonumber(ARGV[6]) then
        return 1
    end
    if bytes > before and user_bytes + bytes > tonumber(ARGV[9]) then return 2 end
    redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
    redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
    if ARGV[8] == '1' then redis.call('ZREM', KEYS[2], ARGV[2]) end
    redis.call('ZADD', KEYS[7], ARGV[3], ARGV[2])
    if redis.call('TTL', KEYS[7]) < tonumber(ARGV[5]) then redis.call('EXPIRE', KEYS[7], ARGV[5]) end
    redis.call('HSET', KEYS[4], ARGV[2], ARGV[7])
    redis.call('INCRBY', KEYS[5], bytes - before)
    redis.call('ZADD', KEYS[6], ARGV[3], ARGV[2])
    return 0
"
);

/// Gives up a claim only while it holds the token given (its lease may
/// have lapsed and another decision claimed it since).
/// KEYS: the claim. ARGV: the token.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

/// What [`PUT`] answers when the claim does not hold the token given.
const UNCLAIMED: u8 = 3;

/// The admission [`PUT`]'s answer (other than [`UNCLAIMED`]) stands for.
fn put_admission(answer: u8) -> Admission {
    match answer {
        0 => Admission::Stored,
        2 => Admission::TooManyBytesForUser,
        _ => Admission::TooManyBytes,
    }
}

/// Milliseconds since the epoch.
fn unix_millis(at: OffsetDateTime) -> i128 {
    at.unix_timestamp_nanos() / 1_000_000
}

fn unavailable(error: redis::RedisError) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

/// Seconds from now until `at`, at least one (Redis refuses a TTL of 0).
fn ttl(at: OffsetDateTime) -> u64 {
    u64::try_from((at - OffsetDateTime::now_utc()).whole_seconds()).unwrap_or(0).max(1)
}

/// Reads a stored record. Its `arguments` and `result` are read on their
/// own, so serde_json's nesting limit counts from each of them rather than
/// from the record around them: arguments and results nested as deeply as
/// a request or a module's answer may be stay readable one and two levels
/// further down in the record. (Raw values are skipped without recursion.)
fn read_record(text: &str) -> serde_json::Result<Approval> {
    let mut fields: HashMap<String, Box<RawValue>> = serde_json::from_str(text)?;
    let arguments = fields.insert("arguments".to_owned(), RawValue::from_string("{}".to_owned())?);
    let result = fields.remove("result");
    let mut approval: Approval = serde_json::from_str(&serde_json::to_string(&fields)?)?;
    if let Some(arguments) = arguments {
        approval.arguments = serde_json::from_str(arguments.get())?;
    }
    if let Some(result) = result {
        approval.result = serde_json::from_str(result.get())?;
    }
    Ok(approval)
}

/// Reads the stored record of `id` ([`read_record`]), or says it is not readable.
fn read_stored(id: &str, text: &str) -> Result<Approval, StoreError> {
    read_record(text).map_err(|e| StoreError::Corrupt { id: id.to_owned(), reason: e.to_string() })
}

/// `script` ([`INSERT`] or [`PUT`]) over the keys of [`drop_lapsed_bytes`]
/// and the user's kept set for `approval`, its arguments left to add.
fn storing<'a>(script: &'a Script, approval: &Approval) -> ScriptInvocation<'a> {
    let mut invocation = script.prepare_invoke();
    let user = approval.user_id.as_deref();
    invocation
        .key(INDEX)
        .key(pending_key(user))
        .key(record_key(&approval.id))
        .key(BYTES)
        .key(TOTAL_BYTES)
        .key(BYTES_DROP)
        .key(user_key(user));
    invocation
}

/// Approvals shared by every orchestrator on the same Redis.
pub struct RedisStore {
    connection: ConnectionManager,
    /// [`INSERT`], [`PUT`] and [`RELEASE`], called by their hash
    /// (`EVALSHA`): their text is sent only when the server does not have
    /// it (the first call, or after a restart or `SCRIPT FLUSH`), and the
    /// call is then made again.
    insert: Script,
    put: Script,
    release: Script,
}

impl RedisStore {
    /// A store at `url`, connecting lazily like the manifest cache.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        Ok(Self {
            connection: connection_manager(url).map_err(unavailable)?,
            insert: Script::new(INSERT),
            put: Script::new(PUT),
            release: Script::new(RELEASE),
        })
    }

    /// Runs a storing script: 0 when it stored, otherwise the budget it refused for.
    async fn run(&self, invocation: &ScriptInvocation<'_>) -> Result<u8, StoreError> {
        invocation.invoke_async(&mut self.connection.clone()).await.map_err(unavailable)
    }

    /// Runs [`PUT`] for `approval` (while its claim holds `token`, unless empty).
    async fn run_put(
        &self,
        approval: &Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &ApprovalSettings,
        token: &str,
    ) -> Result<u8, StoreError> {
        let text = serde_json::to_string(approval).expect("an approval always serializes");
        let mut invocation = storing(&self.put, approval);
        invocation
            .key(claim_key(&approval.id))
            .arg(OffsetDateTime::now_utc().unix_timestamp())
            .arg(&approval.id)
            .arg(drop_at.unix_timestamp())
            .arg(text)
            .arg(ttl(drop_at))
            .arg(settings.max_total_bytes)
            .arg(bytes)
            .arg(u8::from(approval.status != ApprovalStatus::Pending))
            .arg(settings.max_bytes_per_user)
            .arg(token);
        self.run(&invocation).await
    }
}

impl ApprovalStore for RedisStore {
    fn insert<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>> {
        async move {
            let text = serde_json::to_string(approval).expect("an approval always serializes");
            let now = OffsetDateTime::now_utc();
            let mut invocation = storing(&self.insert, approval);
            invocation
                .arg(now.unix_timestamp())
                .arg(unix_millis(now).to_string())
                .arg(settings.max_total)
                .arg(settings.max_pending)
                .arg(&approval.id)
                .arg(drop_at.unix_timestamp())
                .arg(unix_millis(approval.expires_at).to_string())
                .arg(text)
                .arg(ttl(drop_at))
                .arg(settings.max_total_bytes)
                .arg(bytes)
                .arg(settings.max_per_user)
                .arg(settings.max_bytes_per_user);
            Ok(match self.run(&invocation).await? {
                0 => Admission::Stored,
                1 => Admission::Full,
                2 => Admission::TooManyPending,
                4 => Admission::TooManyForUser,
                5 => Admission::TooManyBytesForUser,
                _ => Admission::TooManyBytes,
            })
        }
        .boxed()
    }

    fn put<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
    ) -> BoxFuture<'a, Result<Admission, StoreError>> {
        async move { Ok(put_admission(self.run_put(approval, bytes, drop_at, settings, "").await?)) }.boxed()
    }

    fn put_claimed<'a>(
        &'a self,
        approval: &'a Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        settings: &'a ApprovalSettings,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Admission>, StoreError>> {
        async move {
            let answer = self.run_put(approval, bytes, drop_at, settings, token.as_str()).await?;
            Ok((answer != UNCLAIMED).then(|| put_admission(answer)))
        }
        .boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            let text: Option<String> = connection.get(record_key(id)).await.map_err(unavailable)?;
            text.map(|text| read_stored(id, &text)).transpose()
        }
        .boxed()
    }

    fn get_claimed<'a>(
        &'a self,
        id: &'a str,
        token: &'a ClaimToken,
    ) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            // One `MGET`: the record as it was while the claim held what it answers.
            let (text, claim): (Option<String>, Option<String>) =
                connection.mget(&[record_key(id), claim_key(id)]).await.map_err(unavailable)?;
            text.filter(|_| claim.as_deref() == Some(token.as_str())).map(|text| read_stored(id, &text)).transpose()
        }
        .boxed()
    }

    fn list<'a>(&'a self, user: Option<&'a str>) -> BoxFuture<'a, Result<Vec<Approval>, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            // Lapsed ids are left for the storing script to drop, with their bytes.
            let now = OffsetDateTime::now_utc().unix_timestamp();
            // A user's kept set is scored as the index is, by when each is dropped.
            let index = user.map_or_else(|| INDEX.to_owned(), |user| user_key(Some(user)));
            let ids: Vec<String> =
                connection.zrangebyscore(index, format!("({now}"), "+inf").await.map_err(unavailable)?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let keys: Vec<String> = ids.iter().map(|id| record_key(id)).collect();
            let texts: Vec<Option<String>> = connection.mget(&keys).await.map_err(unavailable)?;
            // One unreadable record is left out (and logged), not every user's approvals.
            let readable = ids
                .into_iter()
                .zip(texts)
                .filter_map(|(id, text)| text.map(|text| (id, text)))
                .filter_map(|(id, text)| {
                    read_record(&text)
                        .inspect_err(|error| {
                            tracing::warn!(key = %record_key(&id), %error, "an approval record is not readable; left out");
                        })
                        .ok()
                })
                .collect();
            Ok(readable)
        }
        .boxed()
    }

    fn claim<'a>(&'a self, approval: &'a Approval, lease: Duration) -> BoxFuture<'a, Result<Claim, StoreError>> {
        async move {
            let mut connection = self.connection.clone();
            // At least a millisecond: Redis refuses an expiry of 0.
            let lease = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
            let options = redis::SetOptions::default()
                .conditional_set(redis::ExistenceCheck::NX)
                .with_expiration(redis::SetExpiry::PX(lease));
            let token = ClaimToken::new();
            let key = claim_key(&approval.id);
            let set: Option<String> =
                connection.set_options(key, token.as_str(), options).await.map_err(unavailable)?;
            Ok(if set.is_some() { Claim::Won(token) } else { Claim::Taken })
        }
        .boxed()
    }

    fn release<'a>(&'a self, id: &'a str, token: &'a ClaimToken) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let mut invocation = self.release.prepare_invoke();
            invocation.key(claim_key(id)).arg(token.as_str());
            let _: u8 = invocation.invoke_async(&mut self.connection.clone()).await.map_err(unavailable)?;
            Ok(())
        }
        .boxed()
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::store::tests::{
        approval, check_claims, check_insert_budgets, check_listing_by_user, check_per_user_budget,
        check_per_user_bytes, check_put_budgets, put,
    };
    use module_sdk::contract::ToolResult;
    use serde_json::{Value, json};
    use std::time::Duration;

    /// `levels` arrays, one inside the other.
    fn nested(levels: usize) -> Value {
        (1..levels).fold(json!([]), |inner, _| json!([inner]))
    }

    #[test]
    fn records_with_arguments_and_results_nested_as_deep_as_they_read_are_readable() {
        let mut deep = approval("deep", Duration::from_secs(60));
        // Each as deep as serde_json reads on its own (127 levels, the object included).
        deep.arguments = serde_json::Map::from_iter([("deep".to_owned(), nested(126))]);
        deep.result = Some(ToolResult::success("m.t", nested(126)));
        let text = serde_json::to_string(&deep).unwrap();
        assert!(serde_json::from_str::<Approval>(&text).is_err(), "the record as a whole is too deep for serde_json");
        assert_eq!(read_record(&text).unwrap(), deep);
        let plain = approval("plain", Duration::from_secs(60));
        assert_eq!(read_record(&serde_json::to_string(&plain).unwrap()).unwrap(), plain);
        assert!(read_record("{\"id\": \"x\"}").is_err(), "a record missing its fields is refused");
    }

    #[tokio::test]
    async fn inserting_keeps_to_the_budgets() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_insert_budgets(&RedisStore::new(&redis.url()).unwrap()).await;
    }

    #[tokio::test]
    async fn one_user_keeps_at_most_their_share_of_approvals() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_per_user_budget(&RedisStore::new(&redis.url()).unwrap()).await;
    }

    #[tokio::test]
    async fn a_users_listing_reads_only_their_approvals() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_listing_by_user(&RedisStore::new(&redis.url()).unwrap()).await;
    }

    #[tokio::test]
    async fn one_user_keeps_at_most_their_share_of_bytes() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_per_user_bytes(&RedisStore::new(&redis.url()).unwrap()).await;
    }

    #[tokio::test]
    async fn an_approval_an_older_replica_kept_out_of_its_users_set_counts_once_stored_again() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store = RedisStore::new(&redis.url()).unwrap();
        let settings = ApprovalSettings { max_bytes_per_user: 1000, ..ApprovalSettings::default() };
        let old = approval("old", Duration::from_secs(60));
        let drop_at = old.expires_at + Duration::from_secs(60);
        assert_eq!(store.insert(&old, 400, drop_at, &settings).await.unwrap(), Admission::Stored);
        // An older replica stored it without adding it to ada's kept set.
        let mut connection = store.connection.clone();
        let _: () = connection.del(user_key(Some("ada"))).await.unwrap();
        let mut decided = old.clone();
        decided.status = ApprovalStatus::Denied;
        assert_eq!(store.put(&decided, 600, drop_at, &settings).await.unwrap(), Admission::Stored);
        let ttl: i64 = connection.ttl(user_key(Some("ada"))).await.unwrap();
        assert!(ttl > 60, "the set lasts as long as the approval: {ttl}");
        let next = approval("next", Duration::from_secs(60));
        let refused = store.insert(&next, 401, next.expires_at, &settings).await.unwrap();
        assert_eq!(refused, Admission::TooManyBytesForUser, "the decided approval's 600 bytes are ada's");
    }

    #[tokio::test]
    async fn storing_again_counts_the_new_bytes_within_the_budget() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store = RedisStore::new(&redis.url()).unwrap();
        check_put_budgets(&store).await;
        let mut connection = store.connection.clone();
        let total: i64 = connection.get(TOTAL_BYTES).await.unwrap();
        let mut kept: Vec<(String, i64)> = connection.hgetall(BYTES).await.unwrap();
        kept.sort();
        let expected = [("b", 800), ("c", 150), ("d", 50)].map(|(id, bytes)| (id.to_owned(), bytes));
        assert_eq!((total, kept), (1000, expected.to_vec()), "the sum is the kept approvals' bytes");
    }

    #[tokio::test]
    async fn counted_bytes_leave_the_sum_with_their_approval_whoever_emptied_the_index() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store = RedisStore::new(&redis.url()).unwrap();
        let settings = ApprovalSettings { max_total_bytes: 1000, ..ApprovalSettings::default() };
        let lapsed = approval("lapsed", Duration::from_secs(60));
        let past = OffsetDateTime::now_utc() - Duration::from_secs(1);
        assert_eq!(store.insert(&lapsed, 600, past, &settings).await.unwrap(), Admission::Stored);
        // An older replica's listing (or a person) empties the index alone.
        let mut connection = store.connection.clone();
        let _: () = connection.del(INDEX).await.unwrap();
        let next = approval("next", Duration::from_secs(60));
        assert_eq!(store.insert(&next, 600, next.expires_at, &settings).await.unwrap(), Admission::Stored);
        let total: i64 = connection.get(TOTAL_BYTES).await.unwrap();
        assert_eq!(total, 600, "only the kept approval's bytes are counted");
        // Without the drop set nothing is known to be counted: the sum starts again.
        let _: () = connection.del(BYTES_DROP).await.unwrap();
        let last = approval("last", Duration::from_secs(60));
        assert_eq!(store.insert(&last, 900, last.expires_at, &settings).await.unwrap(), Admission::Stored);
        // Nor without the sum (which must not go below what is kept).
        let _: () = connection.del(TOTAL_BYTES).await.unwrap();
        let again = approval("again", Duration::from_secs(60));
        assert_eq!(store.insert(&again, 100, again.expires_at, &settings).await.unwrap(), Admission::Stored);
        let kept: Vec<String> = connection.hkeys(BYTES).await.unwrap();
        assert_eq!((connection.get::<_, i64>(TOTAL_BYTES).await.unwrap(), kept), (100, vec!["again".to_owned()]));
    }

    #[tokio::test]
    async fn the_scripts_are_called_by_their_hash_and_sent_again_when_the_server_forgot_them() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store = RedisStore::new(&redis.url()).unwrap();
        let settings = ApprovalSettings::default();
        let mut connection = store.connection.clone();
        let mut decided = approval("decided", Duration::from_secs(60));
        for id in ["first", "second"] {
            let pending = approval(id, Duration::from_secs(60));
            assert_eq!(store.insert(&pending, 10, pending.expires_at, &settings).await.unwrap(), Admission::Stored);
            put(&store, &decided, decided.expires_at).await;
            decided.status = ApprovalStatus::Denied;
            // A restarted server, or `SCRIPT FLUSH`, has forgotten them: the next calls answer NOSCRIPT.
            let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut connection).await.unwrap();
        }
        assert_eq!(store.list(None).await.unwrap().len(), 3);
        let stats: String = redis::cmd("INFO").arg("commandstats").query_async(&mut connection).await.unwrap();
        // `cmdstat_evalsha:calls=8,usec=...,failed_calls=4`: a count of the command's, 0 if it never ran.
        let count = |command: &str, field: &str| {
            let line = stats.lines().find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:")));
            let fields = line.map(|line| line.split(',').filter_map(|field| field.split_once('=')).collect::<Vec<_>>());
            fields
                .and_then(|fields| fields.into_iter().find(|(name, _)| *name == field))
                .map_or(0, |(_, n)| n.parse::<u32>().unwrap())
        };
        assert_eq!(count("eval", "calls"), 0, "the text is not sent with each call: {stats}");
        // After each flush each script's first call answered NOSCRIPT, was loaded and called again, by hash.
        let counts =
            [("evalsha", "failed_calls"), ("script|load", "calls"), ("evalsha", "calls")].map(|(c, f)| count(c, f));
        assert_eq!(counts, [4, 4, 8], "{stats}");
    }

    #[tokio::test]
    async fn one_claim_wins_until_it_is_released() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_claims(&RedisStore::new(&redis.url()).unwrap()).await;
    }

    #[tokio::test]
    async fn an_unreadable_record_is_left_out_of_the_list() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store = RedisStore::new(&redis.url()).unwrap();
        let kept = approval("kept", Duration::from_secs(60));
        put(&store, &kept, kept.expires_at).await;
        let mut broken = approval("broken", Duration::from_secs(60));
        put(&store, &broken, broken.expires_at).await;
        let mut connection = store.connection.clone();
        let _: () = connection.set(record_key("broken"), "{\"id\": \"broken\", \"arguments\": [").await.unwrap();
        assert_eq!(store.list(None).await.unwrap(), vec![kept]);
        assert!(matches!(store.get("broken").await, Err(StoreError::Corrupt { .. })));
        broken.status = crate::approvals::ApprovalStatus::Denied;
        put(&store, &broken, broken.expires_at).await;
        assert_eq!(store.list(None).await.unwrap().len(), 2, "a record written again is read again");
    }
}
