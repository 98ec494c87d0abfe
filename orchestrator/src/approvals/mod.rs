//! Human approval of risky calls: a call that needs approval is stored as a
//! pending approval instead of running; approving it runs the stored call
//! (tool, arguments, user) exactly once, denying it tells the model why.

mod held_claim;
pub mod record;
pub mod redis_store;
pub mod routes;
pub mod settings;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use module_sdk::ErrorKind;
use module_sdk::contract::ToolResult;
use serde::Deserialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::app::Orchestrator;
use crate::caller::Caller;
use crate::execute::{CallArguments, Executor};
use crate::identity::Identity;
use crate::providers::{self, CallFormat, RequestedCall};
use crate::registry::RouteError;
use crate::trace::RequestTrace;
use held_claim::HeldClaim;
use record::json_bytes;
pub use record::{Approval, ApprovalStatus, ProviderCall};
pub use settings::ApprovalSettings;
use store::{Admission, ApprovalStore, Claim, ClaimToken, MemoryStore, StoreError};

/// A person's decision on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run the stored call once.
    Approve,
    /// Never run it.
    Deny,
}

/// Why an approval request or decision was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No such approval (or it was dropped after expiring).
    #[error("no approval `{0}`")]
    NotFound(String),
    /// The identity may not see or decide it.
    #[error("approval `{0}` is for another user; only that user or an admin may see or decide it")]
    NotYours(String),
    /// The identity that asked for the call may not decide it
    /// (`APPROVAL_SEPARATE_DECIDER`).
    #[error(
        "approval `{id}` was asked for by this identity (`{identity}`), and with APPROVAL_SEPARATE_DECIDER set the identity that asks for a call may not decide it: a person decides it with another identity (their own key or sign-in, or an admin's), in the console or through the approvals API"
    )]
    OwnCall {
        /// The approval's id.
        id: String,
        /// The identity's name, as in the approval's `requested_by`.
        identity: String,
    },
    /// It was already decided, or expired.
    #[error("approval `{id}` is {status}; it can be decided only once, while pending")]
    Conflict {
        /// The approval's id.
        id: String,
        /// Where it stands.
        status: &'static str,
    },
    /// The user has too many pending approvals.
    #[error("user `{user}` already has {max} pending approvals (MAX_PENDING_APPROVALS); decide those first")]
    TooMany {
        /// The user (empty for calls without one).
        user: String,
        /// The budget.
        max: usize,
    },
    /// The user has as many approvals kept (any state) as one user may.
    #[error(
        "user `{user}` already has {max} approvals kept (MAX_APPROVALS_PER_USER), pending, decided or expired; decided ones are dropped APPROVAL_EXPIRY_SECONDS after they expire"
    )]
    UserFull {
        /// The user (empty for calls without one).
        user: String,
        /// The budget.
        max: usize,
    },
    /// The call's arguments (with its caller and ids) are larger than an approval may hold.
    #[error(
        "the call's arguments, caller (user, permission, modules) and ids, as JSON, are {bytes} bytes, more than the {max} an approval may hold ({budget})"
    )]
    TooLarge {
        /// The arguments' size.
        bytes: usize,
        /// The most an approval's arguments may have.
        max: usize,
        /// The setting that decides `max`.
        budget: &'static str,
    },
    /// The approvals kept hold as many bytes as they may.
    #[error(
        "the orchestrator's approvals already hold as many bytes (arguments, callers, reasons and results) as they may ({max}, MAX_APPROVAL_BYTES); decide pending ones or wait for old ones to expire"
    )]
    FullOfBytes {
        /// The budget.
        max: usize,
    },
    /// The user's approvals kept (any state) hold as many bytes as one user's may.
    #[error(
        "user `{user}`'s approvals already hold as many bytes (arguments, callers, reasons and results) as one user's may ({max}, MAX_APPROVAL_BYTES_PER_USER), pending, decided or expired; decided ones are dropped APPROVAL_EXPIRY_SECONDS after they expire"
    )]
    UserFullOfBytes {
        /// The user (empty for calls without one).
        user: String,
        /// The budget.
        max: usize,
    },
    /// A decision's reason is longer than a decision may give.
    #[error("the decision's reason is {bytes} bytes, more than the {max} it may be (MAX_APPROVAL_REASON_BYTES)")]
    ReasonTooLong {
        /// The reason's size.
        bytes: usize,
        /// The budget.
        max: usize,
    },
    /// A decision's reason would take the approvals kept (all, or its
    /// user's) past their bytes.
    #[error(
        "recording the decision of approval `{id}` with its reason of {bytes} bytes would take {whose} approvals past the bytes they may hold ({max}, {setting}); decide it without a reason (that always fits), or once older approvals are dropped"
    )]
    NoRoomForReason {
        /// The approval's id.
        id: String,
        /// The reason's size as stored (JSON).
        bytes: usize,
        /// `the orchestrator's` or `its user's`.
        whose: &'static str,
        /// `MAX_APPROVAL_BYTES` or `MAX_APPROVAL_BYTES_PER_USER`.
        setting: &'static str,
        /// The budget.
        max: usize,
    },
    /// The store holds as many approvals as it may.
    #[error(
        "the orchestrator already keeps {max} approvals (MAX_APPROVALS); decide pending ones or wait for old ones to expire"
    )]
    Full {
        /// The budget.
        max: usize,
    },
    /// The store did not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Deciding it took longer than its claim's lease before the decision
    /// was recorded: another decision may hold the claim now, so this one
    /// recorded and ran nothing.
    #[error(
        "deciding approval `{id}` took longer than its claim lasts ({lease:?}) before the decision was recorded, so another decision may have taken it over: this one recorded and ran nothing; read the approval again"
    )]
    ClaimLapsed {
        /// The approval's id.
        id: String,
        /// How long a claim lasts.
        lease: Duration,
    },
    /// Deciding it stopped before its end (the task running it panicked or
    /// the orchestrator is shutting down).
    #[error("deciding approval `{id}` stopped before its end: {reason}")]
    Interrupted {
        /// The approval's id.
        id: String,
        /// What stopped it.
        reason: String,
    },
}

