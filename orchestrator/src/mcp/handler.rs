//! The fleet as one MCP server: `tools/list` pages through the caller's
//! tools, `tools/call` runs through [`Orchestrator::call`] (the path of
//! `POST /execute`: permission re-checked, `user_id` injected, timeouts,
//! gateway validation, approvals, metrics), directly or as an MCP task
//! ([`tasks`](crate::mcp::tasks)), and tool list changes reach clients that listen.

use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use module_sdk::ErrorKind;
use module_sdk::mcp::{USER_ID_META_KEY, shown};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, ContentBlock, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams, RequestMetaObject, ServerCapabilities,
    ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::watch;

use crate::app::Orchestrator;
use crate::caller::{Caller, CallerFields};
use crate::identity::Identity;
use crate::mcp::progress::with_progress;
use crate::mcp::streams::StreamBudget;
use crate::mcp::tasks::{McpTasks, TaskOwner, client_accepts_tasks, run_as_task};
use crate::mcp::tools::CallerTools;
use crate::mcp::{approval, call_results};
use crate::trace::RequestTrace;

/// How long a client may keep a `tools/list` page: the fleet's tools change
/// as modules come and go, which `notifications/tools/list_changed` says.
const TOOL_LIST_TTL_MS: u64 = 30 * 1000;
/// How often a session's list change task looks whether the session ended.
const SESSION_CHECK: Duration = Duration::from_secs(30);

/// Who sent an MCP request, as the `/mcp` route proved it: put in the HTTP
/// request's extensions, read back by the handler for every request.
#[derive(Debug, Clone)]
pub struct McpCaller {
    /// The identity the bearer token proved (development mode without one).
    pub identity: Identity,
    /// The caller it acts as (the `/mcp` URL's `permission`, `modules` and `user_id`, within the identity).
    pub caller: Caller,
    /// The HTTP request's trace, which its calls go on in unless a message's
    /// `_meta` names one: rmcp runs each message's handler in a task of its
    /// own, out of the request's scope.
    pub(crate) trace: RequestTrace,
}

impl McpCaller {
    /// Who owns the tasks this caller starts: its identity's grant, acting for its user.
    fn task_owner(&self) -> TaskOwner {
        TaskOwner { grant: self.identity.grant(), user_id: self.caller.user_id.clone() }
    }

    /// This caller acting for the user a request's `_meta` names
    /// ([`USER_ID_META_KEY`], as a module's `/mcp` reads it), within the
    /// identity as the URL's `user_id=` is: a service identity may name
    /// anyone, a user's key or JWT only its own user.
    fn for_user(&self, user_id: Option<&str>) -> Result<Self, ErrorData> {
        let Some(user_id) = user_id else { return Ok(self.clone()) };
        let fields = CallerFields {
            user_id: Some(user_id.to_owned()),
            user_permission: Some(self.caller.permission.as_str().to_owned()),
            modules: self.caller.modules.clone(),
        };
        let caller = self
            .identity
            .caller(fields)
            .map_err(|refused| ErrorData::invalid_params(format!("`_meta` `{USER_ID_META_KEY}`: {refused}"), None))?;
        Ok(Self { identity: self.identity.clone(), caller, trace: self.trace })
    }
}

/// The fleet's MCP server; cheap to clone (one per session or request).
#[derive(Clone)]
pub struct FleetMcp {
    orchestrator: Arc<Orchestrator>,
    page_size: usize,
    progress_interval: Duration,
    tasks: McpTasks,
    streams: Arc<StreamBudget>,
}

impl FleetMcp {
    /// The MCP server of `orchestrator`'s fleet, under its `/mcp` settings;
    /// its tasks are kept in this process (and shared through `REDIS_URL`),
    /// its `subscriptions/listen` streams counted in `streams`.
    pub fn new(orchestrator: Arc<Orchestrator>, streams: Arc<StreamBudget>) -> Self {
        let config = &orchestrator.config;
        Self {
            page_size: config.mcp.transport.page_size,
            progress_interval: config.mcp.progress_interval,
            tasks: McpTasks::new(config),
            orchestrator,
            streams,
        }
    }

