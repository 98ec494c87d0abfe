//! `POST /v1/tool-calls?format=...`: a model's message in its provider's
//! format in, every tool call in it executed concurrently, the provider's
//! own result messages out.

use futures::future::join_all;
use module_sdk::{ErrorKind, ToolCall, ToolResult};
use serde::Deserialize;
use serde_json::Value;

use crate::app::Orchestrator;
use crate::caller::Caller;
use crate::providers::{self, CallFormat, ProviderError, RequestedCall};

/// The body of `POST /v1/tool-calls`: who the caller is, and the model's message.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCallsRequest {
    /// The authenticated user, passed to modules as each call's `user_id`.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The caller's level; unknown or absent is `guest`.
    #[serde(default)]
    pub user_permission: Option<String>,
    /// The modules the caller's persona allows; absent allows all.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
    /// Tools (`module.tool`) the user explicitly approved for this turn.
    #[serde(default)]
    pub approved_tools: Vec<String>,
    /// The model's message, exactly as the provider returned it.
    pub message: Value,
}

/// Reads the calls out of `request.message`, runs them all at once through
/// the same path as `POST /execute`, and renders the results for `format`.
/// A call that cannot be run (unknown tool, unreadable arguments) becomes a
/// failed result the model can act on; only a message that is not in the
/// provider's shape at all is an error.
pub async fn run_tool_calls(
    orchestrator: &Orchestrator,
    format: CallFormat,
    request: ToolCallsRequest,
) -> Result<Value, ProviderError> {
    let caller = Caller::new(request.user_permission.as_deref(), request.modules);
    let visible = orchestrator.tools(&caller);
    let calls = providers::parse_calls(format, &request.message, &visible)?;
    let results =
        join_all(calls.iter().map(|requested| {
            run_one(orchestrator, &caller, requested, request.user_id.clone(), &request.approved_tools)
        }))
        .await;
    let pairs: Vec<(RequestedCall, ToolResult)> = calls.into_iter().zip(results).collect();
    Ok(providers::render_results(format, &pairs))
}

async fn run_one(
    orchestrator: &Orchestrator,
    caller: &Caller,
    requested: &RequestedCall,
    user_id: Option<String>,
    approved_tools: &[String],
) -> ToolResult {
    let Some(tool_name) = &requested.tool_name else {
        let message = format!(
            "there is no tool `{}` among this caller's tools; call one of the tools you were given",
            requested.provider_name
        );
        return ToolResult::failure(requested.provider_name.clone(), ErrorKind::UnknownTool, message);
    };
    let arguments = match &requested.arguments {
        Ok(arguments) => arguments.clone(),
        Err(reason) => {
            let message =
                format!("the arguments of this call could not be read: {reason}; send them as one JSON object");
            return ToolResult::failure(tool_name.clone(), ErrorKind::InvalidArguments, message);
        }
    };
    let approved = approved_tools.iter().any(|approved| approved == tool_name);
    let call = ToolCall { tool_name: tool_name.clone(), arguments, user_id };
    orchestrator.executor.execute(caller, call, approved).await
}