/// The bytes an approval counts, beyond [`Approval::counted_bytes`], until
/// its call's result is stored: room for the result of its decision, at
/// least the largest a decision stores of its own (a denial's without a
/// reason, [`unkept_result`]). So a decision without a reason always fits
/// in `MAX_APPROVAL_BYTES` and `MAX_APPROVAL_BYTES_PER_USER`, however full,
/// and a result that does not fit can always be replaced.
pub const DECISION_BYTES: usize = 512;

/// How long a claim on an approval's decision lasts in Redis, from when it
/// is won until the decision is recorded (`running` or `denied`, a few
/// Redis commands later): a claim whose replica died in between strands the
/// approval (`409` "already being decided") no longer than this. A decision
/// that takes longer records and runs nothing ([`ApprovalError::ClaimLapsed`]).
pub const CLAIM_LEASE: Duration = Duration::from_secs(30);

/// A budget of approvals' bytes a store refused for.
struct ByteBudget {
    /// Whose approvals it bounds, as told: `the orchestrator's` or `its user's`.
    whose: &'static str,
    /// Its setting.
    setting: &'static str,
    /// Its value.
    max: usize,
}

/// The approval store and policy of one orchestrator.
pub struct Approvals {
    store: Arc<dyn ApprovalStore>,
    settings: ApprovalSettings,
    /// [`CLAIM_LEASE`] (shorter in tests).
    claim_lease: Duration,
}

impl Approvals {
    /// Approvals in Redis when `redis_url` is set, in memory otherwise.
    pub fn new(redis_url: Option<&str>, settings: ApprovalSettings) -> Result<Self, StoreError> {
        let store: Arc<dyn ApprovalStore> = match redis_url {
            Some(url) => Arc::new(redis_store::RedisStore::new(url)?),
            None => Arc::new(MemoryStore::default()),
        };
        Ok(Self { store, settings, claim_lease: CLAIM_LEASE })
    }

    /// The policy and budgets.
    pub fn settings(&self) -> &ApprovalSettings {
        &self.settings
    }