    /// The caller of the request `context` belongs to.
    fn caller(context: &RequestContext<RoleServer>) -> Result<&McpCaller, ErrorData> {
        context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.extensions.get::<McpCaller>())
            .ok_or_else(|| ErrorData::internal_error("the request reached the MCP server without an identity", None))
    }

    /// The request's caller, acting for the user its `_meta` names (the
    /// params' `_meta`, else the request's), so the tasks a call starts for
    /// that user are that user's to see and cancel.
    fn request_caller(
        context: &RequestContext<RoleServer>,
        params_meta: Option<&RequestMetaObject>,
    ) -> Result<McpCaller, ErrorData> {
        let meta_user = params_meta
            .and_then(|meta| meta.get(USER_ID_META_KEY))
            .or_else(|| context.meta.get(USER_ID_META_KEY))
            .and_then(Value::as_str);
        Self::caller(context)?.for_user(meta_user)
    }

    /// The caller's tools, named for MCP.
    fn tools(&self, caller: &Caller) -> CallerTools {
        CallerTools::new(self.orchestrator.registry.snapshot(), caller)
    }

    /// Sends `notifications/tools/list_changed` through `notify` for every
    /// new registry generation, until `notify` fails (the client went away).
    async fn forward_changes<F, Fut>(mut generations: watch::Receiver<u64>, notify: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = bool>,
    {
        generations.mark_unchanged();
        while generations.changed().await.is_ok() {
            if !notify().await {
                break;
            }
        }
    }
}

