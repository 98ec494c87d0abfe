//! Whole-process MCP tests: the demo example module (`examples/demo.rs`)
//! runs as a real process and is driven by the official MCP client (`rmcp`),
//! over `/mcp` with both lifecycles (2025-11-25 `initialize`, 2026-07-28
//! `server/discover`) and over stdio (`--stdio`).

use std::process::Command;
use std::time::Duration;

use module_sdk::mcp::USER_ID_META_KEY;
use reqwest::StatusCode;
use rmcp::model::{CallToolRequestParams, CallToolResult, PaginatedRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, RunningService, serve_client_with_lifecycle};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use test_support::mcp_checks::{assert_matches_output_schema, text_of};
use test_support::{OtlpReceiver, Process, built_binary};

/// A demo module on a free port with `env`.
fn start_demo(env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env_remove("SERVICE_AUTH_TOKEN").envs(env.iter().copied());
    Process::start(command)
}

/// An MCP client of `demo`'s `/mcp`, with `token` as its bearer token.
async fn connect(
    demo: &Process,
    lifecycle: ClientLifecycleMode,
    token: Option<&str>,
) -> Result<RunningService<RoleClient, ()>, rmcp::service::ClientInitializeError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", demo.url()));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    serve_client_with_lifecycle((), test_support::mcp_client::transport(config), lifecycle).await
}

/// Both ways a client starts: the 2025-11-25 handshake and 2026-07-28 discovery.
fn lifecycles() -> [ClientLifecycleMode; 2] {
    [
        ClientLifecycleMode::Initialize,
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
    ]
}

async fn call(client: &RunningService<RoleClient, ()>, name: &'static str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments)).await.expect("a tool result")
}

/// The same work through the two lifecycles: list, then calls that succeed,
/// fail, panic and time out.
async fn exercise(client: &RunningService<RoleClient, ()>) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["greet", "plan_trip", "sleep", "explode"], "manifest order, without the module prefix");
    let greet = &tools[0];
    assert_eq!(greet.title.as_deref(), Some("Greet"));
    assert_eq!(greet.description.as_deref(), Some("Say hello to someone."));
    assert_eq!(greet.input_schema["properties"]["name"]["type"], "string");
    let hints = greet.annotations.clone().unwrap();
    assert_eq!(
        (hints.read_only_hint, hints.idempotent_hint, hints.destructive_hint),
        (Some(true), Some(true), Some(false))
    );
    assert_eq!(tools[3].annotations.clone().unwrap().destructive_hint, Some(true));

    let greeting = call(client, "greet", json!({"name": "Ann", "excitement": 2})).await;
    assert_eq!(greeting.structured_content, Some(json!({"text": "Hello, Ann!!"})));
    assert_matches_output_schema(greet, &greeting);
    let trip = call(client, "plan_trip", json!({"origin": {"name": "Lyon"}, "stops": [{"name": "Dijon"}]})).await;
    assert_matches_output_schema(&tools[1], &trip);
    assert_eq!(trip.structured_content.as_ref().unwrap()["planned_for"], Value::Null);
    let mut as_user = CallToolRequestParams::new("plan_trip")
        .with_arguments(json!({"origin": {"name": "Lyon"}, "stops": [{"name": "Dijon"}]}).as_object().unwrap().clone());
    as_user.meta = Some(Map::from_iter([(USER_ID_META_KEY.to_owned(), json!("u1"))]).into());
    let planned = client.call_tool(as_user).await.unwrap();
    assert_eq!(planned.structured_content.unwrap()["planned_for"], "u1", "the user id in _meta reaches the handler");

    let invalid = call(client, "greet", json!({"excitement": 9})).await;
    assert_eq!(invalid.is_error, Some(true));
    assert!(text_of(&invalid).contains("name") && text_of(&invalid).contains("excitement"), "{}", text_of(&invalid));
    let panicked = call(client, "explode", json!({"message": "boom"})).await;
    assert_eq!(panicked.is_error, Some(true));
    assert!(text_of(&panicked).contains("internal error"), "{}", text_of(&panicked));
    let slow = call(client, "sleep", json!({"millis": 5000})).await;
    assert_eq!(slow.is_error, Some(true));
    assert!(text_of(&slow).contains("timeout of 1 s"), "{}", text_of(&slow));

    let unknown = client.call_tool(CallToolRequestParams::new("demo.greet").with_arguments(Map::new())).await;
    let message = unknown.unwrap_err().to_string();
    assert!(message.contains("no tool named `demo.greet`") && message.contains("greet, plan_trip"), "{message}");
}

