//! Whole-process tests of the orchestrator's `/mcp`: the real binary, driven
//! by the official MCP client (`rmcp`) through both lifecycles (2025-11-25
//! `initialize` with a session, 2026-07-28 `server/discover`, stateless),
//! with API keys of different permissions, and tasks (the tasks extension)
//! driven with the same client's `tasks/get` and `tasks/cancel`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::identities::{ISSUER_KEY, TestKey, claims, jwks_file, keys_file, now_plus, token};
use common::modules::{Calls, answering_module, approval_module, sdk_module, stalling_module};
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::mcp::USER_ID_META_KEY;
use module_sdk::{Context, Module, ToolError, tool};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ClientConfig,
    DetailedTask, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, GetTaskParams,
    Implementation, PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestMetaObject, ServerNotification, SubscriptionFilter, TaskPayload, TaskStatus, Tool, UpdateTaskParams,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, RequestContext, RunningService, serve_client_with_lifecycle,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use test_support::RedisServer;
use test_support::mcp_checks::{assert_matches_output_schema, text_of};
use tokio::sync::mpsc;

const SERVICE_TOKEN: &str = "service-token-for-tests-0123456789";

/// Three modules (`alpha`: echo and the admin's wipe; `bank`: the same and
/// transfer, which needs approval; `slow`: tools that never answer), keys
/// for a user and an admin, and the orchestrator using them.
struct Fleet {
    _alpha: ModuleServer,
    _bank: ModuleServer,
    slow: ModuleServer,
    slow_calls: Calls,
    _keys: tempfile::NamedTempFile,
    alpha_calls: Calls,
    bank_calls: Calls,
    orchestrator: OrchestratorProcess,
}

impl Fleet {
    async fn start(extra: &[(&str, &str)]) -> Self {
        let (alpha, alpha_calls) = sdk_module("alpha");
        let alpha = ModuleServer::sdk(alpha);
        let (bank, bank_calls) = approval_module("bank");
        let bank = ModuleServer::sdk(bank);
        let (slow, slow_calls) = stalling_module("slow");
        let slow = ModuleServer::start(slow);
        let services = module_services(&[("alpha", alpha.url()), ("bank", bank.url()), ("slow", slow.url())]);
        let keys = keys_file(&[TestKey::new("ada", "ada", "user"), TestKey::new("root", "root", "admin")]);
        let mut env = vec![
            ("MODULE_SERVICES", services.as_str()),
            ("API_KEYS_FILE", keys.path().to_str().unwrap()),
            ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
            ("MCP_PROGRESS_INTERVAL_SECONDS", "0.2"),
        ];
        env.extend_from_slice(extra);
        let orchestrator = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
        for module in ["alpha", "bank", "slow"] {
            orchestrator.wait_for_module(module, "up", Duration::from_secs(10)).await;
        }
        Self { _alpha: alpha, _bank: bank, slow, slow_calls, _keys: keys, alpha_calls, bank_calls, orchestrator }
    }

    /// An MCP client with `handler` of `/mcp{query}`, sending `key`'s API key.
    async fn connect<H: ClientHandler>(
        &self,
        handler: H,
        key: &'static str,
        query: &str,
        lifecycle: ClientLifecycleMode,
    ) -> RunningService<RoleClient, H> {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp{query}", self.orchestrator.url))
            .auth_header(api_key(key));
        let transport = test_support::mcp_client::transport(config);
        serve_client_with_lifecycle(handler, transport, lifecycle).await.expect("connected")
    }
}

fn api_key(id: &'static str) -> String {
    TestKey::new(id, "", "").key
}

/// Both ways a client starts: the 2025-11-25 handshake and 2026-07-28 discovery.
fn lifecycles() -> [ClientLifecycleMode; 2] {
    [ClientLifecycleMode::Initialize, recent()]
}

fn recent() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
}

fn arguments(value: Value) -> Map<String, Value> {
    let Value::Object(arguments) = value else { panic!("arguments are an object") };
    arguments
}

async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    name: &'static str,
    args: Value,
) -> CallToolResult {
    client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments(args))).await.expect("a tool result")
}

fn names(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_ref()).collect()
}

/// A client whose user says yes to every confirmation, declares form
/// elicitation (and the tasks extension if `tasks`), and collects the list
/// changes and progress it is told of.
#[derive(Clone)]
struct Agreeable {
    changes: mpsc::UnboundedSender<()>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    tasks: bool,
}

impl Agreeable {
    fn new() -> (Self, mpsc::UnboundedReceiver<()>) {
        let (changes, received) = mpsc::unbounded_channel();
        (Self { changes, progress: Arc::default(), tasks: false }, received)
    }
}

