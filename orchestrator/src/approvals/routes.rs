//! `GET /approvals`, `GET /approvals/{id}` and `POST /approvals/{id}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use module_sdk::contract::ErrorBody;
use module_sdk::service::error_response;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Approval, ApprovalError, Decision, decide_to_the_end, result_message};
use crate::auth::Authorized;
use crate::http::AppState;
use crate::json_body::JsonBody;

/// The approval routes, to merge into the API's router.
pub fn routes() -> Router<AppState> {
    Router::new().route("/approvals", get(list)).route("/approvals/{id}", get(show).post(decide))
}

/// The body of `POST /approvals/{id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    /// `approve` or `deny`.
    decision: Decision,
    /// Why (shown to the model on a denial); at most `MAX_APPROVAL_REASON_BYTES`.
    #[serde(default)]
    reason: Option<String>,
}

/// The answer for an approval error.
pub fn error_answer(error: &ApprovalError) -> Response {
    let status = match error {
        ApprovalError::NotFound(_) => StatusCode::NOT_FOUND,
        ApprovalError::NotYours(_) | ApprovalError::OwnCall { .. } => StatusCode::FORBIDDEN,
        ApprovalError::Conflict { .. } | ApprovalError::ClaimLapsed { .. } => StatusCode::CONFLICT,
        ApprovalError::TooMany { .. }
        | ApprovalError::UserFull { .. }
        | ApprovalError::UserFullOfBytes { .. }
        | ApprovalError::Full { .. }
        | ApprovalError::FullOfBytes { .. }
        | ApprovalError::NoRoomForReason { .. } => StatusCode::TOO_MANY_REQUESTS,
        ApprovalError::ReasonTooLong { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        ApprovalError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        ApprovalError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        ApprovalError::Interrupted { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error_response(status, error.to_string())
}

/// The caller's approvals (every user's for admins and services), newest first.
#[utoipa::path(get, path = "/approvals", security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"approvals\": [ShownApproval]}`: each approval with `arguments_json`, its arguments as JSON text"),
    (status = 401, body = ErrorBody, description = "No valid identity"),
    (status = 503, body = ErrorBody, description = "The approval store (Redis) failed")
))]
pub(crate) async fn list(Authorized(identity): Authorized, State(state): State<AppState>) -> Response {
    match state.orchestrator.approvals.list_for(&identity, &state.orchestrator.executor).await {
        Ok(approvals) => {
            let shown: Vec<Shown<'_>> = approvals.iter().map(Shown::new).collect();
            Json(json!({ "approvals": shown })).into_response()
        }
        Err(error) => error_answer(&error),
    }
}

/// An approval as it is shown, with its arguments also as JSON text: a
/// page reading them as JavaScript numbers would show integers past 2^53
/// rounded, not the exact ones that run.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ShownApproval)]
pub(crate) struct Shown<'a> {
    /// The approval.
    #[serde(flatten)]
    approval: &'a Approval,
    /// The arguments as JSON text (one line, spaced), exactly as they run.
    arguments_json: String,
}

impl<'a> Shown<'a> {
    fn new(approval: &'a Approval) -> Self {
        let mut text = Vec::new();
        let mut writer = serde_json::Serializer::with_formatter(&mut text, Spaced);
        let arguments_json = match approval.arguments.serialize(&mut writer) {
            Ok(()) => String::from_utf8(text).unwrap_or_default(),
            Err(_) => String::new(),
        };
        Self { approval, arguments_json }
    }
}