    /// `memory` or `redis`.
    pub fn kind(&self) -> &'static str {
        self.store.kind()
    }

    /// When `approval` is dropped: `APPROVAL_EXPIRY_SECONDS` after it
    /// expires ([`Self::drop_after`] its expiry).
    fn drop_at(&self, approval: &Approval) -> OffsetDateTime {
        self.drop_after(approval, approval.expires_at)
    }

    /// When `approval`, whose call may run until `ends` (its result kept
    /// then), is dropped: `APPROVAL_EXPIRY_SECONDS` after it expires or after
    /// `ends`, whichever is later, so a call approved just before the
    /// approval expires keeps its record while it runs, and its result for
    /// as long as any other decision's.
    fn drop_after(&self, approval: &Approval, ends: OffsetDateTime) -> OffsetDateTime {
        approval.expires_at.max(ends) + self.settings.expiry
    }

    /// Stores a pending approval of `tool_name` with `arguments` for `caller`.
    pub async fn request(
        &self,
        identity: &Identity,
        caller: &Caller,
        tool_name: &str,
        arguments: Map<String, Value>,
        call: Option<ProviderCall>,
    ) -> Result<Approval, ApprovalError> {
        let now = OffsetDateTime::now_utc();
        let approval = Approval {
            id: uuid::Uuid::new_v4().to_string(),
            tool_name: tool_name.to_owned(),
            arguments,
            user_id: caller.user_id.clone(),
            permission: caller.permission,
            modules: caller.modules.clone(),
            requested_by: identity.name.clone(),
            created_at: now,
            expires_at: now + self.settings.expiry,
            status: ApprovalStatus::Pending,
            decided_by: None,
            decided_at: None,
            reason: None,
            result: None,
            call,
        };
        // Undecided, it counts its arguments, caller, asker and provider call.
        let bytes = approval.counted_bytes();
        // A byte budget smaller than the arguments' would refuse the call as
        // if full however empty: named here, as what no approval may pass.
        let arguments = (self.settings.max_argument_bytes, "MAX_APPROVAL_ARGUMENT_BYTES");
        let user = self.settings.max_bytes_per_user.saturating_sub(DECISION_BYTES);
        let total = self.settings.max_total_bytes.saturating_sub(DECISION_BYTES);
        let (max, budget) = [
            (user, "MAX_APPROVAL_BYTES_PER_USER, less 512 kept for the decision"),
            (total, "MAX_APPROVAL_BYTES, less 512 kept for the decision"),
        ]
        .into_iter()
        .fold(arguments, |smallest, next| if next.0 < smallest.0 { next } else { smallest });
        if bytes > max {
            return Err(ApprovalError::TooLarge { bytes, max, budget });
        }
        let counted = bytes + DECISION_BYTES;
        match self.store.insert(&approval, counted, self.drop_at(&approval), &self.settings).await? {
            Admission::Stored => {}
            Admission::Full => return Err(ApprovalError::Full { max: self.settings.max_total }),
            Admission::TooManyBytes => return Err(ApprovalError::FullOfBytes { max: self.settings.max_total_bytes }),
            Admission::TooManyPending => {
                let user = caller.user_id.clone().unwrap_or_default();
                return Err(ApprovalError::TooMany { user, max: self.settings.max_pending });
            }
            Admission::TooManyForUser => {
                let user = caller.user_id.clone().unwrap_or_default();
                return Err(ApprovalError::UserFull { user, max: self.settings.max_per_user });
            }
            Admission::TooManyBytesForUser => {
                let user = caller.user_id.clone().unwrap_or_default();
                return Err(ApprovalError::UserFullOfBytes { user, max: self.settings.max_bytes_per_user });
            }
        }
        tracing::info!(approval = %approval.id, tool = %tool_name, user = ?approval.user_id, by = %identity.name, "approval pending");
        Ok(approval)
    }

    /// The approvals `identity` may see, newest first: its user's (every
    /// user's for admins and services), of the tools it may use itself.
    /// Only its user's are read from the store unless it sees every user's.
    pub async fn list_for(&self, identity: &Identity, executor: &Executor) -> Result<Vec<Approval>, ApprovalError> {
        let only_user = if identity.is_operator() { None } else { identity.own_user() };
        let mut visible: Vec<Approval> = self
            .store
            .list(only_user)
            .await?
            .into_iter()
            .filter(|a| may_see(identity, a, executor))
            .map(Approval::current)
            .collect();
        visible.sort_by_key(|a| std::cmp::Reverse(a.created_at));
        Ok(visible)
    }

    /// Approval `id`, if `identity` may see it: another user's is refused
    /// as such, one whose tool the identity may not use is not found, so its
    /// existence does not show.
    pub async fn get_for(&self, identity: &Identity, id: &str, executor: &Executor) -> Result<Approval, ApprovalError> {
        let approval = self.store.get(id).await?.ok_or_else(|| ApprovalError::NotFound(id.to_owned()))?;
        if !identity.may_act_for(approval.user_id.as_deref()) {
            return Err(ApprovalError::NotYours(id.to_owned()));
        }
        if !may_use_tool(identity, &approval, executor) {
            return Err(ApprovalError::NotFound(id.to_owned()));
        }
        Ok(approval.current())
    }

    /// Decides approval `id` once: approving runs the stored call through
    /// `executor`, denying records the declined result. Anything but a
    /// pending approval, or a second decision, is a conflict and runs
    /// nothing. The approval answered holds the call's result even when the
    /// store keeps [`unkept_result`] in its place. Why a module was not
    /// reached (its discovery error) is kept from every reader of the
    /// approval ([`RouteError::without_internals`]) and told only to an
    /// operator deciding ([`Identity::is_operator`]), as at `/execute`.
    /// With `APPROVAL_SEPARATE_DECIDER` the identity that asked for the call
    /// may not decide it ([`ApprovalError::OwnCall`]).
    pub async fn decide(
        &self,
        identity: &Identity,
        id: &str,
        decision: Decision,
        reason: Option<String>,
        executor: &Executor,
    ) -> Result<Approval, ApprovalError> {
        if let Some(bytes) = reason.as_ref().map(String::len).filter(|&bytes| bytes > self.settings.max_reason_bytes) {
            return Err(ApprovalError::ReasonTooLong { bytes, max: self.settings.max_reason_bytes });
        }
        let mut approval = self.get_for(identity, id, executor).await?;
        if self.settings.separate_decider && approval.requested_by == identity.name {
            return Err(ApprovalError::OwnCall { id: id.to_owned(), identity: identity.name.clone() });
        }
        if approval.status != ApprovalStatus::Pending {
            return Err(ApprovalError::Conflict { id: id.to_owned(), status: approval.status.as_str() });
        }
        let Claim::Won(token) = self.store.claim(&approval, self.claim_lease).await? else {
            return Err(ApprovalError::Conflict { id: id.to_owned(), status: "already being decided" });
        };
        // Given up if the decision ends undecided, however it ends.
        let claim = HeldClaim::new(Arc::clone(&self.store), id, token);
        // Read again once the claim is won (however long that took): a
        // decision recorded under an earlier claim, lapsed since, shows now;
        // and its expiry is checked by the clock that set it.
        let status = match self.store.get(id).await {
            Ok(stored) => stored.map(|stored| stored.status_at(OffsetDateTime::now_utc())),
            Err(error) => return Err(undecided(claim, error.into()).await),
        };
        match status {
            Some(ApprovalStatus::Pending) => {}
            Some(status) => {
                let decided = ApprovalError::Conflict { id: id.to_owned(), status: status.as_str() };
                return Err(undecided(claim, decided).await);
            }
            None => return Err(undecided(claim, ApprovalError::NotFound(id.to_owned())).await),
        }
        approval.decided_by = Some(identity.name.clone());
        approval.decided_at = Some(OffsetDateTime::now_utc());
        // What only the decider is told in place of the result kept.
        let mut told = None;
        let result = match decision {
            Decision::Approve => {
                // Recorded before the call runs, so an orchestrator stopped
                // while it runs leaves it `running` (approved, no result
                // came back), never `pending` as if nothing had happened.
                approval.status = ApprovalStatus::Running;
                approval.reason.clone_from(&reason);
                let (caller, tool_name) = (approval.caller(), approval.tool_name.clone());
                let route = executor.route(&tool_name);
                // Kept while the call may run (its tool's timeout), however
                // soon the approval expires.
                let running_for = route.as_ref().map_or(Duration::ZERO, |route| executor.call_timeout(route));
                let drop_at = self.drop_after(&approval, OffsetDateTime::now_utc() + running_for);
                let bytes = approval.counted_bytes() + DECISION_BYTES;
                if let Err(error) = self.record(&approval, bytes, drop_at, claim.token()).await {
                    return Err(undecided(claim, error).await);
                }
                // The result is kept once and read by everyone who may see
                // the approval (its user too): why a module was not reached
                // goes only to an operator deciding, as at `/execute`.
                told = route
                    .as_ref()
                    .err()
                    .filter(|_| identity.is_operator())
                    .map(|error| executor.refusal(&caller, &tool_name, error));
                let route = route.map_err(RouteError::without_internals);
                let arguments = CallArguments::Tree(approval.arguments.clone());
                executor.execute_answer(&caller, route, tool_name, arguments, true).await.into_result()
            }
            Decision::Deny => declined_result(&approval.tool_name, reason.as_deref()),
        };
        approval.status = match decision {
            Decision::Approve => ApprovalStatus::Approved,
            Decision::Deny => ApprovalStatus::Denied,
        };
        approval.reason = reason;
        approval.result = Some(result);
        match decision {
            Decision::Deny => {
                let drop_at = self.drop_at(&approval);
                if let Err(error) = self.record(&approval, approval.counted_bytes(), drop_at, claim.token()).await {
                    return Err(undecided(claim, error).await);
                }
            }
            Decision::Approve => self.keep_result(&mut approval).await,
        }
        claim.keep();
        if told.is_some() {
            approval.result = told;
        }
        tracing::info!(
            approval = %approval.id,
            tool = %approval.tool_name,
            user = ?approval.user_id,
            decision = approval.status.as_str(),
            by = %identity.name,
            reason = ?approval.reason,
            "approval decided"
        );
        Ok(approval)
    }

    /// Stores the decision of `approval`, counted as `bytes`, until
    /// `drop_at`, while its claim holds `token`, or refuses it when the
    /// claim lapsed ([`ApprovalError::ClaimLapsed`]) or when it would take
    /// the approvals kept past `MAX_APPROVAL_BYTES` or its user's past
    /// `MAX_APPROVAL_BYTES_PER_USER` (only a reason can: see [`DECISION_BYTES`]).
    /// A store that fails is asked whether it stored the decision all the
    /// same ([`Self::stored_anyway`]).
    async fn record(
        &self,
        approval: &Approval,
        bytes: usize,
        drop_at: OffsetDateTime,
        token: &ClaimToken,
    ) -> Result<(), ApprovalError> {
        let stored = match self.store.put_claimed(approval, bytes, drop_at, &self.settings, token).await {
            Ok(stored) => stored,
            Err(error) => self.stored_anyway(approval, token, error).await?,
        };
        let Some(admission) = stored else {
            tracing::warn!(approval = %approval.id, lease = ?self.claim_lease, "a decision's claim lapsed before it was recorded; it recorded and ran nothing");
            return Err(ApprovalError::ClaimLapsed { id: approval.id.clone(), lease: self.claim_lease });
        };
        match self.byte_budget(admission) {
            None => Ok(()),
            Some(ByteBudget { whose, setting, max }) => Err(ApprovalError::NoRoomForReason {
                id: approval.id.clone(),
                bytes: approval.reason.as_ref().map_or(0, json_bytes),
                whose,
                setting,
                max,
            }),
        }
    }

    /// Whether the decision `approval` (`running` or `denied`), whose
    /// storing under the claim `token` failed with `error`, was stored all
    /// the same: a script that ran while only its answer was lost (Redis
    /// answering after the client's timeout, a connection dropped after the
    /// command). Read again with its claim: it was, and goes on as stored
    /// (an approved call runs, once), when the claim still holds `token`
    /// and the record has the status decided. The claim was won with a fresh
    /// token and the approval then read pending, so a claim that still holds
    /// it has held it since, and no other decision can have stored one.
    /// Otherwise (not stored, the claim lapsed, the store still failing)
    /// `error` is answered and nothing runs.
    async fn stored_anyway(
        &self,
        approval: &Approval,
        token: &ClaimToken,
        error: StoreError,
    ) -> Result<Option<Admission>, StoreError> {
        match self.store.get_claimed(&approval.id, token).await {
            Ok(Some(stored)) if stored.status == approval.status => {
                tracing::warn!(approval = %approval.id, %error, status = approval.status.as_str(), "storing a decision failed, but it was stored; it goes on");
                Ok(Some(Admission::Stored))
            }
            Ok(_) => Err(error),
            Err(again) => {
                tracing::warn!(approval = %approval.id, %error, error_again = %again, "storing a decision failed, and whether it was stored could not be read");
                Err(error)
            }
        }
    }

    /// The budget of bytes `admission` of a stored approval was refused
    /// for, if any (storing again is refused for nothing else).
    fn byte_budget(&self, admission: Admission) -> Option<ByteBudget> {
        match admission {
            Admission::Stored => None,
            Admission::TooManyBytesForUser => Some(ByteBudget {
                whose: "its user's",
                setting: "MAX_APPROVAL_BYTES_PER_USER",
                max: self.settings.max_bytes_per_user,
            }),
            // `put` counts bytes only and never answers the three counts;
            // were it to, the approval was refused, so it is not taken as
            // stored. Listed, not `_`, so a new refusal gets its own name.
            Admission::TooManyBytes | Admission::Full | Admission::TooManyPending | Admission::TooManyForUser => {
                Some(ByteBudget {
                    whose: "the orchestrator's",
                    setting: "MAX_APPROVAL_BYTES",
                    max: self.settings.max_total_bytes,
                })
            }
        }
    }

    /// Stores the approved call's `approval` with its result or, when that
    /// would take the approvals kept past `MAX_APPROVAL_BYTES` or its
    /// user's past `MAX_APPROVAL_BYTES_PER_USER`, with [`unkept_result`] in
    /// its place (which fits in the bytes it counted while it ran). The call
    /// ran: its result goes to the one who approved it whatever is stored,
    /// so a store that fails is logged, and the approval stays `running`
    /// without the result. It is kept `APPROVAL_EXPIRY_SECONDS` after the
    /// result came (or after the approval expired, if later).
    async fn keep_result(&self, approval: &mut Approval) {
        let drop_at = self.drop_after(approval, OffsetDateTime::now_utc());
        let mut stored = self.store.put(approval, approval.counted_bytes(), drop_at, &self.settings).await;
        if let Some(ByteBudget { setting, max, .. }) = stored.as_ref().ok().and_then(|a| self.byte_budget(*a)) {
            let bytes = approval.result.as_ref().map_or(0, json_bytes);
            tracing::warn!(approval = %approval.id, bytes, max, setting, "an approved call's result is over a budget of approvals' bytes; its approval keeps an error in its place");
            let result = approval.result.replace(unkept_result(&approval.tool_name, bytes, setting, max));
            stored = self.store.put(approval, approval.counted_bytes(), drop_at, &self.settings).await;
            approval.result = result;
        }
        let error = match stored.as_ref().map(|admission| self.byte_budget(*admission)) {
            Ok(None) => return,
            // Only an approval no longer counted (dropped meanwhile) gets here.
            Ok(Some(ByteBudget { setting, max, .. })) => {
                format!("not even its replacement fits in {setting} ({max})")
            }
            Err(error) => error.to_string(),
        };
        tracing::error!(approval = %approval.id, %error, "an approved call ran, but its result could not be stored");
    }
}