#[tokio::test]
async fn a_module_serves_its_tools_over_streamable_http_to_both_lifecycles() {
    let demo = start_demo(&[]);
    for lifecycle in lifecycles() {
        let client = connect(&demo, lifecycle, None).await.expect("connected");
        exercise(&client).await;
        client.cancel().await.unwrap();
    }
    assert!(demo.wait_for_log("tool handler panicked", Duration::from_secs(5)), "the panic is logged");
}

#[tokio::test]
async fn a_module_serves_mcp_on_stdio_when_started_with_the_flag() {
    let mut command = tokio::process::Command::new(built_binary("examples/demo"));
    command.arg("--stdio").env_remove("SERVICE_AUTH_TOKEN").env("RUST_LOG", "warn").env("RUST_BACKTRACE", "0");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("connected over stdio");
    let info = client.peer_info().expect("the server's answer to initialize");
    assert_eq!(info.server_info.as_ref().map(|server| server.name.as_str()), Some("demo"));
    exercise(&client).await;
    client.cancel().await.unwrap();
}

/// A demo module on stdio with `env`, driven line by line: messages are
/// written without waiting, answers read as they come.
struct StdioDemo {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<Value>,
}

impl StdioDemo {
    /// The demo, initialized (2025-11-25).
    fn start(env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(built_binary("examples/demo"))
            .arg("--stdio")
            .env_remove("SERVICE_AUTH_TOKEN")
            .env("RUST_LOG", "off")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(output) {
                let answer = serde_json::from_str(&line.unwrap()).unwrap();
                if sender.send(answer).is_err() {
                    break;
                }
            }
        });
        let mut demo = Self { input: child.stdin.take(), child, answers };
        demo.write(&[
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ]);
        assert_eq!(demo.answer()["id"], 0);
        demo
    }

    /// Writes `messages`, reading nothing.
    fn write(&mut self, messages: &[Value]) {
        for message in messages {
            self.write_bytes(format!("{message}\n").as_bytes());
        }
    }

    /// Writes `bytes` as they are, reading nothing.
    fn write_bytes(&mut self, bytes: &[u8]) {
        use std::io::Write;
        let input = self.input.as_mut().unwrap();
        input.write_all(bytes).unwrap();
        input.flush().unwrap();
    }

    /// The next answer; one that never comes (the module stalled) fails the test.
    fn answer(&self) -> Value {
        self.answers.recv_timeout(Duration::from_secs(60)).expect("an answer within a minute: the module stalled")
    }

    /// Closes standard input; the module then stops.
    fn close(mut self) {
        drop(self.input.take());
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for StdioDemo {
    /// A test that failed leaves no module behind (one that stalled never sees its input close).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools_call(id: u32, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// `answer` is the JSON-RPC error `code` for a line whose request could not
/// be told (no `id`: MCP's form of JSON-RPC's `"id": null`), with a message
/// that says `why`.
fn assert_refused(answer: &Value, code: i64, why: &str) {
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert_eq!(answer.get("id"), None, "{answer}");
    assert_eq!(answer["error"]["code"], code, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains(why), "{answer}");
}

/// `levels` arrays inside one another around `1`.
fn nested(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// rmcp's own transport answers nothing to a line that is not UTF-8 or not
/// JSON, or nests too deep to read, so the client would wait forever: each
/// gets one parse error saying why, and the request after them is answered.
#[test]
fn each_stdio_line_that_cannot_be_read_gets_one_parse_error_and_the_next_is_answered() {
    let mut demo = StdioDemo::start(&[]);
    demo.write_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\xff\"}\n");
    demo.write_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \n");
    // Valid JSON past the depth budget, and no request in it.
    demo.write_bytes(format!("{}\n", nested(200)).as_bytes());
    demo.write(&[tools_call(3, "greet", json!({"name": "Ann"}))]);
    assert_refused(&demo.answer(), -32700, "not valid UTF-8");
    assert_refused(&demo.answer(), -32700, "not valid JSON");
    assert_refused(&demo.answer(), -32700, "deeper than 127 levels");
    let answer = demo.answer();
    assert_eq!((&answer["id"], &answer["result"]["isError"]), (&json!(3), &json!(false)), "{answer}");
    demo.close();
}

/// A request that nests too deep is otherwise readable JSON: its id is read
/// (without nesting into the rest) and it is refused as that request, naming
/// the depth budget, as `/mcp` refuses such a body.
#[test]
fn a_stdio_request_nesting_too_deep_is_refused_by_its_id() {
    let mut demo = StdioDemo::start(&[]);
    // serde_json's Value reads no deeper than 128 levels itself, so the deep part goes in as text.
    let line = tools_call(4, "greet", json!({"name": "DEEP"})).to_string().replace("\"DEEP\"", &nested(200));
    demo.write_bytes(format!("{line}\n").as_bytes());
    demo.write(&[tools_call(5, "greet", json!({"name": "Ann"}))]);
    let refusal = demo.answer();
    assert_eq!(refusal["id"], 4, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(refusal["error"]["message"].as_str().unwrap().contains("deeper than 127 levels"), "{refusal}");
    assert_eq!(demo.answer()["id"], 5);
    demo.close();
}

/// A line over `MAX_BODY_BYTES` is skipped as its bytes come (the module
/// never holds more than the limit of it), its several MiB read to its end,
/// then refused naming the limit, and the request after it is answered: one
/// answer for the line, however long.
#[test]
fn a_stdio_line_over_max_body_bytes_is_skipped_refused_and_the_next_answered() {
    let mut demo = StdioDemo::start(&[("MAX_BODY_BYTES", "4096")]);
    let start = tools_call(6, "greet", json!({"name": "a".repeat(64 * 1024)})).to_string();
    demo.write_bytes(&start.as_bytes()[..60 * 1024]);
    let rest = "a".repeat(1024 * 1024);
    for _ in 0..8 {
        demo.write_bytes(rest.as_bytes());
    }
    demo.write_bytes(b"\"}}}\n");
    assert_refused(&demo.answer(), -32700, "longer than MAX_BODY_BYTES (4096 bytes)");
    demo.write(&[tools_call(7, "greet", json!({"name": "Ann"}))]);
    let answer = demo.answer();
    assert_eq!((&answer["id"], &answer["result"]["isError"]), (&json!(7), &json!(false)), "{answer}");
    demo.close();
}

/// A client writing many calls without reading the answers makes the module
/// hold no more than `MAX_CONNECTIONS` of them: it reads no further line
/// until one is answered, so at most that many run at once (each `sleep`
/// answer says how many were running when it started), and all are answered.
#[test]
fn stdio_calls_written_without_reading_run_at_most_max_connections_at_once() {
    let mut demo = StdioDemo::start(&[("MAX_CONNECTIONS", "3")]);
    let calls = 120;
    let messages: Vec<Value> = (1..=calls).map(|id| tools_call(id, "sleep", json!({"millis": 10}))).collect();
    demo.write(&messages);
    let mut answered = Vec::new();
    let mut most_running = 0;
    for _ in 1..=calls {
        let answer = demo.answer();
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        most_running = most_running.max(answer["result"]["structuredContent"]["running"].as_u64().unwrap());
        answered.push(answer["id"].as_u64().unwrap());
    }
    answered.sort_unstable();
    assert_eq!(answered, (1..=u64::from(calls)).collect::<Vec<_>>(), "every call is answered once");
    assert!(most_running <= 3, "{most_running} sleep calls ran at once, over MAX_CONNECTIONS (3)");
    demo.close();
}

/// rmcp writes no answer to a cancelled call, so the cancellation itself
/// gives the call's slot back: with one slot, the call after a cancelled one
/// is still read and answered.
#[test]
fn a_cancelled_stdio_call_frees_its_slot() {
    let mut demo = StdioDemo::start(&[("MAX_CONNECTIONS", "1")]);
    demo.write(&[
        tools_call(1, "sleep", json!({"millis": 60_000})),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        tools_call(2, "greet", json!({"name": "Ann"})),
    ]);
    let answer = demo.answer();
    assert_eq!(answer["id"], 2, "the cancelled call is not answered: {answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    demo.close();
}

#[tokio::test]
async fn a_stdio_module_flushes_its_call_spans_when_the_client_closes_it() {
    let receiver = OtlpReceiver::start();
    let mut command = tokio::process::Command::new(built_binary("examples/demo"));
    command
        .arg("--stdio")
        .env_remove("SERVICE_AUTH_TOKEN")
        .env("RUST_LOG", "warn")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        // Batches wait 10 minutes: the span can only arrive through the flush at the end.
        .env("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("connected over stdio");
    call(&client, "greet", json!({"name": "Ann"})).await;
    client.cancel().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while receiver.spans().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the call's span never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let spans = receiver.spans();
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert!(spans[0].name.contains("greet"), "{spans:?}");
}

#[tokio::test]
async fn tools_list_pages_in_a_stable_order() {
    let demo = start_demo(&[("MCP_PAGE_SIZE", "3")]);
    let client = connect(&demo, ClientLifecycleMode::Initialize, None).await.unwrap();
    let first = client.list_tools(None).await.unwrap();
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["greet", "plan_trip", "sleep"]);
    let cursor = first.next_cursor.clone().expect("a second page");
    let second = client.list_tools(Some(PaginatedRequestParams::default().with_cursor(Some(cursor)))).await.unwrap();
    assert_eq!(second.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), ["explode"]);
    assert_eq!(second.next_cursor, None);
    let again = client.list_tools(None).await.unwrap();
    assert_eq!((again.tools, again.next_cursor), (first.tools, first.next_cursor), "the same page every time");
    let bad = client.list_tools(Some(PaginatedRequestParams::default().with_cursor(Some("nope".into())))).await;
    assert!(bad.unwrap_err().to_string().contains("cursor"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_service_token_guards_mcp_as_it_guards_execute() {
    let demo = start_demo(&[("SERVICE_AUTH_TOKEN", "s3cret")]);
    assert!(connect(&demo, ClientLifecycleMode::Initialize, None).await.is_err(), "no token");
    assert!(connect(&demo, ClientLifecycleMode::Initialize, Some("wrong")).await.is_err(), "a wrong token");
    let client = connect(&demo, ClientLifecycleMode::Initialize, Some("s3cret")).await.expect("the right token");
    assert_eq!(client.list_all_tools().await.unwrap().len(), 4);
    client.cancel().await.unwrap();
    let (status, _) = post_raw(&demo, &[], list_request()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// A `tools/list` request as a 2025-11-25 client sends it after `initialize`.
fn list_request() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
}

/// POSTs `body` to `/mcp` with the headers a client sends plus `headers`.
async fn post_raw(demo: &Process, headers: &[(&str, &str)], body: Value) -> (StatusCode, String) {
    post_text(demo, headers, body.to_string()).await
}

/// POSTs the JSON text `body` to `/mcp` as [`post_raw`] does.
async fn post_text(demo: &Process, headers: &[(&str, &str)], body: String) -> (StatusCode, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", demo.url()))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test]
async fn foreign_origins_and_unknown_protocol_versions_are_refused() {
    let demo = start_demo(&[("MCP_ALLOWED_ORIGINS", "https://app.example.com")]);
    let version = ("mcp-protocol-version", "2025-11-25");
    let (status, body) = post_raw(&demo, &[version], list_request()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("plan_trip"), "{body}");
    let (status, body) = post_raw(&demo, &[version, ("origin", "https://app.example.com")], list_request()).await;
    assert_eq!(status, StatusCode::OK, "a listed origin: {body}");
    for origin in ["https://evil.example", "http://app.example.com", "null"] {
        let (status, _) = post_raw(&demo, &[version, ("origin", origin)], list_request()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}");
    }
    for unknown in ["1999-01-01", "latest"] {
        let (status, body) = post_raw(&demo, &[("mcp-protocol-version", unknown)], list_request()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{unknown}: {body}");
    }
    // Without a list, every Origin is foreign: no web page can drive a module.
    let closed = start_demo(&[]);
    let (status, _) = post_raw(&closed, &[version, ("origin", "http://localhost:3000")], list_request()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// rmcp logs the id of every request it answers with an error: one over
/// `MAX_ID_BYTES` is refused before rmcp reads it, however its name is
/// written (serde decodes `"\u0069d"` to `id`).
#[tokio::test]
async fn a_long_id_is_refused_naming_its_budget_however_its_name_is_written() {
    let demo = start_demo(&[]);
    let stateless = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "nope")];
    let long = "A".repeat(64 * 1024);
    for name in ["id", "\\u0069d", "\\u0069\\u0064"] {
        let body = format!(r#"{{"jsonrpc":"2.0","{name}":"{long}","method":"tools/call","params":{{"name":"nope"}}}}"#);
        let (status, answer) = post_text(&demo, &stateless, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {}", &answer[..answer.len().min(300)]);
        assert!(answer.contains("MAX_ID_BYTES"), "{name}: {}", &answer[..answer.len().min(300)]);
    }
}

/// As `/mcp` does, `--stdio` refuses a long id whose name is escaped.
#[test]
fn a_stdio_request_with_a_long_escaped_id_is_refused_naming_its_budget() {
    let long = "A".repeat(64 * 1024);
    let mut stdio = StdioDemo::start(&[]);
    stdio.write_bytes(format!("{{\"jsonrpc\":\"2.0\",\"\\u0069d\":\"{long}\",\"method\":\"ping\"}}\n").as_bytes());
    assert_refused(&stdio.answer(), -32600, "MAX_ID_BYTES");
    stdio.close();
}

#[tokio::test]
async fn the_openapi_document_lists_mcp() {
    let demo = start_demo(&[]);
    let document: Value = reqwest::get(format!("{}/openapi.json", demo.url())).await.unwrap().json().await.unwrap();
    let mcp = &document["paths"]["/mcp"]["post"];
    assert!(mcp["requestBody"]["content"]["application/json"].is_object(), "{mcp}");
    assert!(mcp["responses"]["403"].is_object(), "{mcp}");
}
