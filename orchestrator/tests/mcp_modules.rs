//! MCP servers as modules of the fleet, through the real orchestrator
//! binary: the SDK's demo module (`module-sdk/examples/demo.rs`) is
//! configured *as an MCP server*, once over streamable HTTP (its own `/mcp`)
//! and once as a stdio child process (`--stdio`); its tools are listed in
//! every format and called through the orchestrator's `/execute` and its
//! own `/mcp` (with the `rmcp` client), while the contract tests still pass
//! on the module's own `/execute`. Then what can go wrong: the server going
//! away (and coming back), dying during a call, restarted into a process
//! that never answers the handshake, a server that never answers, a stdio
//! server's environment (its `env` and the basic variables, no secrets, no
//! inherited descriptor), a
//! `tools/list` over `MAX_MANIFEST_BYTES`; and with a server
//! written by hand, `notifications/tools/list_changed` and a call that
//! never ends.

mod common;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::{Body, Bytes};
use axum::response::IntoResponse;
use axum::{Json, Router};
use common::{HungServer, ModuleServer, OrchestratorProcess, free_port};
use contract_tests::{Level, RunReport, SuiteOptions, check_module};
use orchestrator::providers::ToolFormat;
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use test_support::{Process, built_binary, error_kind};
use tokio::sync::broadcast;

const TOKEN: &str = "fleet-test-token";

/// The demo module on a free port, guarded by [`TOKEN`].
fn start_demo() -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("SERVICE_AUTH_TOKEN", TOKEN).env("RUST_LOG", "warn");
    Process::start(command)
}

/// The demo's MCP server table: `where_` (`url` or `command`) plus the
/// permissions the demo's own manifest gives (MCP carries none).
fn demo_entry(where_: Value) -> Value {
    let mut entry = json!({
        "permission": "guest",
        "tools": {"plan_trip": {"permission": "user"}, "explode": {"permission": "admin", "requires_approval": true}}
    });
    entry.as_object_mut().unwrap().extend(where_.as_object().unwrap().clone());
    entry
}

