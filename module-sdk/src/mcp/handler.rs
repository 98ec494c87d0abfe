//! The MCP server of a module: `tools/list` from the manifest's definitions
//! and `tools/call` through the path `/execute` takes (argument validation,
//! timeout, panics contained), so both answer alike.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    RequestMetaObject, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::contract::ToolCall;
use crate::mcp::pages::page_range;
use crate::mcp::serialized::CallAnswer;
use crate::mcp::shown::shown;
use crate::mcp::tools::McpTools;
use crate::module::ModuleService;
use crate::trace_context::TraceParent;

/// The `_meta` key of a `tools/call` that carries the caller's user id, as
/// `user_id` does in a `/execute` call; trusted as `/execute` trusts it (the
/// bearer token says who may send it).
pub const USER_ID_META_KEY: &str = "io.github.tool-modules/user_id";

/// How long a client may keep a `tools/list` page: a module's tools do not
/// change while it runs.
const TOOL_LIST_TTL_MS: u64 = 5 * 60 * 1000;

/// One module as an MCP server; cheap to clone (one per HTTP request).
#[derive(Clone)]
pub(crate) struct ModuleMcp {
    service: Arc<ModuleService>,
    tools: Arc<McpTools>,
    page_size: usize,
}

impl ModuleMcp {
    /// The MCP server of `service`, listing `page_size` tools per page.
    pub(crate) fn new(service: Arc<ModuleService>, page_size: usize) -> Self {
        let tools = Arc::new(McpTools::new(service.manifest()));
        Self { service, tools, page_size: page_size.max(1) }
    }

    /// The tools of one `tools/list` page, in manifest order, and the cursor
    /// of the next page (the index of its first tool).
    fn page(&self, cursor: Option<&str>) -> Result<ListToolsResult, ErrorData> {
        let all = self.tools.all();
        let (range, next_cursor) = page_range(cursor, all.len(), self.page_size)?;
        let mut page = ListToolsResult::with_all_items(all[range].iter().map(|tool| tool.listing.clone()).collect())
            .with_ttl_ms(TOOL_LIST_TTL_MS)
            .with_cache_scope(CacheScope::Public);
        page.next_cursor = next_cursor;
        Ok(page)
    }
}

impl ServerHandler for ModuleMcp {
    fn get_info(&self) -> ServerConfig {
        let manifest = self.service.manifest();
        let version = manifest.version.clone().unwrap_or_else(|| "0.0.0".to_owned());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new(manifest.module_name.clone(), version)
                    .with_description(manifest.description.clone()),
            )
            .with_instructions(manifest.description.clone())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.list(request.as_ref())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.get(name).map(|tool| tool.listing.clone())
    }

    /// Runs the call through [`ModuleMcp::call`]; when the client cancels it
    /// (or goes away), the call's future is dropped, which cancels the
    /// handler's [`Context`](crate::Context).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let meta = std::mem::take(&mut context.meta);
        tokio::select! {
            result = self.call(request, meta) => result.map(|answer| answer.into_call_result().into()),
            () = context.ct.cancelled() => Err(ErrorData::internal_error(Cow::Borrowed("the call was cancelled"), None)),
        }
    }
}

impl ModuleMcp {
    /// A `tools/list` answer: the page `request`'s cursor names.
    pub(crate) fn list(&self, request: Option<&PaginatedRequestParams>) -> Result<ListToolsResult, ErrorData> {
        self.page(request.and_then(|params| params.cursor.as_deref()))
    }