impl ClientHandler for Agreeable {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = match self.tasks {
            true => ClientCapabilities::builder().enable_tasks().build(),
            false => ClientCapabilities::default(),
        };
        capabilities.elicitation = Some(ElicitationCapability::new());
        ClientConfig::new(capabilities, Implementation::new("agreeable-test-client", "1.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            panic!("a form was expected");
        };
        assert!(message.contains("bank.transfer") && message.contains("carol"), "{message}");
        assert!(serde_json::to_value(&requested_schema).unwrap()["properties"]["approve"].is_object());
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(());
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

#[tokio::test]
async fn the_fleet_serves_the_callers_tools_to_both_lifecycles() {
    let fleet = Fleet::start(&[]).await;
    for lifecycle in lifecycles() {
        let client = fleet.connect((), "root", "", lifecycle).await;
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(
            names(&tools),
            ["alpha__echo", "alpha__wipe", "bank__echo", "bank__transfer", "bank__wipe", "slow__stall", "slow__wait"],
            "named module__tool, in the order of those names"
        );
        let echo = &tools[0];
        assert_eq!(echo.title.as_deref(), Some("Echo"));
        assert_eq!(echo.description.as_deref(), Some("Send the text back, with the caller's user id."));
        assert_eq!(echo.input_schema["properties"]["text"]["type"], "string");
        let hints = echo.annotations.clone().unwrap();
        assert_eq!((hints.read_only_hint, hints.idempotent_hint), (Some(true), Some(true)));
        assert_eq!(tools[1].annotations.clone().unwrap().destructive_hint, Some(true));

        let echoed = call(&client, "alpha__echo", json!({"text": "hi"})).await;
        assert_matches_output_schema(echo, &echoed);
        assert_eq!(echoed.structured_content, Some(json!({"text": "hi", "user_id": "root"})), "the key's user");

        let invalid = call(&client, "alpha__echo", json!({"text": 7})).await;
        assert_eq!(invalid.is_error, Some(true));
        assert!(text_of(&invalid).contains("text"), "{}", text_of(&invalid));

        let slow = call(&client, "slow__wait", json!({})).await;
        assert_eq!(slow.is_error, Some(true));
        assert!(text_of(&slow).contains("did not finish within"), "{}", text_of(&slow));
        client.cancel().await.unwrap();
    }
    assert_eq!(fleet.alpha_calls.count(), 2, "one echo per lifecycle; the invalid call never reached the module");

    let metrics = fleet.orchestrator.metrics().await;
    for (series, count) in [
        (r#"tool_calls_total{tool="alpha.echo",outcome="success"}"#, "2"),
        (r#"tool_calls_total{tool="alpha.echo",outcome="invalid_arguments"}"#, "2"),
        (r#"tool_calls_total{tool="slow.wait",outcome="timeout"}"#, "2"),
    ] {
        let line = metrics.lines().find(|line| line.starts_with(series)).unwrap_or_else(|| panic!("{series}"));
        assert_eq!(line.split_whitespace().nth(1), Some(count), "{line}");
    }
}

#[tokio::test]
async fn a_success_that_is_not_an_object_fails_a_tool_with_an_output_schema() {
    let tool = |name: &str| {
        json!({
            "name": name, "description": "Counts.", "parameters": [], "required_permission": "guest",
            "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}
        })
    };
    let tools = [tool("shaped.number"), tool("shaped.text"), tool("shaped.object")];
    let manifest = json!({"module_name": "shaped", "description": "Shaped answers.", "tools": tools});
    let answer = |tool: &str, result: Value| json!({"tool_name": tool, "success": true, "result": result}).to_string();
    let answers = [
        ("shaped.number", answer("shaped.number", json!(7))),
        ("shaped.text", answer("shaped.text", json!("n is 1"))),
        ("shaped.object", answer("shaped.object", json!({"n": 1}))),
    ];
    let shaped = ModuleServer::start(answering_module(manifest, &answers));
    let orchestrator =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("shaped", shaped.url())]))]);
    orchestrator.wait_for_module("shaped", "up", Duration::from_secs(10)).await;
    // `/execute` relays any result; `/mcp` holds it to the listed outputSchema.
    let relayed = orchestrator.execute(json!({"tool_name": "shaped.number", "arguments": {}})).await;
    assert_eq!((&relayed["success"], &relayed["result"]), (&json!(true), &json!(7)), "{relayed}");

    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp?permission=guest", orchestrator.url));
    let transport = test_support::mcp_client::transport(config);
    let client = serve_client_with_lifecycle((), transport, ClientLifecycleMode::Initialize).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().all(|tool| tool.output_schema.is_some()), "{tools:?}");
    for (name, kind) in [("shaped__number", "a value of another kind"), ("shaped__text", "text only")] {
        let failed = call(&client, name, json!({})).await;
        assert_eq!((failed.is_error, failed.structured_content.clone()), (Some(true), None), "{failed:?}");
        let expected = format!("the tool `{name}` has an outputSchema but its result is not structured content");
        assert!(text_of(&failed).contains(&expected) && text_of(&failed).contains(kind), "{}", text_of(&failed));
    }
    let fine = call(&client, "shaped__object", json!({})).await;
    assert_eq!((fine.is_error, fine.structured_content.clone()), (Some(false), Some(json!({"n": 1}))), "{fine:?}");
    let object = tools.iter().find(|tool| tool.name == "shaped__object").unwrap();
    assert_matches_output_schema(object, &fine);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn two_identities_see_different_tools_and_cannot_call_outside_theirs() {
    let fleet = Fleet::start(&[]).await;
    let ada = fleet.connect((), "ada", "", recent()).await;
    let ada_tools = ada.list_all_tools().await.unwrap();
    assert_eq!(names(&ada_tools), ["alpha__echo", "bank__echo", "bank__transfer", "slow__stall", "slow__wait"]);
    let refused = ada.call_tool(CallToolRequestParams::new("alpha__wipe").with_arguments(Map::new())).await;
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("no tool named `alpha__wipe`"), "{message}");
    let echoed = call(&ada, "alpha__echo", json!({"text": "hi"})).await;
    assert_eq!(echoed.structured_content.unwrap()["user_id"], "ada");
    ada.cancel().await.unwrap();

    let root = fleet.connect((), "root", "?modules=alpha", ClientLifecycleMode::Initialize).await;
    assert_eq!(names(&root.list_all_tools().await.unwrap()), ["alpha__echo", "alpha__wipe"], "the query narrows");
    let wiped = call(&root, "alpha__wipe", json!({})).await;
    assert_eq!(wiped.structured_content, Some(json!({"wiped": true})));
    let outside = root.call_tool(CallToolRequestParams::new("bank__echo").with_arguments(Map::new())).await;
    assert!(outside.is_err(), "bank is outside the query's modules");
    root.cancel().await.unwrap();
    assert_eq!(fleet.alpha_calls.count(), 2, "ada's echo and root's wipe");
}

/// Calls `alpha__echo` through `client` for the user `user`, named in the request's `_meta`.
async fn echo_for<H: ClientHandler>(client: &RunningService<RoleClient, H>, user: &str) -> Result<Value, String> {
    let mut params = CallToolRequestParams::new("alpha__echo").with_arguments(arguments(json!({"text": "hi"})));
    params.meta = for_user(user);
    let result = client.call_tool(params).await.map_err(|refused| refused.to_string())?;
    Ok(result.structured_content.expect("structured content")["user_id"].clone())
}

#[tokio::test]
async fn a_request_names_its_user_in_meta_within_what_the_identity_may() {
    let fleet = Fleet::start(&[]).await;
    // One service session, as an agent backend serving many users keeps.
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", fleet.orchestrator.url))
        .auth_header(SERVICE_TOKEN);
    let transport = test_support::mcp_client::transport(config);
    let service = serve_client_with_lifecycle((), transport, recent()).await.expect("connected");
    assert_eq!(echo_for(&service, "zoe").await, Ok(json!("zoe")));
    assert_eq!(echo_for(&service, "yann").await, Ok(json!("yann")));
    service.cancel().await.unwrap();

    // A user's key acts for its own user only.
    let ada = fleet.connect((), "ada", "", recent()).await;
    assert_eq!(echo_for(&ada, "ada").await, Ok(json!("ada")));
    let refused = echo_for(&ada, "bob").await.unwrap_err();
    assert!(refused.contains(USER_ID_META_KEY) && refused.contains("bob"), "{refused}");
    ada.cancel().await.unwrap();
    assert_eq!(fleet.alpha_calls.count(), 3, "the refused call never ran");
}