async fn execute(orchestrator: &OrchestratorProcess, tool: &str, arguments: Value, permission: &str) -> Value {
    orchestrator
        .execute(json!({"tool_name": tool, "arguments": arguments, "user_id": "u1", "user_permission": permission}))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_module_joins_the_fleet_as_an_mcp_server() {
    let demo = start_demo();
    let endpoint = format!("mcp+{}/mcp", demo.url());
    let entry = demo_entry(json!({"url": endpoint, "bearer_token": TOKEN}));
    let services = json!({ "demo": entry }).to_string();
    let orchestrator = OrchestratorProcess::start(&[("PORT", "0"), ("MODULE_SERVICES", &services)]);

    let status = orchestrator.wait_for_module("demo", "up", Duration::from_secs(20)).await;
    assert_eq!(status["url"], endpoint, "the URL as configured, without the token");
    assert_eq!(status["tool_count"], 4);
    assert!(!status.to_string().contains(TOKEN));

    assert_eq!(orchestrator.tool_names("permission=user").await, ["demo.greet", "demo.plan_trip", "demo.sleep"]);
    assert_eq!(orchestrator.tool_names("permission=admin").await.len(), 4, "explode needs admin");
    for format in ToolFormat::ALL {
        let listed = orchestrator.get(&format!("/tools?format={}&permission=user", format.as_str())).await;
        let text = listed.to_string();
        assert!(
            text.contains("greet") && text.contains("plan_trip") && !text.contains("explode"),
            "{format:?}: {text}"
        );
    }
    let raw = orchestrator.get("/tools?permission=user").await;
    assert_eq!(
        raw[0]["input_schema"]["properties"]["name"]["type"], "string",
        "the input schema as the server sent it"
    );

    let greeting = execute(&orchestrator, "demo.greet", json!({"name": "Ann", "excitement": 2}), "guest").await;
    assert_eq!(greeting["success"], true, "{greeting}");
    assert_eq!(greeting["result"], json!({"text": "Hello, Ann!!"}));
    let trip = json!({"origin": {"name": "Lyon"}, "stops": [{"name": "Dijon"}]});
    let planned = execute(&orchestrator, "demo.plan_trip", trip, "user").await;
    assert_eq!(planned["result"]["planned_for"], "u1", "the user id reaches the server in _meta: {planned}");

    let pending = execute(&orchestrator, "demo.explode", json!({"message": "boom"}), "admin").await;
    assert!(
        pending["error"].as_str().unwrap().contains("waits for the user's approval"),
        "approval from the config: {pending}"
    );
    let approved = json!({"tool_name": "demo.explode", "arguments": {"message": "boom"}, "user_permission": "admin", "approved": true});
    let failed = orchestrator.execute(approved).await;
    assert_eq!((failed["success"].clone(), error_kind(&failed)), (json!(false), "execution_failed"), "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("internal error"), "{failed}");
    let invalid = execute(&orchestrator, "demo.greet", json!({"excitement": 9}), "guest").await;
    assert_eq!(error_kind(&invalid), "invalid_arguments", "{invalid}");
    let refused = execute(&orchestrator, "demo.explode", json!({"message": "boom"}), "user").await;
    assert_eq!(error_kind(&refused), "permission_denied", "{refused}");
    let slow = execute(&orchestrator, "demo.sleep", json!({"millis": 5000}), "guest").await;
    assert_eq!(error_kind(&slow), "execution_failed", "the server's own timeout is a failed call: {slow}");
    assert!(slow["error"].as_str().unwrap().contains("timeout"), "{slow}");

    // The module itself still keeps the contract on its own /execute.
    let options = SuiteOptions {
        token: Some(TOKEN.to_owned()),
        read_only: false,
        user_id: "contract-tests-user".to_owned(),
        sample_url: "http://127.0.0.1:9/".to_owned(),
        level: Level::Full,
        budgets: contract_tests::Budgets::default(),
    };
    let report = check_module(&demo.url(), &options).await.unwrap();
    assert!(report.passed(), "{}", RunReport::new(vec![report.clone()]).to_text());

    // The whole way: module /mcp -> the orchestrator's MCP client -> the orchestrator's own /mcp.
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp?permission=user&user_id=u2", orchestrator.url));
    let client = ().serve(test_support::mcp_client::transport(config)).await.expect("connected to /mcp");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["demo__greet", "demo__plan_trip", "demo__sleep"]);
    let arguments = |value: Value| value.as_object().unwrap().clone();
    let greeting = client
        .call_tool(CallToolRequestParams::new("demo__greet").with_arguments(arguments(json!({"name": "Cy"}))))
        .await
        .unwrap();
    assert_eq!(greeting.structured_content, Some(json!({"text": "Hello, Cy"})), "{greeting:?}");
    let trip = arguments(json!({"origin": {"name": "Lyon"}, "stops": [{"name": "Dijon"}]}));
    let planned = client.call_tool(CallToolRequestParams::new("demo__plan_trip").with_arguments(trip)).await.unwrap();
    assert_eq!(planned.structured_content.unwrap()["planned_for"], "u2", "the caller's user id, all the way");
    let failed = client
        .call_tool(CallToolRequestParams::new("demo__sleep").with_arguments(arguments(json!({"millis": 5000}))))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true), "{failed:?}");
    client.cancel().await.unwrap();

    // The server goes away: calls are unavailable, the module is shown cached with why.
    let mut demo = demo;
    demo.kill();
    let gone = execute(&orchestrator, "demo.greet", json!({"name": "Ann"}), "guest").await;
    assert_eq!(error_kind(&gone), "unavailable", "{gone}");
    let cached = orchestrator.wait_for_module("demo", "cached", Duration::from_secs(10)).await;
    assert!(cached["last_error"].as_str().unwrap().contains("127.0.0.1"), "{cached}");
    assert_eq!(orchestrator.tool_names("permission=user").await.len(), 3, "its tools stay listed from the cache");
}

