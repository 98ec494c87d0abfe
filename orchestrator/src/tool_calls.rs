//! `POST /v1/tool-calls?format=...`: a model's message in its provider's
//! format in, every tool call in it executed concurrently, the provider's
//! own result messages out.

use futures::future::join_all;
use module_sdk::contract::{ToolDefinition, ToolResult};
use serde::Deserialize;
use serde_json::Value;

use crate::app::{CallOutcome, Orchestrator};
use crate::approvals::{Approval, ProviderCall};
use crate::caller::{Caller, CallerFields};
use crate::identity::{AccessError, Identity};
use crate::providers::{self, CallFormat, ProviderError, RequestedCall};

/// The body of `POST /v1/tool-calls`: who the caller is, and the model's message.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct ToolCallsRequest {
    /// Who is calling.
    #[serde(flatten)]
    pub caller: CallerFields,
    /// Tools (`module.tool`) the user explicitly approved for this turn
    /// (honoured only from a service identity).
    #[serde(default)]
    pub approved_tools: Vec<String>,
    /// The model's message, exactly as the provider returned it.
    pub message: Value,
}

/// Why a message's calls were not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ToolCallsError {
    /// The message is not in the provider's shape (`422`).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The identity may not act as the request asks (`403`), or its
    /// `modules` list is over a budget (`400`): see [`AccessError::status`].
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The message holds more calls than `MAX_CALLS_PER_MESSAGE` (`422`); none was run.
    #[error("the message holds {count} tool calls, more than MAX_CALLS_PER_MESSAGE ({max}); none was run")]
    TooManyCalls {
        /// The calls in the message.
        count: usize,
        /// The budget.
        max: usize,
    },
}

/// The provider's result messages, and the approvals calls now wait for.
#[derive(Debug, Clone)]
pub struct ToolCallsAnswer {
    /// The result messages, in the provider's format.
    pub messages: Value,
    /// The calls that became pending approvals.
    pub pending: Vec<Approval>,
}

/// Reads the calls out of `request.message`, runs them all at once through
/// the same path as `POST /execute`, and renders the results for `format`.
/// A call that cannot be run (unknown tool, unreadable arguments) becomes a
/// failed result the model can act on; a call that needs approval becomes a
/// pending approval and a result telling the model to wait; only a message
/// that is not in the provider's shape at all, or that holds more than
/// `MAX_CALLS_PER_MESSAGE` calls, is an error.
pub async fn run_tool_calls(
    orchestrator: &Orchestrator,
    identity: &Identity,
    format: CallFormat,
    request: ToolCallsRequest,
) -> Result<ToolCallsAnswer, ToolCallsError> {
    let caller = identity.caller(request.caller)?;
    // Reading and rendering a large message is CPU work: off the request
    // threads, with the caller's tools read from the snapshot there (the
    // names are what matter; no definition is copied).
    let (snapshot, reader, message) = (orchestrator.registry.snapshot(), caller.clone(), request.message);
    let meta_tool = orchestrator.tool_search.meta_tool().clone();
    let max = orchestrator.config.budgets.max_calls_per_message;
    let calls = off_thread(move || {
        let mut visible: Vec<&ToolDefinition> = snapshot.tools_for(&reader).map(|found| found.tool).collect();
        // `tools__search` is answered for every caller, listed or not.
        visible.push(&meta_tool);
        providers::parse_calls(format, &message, &visible, max)
    })
    .await
    .map_err(|error| match error {
        ProviderError::TooManyCalls { count, max } => ToolCallsError::TooManyCalls { count, max },
        other => ToolCallsError::Provider(other),
    })?;
    let outcomes = join_all(
        calls
            .iter()
            .map(|requested| run_one(orchestrator, identity, &caller, format, requested, &request.approved_tools)),
    )
    .await;
    let mut pending = Vec::new();
    let pairs: Vec<(RequestedCall, ToolResult)> = calls
        .into_iter()
        .zip(outcomes)
        .map(|(call, outcome)| {
            pending.extend(outcome.pending);
            (call, outcome.result)
        })
        .collect();
    let messages = off_thread(move || providers::render_results(format, &pairs)).await;
    Ok(ToolCallsAnswer { messages, pending })
}

/// Runs `work` on a blocking thread, so request threads keep answering;
/// a panic in it goes on in the caller, as if run here.
async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()))
}

/// Runs one call read from the message, or answers (and counts) the failed
/// result that says why it cannot be run (the same one the library's callers get).
async fn run_one(
    orchestrator: &Orchestrator,
    identity: &Identity,
    caller: &Caller,
    format: CallFormat,
    requested: &RequestedCall,
    approved_tools: &[String],
) -> CallOutcome {
    let (tool_name, arguments) = match requested.executable() {
        Ok(runnable) => runnable,
        Err(refused) => {
            // Counted as `/execute` counts a call it refuses: a name that maps
            // to no tool under `tool="unknown"`, never under the model's text.
            orchestrator.metrics.start_call(requested.tool_name.as_deref()).finish(refused.error_kind);
            return CallOutcome { result: *refused, pending: None };
        }
    };
    let approved = approved_tools.iter().any(|approved| approved == tool_name);
    let provider_call = Some(ProviderCall::new(format.as_str(), requested));
    orchestrator.call(identity, caller, tool_name.to_owned(), arguments.clone(), approved, provider_call).await
}