/// JSON on one line with a space after each `:` and `,`: readable, and at
/// most twice the compact text (indenting each element on its own line, as
/// `to_string_pretty` does, makes deeply nested small arguments ~80 times
/// larger on every listing).
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// One approval.
#[utoipa::path(get, path = "/approvals/{id}", params(("id" = String, Path, description = "The approval's id")),
    security((), ("bearer" = [])), responses(
    (status = 200, body = Shown, description = "The approval, with `arguments_json`, its arguments as JSON text"),
    (status = 401, body = ErrorBody, description = "No valid identity"),
    (status = 403, body = ErrorBody, description = "Another user's approval"),
    (status = 404, body = ErrorBody, description = "No such approval, or one of a tool this identity may not use"),
    (status = 503, body = ErrorBody, description = "The approval store (Redis) failed")
))]
pub(crate) async fn show(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Response {
    match state.orchestrator.approvals.get_for(&identity, &id, &state.orchestrator.executor).await {
        Ok(approval) => Json(Shown::new(&approval)).into_response(),
        Err(error) => error_answer(&error),
    }
}

/// Approves (runs the stored call once) or denies; answers the approval,
/// its ToolResult and the provider-format result message for the model.
#[utoipa::path(post, path = "/approvals/{id}", params(("id" = String, Path, description = "The approval's id")),
    request_body = DecisionBody, security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"approval\": Approval, \"result\": ToolResult, \"message\": the provider's result message or null}`"),
    (status = 400, body = ErrorBody, description = "The body is not JSON"),
    (status = 401, body = ErrorBody, description = "No valid identity"),
    (status = 403, body = ErrorBody, description = "Another user's approval, or, with APPROVAL_SEPARATE_DECIDER, one this identity asked for"),
    (status = 404, body = ErrorBody, description = "No such approval, or one of a tool this identity may not use"),
    (status = 409, body = ErrorBody, description = "Not pending, being decided by another request, or this decision took longer than its claim lasts (nothing ran)"),
    (status = 415, body = ErrorBody, description = "The body is not sent as `Content-Type: application/json`"),
    (status = 422, body = ErrorBody, description = "The body is not a decision, or its reason is over MAX_APPROVAL_REASON_BYTES"),
    (status = 429, body = ErrorBody, description = "The decision's reason would take the approvals kept past MAX_APPROVAL_BYTES, or its user's past MAX_APPROVAL_BYTES_PER_USER"),
    (status = 503, body = ErrorBody, description = "The approval store (Redis) failed")
))]
pub(crate) async fn decide(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> Response {
    match decide_to_the_end(&state.orchestrator, &identity, &id, body.decision, body.reason).await {
        Ok(approval) => Json(decided(&approval)).into_response(),
        Err(error) => error_answer(&error),
    }
}

fn decided(approval: &Approval) -> serde_json::Value {
    json!({ "approval": approval, "result": approval.result, "message": result_message(approval) })
}

/// The answer of `POST /v1/tool-calls`: the provider's result messages (or,
/// with `?envelope=true`, `{"messages", "pending_approvals"}`), and the
/// pending approvals' ids in the `Pending-Approvals` header either way.
pub fn tool_calls_answer(answer: crate::tool_calls::ToolCallsAnswer, envelope: bool) -> Response {
    let ids: Vec<&str> = answer.pending.iter().map(|a| a.id.as_str()).collect();
    let header = (!ids.is_empty()).then(|| ids.join(","));
    let mut response = if envelope {
        Json(json!({ "messages": answer.messages, "pending_approvals": answer.pending })).into_response()
    } else {
        Json(answer.messages).into_response()
    };
    if let Some(value) = header.and_then(|ids| axum::http::HeaderValue::from_str(&ids).ok()) {
        response.headers_mut().insert("pending-approvals", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::store::tests::approval;
    use std::time::Duration;

    #[test]
    fn arguments_are_shown_as_the_exact_json_that_runs() {
        let mut waiting = approval("a", Duration::from_secs(60));
        let arguments = json!({"cents": 9_007_199_254_740_993_u64, "to": "carol"});
        waiting.arguments = arguments.as_object().unwrap().clone();
        let shown = serde_json::to_value(Shown::new(&waiting)).unwrap();
        let text = shown["arguments_json"].as_str().unwrap();
        assert_eq!(text, r#"{"cents": 9007199254740993, "to": "carol"}"#);
        // Deep nesting costs a constant factor, not a line and an indent per level.
        let mut deep = json!([[], [], []]);
        for _ in 0..120 {
            deep = json!([deep]);
        }
        waiting.arguments = json!({"a": deep}).as_object().unwrap().clone();
        let compact = serde_json::to_string(&waiting.arguments).unwrap().len();
        assert!(Shown::new(&waiting).arguments_json.len() < 2 * compact);
        assert_eq!(shown["arguments"], arguments, "the approval's own fields are kept");
        assert_eq!(shown["id"], "a");
    }
}