/// The ids of every process whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|children| children.split_whitespace().filter_map(|id| id.parse().ok()).collect::<Vec<_>>())
        .collect()
}

/// Calls `tool` until it succeeds, or panics after `within`.
async fn wait_for_success(orchestrator: &OrchestratorProcess, tool: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let result = execute(orchestrator, tool, json!({"name": "Bo"}), "guest").await;
        if result["success"] == true {
            return result;
        }
        assert!(Instant::now() < deadline, "{tool} never succeeded: {result}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_from_the_toml_file_is_started_restarted_and_shown() {
    let demo = built_binary("examples/demo");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let config = format!(
        r#"
        [module_services.local]
        command = [{demo:?}, "--stdio"]
        env = {{ RUST_LOG = "warn" }}
        permission = "guest"
        [module_services.local.tools.explode]
        permission = "admin"
        "#,
        demo = demo.display().to_string()
    );
    file.write_all(config.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap();
    let orchestrator = OrchestratorProcess::start(&[("PORT", "0"), ("ORCHESTRATOR_CONFIG", path)]);

    let status = orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    assert_eq!(status["url"], format!("mcp+stdio:{}", demo.display()));
    let greeting = wait_for_success(&orchestrator, "local.greet", Duration::from_secs(5)).await;
    assert_eq!(greeting["result"], json!({"text": "Hello, Bo"}));

    // The server dies: it is started again, and calls work again.
    let children = children_of(orchestrator.pid());
    assert_eq!(children.len(), 1, "one stdio server: {children:?}");
    Command::new("kill").args(["-9", &children[0].to_string()]).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let result = execute(&orchestrator, "local.greet", json!({"name": "Bo"}), "guest").await;
        let now = children_of(orchestrator.pid());
        if result["success"] == true && now.len() == 1 && now != children {
            break;
        }
        assert!(result["success"] == true || error_kind(&result) == "unavailable", "{result}");
        assert!(Instant::now() < deadline, "never restarted: {result}, children {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    orchestrator.wait_for_module("local", "up", Duration::from_secs(10)).await;

    // The server dies during a call: the call fails as unavailable at once,
    // not as a timeout when its time is up.
    let orchestrator = Arc::new(orchestrator);
    let sleeping = {
        let orchestrator = Arc::clone(&orchestrator);
        tokio::spawn(async move { execute(&orchestrator, "local.sleep", json!({"millis": 900}), "guest").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let server = children_of(orchestrator.pid());
    Command::new("kill").args(["-9", &server[0].to_string()]).status().unwrap();
    let result = sleeping.await.unwrap();
    assert_eq!(error_kind(&result), "unavailable", "{result}");
    wait_for_success(&orchestrator, "local.greet", Duration::from_secs(10)).await;
    let mut orchestrator = Arc::into_inner(orchestrator).expect("the call's task has ended");

    // The orchestrator stops: its stdio server stops with it.
    let server = children_of(orchestrator.pid())[0];
    assert!(orchestrator.terminate().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{server}/stat")).is_ok_and(|stat| !stat.contains(") Z ")) {
        assert!(Instant::now() < deadline, "the stdio server {server} outlived the orchestrator");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_gets_its_env_and_the_basic_variables_not_the_orchestrators_secrets_or_descriptors() {
    let demo = built_binary("examples/demo");
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("env");
    let script =
        format!("env > {seen:?}; if [ -e /proc/$$/fd/9 ]; then echo HELD_FD=9 >> {seen:?}; fi; exec {demo:?} --stdio");
    let config = format!(
        "[module_services.local]\ncommand = [\"sh\", \"-c\", {script:?}]\nenv = {{ GIVEN = \"to the server\" }}\npermission = \"guest\"\n"
    );
    let file = dir.path().join("orchestrator.toml");
    std::fs::write(&file, config).unwrap();
    // The orchestrator inherits descriptor 9 without close-on-exec, as from a launcher.
    let held = dir.path().join("held");
    let launcher = format!("exec \"$0\" \"$@\" 9>>{held:?}");
    let orchestrator = OrchestratorProcess::start_under(
        &["sh", "-c", &launcher],
        &[
            ("PORT", "0"),
            ("ORCHESTRATOR_CONFIG", file.to_str().unwrap()),
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ("HOME", dir.path().to_str().unwrap()),
            ("SERVICE_AUTH_TOKEN", "the-fleets-module-token"),
            ("CLOUD_SECRET_KEY", "in-the-orchestrators-environment"),
        ],
    );
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    wait_for_success(&orchestrator, "local.greet", Duration::from_secs(5)).await;

    let env = std::fs::read_to_string(&seen).unwrap();
    let names: Vec<&str> = env.lines().filter_map(|line| line.split_once('=').map(|(name, _)| name)).collect();
    for kept in ["PATH=/usr/local/bin:/usr/bin:/bin", &format!("HOME={}", dir.path().display()), "GIVEN=to the server"]
    {
        assert!(env.lines().any(|line| line == kept), "{kept} missing from the server's environment: {names:?}");
    }
    for secret in ["SERVICE_AUTH_TOKEN", "CLOUD_SECRET_KEY", "ORCHESTRATOR_CONFIG", "PORT", "HELD_FD"] {
        assert!(!names.contains(&secret), "{secret} leaked to the server: {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_that_hangs_when_restarted_fails_calls_within_the_discovery_timeout() {
    let demo = built_binary("examples/demo");
    let started = tempfile::tempdir().unwrap();
    let flag = started.path().join("started");
    // The first start is the demo; every later one starts and never speaks.
    let script = format!("if [ -e {flag:?} ]; then exec sleep 600; fi; touch {flag:?}; exec {demo:?} --stdio");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let config = format!("[module_services.local]\ncommand = [\"sh\", \"-c\", {script:?}]\npermission = \"guest\"\n");
    file.write_all(config.as_bytes()).unwrap();
    let path = file.path().to_str().unwrap();
    let orchestrator =
        OrchestratorProcess::start(&[("PORT", "0"), ("ORCHESTRATOR_CONFIG", path), ("DISCOVERY_TIMEOUT", "3")]);
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    wait_for_success(&orchestrator, "local.greet", Duration::from_secs(5)).await;

    let children = children_of(orchestrator.pid());
    Command::new("kill").args(["-9", &children[0].to_string()]).status().unwrap();
    // Every call fails as unavailable, within DISCOVERY_TIMEOUT when it waits
    // for the session to open, not as a timeout after the tool's 30 s; an
    // attempt to open it (a call's or a discovery's, spaced by the restart
    // backoff) gives up after DISCOVERY_TIMEOUT and says so.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let result = execute(&orchestrator, "local.greet", json!({"name": "Bo"}), "guest").await;
        assert_eq!(error_kind(&result), "unavailable", "{result}");
        let status = orchestrator.wait_for_module("local", "cached", Duration::from_secs(10)).await;
        let said = [result["error"].as_str(), status["last_error"].as_str()];
        if said.iter().flatten().any(|text| text.contains("did not open (start and handshake) within 3 s")) {
            break;
        }
        assert!(Instant::now() < deadline, "no attempt gave up on the handshake: {result} {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_times_out_a_huge_tool_list_is_refused_and_credentials_stay_hidden() {
    let hung = HungServer::start();
    let demo = start_demo();
    let services = json!({
        "silent": format!("mcp+{}/mcp", hung.url()),
        "refused": format!("mcp+http://user:s3cret@127.0.0.1:{}/mcp?key=s3cret", free_port()),
        "huge": {"url": format!("mcp+{}/mcp", demo.url()), "bearer_token": TOKEN},
    })
    .to_string();
    let orchestrator = OrchestratorProcess::start(&[
        ("PORT", "0"),
        ("MODULE_SERVICES", &services),
        ("DISCOVERY_TIMEOUT", "0.5"),
        ("MAX_MANIFEST_BYTES", "2000"),
    ]);
    let silent = orchestrator.wait_for_module("silent", "down", Duration::from_secs(10)).await;
    assert!(silent["last_error"].as_str().unwrap().contains("DISCOVERY_TIMEOUT"), "{silent}");
    let huge = orchestrator.wait_for_module("huge", "down", Duration::from_secs(10)).await;
    assert!(huge["last_error"].as_str().unwrap().contains("MAX_MANIFEST_BYTES"), "{huge}");
    let refused = orchestrator.wait_for_module("refused", "down", Duration::from_secs(10)).await;
    assert!(refused["last_error"].is_string() && !refused.to_string().contains("s3cret"), "{refused}");
    // Only rmcp's own transport errors print the URL as given (README: credentials belong in the table).
    let leaks: Vec<String> = orchestrator
        .logs()
        .into_iter()
        .filter(|line| line.contains("s3cret") && !line.contains(r#""target":"rmcp::"#))
        .collect();
    assert!(leaks.is_empty(), "no credentials in the orchestrator's own logs: {leaks:?}");
    let call = execute(&orchestrator, "silent.anything", json!({}), "guest").await;
    assert_eq!(error_kind(&call), "unavailable", "{call}");
}

/// A hand-written MCP server (2025-11-25, with a session): `tools/list`
/// lists `first`, then `first` and `second` once `POST /change` was called,
/// then only `second` after another, then a JSON-RPC error after a third;
/// each change also sends
/// `notifications/tools/list_changed` on the session's event stream;
/// `tools/call` of `second` never answers, of anything else answers "done".
fn changing_server() -> ModuleServer {
    let version = Arc::new(AtomicUsize::new(0));
    let (changed, _) = broadcast::channel::<()>(4);
    let listed = Arc::clone(&version);
    let post = move |Json(request): Json<Value>| {
        let version = listed.load(Ordering::SeqCst);
        async move {
            let tool = |name: &str| json!({"name": name, "description": "A tool.", "inputSchema": {"type": "object"}});
            let result = match request["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": "changing", "version": "1.0.0"}
                }),
                Some("tools/list") if version == 0 => json!({"tools": [tool("first")]}),
                Some("tools/list") if version == 1 => json!({"tools": [tool("first"), tool("second")]}),
                Some("tools/list") if version == 2 => json!({"tools": [tool("second")]}),
                Some("tools/list") => {
                    let error = json!({"code": -32603, "message": "internal error: the tool index is rebuilding"});
                    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "error": error});
                    return ([("mcp-session-id", "session-1")], Json(answer)).into_response();
                }
                Some("tools/call") if request["params"]["name"] == "second" => std::future::pending().await,
                Some("tools/call") => json!({"content": [{"type": "text", "text": "done"}]}),
                _ => return StatusCode::ACCEPTED.into_response(),
            };
            let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
            ([("mcp-session-id", "session-1")], Json(answer)).into_response()
        }
    };
    let events = changed.clone();
    let get = move || {
        let receiver = events.subscribe();
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.ok()?;
            let event = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
            Some((Ok::<_, std::convert::Infallible>(Bytes::from(event)), receiver))
        });
        std::future::ready(([("content-type", "text/event-stream")], Body::from_stream(stream)))
    };
    let change = move || {
        version.fetch_add(1, Ordering::SeqCst);
        let _ = changed.send(());
        std::future::ready(StatusCode::NO_CONTENT)
    };
    let router = Router::new()
        .route("/mcp", axum::routing::post(post).get(get).delete(|| std::future::ready(StatusCode::OK)))
        .route("/change", axum::routing::post(change));
    ModuleServer::start(router)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_discovers_again_a_call_past_its_time_is_a_timeout_and_gone_tools_leave_metrics() {
    let server = changing_server();
    let services = json!({"changing": format!("mcp+{}/mcp", server.url())}).to_string();
    let orchestrator =
        OrchestratorProcess::start(&[("PORT", "0"), ("MODULE_SERVICES", &services), ("DEFAULT_TOOL_TIMEOUT", "1")]);
    orchestrator.wait_for_module("changing", "up", Duration::from_secs(20)).await;
    assert_eq!(orchestrator.tool_names("permission=user").await, ["changing.first"]);
    assert!(orchestrator.tool_names("permission=guest").await.is_empty(), "MCP tools require `user` by default");

    // A text answer is that text everywhere: /execute's result, a model's tool message, the /mcp text block.
    let done = execute(&orchestrator, "changing.first", json!({}), "user").await;
    assert_eq!(done["result"], "done", "{done}");
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "changing__first", "arguments": "{}"}}
    ]});
    let request = json!({"user_id": "u1", "user_permission": "user", "message": message});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &request).await;
    assert_eq!((status, answer[0]["content"].clone()), (200, json!("done")), "{answer}");
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp?permission=user", orchestrator.url));
    let client = ().serve(test_support::mcp_client::transport(config)).await.expect("connected to /mcp");
    let relayed = client.call_tool(CallToolRequestParams::new("changing__first")).await.unwrap();
    let texts: Vec<&str> = relayed.content.iter().filter_map(|block| Some(block.as_text()?.text.as_str())).collect();
    assert_eq!((texts, relayed.structured_content.clone()), (vec!["done"], None), "plain text, not JSON: {relayed:?}");
    client.cancel().await.unwrap();
    let early = execute(&orchestrator, "changing.second", json!({}), "user").await;
    assert_eq!(error_kind(&early), "unknown_tool", "not listed yet: {early}");

    // The server says its tools changed: listed at once (REFRESH_INTERVAL is 300 s).
    reqwest::Client::new().post(format!("{}/change", server.url())).send().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while orchestrator.tool_names("permission=user").await != ["changing.first", "changing.second"] {
        assert!(Instant::now() < deadline, "the list change was not followed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hung = execute(&orchestrator, "changing.second", json!({}), "user").await;
    assert_eq!(error_kind(&hung), "timeout", "DEFAULT_TOOL_TIMEOUT ran out: {hung}");

    // `first` goes: its series leave /metrics, `second`'s stay.
    let first = r#"tool_calls_total{tool="changing.first",outcome="success"} 3"#;
    assert!(orchestrator.metrics().await.lines().any(|line| line == first), "counted at every door");
    reqwest::Client::new().post(format!("{}/change", server.url())).send().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while orchestrator.metrics().await.contains("changing.first") {
        assert!(Instant::now() < deadline, "a gone tool's series stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(orchestrator.tool_names("permission=user").await, ["changing.second"]);
    let text = orchestrator.metrics().await;
    assert!(text.contains(r#"tool_calls_total{tool="changing.second",outcome="timeout"} 1"#), "{text}");

    // `tools/list` answered with a JSON-RPC error is the MCP form of an error
    // status, not a refused manifest: the tools it had stay, shown `cached`.
    reqwest::Client::new().post(format!("{}/change", server.url())).send().await.unwrap();
    orchestrator.wait_for_module("changing", "cached", Duration::from_secs(10)).await;
    assert_eq!(orchestrator.tool_names("permission=user").await, ["changing.second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_are_reached_directly_whatever_proxy_the_environment_names() {
    let server = changing_server();
    let services = json!({"changing": format!("mcp+{}/mcp", server.url())}).to_string();
    // A proxy that refuses every connection: a client using it reaches nothing.
    let proxy = format!("http://127.0.0.1:{}", free_port());
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &services),
        ("HTTP_PROXY", &proxy),
        ("http_proxy", &proxy),
        ("ALL_PROXY", &proxy),
    ]);
    let status = orchestrator.wait_for_module("changing", "up", Duration::from_secs(20)).await;
    assert_eq!(status["tool_count"], 1, "{status}");
    let done = execute(&orchestrator, "changing.first", json!({}), "user").await;
    assert_eq!(done["result"], "done", "{done}");
}