#[tokio::test]
async fn list_changed_arrives_when_a_module_goes_down() {
    let mut fleet = Fleet::start(&[]).await;
    // A 2026-07-28 client listens on `subscriptions/listen`.
    let recent_client = fleet.connect((), "ada", "", recent()).await;
    let mut subscription =
        recent_client.listen(SubscriptionFilter::builder().tools_list_changed().build()).await.unwrap();
    // A 2025-11-25 client keeps its session's GET stream open.
    let (handler, mut legacy_changes) = Agreeable::new();
    let legacy_client = fleet.connect(handler, "ada", "", ClientLifecycleMode::Initialize).await;
    legacy_client.list_all_tools().await.unwrap();

    fleet.slow.kill();
    let (status, _) = fleet.orchestrator.post("/refresh-tools", &json!({})).await;
    assert_eq!(status, 200);
    let notification = tokio::time::timeout(Duration::from_secs(30), subscription.next()).await.unwrap().unwrap();
    assert!(matches!(notification, Some(ServerNotification::ToolListChangedNotification(_))), "{notification:?}");
    tokio::time::timeout(Duration::from_secs(30), legacy_changes.recv()).await.unwrap().unwrap();
    subscription.cancel().await.unwrap();
    recent_client.cancel().await.unwrap();
    legacy_client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_that_needs_approval_asks_the_user_or_says_it_waits() {
    let fleet = Fleet::start(&[]).await;
    let transfer = json!({"to": "carol", "cents": 500});

    // A client that cannot ask its user: the call waits for a person in the
    // console, and the model is not told the request that would approve it.
    let plain = fleet.connect((), "ada", "", recent()).await;
    let waiting = call(&plain, "bank__transfer", transfer.clone()).await;
    assert_eq!(waiting.is_error, Some(true));
    let told = text_of(&waiting);
    assert!(told.contains("waits for a person's approval") && told.contains("console"), "{told}");
    assert!(!told.contains("POST") && !told.contains("/approvals") && !told.contains("decision"), "{told}");
    let id = waiting.meta.as_ref().unwrap()["io.github.tool-modules/approval_id"].as_str().unwrap().to_owned();
    assert!(text_of(&waiting).contains(&id));
    assert_eq!(fleet.bank_calls.count(), 0, "a waiting call does not run");
    let (status, decided) = fleet
        .orchestrator
        .post_with(&format!("/approvals/{id}"), Some(&api_key("ada")), &json!({"decision": "approve"}))
        .await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    assert_eq!(fleet.bank_calls.count(), 1);
    plain.cancel().await.unwrap();

    // A 2026-07-28 client with elicitation: the user confirms within the call, which then runs once.
    let (handler, _changes) = Agreeable::new();
    let asking = fleet.connect(handler, "ada", "", recent()).await;
    let tools = asking.list_all_tools().await.unwrap();
    let done = call(&asking, "bank__transfer", transfer).await;
    let transfer_tool = tools.iter().find(|tool| tool.name == "bank__transfer").unwrap();
    assert_matches_output_schema(transfer_tool, &done);
    assert_eq!(done.structured_content, Some(json!({"to": "carol", "cents": 500, "user_id": "ada"})));
    assert_eq!(fleet.bank_calls.count(), 2);
    asking.cancel().await.unwrap();
}

#[tokio::test]
async fn with_a_separate_decider_a_client_is_not_asked_and_its_answer_decides_nothing() {
    let fleet = Fleet::start(&[("APPROVAL_SEPARATE_DECIDER", "true")]).await;
    // A client that could ask its user is told the call waits instead: its
    // answer would be the decision of the identity that asked.
    let (handler, _changes) = Agreeable::new();
    let asking = fleet.connect(handler, "ada", "", recent()).await;
    let waiting = call(&asking, "bank__transfer", json!({"to": "carol", "cents": 500})).await;
    assert_eq!(waiting.is_error, Some(true));
    assert!(text_of(&waiting).contains("waits for a person's approval"), "{}", text_of(&waiting));
    let id = waiting.meta.as_ref().unwrap()["io.github.tool-modules/approval_id"].as_str().unwrap().to_owned();
    // A retry carrying a confirmation all the same, from that identity, decides nothing.
    let confirmed = std::collections::BTreeMap::from([(
        "approval".to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    )]);
    let retry =
        CallToolRequestParams::new("bank__transfer").with_request_state(id.clone()).with_input_responses(confirmed);
    let Ok(CallToolResponse::Complete(refused)) = asking.call_tool_once(retry).await else { panic!("not a result") };
    assert_eq!(refused.is_error, Some(true));
    assert!(text_of(&refused).contains("APPROVAL_SEPARATE_DECIDER"), "{}", text_of(&refused));
    assert_eq!(fleet.bank_calls.count(), 0, "nothing ran");
    asking.cancel().await.unwrap();
    // Another identity decides it.
    let path = format!("/approvals/{id}");
    let (status, decided) =
        fleet.orchestrator.post_with(&path, Some(&api_key("root")), &json!({"decision": "approve"})).await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    assert_eq!(fleet.bank_calls.count(), 1);
}

#[tokio::test]
async fn a_long_call_reports_progress_to_a_client_that_asks() {
    let fleet = Fleet::start(&[]).await;
    let (handler, _changes) = Agreeable::new();
    let progress = Arc::clone(&handler.progress);
    let client = fleet.connect(handler, "ada", "", recent()).await;
    let mut request = CallToolRequestParams::new("slow__wait").with_arguments(Map::new());
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(rmcp::model::NumberOrString::String("wait-1".into())));
    request.meta = Some(meta);
    let result = client.call_tool(request).await.unwrap();
    assert_eq!(result.is_error, Some(true), "it times out after a second");
    let seen = progress.lock().unwrap().clone();
    assert!(!seen.is_empty(), "progress every 0.2 s of a call that lasts about 2 s");
    assert!(seen.iter().all(|p| p.message.as_deref().is_some_and(|m| m.starts_with("still running"))), "{seen:?}");
    assert!(seen.windows(2).all(|pair| pair[0].progress < pair[1].progress), "each value above the last: {seen:?}");
    client.cancel().await.unwrap();
}

/// Who sends a raw `/mcp` request: a test API key (by its id), or any bearer token (a JWT).
#[derive(Clone, Copy)]
enum Sender<'a> {
    Key(&'static str),
    Bearer(&'a str),
}

impl From<&'static str> for Sender<'_> {
    fn from(id: &'static str) -> Self {
        Self::Key(id)
    }
}

impl Sender<'_> {
    fn token(self) -> String {
        match self {
            Self::Key(id) => api_key(id),
            Self::Bearer(token) => token.to_owned(),
        }
    }
}

/// `method /mcp` sent by `sender`, with the headers a client sends plus
/// `headers`, and `body` if any: the response, its body unread.
async fn mcp_raw<'a>(
    fleet: &Fleet,
    method: reqwest::Method,
    sender: impl Into<Sender<'a>>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}/mcp", fleet.orchestrator.url))
        .bearer_auth(sender.into().token())
        .header("accept", "application/json, text/event-stream");
    if let Some(body) = body {
        request = request.json(&body);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// POSTs `body` to `/mcp` as `ada` with the headers a client sends plus `headers`.
async fn post_raw(fleet: &Fleet, headers: &[(&str, &str)], body: Value) -> (u16, String) {
    let response = mcp_raw(fleet, reqwest::Method::POST, "ada", headers, Some(body)).await;
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `initialize` sent by `sender`, naming `version` in its params and its
/// `MCP-Protocol-Version` header: the status, and the session it opened.
async fn initialize_raw<'a>(
    fleet: &Fleet,
    sender: impl Into<Sender<'a>>,
    version: &str,
) -> (u16, Option<String>, String) {
    let params = json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let headers = [("mcp-protocol-version", version)];
    let response = mcp_raw(fleet, reqwest::Method::POST, sender, &headers, Some(body)).await;
    let session = response.headers().get("mcp-session-id").map(|id| id.to_str().unwrap().to_owned());
    (response.status().as_u16(), session, response.text().await.unwrap())
}

#[tokio::test]
async fn protocol_rules_pages_and_budgets() {
    let fleet = Fleet::start(&[("MCP_PAGE_SIZE", "2"), ("MCP_MAX_SESSIONS", "1")]).await;
    let client = fleet.connect((), "ada", "", recent()).await;
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(names(&first.tools), ["alpha__echo", "bank__echo"]);
    let second = client
        .list_tools(Some(PaginatedRequestParams::default().with_cursor(first.next_cursor.clone())))
        .await
        .unwrap();
    assert_eq!(names(&second.tools), ["bank__transfer", "slow__stall"]);
    let again = client.list_tools(None).await.unwrap();
    assert_eq!((again.tools, again.next_cursor), (first.tools, first.next_cursor), "the same page every time");
    let bad = client.list_tools(Some(PaginatedRequestParams::default().with_cursor(Some("nope".into())))).await;
    assert!(bad.unwrap_err().to_string().contains("cursor"));
    client.cancel().await.unwrap();

    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, body) = post_raw(&fleet, &[("origin", "https://evil.example")], discover.clone()).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = post_raw(&fleet, &[("mcp-protocol-version", "1999-01-01")], discover.clone()).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) =
        post_raw(&fleet, &[], json!({"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {}})).await;
    assert!(status < 500, "a protocol error is never a 5xx: {status} {body}");
    let (status, _) = fleet.orchestrator.post_with("/mcp", None, &discover).await;
    assert_eq!(status, 401, "no key");

    // One 2025-11-25 session at most: a second initialize is refused until the first ends.
    let first_session = fleet.connect((), "ada", "", ClientLifecycleMode::Initialize).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", fleet.orchestrator.url))
        .auth_header(api_key("ada"));
    let second =
        serve_client_with_lifecycle((), test_support::mcp_client::transport(config), ClientLifecycleMode::Initialize)
            .await;
    assert!(second.is_err(), "MCP_MAX_SESSIONS is 1");
    first_session.cancel().await.unwrap();
}

#[tokio::test]
async fn every_initialize_counts_against_the_session_budget_whatever_version_it_names() {
    let fleet = Fleet::start(&[("MCP_MAX_SESSIONS", "2")]).await;
    // rmcp opens a session for any `initialize`, also one naming 2026-07-28 in its header and params.
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (status, session, body) = initialize_raw(&fleet, "ada", "2026-07-28").await;
        assert_eq!(status, 200, "{body}");
        sessions.push(session.expect("a session was opened"));
    }
    for version in ["2026-07-28", "2025-11-25"] {
        let (status, session, body) = initialize_raw(&fleet, "ada", version).await;
        assert_eq!((status, session), (429, None), "{body}");
        assert!(body.contains("MCP_MAX_SESSIONS (2)"), "{body}");
    }
    // Stateless 2026-07-28 requests need no session, so the full budget does not stop them.
    let recent_client = fleet.connect((), "ada", "", recent()).await;
    assert!(!recent_client.list_all_tools().await.unwrap().is_empty());
    recent_client.cancel().await.unwrap();

    // A session that ends no longer counts.
    let ended = mcp_raw(&fleet, reqwest::Method::DELETE, "ada", &[("mcp-session-id", &sessions[0])], None).await;
    assert_eq!(ended.status(), 202);
    let (status, session, body) = initialize_raw(&fleet, "ada", "2026-07-28").await;
    assert_eq!(status, 200, "{body}");
    assert!(session.is_some());
}

#[tokio::test]
async fn one_identity_cannot_hold_every_session() {
    let fleet = Fleet::start(&[("MCP_MAX_SESSIONS", "3"), ("MCP_MAX_SESSIONS_PER_IDENTITY", "2")]).await;
    let mut ada_sessions = Vec::new();
    for _ in 0..2 {
        let (status, session, body) = initialize_raw(&fleet, "ada", "2025-11-25").await;
        assert_eq!(status, 200, "{body}");
        ada_sessions.push(session.expect("a session was opened"));
    }
    let (status, session, body) = initialize_raw(&fleet, "ada", "2025-11-25").await;
    assert_eq!((status, session), (429, None), "{body}");
    assert!(body.contains("MCP_MAX_SESSIONS_PER_IDENTITY (2)"), "{body}");

    // ada's share taken, another key still gets the sessions that are left, then the total refuses.
    let (status, _, body) = initialize_raw(&fleet, "root", "2025-11-25").await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = initialize_raw(&fleet, "root", "2025-11-25").await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("MCP_MAX_SESSIONS (3)"), "{body}");

    // A session ada ends gives her share back.
    let ended = mcp_raw(&fleet, reqwest::Method::DELETE, "ada", &[("mcp-session-id", &ada_sessions[0])], None).await;
    assert_eq!(ended.status(), 202);
    let (status, session, body) = initialize_raw(&fleet, "ada", "2025-11-25").await;
    assert_eq!(status, 200, "{body}");
    assert!(session.is_some());
}

