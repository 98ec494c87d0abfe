//! `POST /v1/tool-calls?format=...`: a model's message in its provider's
//! format in, every tool call in it executed concurrently, the provider's
//! own result messages out.

use futures::future::join_all;
use module_sdk::contract::ToolResult;
use serde::Deserialize;
use serde_json::Value;

use crate::app::Orchestrator;
use crate::caller::{Caller, CallerFields};
use crate::providers::{self, CallFormat, ProviderError, RequestedCall};

/// The body of `POST /v1/tool-calls`: who the caller is, and the model's message.
#[derive(Debug, Clone, Deserialize)]
pub struct ToolCallsRequest {
    /// Who is calling.
    #[serde(flatten)]
    pub caller: CallerFields,
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
    let caller = request.caller.into_caller();
    let visible = orchestrator.tools(&caller);
    let calls = providers::parse_calls(format, &request.message, &visible)?;
    let results =
        join_all(calls.iter().map(|requested| run_one(orchestrator, &caller, requested, &request.approved_tools)))
            .await;
    let pairs: Vec<(RequestedCall, ToolResult)> = calls.into_iter().zip(results).collect();
    Ok(providers::render_results(format, &pairs))
}

/// Runs one call read from the message, or answers the failed result that
/// says why it cannot be run (the same one the library's callers get).
async fn run_one(
    orchestrator: &Orchestrator,
    caller: &Caller,
    requested: &RequestedCall,
    approved_tools: &[String],
) -> ToolResult {
    let (tool_name, arguments) = match requested.executable() {
        Ok(runnable) => runnable,
        Err(refused) => return *refused,
    };
    let approved = approved_tools.iter().any(|approved| approved == tool_name);
    orchestrator.executor.execute(caller, tool_name.to_owned(), arguments.clone(), approved).await
}