impl ServerHandler for FleetMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities =
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_tasks().build();
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("orchestrator", env!("CARGO_PKG_VERSION"))
                    .with_description("Every tool of the fleet's modules this caller may use."),
            )
            .with_instructions(
                "Tools are named `module__tool`. A call that needs a person's approval waits for it: \
                 the answer says so and how to approve.",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = Self::caller(&context)?;
        let tools = self.tools(&caller.caller);
        let cursor = request.as_ref().and_then(|params| params.cursor.as_deref());
        let (listed, next_cursor) = tools.page(cursor, self.page_size)?;
        let mut page =
            ListToolsResult::with_all_items(listed).with_ttl_ms(TOOL_LIST_TTL_MS).with_cache_scope(CacheScope::Private);
        page.next_cursor = next_cursor;
        Ok(page)
    }

    /// Runs the call as `POST /execute` would; a tool outside the caller's
    /// list is an `invalid_params` error, as the specification has it for
    /// unknown tools. A call that needs approval asks the user through the
    /// client when it can (`input_required`), and otherwise says it waits.
    /// A client that declared the tasks extension gets a long call as a task.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mcp_caller = Self::request_caller(&context, request.meta.as_ref())?;
        let McpCaller { identity, caller, trace } = &mcp_caller;
        // A `traceparent` in the message's `_meta` (SEP-414) is the caller's more exactly than its HTTP request's.
        let meta_trace = request.meta.as_ref().and_then(|meta| meta.get_traceparent());
        let trace = trace.or_callers(meta_trace.or_else(|| context.meta.get_traceparent()));
        let tools = self.tools(caller);
        let Some(tool) = tools.get(&request.name) else {
            // Counted under `tool="unknown"`, as `/execute` counts it: never under the client's text.
            self.orchestrator.metrics.start_call(None).finish(Some(ErrorKind::UnknownTool));
            let message = format!(
                "no tool named `{}` among this caller's tools; tools/list gives them (named module__tool)",
                shown(&request.name)
            );
            return Err(ErrorData::invalid_params(message, None));
        };
        if let Some(state) = request.request_state.as_deref() {
            let resumed =
                approval::resume(&self.orchestrator, identity, &tool, state, request.input_responses.as_ref());
            return trace.scope(resumed).await.map(Into::into);
        }
        let progress_token = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let progress = progress_token.map(|token| (token, context.peer.clone(), self.progress_interval));
        let arguments = request.arguments.unwrap_or_default();
        if client_accepts_tasks(&context) && !self.orchestrator.executor.awaits_approval(caller, &tool.full_name) {
            let (orchestrator, identity, caller) = (Arc::clone(&self.orchestrator), identity.clone(), caller.clone());
            let call = trace.scope(async move {
                let outcome =
                    orchestrator.call(&identity, &caller, tool.full_name.clone(), arguments, false, None).await;
                // An approval asked for meanwhile (the policy changed) is answered as for clients that cannot ask.
                Ok(outcome.pending.map_or_else(
                    || call_results::call_result(&tool, outcome.result),
                    |pending| approval::waiting(&pending),
                ))
            });
            return run_as_task(&self.tasks, mcp_caller.task_owner(), call, progress, context.ct.cancelled()).await;
        }
        let call =
            trace.scope(self.orchestrator.call(identity, caller, tool.full_name.clone(), arguments, false, None));
        let outcome = tokio::select! {
            outcome = with_progress(call, progress) => outcome,
            () = context.ct.cancelled() => {
                return Ok(rmcp::model::CallToolResult::error(vec![ContentBlock::text("the call was cancelled")]).into());
            }
        };
        match outcome.pending {
            Some(pending)
                if approval::asks_the_client(self.orchestrator.approvals.settings().separate_decider, &context) =>
            {
                approval::ask(&pending)
            }
            Some(pending) => Ok(approval::waiting(&pending).into()),
            None => Ok(call_results::call_result(&tool, outcome.result).into()),
        }
    }

    /// `tasks/get`: the task, if this caller's (any other is not found).
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let owner = Self::request_caller(&context, request.meta.as_ref())?.task_owner();
        Ok(GetTaskResult::new(self.tasks.get(&owner, &request.task_id).await?))
    }

    /// `tasks/update`: no task of this server asks for input, so the
    /// responses are ignored, as the specification has it for requests that
    /// are not outstanding; an unknown task is an error.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = Self::request_caller(&context, request.meta.as_ref())?.task_owner();
        self.tasks.get(&owner, &request.task_id).await.map(drop)
    }

    /// `tasks/cancel`: stops the task's call, if this caller's (on
    /// whichever replica runs it).
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = Self::request_caller(&context, request.meta.as_ref())?.task_owner();
        self.tasks.cancel(&owner, &request.task_id).await
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    /// A 2026-07-28 client's `subscriptions/listen`: one
    /// `notifications/tools/list_changed` per registry change until it stops
    /// listening. The stream counts in `MCP_MAX_STREAMS` and
    /// `MCP_MAX_STREAMS_PER_IDENTITY`; past either it is ended at once with a
    /// JSON-RPC error naming the budget (rmcp has acknowledged it by then).
    /// When the server stops (SIGTERM) the stream ends with the final result
    /// (graceful teardown), as the server waits for its connections to close.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let identity = &Self::caller(context.request_context())?.identity;
        let _stream = self
            .streams
            .open(identity)
            .map_err(|refused| ErrorData::new(ErrorCode::INVALID_REQUEST, refused.to_string(), None))?;
        let stopping = module_sdk::service::stopping();
        if context.accepted().tools_list_changed != Some(true) {
            tokio::select! {
                () = context.cancelled() => {}
                () = stopping.cancelled() => {}
            }
            return Ok(());
        }
        let generations = self.orchestrator.registry.subscribe();
        let sink = context.sink().clone();
        tokio::select! {
            () = Self::forward_changes(generations, || async { sink.notify_tool_list_changed().await.is_ok() }) => {}
            () = context.cancelled() => {}
            () = stopping.cancelled() => {}
        }
        Ok(())
    }

    /// A 2025-11-25 client's session: list changes go to its `GET /mcp`
    /// stream from now until the session ends (seen at the next change, or
    /// at the next look every `SESSION_CHECK`).
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let generations = self.orchestrator.registry.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            let closed = async {
                let mut looks = tokio::time::interval(SESSION_CHECK);
                while !peer.is_transport_closed() {
                    looks.tick().await;
                }
            };
            let forward =
                Self::forward_changes(generations, || async { peer.notify_tool_list_changed().await.is_ok() });
            tokio::select! {
                () = forward => {}
                () = closed => {}
            }
        });
    }
}