/// Gives up `claim`, won but not decided (`error`: its decision could not
/// be recorded before anything ran, or it was no longer pending), so the
/// approval can be decided again, or is refused as it stands, rather than
/// as being decided until the claim lapses; answers the error.
async fn undecided(claim: HeldClaim, error: ApprovalError) -> ApprovalError {
    claim.give_up().await;
    error
}

/// Whether `identity` may see and decide `approval`: it may act for the
/// approval's user (see [`Identity::may_act_for`]) and may use its tool.
fn may_see(identity: &Identity, approval: &Approval, executor: &Executor) -> bool {
    identity.may_act_for(approval.user_id.as_deref()) && may_use_tool(identity, approval, executor)
}

/// Whether `identity`, as a caller at its own ceiling, may use the
/// approval's tool as the approval runs it: a cap of at least the
/// permission the call was asked with (the call runs with it, so a user's
/// guest key cannot approve what their owner key asked), and, by the check
/// routing makes, the module among the identity's modules and the tool's
/// required permission within its cap. A tool that does not route now (its
/// module down or gone) needs the module allowed (the permission asked was
/// never below what the tool required then).
fn may_use_tool(identity: &Identity, approval: &Approval, executor: &Executor) -> bool {
    let ceiling = identity.ceiling();
    ceiling.permission.allows(approval.permission)
        && match executor.route(&approval.tool_name) {
            Ok(route) => ceiling.may_use(&route.module, route.tool()),
            Err(_) => {
                let module = approval.tool_name.split_once('.').map(|(module, _)| module);
                module.is_some_and(|module| ceiling.allows_module(module))
            }
        }
}