#[tokio::test]
async fn refused_initializes_log_no_errors() {
    let mut fleet = Fleet::start(&[("MCP_MAX_SESSIONS", "2"), ("MCP_MAX_SESSIONS_PER_IDENTITY", "1")]).await;
    // Clients that keep asking past either budget, or without a key, are refused every time.
    for (key, budget) in [("ada", "MCP_MAX_SESSIONS_PER_IDENTITY (1)"), ("root", "MCP_MAX_SESSIONS (2)")] {
        let (status, _, body) = initialize_raw(&fleet, key, "2025-11-25").await;
        assert_eq!(status, 200, "{body}");
        for _ in 0..5 {
            let (status, session, body) = initialize_raw(&fleet, key, "2025-11-25").await;
            assert_eq!((status, session), (429, None), "{body}");
            assert!(body.contains(budget), "{body}");
        }
    }
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    let (status, _) = fleet.orchestrator.post_with("/mcp", None, &initialize).await;
    assert_eq!(status, 401);

    // The shutdown line comes after every line the refusals caused: none is an error.
    fleet.orchestrator.terminate();
    assert!(fleet.orchestrator.logged(|line| line.contains("shutdown signal received")));
    let errors: Vec<String> =
        fleet.orchestrator.logs().into_iter().filter(|line| line.contains(r#""level":"ERROR""#)).collect();
    assert!(errors.is_empty(), "refusals are no internal errors: {errors:#?}");
}

/// Opens a 2025-11-25 session sent by `sender`, handshake and all: its id.
async fn open_session<'a>(fleet: &Fleet, sender: impl Into<Sender<'a>>) -> String {
    let sender = sender.into();
    let (status, session, body) = initialize_raw(fleet, sender, "2025-11-25").await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session was opened");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    let response = mcp_raw(fleet, reqwest::Method::POST, sender, &headers, Some(initialized)).await;
    assert_eq!(response.status(), 202);
    session
}

/// `tools/call` of `tool` (no arguments) with id `id`, posted by ada in `session`: the response, its stream unread.
async fn call_in_session(fleet: &Fleet, session: &str, id: u64, tool: &str) -> reqwest::Response {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
    let headers = [("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25")];
    mcp_raw(fleet, reqwest::Method::POST, "ada", &headers, Some(call)).await
}

#[tokio::test]
async fn a_session_call_whose_client_went_away_is_cancelled() {
    // One call at a time to a module: a call left running would keep the next one out.
    let fleet = Fleet::start(&[("MAX_CONCURRENT_CALLS_PER_MODULE", "1")]).await;
    let session = open_session(&fleet, "ada").await;
    // `slow__stall` would hold the module's one slot for its 30 s timeout;
    // its client goes away once the module has it.
    let stall = call_in_session(&fleet, &session, 3, "slow__stall").await;
    assert_eq!(stall.status(), 200);
    wait_for_slow_calls(&fleet, 1).await;
    drop(stall);
    // The next call waits up to its 30 s for the slot: it reaches the module once the first frees it.
    let next = call_in_session(&fleet, &session, 4, "slow__stall").await;
    wait_for_slow_calls(&fleet, 2).await;
    drop(next);
}

#[tokio::test]
async fn a_resumed_session_call_whose_client_went_away_is_cancelled() {
    let fleet = Fleet::start(&[("MAX_CONCURRENT_CALLS_PER_MODULE", "1")]).await;
    let session = open_session(&fleet, "ada").await;
    // The answer moved to the `GET`, whose client goes away once the module has the call.
    let resumed = resume_call(&fleet, &session, 3).await;
    wait_for_slow_calls(&fleet, 1).await;
    drop(resumed);
    let next = call_in_session(&fleet, &session, 4, "slow__stall").await;
    wait_for_slow_calls(&fleet, 2).await;
    drop(next);
}

#[tokio::test]
async fn a_session_with_a_resumed_call_running_is_not_idle() {
    // Sessions idle for 3 s end; `slow__stall` runs 8 s (its timeout), sending nothing meanwhile.
    let fleet = Fleet::start(&[("MCP_SESSION_IDLE_SECONDS", "3"), ("DEFAULT_TOOL_TIMEOUT", "8")]).await;
    let session = open_session(&fleet, "ada").await;
    let answer = resume_call(&fleet, &session, 3).await.text().await.unwrap();
    assert!(answer.contains(r#""id":3"#) && answer.contains("isError"), "the session ended mid-call: {answer}");
}

/// Waits (10 s at most) until the `slow` module has been called `count` times.
async fn wait_for_slow_calls(fleet: &Fleet, count: usize) {
    let started = tokio::time::Instant::now();
    while fleet.slow_calls.count() < count {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the module had {} calls, not {count}",
            fleet.slow_calls.count()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Posts a call `id` of `slow__stall` in `session` and resumes its answer
/// with a `GET` naming the first event (`Last-Event-ID`): the `GET`, once
/// rmcp has ended the `POST`'s stream, the answer having moved.
async fn resume_call(fleet: &Fleet, session: &str, id: u64) -> reqwest::Response {
    let mut posted = call_in_session(fleet, session, id, "slow__stall").await;
    let first = String::from_utf8(posted.chunk().await.unwrap().expect("the stream's first event").to_vec()).unwrap();
    let event = first.lines().find_map(|line| line.strip_prefix("id: ")).expect("an event id").to_owned();
    let headers =
        [("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25"), ("last-event-id", event.as_str())];
    let resumed = mcp_raw(fleet, reqwest::Method::GET, "ada", &headers, None).await;
    assert_eq!(resumed.status(), 200);
    while posted.chunk().await.unwrap().is_some() {}
    resumed
}

#[tokio::test]
async fn a_session_with_a_call_running_is_not_idle() {
    // Sessions idle for 3 s end; `slow__stall` runs 8 s (its timeout), sending nothing meanwhile.
    let fleet = Fleet::start(&[("MCP_SESSION_IDLE_SECONDS", "3"), ("DEFAULT_TOOL_TIMEOUT", "8")]).await;
    let session = open_session(&fleet, "ada").await;
    let answer = call_in_session(&fleet, &session, 3, "slow__stall").await.text().await.unwrap();
    assert!(answer.contains(r#""id":3"#) && answer.contains("isError"), "the session ended mid-call: {answer}");
    // Without a call running, the session ends after its idle 3 s.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(list_in_session(&fleet, "ada", &session).await.0, 404, "the idle session was kept");
}

#[tokio::test]
async fn a_cancelled_calls_stream_is_not_kept_for_resuming() {
    let fleet = Fleet::start(&[]).await;
    let session = open_session(&fleet, "ada").await;
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    let mut stall = call_in_session(&fleet, &session, 3, "slow__stall").await;
    let first = String::from_utf8(stall.chunk().await.unwrap().expect("the stream's first event").to_vec()).unwrap();
    let event = first.lines().find_map(|line| line.strip_prefix("id: ")).expect("an event id").to_owned();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}});
    assert_eq!(mcp_raw(&fleet, reqwest::Method::POST, "ada", &headers, Some(cancel)).await.status(), 202);
    // rmcp kept a cancelled call's stream, up to 16 events, for 60 s to be
    // resumed: one session cancelling calls at a high rate grew memory so.
    let resume = [headers[0], headers[1], ("last-event-id", event.as_str())];
    let (status, replayed) = answer(mcp_raw(&fleet, reqwest::Method::GET, "ada", &resume, None).await).await;
    assert_eq!((status, replayed.as_str()), (200, ""), "the cancelled call's stream was kept");
    drop(stall);
}

/// `GET /mcp` of `session` sent by `sender`: the session's event stream, open while the response is kept.
async fn get_stream<'a>(fleet: &Fleet, sender: impl Into<Sender<'a>>, session: &str) -> reqwest::Response {
    let headers = [("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25")];
    mcp_raw(fleet, reqwest::Method::GET, sender, &headers, None).await
}

#[tokio::test]
async fn a_session_whose_get_stream_is_open_is_not_idle() {
    // Sessions idle for 3 s end; a client holding `GET /mcp` open waits
    // for notifications, sending nothing meanwhile.
    let fleet = Fleet::start(&[("MCP_SESSION_IDLE_SECONDS", "3")]).await;
    let session = open_session(&fleet, "ada").await;
    let stream = get_stream(&fleet, "ada", &session).await;
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(list_in_session(&fleet, "ada", &session).await.0, 200, "the session ended with its stream open");
    drop(stream);
}

#[tokio::test]
async fn a_session_whose_resumed_get_stream_is_open_is_not_idle() {
    // Sessions idle for 3 s end; a client reconnecting its `GET /mcp`
    // after a network blip names the last event it had (`Last-Event-ID`).
    let fleet = Fleet::start(&[("MCP_SESSION_IDLE_SECONDS", "3")]).await;
    let session = open_session(&fleet, "ada").await;
    drop(get_stream(&fleet, "ada", &session).await);
    let headers =
        [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25"), ("last-event-id", "0")];
    let stream = mcp_raw(&fleet, reqwest::Method::GET, "ada", &headers, None).await;
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(list_in_session(&fleet, "ada", &session).await.0, 200, "the session ended with its stream open");
    drop(stream);
}

#[tokio::test]
async fn sigterm_ends_open_event_streams_and_the_process() {
    let mut fleet = Fleet::start(&[]).await;
    let session = open_session(&fleet, "ada").await;
    let stream = get_stream(&fleet, "ada", &session).await;
    assert_eq!(stream.status(), 200);
    // The stream, kept open by its client, would keep the stop waiting until
    // `terminate` kills the process after 10 s; ended, the process exits by itself.
    let status = fleet.orchestrator.terminate();
    assert!(status.success(), "the orchestrator did not stop by itself: {status:?}");
    assert!(fleet.orchestrator.logged(|line| line.contains("orchestrator stopped")));
    drop(stream);
}

/// `tools/list` sent by `sender` on `session`: the status and the answer.
async fn list_in_session<'a>(fleet: &Fleet, sender: impl Into<Sender<'a>>, session: &str) -> (u16, String) {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let headers = [("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25")];
    let response = mcp_raw(fleet, reqwest::Method::POST, sender, &headers, Some(list)).await;
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_session_is_its_openers_and_to_anyone_else_does_not_exist() {
    let fleet = Fleet::start(&[]).await;
    let session = open_session(&fleet, "ada").await;
    let made_up = "0b5c6f0e-6a4e-4d7e-9a55-4c1f3c0e2f11";
    // root, given ada's session id, gets what it gets for a session that never was.
    for id in [session.as_str(), made_up] {
        let (status, body) = list_in_session(&fleet, "root", id).await;
        assert_eq!((status, body.as_str()), (404, r#"{"error":"no such MCP session: it has ended, or never was"}"#));
        let stream = get_stream(&fleet, "root", id).await;
        assert_eq!(stream.status(), 404);
        let ended = mcp_raw(&fleet, reqwest::Method::DELETE, "root", &[("mcp-session-id", id)], None).await;
        assert_eq!(ended.status(), 404);
    }
    // The session is untouched, and ada's own.
    let (status, body) = list_in_session(&fleet, "ada", &session).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("alpha__echo"), "{body}");
    let ended = mcp_raw(&fleet, reqwest::Method::DELETE, "ada", &[("mcp-session-id", &session)], None).await;
    assert_eq!(ended.status(), 202);
    assert_eq!(list_in_session(&fleet, "ada", &session).await.0, 404, "ended");
}

/// The status and body of `response`.
async fn answer(response: reqwest::Response) -> (u16, String) {
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The settings verifying the test issuer's JWTs against `jwks`.
fn jwt_settings(jwks: &tempfile::NamedTempFile) -> [(&'static str, &str); 4] {
    [
        ("JWT_JWKS", jwks.path().to_str().unwrap()),
        ("JWT_ISSUER", "test-issuer"),
        ("JWT_AUDIENCE", "orchestrator"),
        ("JWT_ALGORITHMS", "ES256"),
    ]
}

/// Three JWTs of ada, all the identity `jwt:ada`: an admin's of every
/// module, a user's of `module` only, and the first one refreshed (the same
/// claims, a later expiry).
fn ada_jwts(module: &str) -> [String; 3] {
    let mut narrow = claims("ada", "user");
    narrow["modules"] = json!([module]);
    let mut refreshed = claims("ada", "admin");
    refreshed["exp"] = json!(now_plus(1200));
    [claims("ada", "admin"), narrow, refreshed].map(|claims| token(ISSUER_KEY, &claims))
}

#[tokio::test]
async fn a_session_is_bound_to_its_openers_grant_not_only_its_user() {
    let jwks = jwks_file();
    let fleet = Fleet::start(&jwt_settings(&jwks)).await;
    let [broad, narrow, refreshed] = ada_jwts("bank");
    let session = open_session(&fleet, Sender::Bearer(&broad)).await;
    let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    // The broad token calls `slow__wait` (answered within a second), outside the narrow one's modules.
    let wait =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "slow__wait", "arguments": {}}});
    let mut call = mcp_raw(&fleet, reqwest::Method::POST, Sender::Bearer(&broad), &in_session, Some(wait)).await;
    assert_eq!(call.status(), 200);
    // The call's stream opens with an event whose id a client resumes the stream by.
    let first = String::from_utf8(call.chunk().await.unwrap().expect("the stream's first event").to_vec()).unwrap();
    let event = first.lines().find_map(|line| line.strip_prefix("id: ")).expect("an event id").to_owned();

    // The narrower token gets what it gets for a session that never was: it
    // can neither use the session, nor take over the stream of the broad
    // token's call (Last-Event-ID) and be given its answer, nor end it.
    let used = list_in_session(&fleet, Sender::Bearer(&narrow), &session).await;
    let resume = [in_session[0], in_session[1], ("last-event-id", event.as_str())];
    let resumed = answer(mcp_raw(&fleet, reqwest::Method::GET, Sender::Bearer(&narrow), &resume, None).await).await;
    let ended = answer(mcp_raw(&fleet, reqwest::Method::DELETE, Sender::Bearer(&narrow), &in_session, None).await);
    let unknown = (404, r#"{"error":"no such MCP session: it has ended, or never was"}"#.to_owned());
    assert_eq!([used, resumed, ended.await], [unknown.clone(), unknown.clone(), unknown]);
    let rest = call.text().await.unwrap();
    assert!(rest.contains(r#""id":3"#) && rest.contains("slow.wait"), "the call's answer reached its caller: {rest}");

    // Another token with the same claims (a refreshed one) is the same grant: the session is its.
    let (status, listed) = list_in_session(&fleet, Sender::Bearer(&refreshed), &session).await;
    assert!(status == 200 && listed.contains("alpha__wipe"), "{status}: {listed}");
    let ended = mcp_raw(&fleet, reqwest::Method::DELETE, Sender::Bearer(&refreshed), &in_session, None).await;
    assert_eq!(ended.status(), 202);
}

/// A `GET /mcp` refused with `429`: its message.
async fn refused_stream(response: reqwest::Response) -> String {
    assert_eq!(response.status(), 429);
    response.text().await.unwrap()
}

fn tool_list_changes() -> SubscriptionFilter {
    SubscriptionFilter::builder().tools_list_changed().build()
}

#[tokio::test]
async fn event_streams_are_capped_in_all_and_per_identity() {
    let fleet = Fleet::start(&[("MCP_MAX_STREAMS", "3"), ("MCP_MAX_STREAMS_PER_IDENTITY", "2")]).await;
    // ada keeps a `subscriptions/listen` and a `GET /mcp` stream open: her share.
    let ada_recent = fleet.connect((), "ada", "", recent()).await;
    let _listening = ada_recent.listen(tool_list_changes()).await.unwrap();
    let ada_session = open_session(&fleet, "ada").await;
    let ada_stream = get_stream(&fleet, "ada", &ada_session).await;
    assert_eq!(ada_stream.status(), 200);
    let refused = refused_stream(get_stream(&fleet, "ada", &ada_session).await).await;
    assert!(refused.contains("MCP_MAX_STREAMS_PER_IDENTITY (2)"), "{refused}");

    // root takes the last stream of all; then neither a GET nor a listen gets one.
    let root_session = open_session(&fleet, "root").await;
    let root_stream = get_stream(&fleet, "root", &root_session).await;
    assert_eq!(root_stream.status(), 200);
    let refused = refused_stream(get_stream(&fleet, "root", &root_session).await).await;
    assert!(refused.contains("MCP_MAX_STREAMS (3)"), "{refused}");
    let root_recent = fleet.connect((), "root", "", recent()).await;
    let listened = match root_recent.listen(tool_list_changes()).await {
        // rmcp acknowledges a subscription before the server's handler runs; the refusal ends it at once.
        Ok(mut subscription) => tokio::time::timeout(Duration::from_secs(10), subscription.next())
            .await
            .expect("the refused subscription ended")
            .map(drop),
        Err(error) => Err(error),
    };
    let refused = listened.unwrap_err().to_string();
    assert!(refused.contains("MCP_MAX_STREAMS (3)"), "{refused}");

    // Requests that are no streams, and other routes, are served meanwhile.
    assert!(!root_recent.list_all_tools().await.unwrap().is_empty());
    assert_eq!(fleet.orchestrator.get_with("/health", None).await.0, 200);

    // A stream that ends frees its place: ending root's session ends its stream.
    let ended = mcp_raw(&fleet, reqwest::Method::DELETE, "root", &[("mcp-session-id", &root_session)], None).await;
    assert_eq!(ended.status(), 202);
    let root_session = open_session(&fleet, "root").await;
    let mut reopened = get_stream(&fleet, "root", &root_session).await;
    for _ in 0..50 {
        if reopened.status() == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        reopened = get_stream(&fleet, "root", &root_session).await;
    }
    assert_eq!(reopened.status(), 200, "the ended stream's place was freed");
    drop((ada_stream, root_stream));
    root_recent.cancel().await.unwrap();
    ada_recent.cancel().await.unwrap();
}

/// What the `held` module saw: calls that started, and calls whose caller went away.
#[derive(Clone, Default)]
struct Holds {
    started: Arc<AtomicUsize>,
    cancelled: Arc<AtomicUsize>,
}

/// Arguments of `hold`.
#[derive(Deserialize, JsonSchema)]
struct Hold {}

/// What `hold` would return.
#[derive(Serialize, JsonSchema)]
struct Held {
    /// Never sent.
    held: bool,
}

/// Hold the call until the caller goes away.
#[tool(timeout_seconds = 120)]
async fn hold(ctx: Context, _args: Hold) -> Result<Held, ToolError> {
    let holds = ctx.state::<Holds>()?;
    holds.started.fetch_add(1, Ordering::SeqCst);
    let (cancellation, cancelled) = (ctx.cancellation().clone(), Arc::clone(&holds.cancelled));
    // The handler's own future is dropped with the call, so a task of its own sees the cancellation.
    tokio::spawn(async move {
        cancellation.cancelled().await;
        cancelled.fetch_add(1, Ordering::SeqCst);
    });
    std::future::pending().await
}

/// `alpha` (echo, the admin's wipe) and `held` (hold, which sees its
/// cancellation), and the orchestrator with `settings`.
struct TaskFleet {
    _alpha: ModuleServer,
    _held: ModuleServer,
    keys: tempfile::NamedTempFile,
    services: String,
    holds: Holds,
    orchestrator: OrchestratorProcess,
}

impl TaskFleet {
    async fn start(settings: &[(&str, &str)]) -> Self {
        let alpha = ModuleServer::sdk(sdk_module("alpha").0);
        let holds = Holds::default();
        let held = Module::new("held", "Calls that end when their caller goes away.").tool(hold).state(holds.clone());
        let held = ModuleServer::sdk(held);
        let services = module_services(&[("alpha", alpha.url()), ("held", held.url())]);
        let keys = keys_file(&[TestKey::new("ada", "ada", "user"), TestKey::new("root", "root", "admin")]);
        let orchestrator = Self::orchestrator(&services, &keys, settings).await;
        Self { _alpha: alpha, _held: held, keys, services, holds, orchestrator }
    }

    /// An orchestrator of `services`, with `keys` and `settings`, once it sees both modules.
    async fn orchestrator(
        services: &str,
        keys: &tempfile::NamedTempFile,
        settings: &[(&str, &str)],
    ) -> OrchestratorProcess {
        let mut env = vec![
            ("MODULE_SERVICES", services),
            ("API_KEYS_FILE", keys.path().to_str().unwrap()),
            ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
        ];
        env.extend_from_slice(settings);
        let orchestrator = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
        for module in ["alpha", "held"] {
            orchestrator.wait_for_module(module, "up", Duration::from_secs(10)).await;
        }
        orchestrator
    }

    /// Another orchestrator of the same modules and keys, with `settings`.
    async fn replica(&self, settings: &[(&str, &str)]) -> OrchestratorProcess {
        Self::orchestrator(&self.services, &self.keys, settings).await
    }

    /// A 2026-07-28 client of `key` that declares the tasks extension.
    async fn client(&self, key: &'static str) -> RunningService<RoleClient, TasksClient> {
        self.client_with(key, recent()).await
    }

    /// A client of `key` that declares the tasks extension, starting with `lifecycle`.
    async fn client_with(
        &self,
        key: &'static str,
        lifecycle: ClientLifecycleMode,
    ) -> RunningService<RoleClient, TasksClient> {
        tasks_client(&self.orchestrator, &api_key(key), lifecycle).await
    }
}

/// A client of `orchestrator` sending `token` that declares the tasks extension, starting with `lifecycle`.
async fn tasks_client(
    orchestrator: &OrchestratorProcess,
    token: &str,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, TasksClient> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", orchestrator.url)).auth_header(token);
    let transport = test_support::mcp_client::transport(config);
    serve_client_with_lifecycle(TasksClient, transport, lifecycle).await.expect("connected")
}

impl TaskFleet {
    /// A 2026-07-28 client of `key` that does not declare the tasks extension.
    async fn plain_client(&self, key: &'static str) -> RunningService<RoleClient, ()> {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.orchestrator.url))
            .auth_header(api_key(key));
        let transport = test_support::mcp_client::transport(config);
        serve_client_with_lifecycle((), transport, recent()).await.expect("connected")
    }
}

/// A client that declares the tasks extension.
#[derive(Clone)]
struct TasksClient;

impl ClientHandler for TasksClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-client", "1.0.0"),
        )
    }
}

/// Calls `name` once, expecting a task; its id.
async fn start_task(client: &RunningService<RoleClient, TasksClient>, name: &'static str, args: Value) -> String {
    let request = CallToolRequestParams::new(name).with_arguments(arguments(args));
    match client.call_tool_once(request).await.expect("an answer") {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
            assert!(created.task.poll_interval_ms.is_some());
            created.task.task_id
        }
        other => panic!("a task was expected: {other:?}"),
    }
}

/// Polls task `id` until `done` holds for it (at most 30 s, at most every 50 ms).
async fn poll_until<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    id: &str,
    done: impl Fn(&DetailedTask) -> bool,
) -> DetailedTask {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let task = client.get_task(GetTaskParams::new(id)).await.expect("the task").task;
        if done(&task) {
            return task;
        }
        assert!(tokio::time::Instant::now() < deadline, "task {id} is still {:?}", task.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tool result a completed task holds.
fn task_result(task: &DetailedTask) -> CallToolResult {
    let TaskPayload::Completed { result } = &task.payload else { panic!("a completed task: {task:?}") };
    serde_json::from_value(Value::Object(result.clone())).expect("a CallToolResult")
}

/// Waits (at most 30 s) until `counter` reaches `count`.
async fn wait_for_count(counter: &AtomicUsize, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while counter.load(Ordering::SeqCst) < count {
        assert!(tokio::time::Instant::now() < deadline, "the count stays {}", counter.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `_meta` naming `user` as the user a request acts for.
fn for_user(user: &str) -> Option<RequestMetaObject> {
    Some(Map::from_iter([(USER_ID_META_KEY.to_owned(), json!(user))]).into())
}

#[tokio::test]
async fn a_task_started_for_a_user_named_in_meta_is_that_users() {
    let fleet = TaskFleet::start(&[("MCP_TASK_AFTER_SECONDS", "0")]).await;
    let service = tasks_client(&fleet.orchestrator, SERVICE_TOKEN, recent()).await;
    let mut request = CallToolRequestParams::new("alpha__echo").with_arguments(arguments(json!({"text": "hi"})));
    request.meta = for_user("zoe");
    let CallToolResponse::Task(created) = service.call_tool_once(request).await.unwrap() else {
        panic!("a task was expected");
    };
    let id = created.task.task_id;

    let get_for = |user: Option<&str>| {
        let mut params = GetTaskParams::new(&id);
        params.meta = user.and_then(for_user);
        service.get_task(params)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let task = get_for(Some("zoe")).await.expect("zoe's task").task;
        if task.status().is_terminal() {
            break task;
        }
        assert!(tokio::time::Instant::now() < deadline, "task {id} is still {:?}", task.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(task_result(&done).structured_content, Some(json!({"text": "hi", "user_id": "zoe"})));
    // The same session acting for nobody, or for another user, does not see it.
    for other in [None, Some("yann")] {
        let hidden = get_for(other).await.unwrap_err().to_string();
        assert!(hidden.contains(&format!("no task `{id}`")), "{other:?}: {hidden}");
    }
    let mut cancel = CancelTaskParams::new(&id);
    cancel.meta = for_user("yann");
    assert!(service.cancel_task(cancel).await.is_err(), "another user cannot cancel it");
    service.cancel().await.unwrap();
}

#[tokio::test]
async fn a_task_runs_the_call_as_execute_would_and_only_its_owner_sees_it() {
    let fleet = TaskFleet::start(&[("MCP_TASK_AFTER_SECONDS", "0")]).await;
    let ada = fleet.client("ada").await;

    let id = start_task(&ada, "alpha__echo", json!({"text": "hi"})).await;
    let done = poll_until(&ada, &id, |task| task.status().is_terminal()).await;
    assert_eq!(done.status(), TaskStatus::Completed);
    assert!(done.task.ttl_ms.is_some_and(|ms| ms >= 600_000), "kept 600 s after it ended: {:?}", done.task);
    let echoed = task_result(&done);
    assert_eq!(echoed.structured_content, Some(json!({"text": "hi", "user_id": "ada"})), "the key's user injected");

    let invalid = start_task(&ada, "alpha__echo", json!({"text": 7})).await;
    let refused = task_result(&poll_until(&ada, &invalid, |task| task.status().is_terminal()).await);
    assert_eq!(refused.is_error, Some(true), "a failed call is a completed task with an error result");
    assert!(text_of(&refused).contains("text"), "{}", text_of(&refused));

    let outside = ada.call_tool_once(CallToolRequestParams::new("alpha__wipe").with_arguments(Map::new())).await;
    assert!(outside.unwrap_err().to_string().contains("no tool named"), "refused before any task");

    // Another identity, even the admin, cannot see, update or cancel ada's task.
    let root = fleet.client("root").await;
    let hidden = root.get_task(GetTaskParams::new(&id)).await.unwrap_err().to_string();
    assert!(hidden.contains(&format!("no task `{id}`")), "{hidden}");
    assert!(root.cancel_task(CancelTaskParams::new(&id)).await.is_err());
    assert!(root.update_task(UpdateTaskParams::new(&id, Default::default())).await.is_err());
    ada.update_task(UpdateTaskParams::new(&id, Default::default())).await.expect("its owner's update is acknowledged");
    assert_eq!(ada.get_task(GetTaskParams::new(&id)).await.unwrap().task.status(), TaskStatus::Completed);

    // A 2025-11-25 client gets its answer directly, whatever it declares: the extension is of 2026-07-28.
    let legacy = fleet.client_with("ada", ClientLifecycleMode::Initialize).await;
    let request = CallToolRequestParams::new("alpha__echo").with_arguments(arguments(json!({"text": "old"})));
    assert!(matches!(legacy.call_tool_once(request).await.unwrap(), CallToolResponse::Complete(_)));
    legacy.cancel().await.unwrap();

    // A client without the extension gets its answer directly.
    let plain = fleet.plain_client("ada").await;
    let direct = call(&plain, "alpha__echo", json!({"text": "direct"})).await;
    assert_eq!(direct.structured_content.unwrap()["text"], "direct");
    for client in [ada, root] {
        client.cancel().await.unwrap();
    }
    plain.cancel().await.unwrap();

    let metrics = fleet.orchestrator.metrics().await;
    let line =
        metrics.lines().find(|line| line.starts_with(r#"tool_calls_total{tool="alpha.echo",outcome="success"}"#));
    assert_eq!(line.and_then(|line| line.split_whitespace().nth(1)), Some("3"), "tasks are counted as calls");
}

#[tokio::test]
async fn a_task_is_its_owners_grant_not_every_token_of_its_user() {
    let jwks = jwks_file();
    let fleet = TaskFleet::start(&[jwt_settings(&jwks).as_slice(), &[("MCP_TASK_AFTER_SECONDS", "0")]].concat()).await;
    let [broad, narrow, refreshed] = ada_jwts("held");
    let broad = tasks_client(&fleet.orchestrator, &broad, recent()).await;
    let narrow = tasks_client(&fleet.orchestrator, &narrow, recent()).await;
    let refreshed = tasks_client(&fleet.orchestrator, &refreshed, recent()).await;
    // The broad token's task runs `alpha__echo`, outside the narrow one's modules.
    let id = start_task(&broad, "alpha__echo", json!({"text": "hi"})).await;
    assert_eq!(poll_until(&broad, &id, |task| task.status().is_terminal()).await.status(), TaskStatus::Completed);
    // The narrow token cannot see its answer, nor cancel it: to it the task does not exist.
    let hidden = narrow.get_task(GetTaskParams::new(&id)).await.unwrap_err().to_string();
    assert!(hidden.contains(&format!("no task `{id}`")), "{hidden}");
    assert!(narrow.cancel_task(CancelTaskParams::new(&id)).await.is_err());
    // A refreshed token with the same claims is the same grant: the task is its.
    let done = refreshed.get_task(GetTaskParams::new(&id)).await.expect("the task").task;
    assert_eq!(task_result(&done).structured_content, Some(json!({"text": "hi", "user_id": "ada"})));
    for client in [broad, narrow, refreshed] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn cancelling_a_task_stops_its_call_in_the_module() {
    let fleet = TaskFleet::start(&[("MCP_TASK_AFTER_SECONDS", "0")]).await;
    let ada = fleet.client("ada").await;
    let id = start_task(&ada, "held__hold", json!({})).await;
    wait_for_count(&fleet.holds.started, 1).await;
    assert_eq!(ada.get_task(GetTaskParams::new(&id)).await.unwrap().task.status(), TaskStatus::Working);
    ada.cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    let cancelled = poll_until(&ada, &id, |task| task.status().is_terminal()).await;
    assert_eq!(cancelled.status(), TaskStatus::Cancelled);
    wait_for_count(&fleet.holds.cancelled, 1).await;
    ada.cancel().await.unwrap();
}

#[tokio::test]
async fn tasks_are_bounded_per_owner() {
    let fleet = TaskFleet::start(&[("MCP_TASK_AFTER_SECONDS", "0"), ("MCP_MAX_TASKS_PER_OWNER", "2")]).await;
    let ada = fleet.client("ada").await;
    for _ in 0..2 {
        start_task(&ada, "held__hold", json!({})).await;
    }
    let request = CallToolRequestParams::new("held__hold").with_arguments(Map::new());
    let CallToolResponse::Complete(refused) = ada.call_tool_once(request).await.unwrap() else {
        panic!("a refusal, not a task");
    };
    assert_eq!(refused.is_error, Some(true));
    assert!(text_of(&refused).contains("MCP_MAX_TASKS_PER_OWNER (2)"), "{}", text_of(&refused));
    wait_for_count(&fleet.holds.started, 2).await;
    let root = fleet.client("root").await;
    start_task(&root, "held__hold", json!({})).await;
    wait_for_count(&fleet.holds.started, 3).await;
    assert_eq!(fleet.holds.started.load(Ordering::SeqCst), 3, "the refused call never ran");
    ada.cancel().await.unwrap();
    root.cancel().await.unwrap();
}

#[tokio::test]
async fn a_quick_call_answers_directly_and_an_ended_task_expires() {
    let fleet = TaskFleet::start(&[("MCP_TASK_AFTER_SECONDS", "5"), ("MCP_TASK_TTL_SECONDS", "3")]).await;
    let ada = fleet.client("ada").await;
    let request = CallToolRequestParams::new("alpha__echo").with_arguments(arguments(json!({"text": "quick"})));
    let CallToolResponse::Complete(quick) = ada.call_tool_once(request).await.unwrap() else {
        panic!("a call that ends within MCP_TASK_AFTER_SECONDS answers directly");
    };
    assert_eq!(quick.structured_content.unwrap()["text"], "quick");

    let id = start_task(&ada, "held__hold", json!({})).await;
    ada.cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    let cancelled = poll_until(&ada, &id, |task| task.status().is_terminal()).await;
    assert_eq!(cancelled.status(), TaskStatus::Cancelled);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let gone = loop {
        match ada.get_task(GetTaskParams::new(&id)).await {
            Ok(task) => assert_eq!(task.task.status(), TaskStatus::Cancelled),
            Err(error) => break error.to_string(),
        }
        assert!(tokio::time::Instant::now() < deadline, "the task outlives MCP_TASK_TTL_SECONDS");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(gone.contains("expired"), "{gone}");
    ada.cancel().await.unwrap();
}

#[tokio::test]
async fn with_redis_a_task_is_seen_and_cancelled_on_another_replica() {
    let Some(redis) = RedisServer::start() else { return };
    let url = redis.url();
    let settings = [("MCP_TASK_AFTER_SECONDS", "0"), ("REDIS_URL", url.as_str())];
    let fleet = TaskFleet::start(&settings).await;
    let other = fleet.replica(&settings).await;
    let here = fleet.client("ada").await;
    let there = tasks_client(&other, &api_key("ada"), recent()).await;

    let echo = start_task(&here, "alpha__echo", json!({"text": "shared"})).await;
    let done = poll_until(&there, &echo, |task| task.status().is_terminal()).await;
    assert_eq!(task_result(&done).structured_content, Some(json!({"text": "shared", "user_id": "ada"})));

    let held = start_task(&here, "held__hold", json!({})).await;
    wait_for_count(&fleet.holds.started, 1).await;
    assert_eq!(there.get_task(GetTaskParams::new(&held)).await.unwrap().task.status(), TaskStatus::Working);
    let root = tasks_client(&other, &api_key("root"), recent()).await;
    assert!(root.get_task(GetTaskParams::new(&held)).await.is_err(), "another identity, on any replica");
    assert!(root.cancel_task(CancelTaskParams::new(&held)).await.is_err());
    there.cancel_task(CancelTaskParams::new(&held)).await.unwrap();
    let cancelled = poll_until(&there, &held, |task| task.status().is_terminal()).await;
    assert_eq!(cancelled.status(), TaskStatus::Cancelled);
    wait_for_count(&fleet.holds.cancelled, 1).await;
    assert_eq!(here.get_task(GetTaskParams::new(&held)).await.unwrap().task.status(), TaskStatus::Cancelled);
    for client in [here, there, root] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_call_that_needs_approval_is_confirmed_within_the_call_not_run_as_a_task() {
    let fleet = Fleet::start(&[("MCP_TASK_AFTER_SECONDS", "0")]).await;
    let (mut handler, _changes) = Agreeable::new();
    handler.tasks = true;
    let client = fleet.connect(handler, "ada", "", recent()).await;
    let request =
        CallToolRequestParams::new("bank__transfer").with_arguments(arguments(json!({"to": "carol", "cents": 5})));
    let first = client.call_tool_once(request).await.unwrap();
    assert!(matches!(first, CallToolResponse::InputRequired(_)), "the confirmation comes first: {first:?}");
    // rmcp's call_tool answers the confirmation and retries; the approved call answers directly.
    let done = call(&client, "bank__transfer", json!({"to": "carol", "cents": 5})).await;
    assert_eq!(done.structured_content, Some(json!({"to": "carol", "cents": 5, "user_id": "ada"})));
    assert_eq!(fleet.bank_calls.count(), 1, "run once, after the confirmation");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn long_names_and_ids_do_not_flood_the_log() {
    let mut fleet = Fleet::start(&[]).await;
    let session = open_session(&fleet, "ada").await;
    let in_session = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    let long = "x".repeat(512 * 1024);
    // rmcp logs every error answer at `warn`: the unknown name is shown cut to 80 characters.
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": long, "arguments": {}}});
    let (status, body) = post_raw(&fleet, &in_session, call).await;
    assert_eq!(status, 200);
    assert!(body.contains("no tool named `xxx") && body.len() < 4096, "{}", &body[..body.len().min(500)]);
    // A long id is refused before rmcp reads it, naming the budget, in a session and stateless.
    let stateless = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "nope__x")];
    for headers in [&in_session[..], &stateless[..]] {
        let call = json!({"jsonrpc": "2.0", "id": long, "method": "tools/call", "params": {"name": "nope__x"}});
        let (status, body) = post_raw(&fleet, headers, call).await;
        assert_eq!(status, 400, "{}", &body[..body.len().min(500)]);
        assert!(body.contains("MAX_ID_BYTES"), "{body}");
    }
    fleet.orchestrator.terminate();
    let longest = fleet.orchestrator.logs().iter().map(String::len).max().unwrap_or_default();
    assert!(longest < 16 * 1024, "a log line of {longest} bytes");
}