    /// A `tools/call` answer, run as `/execute` runs it (argument validation,
    /// timeout, panics contained); the user id and the W3C `traceparent`
    /// (SEP-414: its trace id goes into the call's log events, as the
    /// `traceparent` header's does on `/execute`; an invalid one is ignored)
    /// come from the params' `_meta` or the request's `meta`. Dropping the
    /// future cancels the handler's [`Context`](crate::Context).
    pub(crate) async fn call(
        &self,
        mut request: CallToolRequestParams,
        mut meta: RequestMetaObject,
    ) -> Result<CallAnswer, ErrorData> {
        let Some(tool) = self.tools.get(&request.name) else {
            let message = format!(
                "no tool named `{}`; this server's tools are: {}",
                shown(&request.name),
                self.tools.names().join(", ")
            );
            return Err(ErrorData::invalid_params(message, None));
        };
        let trace = match request.meta.as_ref().and_then(|params_meta| params_meta.get_traceparent()) {
            Some(header) => TraceParent::parse(header),
            None => meta.get_traceparent().and_then(TraceParent::parse),
        };
        // Taken out, not copied: the params' `_meta` first, the request's only without one there.
        let found = match request.meta.as_mut().and_then(|params_meta| params_meta.remove(USER_ID_META_KEY)) {
            Some(value) => Some(value),
            None => meta.remove(USER_ID_META_KEY),
        };
        let user_id = match found {
            Some(Value::String(user_id)) => Some(user_id),
            _ => None,
        };
        let call =
            ToolCall { tool_name: tool.full_name.clone(), arguments: request.arguments.unwrap_or_default(), user_id };
        Ok(tool.answer(self.service.answer(call.into(), trace).await))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Module, ToolError, tool};

    /// No arguments.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}

    /// Say nothing.
    #[tool]
    async fn quiet(_ctx: Context, _args: Nothing) -> Result<(), ToolError> {
        Ok(())
    }

    fn server(page_size: usize) -> ModuleMcp {
        let module = Module::new("m", "Tools.").tool(quiet().name("a")).tool(quiet().name("b")).tool(quiet().name("c"));
        ModuleMcp::new(Arc::new(module.build().unwrap()), page_size)
    }

    /// Where `hang` leaves its call's cancellation token.
    #[derive(Clone, Default)]
    struct Seen(Arc<std::sync::Mutex<Option<tokio_util::sync::CancellationToken>>>);

    /// Wait until cancelled (its timeout never comes first).
    #[tool(timeout_seconds = 3600)]
    async fn hang(ctx: Context, _args: Nothing) -> Result<(), ToolError> {
        let seen = ctx.state::<Seen>()?;
        *seen.0.lock().unwrap() = Some(ctx.cancellation().clone());
        ctx.cancellation().cancelled().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_client_cancelling_a_call_cancels_the_handler() {
        use rmcp::ServiceExt;
        use rmcp::model::{CallToolRequest, ClientRequest};
        use rmcp::service::PeerRequestOptions;

        let seen = Seen::default();
        let module = Module::new("m", "Tools.").tool(hang).state(seen.clone());
        let (server_io, client_io) = tokio::io::duplex(64 * 1024);
        let server = ModuleMcp::new(Arc::new(module.build().unwrap()), 10);
        tokio::spawn(async move { server.serve(server_io).await.unwrap().waiting().await });
        let client = ().serve(client_io).await.unwrap();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("hang")));
        let handle = client.send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
        let token = loop {
            if let Some(token) = seen.0.lock().unwrap().clone() {
                break token;
            }
            tokio::task::yield_now().await;
        };
        assert!(!token.is_cancelled());
        handle.cancel(Some("changed my mind".into())).await.unwrap();
        let cancelled = tokio::time::timeout(std::time::Duration::from_secs(60), token.cancelled()).await;
        assert!(cancelled.is_ok(), "the handler was not cancelled");
    }

    #[test]
    fn pages_follow_the_manifest_order_and_bad_cursors_are_refused() {
        let server = server(2);
        let first = server.page(None).unwrap();
        assert_eq!(first.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["a", "b"]);
        let second = server.page(first.next_cursor.as_deref()).unwrap();
        assert_eq!(second.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["c"]);
        assert_eq!(second.next_cursor, None);
        for bad in ["3", "x", "-1", "99999999999999999999999"] {
            let error = server.page(Some(bad)).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{bad}");
        }
        assert_eq!(server.page(None).unwrap().tools.len(), 2);
        assert_eq!(ModuleMcp::new(server.service.clone(), 100).page(None).unwrap().tools.len(), 3);
    }
}