/// Decides approval `id` for `identity` (as [`Approvals::decide`]) in a
/// task of its own, in the deciding request's trace, and counts the outcome: an approved call runs to its end
/// and its result is recorded even when the request that decided it goes
/// away mid-run (a client that hangs up, a proxy's timeout), instead of the
/// approval staying claimed and undecided until it expires.
pub async fn decide_to_the_end(
    orchestrator: &Arc<Orchestrator>,
    identity: &Identity,
    id: &str,
    decision: Decision,
    reason: Option<String>,
) -> Result<Approval, ApprovalError> {
    let (orchestrator, identity, owned_id) = (Arc::clone(orchestrator), identity.clone(), id.to_owned());
    let deciding = tokio::spawn(RequestTrace::current().scope(async move {
        let outcome =
            orchestrator.approvals.decide(&identity, &owned_id, decision, reason, &orchestrator.executor).await;
        count_decision(&orchestrator, outcome.as_ref().map(|_| decision));
        outcome
    }));
    deciding.await.unwrap_or_else(|stopped| {
        tracing::error!(approval = %id, error = %stopped, "deciding an approval stopped before its end");
        Err(ApprovalError::Interrupted { id: id.to_owned(), reason: stopped.to_string() })
    })
}

/// Counts in `orchestrator_approvals_decided` a decision taken (`Ok`) or
/// refused or failed (`Err`): what every way of deciding approvals counts
/// through (`POST /approvals/{id}`, `/mcp`'s confirmations), refusals
/// before [`decide_to_the_end`] included.
pub(crate) fn count_decision(orchestrator: &Orchestrator, outcome: Result<Decision, &ApprovalError>) {
    let label = match outcome {
        Ok(Decision::Approve) => "approved",
        Ok(Decision::Deny) => "denied",
        Err(ApprovalError::Store(_) | ApprovalError::Interrupted { .. }) => "error",
        Err(_) => "refused",
    };
    orchestrator.metrics.approval_decided(label);
}

/// The result the model gets while its call waits for the user.
pub fn pending_result(approval: &Approval) -> ToolResult {
    let expires = approval.expires_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    ToolResult::failure(
        &approval.tool_name,
        ErrorKind::PermissionDenied,
        format!(
            "this call waits for the user's approval (approval {}, until {expires}); it has not run. Tell the user \
             and do not call it again: its result follows once they decide",
            approval.id
        ),
    )
}

/// The result the model gets when the user declined.
pub fn declined_result(tool_name: &str, reason: Option<&str>) -> ToolResult {
    let message = match reason.map(str::trim).filter(|r| !r.is_empty()) {
        Some(reason) => format!("the user declined: {reason}"),
        None => "the user declined this call".to_owned(),
    };
    ToolResult::failure(tool_name, ErrorKind::PermissionDenied, message)
}

/// What an approval keeps in place of its approved call's result of `bytes`
/// (as JSON) that would take the approvals kept past `setting`
/// (`MAX_APPROVAL_BYTES` or `MAX_APPROVAL_BYTES_PER_USER`, of `max`): the
/// answer to the decision carried the result itself.
pub fn unkept_result(tool_name: &str, bytes: usize, setting: &str, max: usize) -> ToolResult {
    ToolResult::failure(
        tool_name,
        ErrorKind::ExecutionFailed,
        format!(
            "the call ran once, but its result ({bytes} bytes as JSON) would take the approvals kept past \
             {setting} ({max}), so it is not kept: only the answer to the decision carried it"
        ),
    )
}

