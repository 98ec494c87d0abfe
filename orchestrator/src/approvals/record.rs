//! One approval: the exact call that waits, for whom, who asked and
//! decided, and what came of it.

use module_sdk::Permission;
use module_sdk::contract::ToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::caller::Caller;
use crate::providers::RequestedCall;

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    Pending,
    /// Approved; the call is running. It stays so when the orchestrator
    /// running it stopped before the call ended: no result came back, and
    /// it is not run again.
    Running,
    /// Approved; the call ran once.
    Approved,
    /// Denied; the call never ran.
    Denied,
    /// Not decided in time; it can no longer be approved.
    Expired,
}

impl ApprovalStatus {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }
}

/// The model's call an approval came from (`/v1/tool-calls`), so the
/// decision can be answered as the provider's result message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProviderCall {
    /// The `?format=` of the request.
    pub format: String,
    /// The provider's id of the call.
    pub call_id: String,
    /// The name the model used.
    pub provider_name: String,
}

impl ProviderCall {
    /// The stored part of `requested`, in `format`.
    pub fn new(format: &str, requested: &RequestedCall) -> Self {
        Self {
            format: format.to_owned(),
            call_id: requested.call_id.clone(),
            provider_name: requested.provider_name.clone(),
        }
    }
}

/// A call waiting for (or past) a person's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Approval {
    /// Its id (a random UUID).
    pub id: String,
    /// The tool, `module.tool`.
    pub tool_name: String,
    /// The exact arguments that run when it is approved.
    #[schema(value_type = Object)]
    pub arguments: Map<String, Value>,
    /// The user the call is for.
    pub user_id: Option<String>,
    /// The caller's permission when it was asked.
    pub permission: Permission,
    /// The caller's modules when it was asked.
    pub modules: Option<Vec<String>>,
    /// The identity that asked (`key:<id>`, `jwt:<user>`, `service-token`, `development`).
    pub requested_by: String,
    /// When it was asked.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    /// When it can no longer be approved.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: OffsetDateTime,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// The identity that decided.
    #[serde(default)]
    pub decided_by: Option<String>,
    /// When it was decided.
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub decided_at: Option<OffsetDateTime>,
    /// The reason given with the decision.
    #[serde(default)]
    pub reason: Option<String>,
    /// The call's result (approved), or the declined result (denied).
    #[serde(default)]
    pub result: Option<ToolResult>,
    /// The model's call it came from, if any.
    #[serde(default)]
    pub call: Option<ProviderCall>,
}

impl Approval {
    /// Where it stands at `now`: a pending one past its expiry is expired.
    pub fn status_at(&self, now: OffsetDateTime) -> ApprovalStatus {
        if self.status == ApprovalStatus::Pending && now >= self.expires_at {
            ApprovalStatus::Expired
        } else {
            self.status
        }
    }

    /// The same approval with its status as of now (what is shown).
    pub fn current(mut self) -> Self {
        self.status = self.status_at(OffsetDateTime::now_utc());
        self
    }

    /// Its bytes counted against `MAX_APPROVAL_BYTES`: everything it
    /// stores as JSON (escaped as stored), but what a decision adds of the
    /// orchestrator's own (its status, time and decider's name), which
    /// [`super::DECISION_BYTES`] covers: its arguments and result, the
    /// caller it runs as (user, permission, modules), who asked, the
    /// provider call and the decision's reason.
    pub fn counted_bytes(&self) -> usize {
        // Every field named, so one added to the record must be weighed here.
        let Self {
            id,
            tool_name,
            arguments,
            user_id,
            permission,
            modules,
            requested_by,
            created_at: _,
            expires_at: _,
            status: _,
            decided_by: _,
            decided_at: _,
            reason,
            result,
            call,
        } = self;
        json_bytes(id)
            + json_bytes(tool_name)
            + json_bytes(arguments)
            + json_bytes(user_id)
            + json_bytes(permission)
            + json_bytes(modules)
            + json_bytes(requested_by)
            + json_bytes(reason)
            + json_bytes(result)
            + json_bytes(call)
    }

    /// The caller the stored call runs as.
    pub fn caller(&self) -> Caller {
        Caller { user_id: self.user_id.clone(), permission: self.permission, modules: self.modules.clone() }
    }
}

/// The size of `value` as JSON.
pub fn json_bytes(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(0, |text| text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::store::tests::approval;
    use std::time::Duration;

    #[test]
    fn text_is_counted_as_stored_escaped_not_as_given() {
        let plain = approval("a", Duration::from_secs(60));
        let mut counted = plain.clone();
        let control = "\u{1}".repeat(100);
        counted.reason = Some(control.clone());
        counted.call = Some(ProviderCall { format: "openai".into(), call_id: control, provider_name: "m__t".into() });
        // Each text's 100 characters as `\u0001`, in place of `null`.
        let call = r#"{"format":"openai","call_id":"","provider_name":"m__t"}"#.len();
        assert_eq!(counted.counted_bytes() - plain.counted_bytes(), (100 * 6 + 2 - 4) + (call + 100 * 6 - 4));
    }

    #[test]
    fn the_caller_and_who_asked_are_counted() {
        let plain = approval("a", Duration::from_secs(60));
        let modules = vec!["m".repeat(1000); 10];
        let big = Approval {
            modules: Some(modules.clone()),
            user_id: Some("u".repeat(500)),
            requested_by: "k".repeat(300),
            ..plain.clone()
        };
        let grown = json_bytes(&modules) - 4 + (500 - 3) + (300 - "key:ada".len());
        assert_eq!(big.counted_bytes() - plain.counted_bytes(), grown);
    }
}