/// The decided approval's result as the provider's result message, for a
/// call that came from `/v1/tool-calls` (`None` otherwise).
pub fn result_message(approval: &Approval) -> Option<Value> {
    let (call, result) = (approval.call.as_ref()?, approval.result.as_ref()?);
    let format = call.format.parse::<CallFormat>().ok()?;
    let requested = RequestedCall {
        call_id: call.call_id.clone(),
        provider_name: call.provider_name.clone(),
        tool_name: Some(approval.tool_name.clone()),
        arguments: Ok(approval.arguments.clone()),
        arguments_cut_short: false,
    };
    Some(providers::render_results(format, &[(requested, result.clone())]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use futures::FutureExt;
    use futures::future::BoxFuture;
    use module_sdk::Permission;
    use std::time::Duration;
    use store::tests::{approval, put};
    use tokio::sync::Notify;

    /// Where a [`SlowStore`] waits, as a slow Redis or a paused process may.
    enum Wait {
        /// Each claim is made only once the approval has expired.
        ClaimsUntilExpiry,
        /// Each claim is made only once paused.
        Claims(Pause),
        /// Each decision recorded under a claim is stored only once paused.
        Records(Pause),
        /// Each decision recorded under a claim is stored, but answered with
        /// an error (its answer lost, as when Redis answers after the
        /// client's timeout); with `claim_lapsed`, the claim is given up
        /// first, as if its lease lapsed meanwhile.
        LosesRecordAnswers { claim_lapsed: bool },
        /// Recording a decision under a claim panics (as a bug would, in
        /// the store or anywhere the decision goes).
        PanicsRecording,
    }

    /// A pause: notifies `reached`, then waits until `go` is notified.
    struct Pause {
        reached: Arc<Notify>,
        go: Arc<Notify>,
    }

    impl Pause {
        /// A pause and its two signals.
        fn new() -> (Self, Arc<Notify>, Arc<Notify>) {
            let (reached, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
            (Self { reached: Arc::clone(&reached), go: Arc::clone(&go) }, reached, go)
        }

        async fn wait(&self) {
            self.reached.notify_one();
            self.go.notified().await;
        }
    }

    /// A store that waits (or fails) where [`Wait`] says.
    struct SlowStore(Arc<dyn ApprovalStore>, Wait);

    impl ApprovalStore for SlowStore {
        fn insert<'a>(
            &'a self,
            approval: &'a Approval,
            bytes: usize,
            drop_at: OffsetDateTime,
            settings: &'a ApprovalSettings,
        ) -> BoxFuture<'a, Result<Admission, StoreError>> {
            self.0.insert(approval, bytes, drop_at, settings)
        }

        fn put<'a>(
            &'a self,
            approval: &'a Approval,
            bytes: usize,
            drop_at: OffsetDateTime,
            settings: &'a ApprovalSettings,
        ) -> BoxFuture<'a, Result<Admission, StoreError>> {
            self.0.put(approval, bytes, drop_at, settings)
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
                match &self.1 {
                    Wait::Records(pause) => pause.wait().await,
                    Wait::PanicsRecording => panic!("recording the decision of `{}` panicked", approval.id),
                    _ => {}
                }
                let stored = self.0.put_claimed(approval, bytes, drop_at, settings, token).await;
                let Wait::LosesRecordAnswers { claim_lapsed } = self.1 else { return stored };
                if claim_lapsed {
                    self.0.release(&approval.id, token).await.unwrap();
                }
                Err(StoreError::Unavailable(format!("the answer to storing {:?} was lost", stored.unwrap())))
            }
            .boxed()
        }

        fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
            self.0.get(id)
        }

        fn get_claimed<'a>(
            &'a self,
            id: &'a str,
            token: &'a ClaimToken,
        ) -> BoxFuture<'a, Result<Option<Approval>, StoreError>> {
            self.0.get_claimed(id, token)
        }

        fn list<'a>(&'a self, user: Option<&'a str>) -> BoxFuture<'a, Result<Vec<Approval>, StoreError>> {
            self.0.list(user)
        }

        fn claim<'a>(&'a self, approval: &'a Approval, lease: Duration) -> BoxFuture<'a, Result<Claim, StoreError>> {
            async move {
                match &self.1 {
                    Wait::ClaimsUntilExpiry => {
                        let left = approval.expires_at - OffsetDateTime::now_utc();
                        tokio::time::sleep(Duration::try_from(left).unwrap_or_default()).await;
                    }
                    Wait::Claims(pause) => pause.wait().await,
                    Wait::Records(_) | Wait::LosesRecordAnswers { .. } | Wait::PanicsRecording => {}
                }
                self.0.claim(approval, lease).await
            }
            .boxed()
        }

        fn release<'a>(&'a self, id: &'a str, token: &'a ClaimToken) -> BoxFuture<'a, Result<(), StoreError>> {
            self.0.release(id, token)
        }

        fn kind(&self) -> &'static str {
            self.0.kind()
        }
    }

    /// Checks that an approval of `store` that expired by the time its
    /// claim was won is not decided, and its claim is given up; a pending
    /// one still is decided.
    async fn check_expired_by_the_claim(store: Arc<dyn ApprovalStore>) {
        // The executor of an orchestrator without modules: nothing is run.
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let slow = Arc::new(SlowStore(Arc::clone(&store), Wait::ClaimsUntilExpiry));
        let approvals = Approvals { store: slow, settings: Default::default(), claim_lease: CLAIM_LEASE };
        let identity = Identity::development();
        let late = approval("late", Duration::from_millis(500));
        let drop_at = late.expires_at + Duration::from_secs(60);
        put(store.as_ref(), &late, drop_at).await;
        let decided = approvals.decide(&identity, "late", Decision::Approve, None, &orchestrator.executor).await;
        assert!(matches!(decided, Err(ApprovalError::Conflict { status: "expired", .. })), "{decided:?}");
        assert_eq!(store.get("late").await.unwrap().unwrap().status, ApprovalStatus::Pending, "nothing recorded");
        let claim = store.claim(&late, CLAIM_LEASE).await.unwrap();
        assert!(matches!(claim, Claim::Won(_)), "the claim was given up");

        let live = approval("live", Duration::from_secs(60));
        put(store.as_ref(), &live, drop_at).await;
        let approvals = Approvals { store, settings: Default::default(), claim_lease: CLAIM_LEASE };
        let decided = approvals.decide(&identity, "live", Decision::Deny, None, &orchestrator.executor).await;
        assert_eq!(decided.unwrap().status, ApprovalStatus::Denied);
    }

    #[tokio::test]
    async fn an_approval_expired_by_its_claim_is_not_decided_in_memory() {
        check_expired_by_the_claim(Arc::new(MemoryStore::default())).await;
    }

    #[tokio::test]
    async fn an_approval_expired_by_its_claim_is_not_decided_in_redis() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_expired_by_the_claim(Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap())).await;
    }

    /// The calls `orchestrator`'s executor has made (each counted in
    /// `tool_calls_total`, whatever came of it).
    fn calls_made(orchestrator: &Orchestrator) -> u64 {
        let metrics = orchestrator.metrics.encode(&[]);
        let counts = metrics.lines().filter(|line| line.starts_with("tool_calls_total{"));
        counts.filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok()).sum()
    }

    /// A short claim lease for the tests, so one can lapse; long enough that
    /// a decider on a loaded machine records within it when it should.
    const SHORT_LEASE: Duration = Duration::from_millis(1500);

    #[tokio::test]
    async fn a_claim_whose_decider_died_before_recording_lapses_and_the_approval_is_decided() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store: Arc<dyn ApprovalStore> = Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap());
        // The executor of an orchestrator without modules: it counts the call, and nothing is reached.
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let approvals = Approvals { store: Arc::clone(&store), settings: Default::default(), claim_lease: CLAIM_LEASE };
        let identity = Identity::development();
        let stranded = approval("stranded", Duration::from_secs(60));
        put(store.as_ref(), &stranded, stranded.expires_at).await;
        // A replica won the claim and was killed before recording the decision.
        assert!(matches!(store.claim(&stranded, SHORT_LEASE).await.unwrap(), Claim::Won(_)));
        let decide = || approvals.decide(&identity, "stranded", Decision::Approve, None, &orchestrator.executor);
        let refused = decide().await;
        assert!(matches!(refused, Err(ApprovalError::Conflict { status: "already being decided", .. })), "{refused:?}");
        tokio::time::sleep(SHORT_LEASE * 2).await;
        assert_eq!(decide().await.unwrap().status, ApprovalStatus::Approved, "decided once the lease lapsed");
        assert_eq!(calls_made(&orchestrator), 1);
        assert_eq!(store.get("stranded").await.unwrap().unwrap().status, ApprovalStatus::Approved);
    }

    #[tokio::test]
    async fn a_full_redis_that_evicts_nothing_refuses_a_decision_as_unavailable_and_keeps_the_approval() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store: Arc<dyn ApprovalStore> = Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap());
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let approvals = Approvals { store: Arc::clone(&store), settings: Default::default(), claim_lease: CLAIM_LEASE };
        let identity = Identity::development();
        let waiting = approval("waiting", Duration::from_secs(60));
        put(store.as_ref(), &waiting, waiting.expires_at).await;
        // deploy/kubernetes/base/redis.yaml's policy, with Redis past its maxmemory.
        let connection = crate::redis_cache::connection_manager(&redis.url()).unwrap();
        let config = |name: &'static str, value: &'static str| {
            let mut connection = connection.clone();
            async move {
                let _: () =
                    redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query_async(&mut connection).await.unwrap();
            }
        };
        config("maxmemory-policy", "noeviction").await;
        config("maxmemory", "1").await;
        let decide = || approvals.decide(&identity, "waiting", Decision::Approve, None, &orchestrator.executor);
        let refused = decide().await;
        let Err(ApprovalError::Store(StoreError::Unavailable(reason))) = &refused else { panic!("{refused:?}") };
        assert!(reason.contains("maxmemory"), "the answer says Redis is full: {reason}");
        assert_eq!(calls_made(&orchestrator), 0, "nothing ran");
        assert_eq!(store.get("waiting").await.unwrap().unwrap().status, ApprovalStatus::Pending, "nothing lost");
        config("maxmemory", "0").await;
        assert_eq!(decide().await.unwrap().status, ApprovalStatus::Approved, "decided once Redis has room");
        assert_eq!(calls_made(&orchestrator), 1);
    }

    #[tokio::test]
    async fn a_decider_whose_claim_lapsed_and_was_taken_over_records_and_runs_nothing() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store: Arc<dyn ApprovalStore> = Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap());
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let identity = Identity::development();
        let contested = approval("contested", Duration::from_secs(60));
        put(store.as_ref(), &contested, contested.expires_at).await;
        // The first decider pauses (a GC pause, a slow Redis) once it won the claim and read the approval pending.
        let (pause, reached, go) = Pause::new();
        let slow = Approvals {
            store: Arc::new(SlowStore(Arc::clone(&store), Wait::Records(pause))),
            settings: Default::default(),
            claim_lease: SHORT_LEASE,
        };
        let first = async {
            let decided = slow.decide(&identity, "contested", Decision::Approve, None, &orchestrator.executor).await;
            assert!(matches!(decided, Err(ApprovalError::ClaimLapsed { .. })), "{decided:?}");
        };
        let second = async {
            reached.notified().await;
            tokio::time::sleep(SHORT_LEASE * 2).await;
            // Its claim lapsed: a second decider takes it over and runs the call once.
            let approvals =
                Approvals { store: Arc::clone(&store), settings: Default::default(), claim_lease: CLAIM_LEASE };
            let decided =
                approvals.decide(&identity, "contested", Decision::Approve, None, &orchestrator.executor).await;
            assert_eq!(decided.unwrap().status, ApprovalStatus::Approved);
            go.notify_one();
        };
        tokio::join!(first, second);
        assert_eq!(calls_made(&orchestrator), 1, "the call ran once");
        assert_eq!(store.get("contested").await.unwrap().unwrap().status, ApprovalStatus::Approved);
    }

    #[tokio::test]
    async fn a_decider_that_claims_after_another_decision_and_its_lease_is_refused_and_runs_nothing() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        let store: Arc<dyn ApprovalStore> = Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap());
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let identity = Identity::development();
        let twice = approval("twice", Duration::from_secs(60));
        put(store.as_ref(), &twice, twice.expires_at).await;
        // The second decider read it pending, then paused before claiming it.
        let (pause, reached, go) = Pause::new();
        let late = Approvals {
            store: Arc::new(SlowStore(Arc::clone(&store), Wait::Claims(pause))),
            settings: Default::default(),
            claim_lease: SHORT_LEASE,
        };
        let second = async {
            let decided = late.decide(&identity, "twice", Decision::Approve, None, &orchestrator.executor).await;
            assert!(matches!(decided, Err(ApprovalError::Conflict { status: "approved", .. })), "{decided:?}");
        };
        let first = async {
            reached.notified().await;
            let approvals =
                Approvals { store: Arc::clone(&store), settings: Default::default(), claim_lease: SHORT_LEASE };
            let decided = approvals.decide(&identity, "twice", Decision::Approve, None, &orchestrator.executor).await;
            assert_eq!(decided.unwrap().status, ApprovalStatus::Approved);
            // Its claim lapses: the second decider wins a claim of its own.
            tokio::time::sleep(SHORT_LEASE * 2).await;
            go.notify_one();
        };
        tokio::join!(first, second);
        assert_eq!(calls_made(&orchestrator), 1, "the call ran once");
        assert_eq!(store.get("twice").await.unwrap().unwrap().status, ApprovalStatus::Approved);
    }

    /// Checks that a decision of `store` stored under its claim whose answer
    /// was lost goes on as stored: an approved call runs once, a denial is
    /// answered; and that one whose claim lapsed meanwhile (another decision
    /// may have taken it) runs nothing and answers the store's error.
    async fn check_lost_answers(store: Arc<dyn ApprovalStore>) {
        let orchestrator = Orchestrator::new(Config::default()).unwrap();
        let identity = Identity::development();
        let losing = |claim_lapsed| Approvals {
            store: Arc::new(SlowStore(Arc::clone(&store), Wait::LosesRecordAnswers { claim_lapsed })),
            settings: Default::default(),
            claim_lease: CLAIM_LEASE,
        };
        for (id, decision, status) in [
            ("approved", Decision::Approve, ApprovalStatus::Approved),
            ("denied", Decision::Deny, ApprovalStatus::Denied),
        ] {
            let lost = approval(id, Duration::from_secs(60));
            put(store.as_ref(), &lost, lost.expires_at).await;
            let decided = losing(false).decide(&identity, id, decision, None, &orchestrator.executor).await;
            assert_eq!(decided.unwrap().status, status, "{id}");
            assert_eq!(store.get(id).await.unwrap().unwrap().status, status, "{id}");
        }
        assert_eq!(calls_made(&orchestrator), 1, "the approved call ran once");

        let lapsed = approval("lapsed", Duration::from_secs(60));
        put(store.as_ref(), &lapsed, lapsed.expires_at).await;
        let decided = losing(true).decide(&identity, "lapsed", Decision::Approve, None, &orchestrator.executor).await;
        assert!(matches!(decided, Err(ApprovalError::Store(_))), "{decided:?}");
        assert_eq!(calls_made(&orchestrator), 1, "nothing ran");
        assert_eq!(store.get("lapsed").await.unwrap().unwrap().status, ApprovalStatus::Running);
    }

    #[tokio::test]
    async fn a_decision_stored_whose_answer_was_lost_goes_on_in_memory() {
        check_lost_answers(Arc::new(MemoryStore::default())).await;
    }

    #[tokio::test]
    async fn a_decision_stored_whose_answer_was_lost_goes_on_in_redis() {
        let Some(redis) = test_support::RedisServer::start() else { return };
        check_lost_answers(Arc::new(redis_store::RedisStore::new(&redis.url()).unwrap())).await;
    }

    #[tokio::test]
    async fn a_decision_that_panicked_gives_its_claim_up_in_memory() {
        let store: Arc<dyn ApprovalStore> = Arc::new(MemoryStore::default());
        let orchestrator = Arc::new(Orchestrator::new(Config::default()).unwrap());
        let panicking = Arc::new(Approvals {
            store: Arc::new(SlowStore(Arc::clone(&store), Wait::PanicsRecording)),
            settings: Default::default(),
            claim_lease: CLAIM_LEASE,
        });
        let stuck = approval("stuck", Duration::from_secs(60));
        put(store.as_ref(), &stuck, stuck.expires_at).await;
        let deciding = tokio::spawn({
            let orchestrator = Arc::clone(&orchestrator);
            async move {
                let identity = Identity::development();
                panicking.decide(&identity, "stuck", Decision::Approve, None, &orchestrator.executor).await
            }
        });
        assert!(deciding.await.unwrap_err().is_panic());
        assert_eq!(store.get("stuck").await.unwrap().unwrap().status, ApprovalStatus::Pending, "nothing recorded");
        let approvals = Approvals { store, settings: Default::default(), claim_lease: CLAIM_LEASE };
        let decided =
            approvals.decide(&Identity::development(), "stuck", Decision::Approve, None, &orchestrator.executor).await;
        assert_eq!(decided.unwrap().status, ApprovalStatus::Approved, "its claim was given up");
        assert_eq!(calls_made(&orchestrator), 1);
    }

    #[tokio::test]
    async fn arguments_no_byte_budget_could_hold_are_refused_naming_the_smallest() {
        let settings = ApprovalSettings { max_bytes_per_user: 1000, ..Default::default() };
        let approvals = Approvals { store: Arc::new(MemoryStore::default()), settings, claim_lease: CLAIM_LEASE };
        let caller = Caller { user_id: Some("ada".into()), permission: Permission::User, modules: None };
        let arguments = |size: usize| Map::from_iter([("text".to_owned(), Value::String("x".repeat(size)))]);
        let identity = Identity::development();
        let refused = approvals.request(&identity, &caller, "bank.transfer", arguments(600), None).await;
        let Err(ApprovalError::TooLarge { max: 488, budget, .. }) = refused else { panic!("{refused:?}") };
        assert!(budget.starts_with("MAX_APPROVAL_BYTES_PER_USER"), "{budget}");
        approvals.request(&identity, &caller, "bank.transfer", arguments(300), None).await.unwrap();
    }

    #[tokio::test]
    async fn the_callers_modules_count_against_the_byte_budgets() {
        let settings = ApprovalSettings { max_bytes_per_user: 4000, ..Default::default() };
        let approvals = Approvals { store: Arc::new(MemoryStore::default()), settings, claim_lease: CLAIM_LEASE };
        let caller = |modules: usize| Caller {
            user_id: Some("ada".into()),
            permission: Permission::User,
            modules: Some(vec!["m".repeat(40); modules]),
        };
        let identity = Identity::development();
        let refused = approvals.request(&identity, &caller(100), "bank.transfer", Map::new(), None).await;
        let Err(ApprovalError::TooLarge { bytes, budget, .. }) = refused else { panic!("{refused:?}") };
        assert!(bytes > 100 * 40 && budget.starts_with("MAX_APPROVAL_BYTES_PER_USER"), "{bytes} {budget}");
        approvals.request(&identity, &caller(10), "bank.transfer", Map::new(), None).await.unwrap();
    }

    #[test]
    fn a_decision_without_a_reason_fits_in_the_bytes_counted_for_it() {
        // The longest tool name the contract allows: 40 characters, a dot, 40 more.
        let tool = format!("{}.{}", "m".repeat(40), "t".repeat(40));
        let unkept = unkept_result(&tool, usize::MAX, "MAX_APPROVAL_BYTES_PER_USER", usize::MAX);
        assert!(json_bytes(&unkept) <= DECISION_BYTES, "{}", json_bytes(&unkept));
        assert!(json_bytes(&declined_result(&tool, None)) <= DECISION_BYTES);
        assert!(unkept.error.unwrap().contains(&format!("({} bytes as JSON) would", usize::MAX)));
    }
}
