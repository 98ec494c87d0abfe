//! MCP servers that misbehave, against the real orchestrator binary as
//! their client: each test's server is written by hand to misbehave one
//! way, and the orchestrator bounds what it costs and says so.

mod common;

use std::convert::Infallible;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::response::IntoResponse;
use axum::{Json, Router};
use common::{ModuleServer, OrchestratorProcess};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::process_tree::descendants;
use test_support::{built_binary, error_kind};

/// What a hand-written server saw of the orchestrator.
#[derive(Default)]
struct Seen {
    /// `tools/list` requests.
    lists: AtomicUsize,
    /// `GET /mcp`: event streams opened.
    streams: AtomicUsize,
    /// Answers to the server's own requests.
    answers: AtomicUsize,
    /// Set by a server's event stream when it has changed the tools.
    changed: AtomicBool,
}

/// How a hand-written MCP server (2025-11-25, with a session) behaves
/// beyond its handshake.
struct Behaviour {
    /// The `tools/list` result for a request's `params`.
    list: fn(&Value, &Seen) -> Value,
    /// The body of each `GET /mcp`, an event stream.
    events: fn(Arc<Seen>) -> Body,
    /// Whether the client's answers to the server's requests are never answered.
    hold_answers: bool,
    /// Whether every `tools/list` after the first is never answered.
    hold_lists: bool,
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "A tool.", "inputSchema": {"type": "object"}})
}

/// The size of the instructions every hand-written server gives.
const INSTRUCTIONS_BYTES: usize = 3000;

/// The size of the text `tools/call` of a tool named `big` answers.
const BIG_ANSWER_BYTES: usize = 200_000;

/// `{"tools": [first]}`.
fn one_tool(_params: &Value, _seen: &Seen) -> Value {
    json!({"tools": [tool("first")]})
}

/// An event stream of `events`, one chunk of text at a time.
fn stream_of(events: impl futures::Stream<Item = String> + Send + 'static) -> Body {
    Body::from_stream(events.map(|text| Ok::<_, Infallible>(Bytes::from(text))))
}

/// Serves `behaviour` on a free port.
fn start(behaviour: Behaviour) -> (ModuleServer, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let behaviour = Arc::new(behaviour);
    let (posted, gotten) = (Arc::clone(&seen), Arc::clone(&seen));
    let for_posts = Arc::clone(&behaviour);
    let post = move |Json(request): Json<Value>| {
        let (seen, behaviour) = (Arc::clone(&posted), Arc::clone(&for_posts));
        async move {
            let result = match request["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": "hostile", "version": "1.0.0"},
                    "instructions": "i".repeat(INSTRUCTIONS_BYTES)
                }),
                Some("tools/list") => {
                    if seen.lists.fetch_add(1, Ordering::SeqCst) > 0 && behaviour.hold_lists {
                        std::future::pending::<()>().await;
                    }
                    (behaviour.list)(&request["params"], &seen)
                }
                Some("tools/call") if request["params"]["name"] == "big" => {
                    json!({"content": [{"type": "text", "text": "x".repeat(BIG_ANSWER_BYTES)}]})
                }
                Some("tools/call") if request["params"]["name"] == "delete-repo" => {
                    json!({"content": [{"type": "text", "text": "the repository is gone"}]})
                }
                Some("tools/call") => json!({"content": [{"type": "text", "text": "done"}]}),
                Some(_) => return StatusCode::ACCEPTED.into_response(),
                None => {
                    seen.answers.fetch_add(1, Ordering::SeqCst);
                    if behaviour.hold_answers {
                        std::future::pending::<()>().await;
                    }
                    return StatusCode::ACCEPTED.into_response();
                }
            };
            let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
            ([("mcp-session-id", "session-1")], Json(answer)).into_response()
        }
    };
    let get = move || {
        gotten.streams.fetch_add(1, Ordering::SeqCst);
        let body = (behaviour.events)(Arc::clone(&gotten));
        std::future::ready(([("content-type", "text/event-stream")], body))
    };
    let router =
        Router::new().route("/mcp", axum::routing::post(post).get(get).delete(|| std::future::ready(StatusCode::OK)));
    (ModuleServer::start(router), seen)
}

/// The orchestrator with the server at `url` as module `hostile`, and `env`.
fn orchestrator_for(url: &str, env: &[(&str, &str)]) -> OrchestratorProcess {
    let services = json!({"hostile": format!("mcp+{url}/mcp")}).to_string();
    let mut settings = vec![("MODULE_SERVICES", services.as_str())];
    settings.extend_from_slice(env);
    OrchestratorProcess::start(&settings)
}

/// Waits until the module's `last_error` contains `text`; panics after `within`.
async fn wait_for_error(orchestrator: &OrchestratorProcess, text: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let status = orchestrator.module("hostile").await;
        if status["last_error"].as_str().is_some_and(|error| error.contains(text)) {
            return status;
        }
        assert!(Instant::now() < deadline, "the module never said `{text}`: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Endless `ping` requests, each with an id of its own, as fast as they can be sent.
fn ping_flood(_seen: Arc<Seen>) -> Body {
    let batches = futures::stream::iter(0u64..).map(|batch| {
        let ids = batch * 100..(batch + 1) * 100;
        ids.map(|id| format!("data: {{\"jsonrpc\":\"2.0\",\"id\":\"p{id}\",\"method\":\"ping\"}}\n\n")).collect()
    });
    stream_of(batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_flooding_its_own_requests_loses_its_session_naming_the_budget() {
    let (server, _) = start(Behaviour { list: one_tool, events: ping_flood, hold_answers: true, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[("MAX_MCP_SERVER_REQUESTS", "8")]);
    let status = wait_for_error(&orchestrator, "MAX_MCP_SERVER_REQUESTS (8)", Duration::from_secs(20)).await;
    assert!(status["last_error"].as_str().unwrap().contains("unanswered"), "{status}");
    assert_eq!(orchestrator.get("/health").await["status"], "ok");
}

/// `tools/list`: `first`, and `second` once the event stream has changed the tools.
fn changing_list(_params: &Value, seen: &Seen) -> Value {
    match seen.changed.load(Ordering::SeqCst) {
        false => json!({"tools": [tool("first")]}),
        true => json!({"tools": [tool("first"), tool("second")]}),
    }
}

/// One `notifications/tools/list_changed` event.
const LIST_CHANGED: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";

/// How long [`list_changed_storm`] lasts.
const STORM: Duration = Duration::from_secs(3);

/// After half a second, the tools change and `notifications/tools/list_changed`
/// comes 10,000 times a second for [`STORM`]; then the stream stays quiet.
fn list_changed_storm(seen: Arc<Seen>) -> Body {
    let event = LIST_CHANGED;
    let ticks = futures::stream::unfold(None::<Instant>, move |started| {
        let seen = Arc::clone(&seen);
        async move {
            let started = match started {
                Some(started) => started,
                None => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    seen.changed.store(true, Ordering::SeqCst);
                    Instant::now()
                }
            };
            if started.elapsed() > STORM {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            Some((event.repeat(100), Some(started)))
        }
    });
    stream_of(ticks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_changed_storm_is_followed_about_once_a_second() {
    let (server, seen) =
        start(Behaviour { list: changing_list, events: list_changed_storm, hold_answers: false, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[]);
    orchestrator.wait_for_module("hostile", "up", Duration::from_secs(20)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while orchestrator.tool_names("permission=user").await != ["hostile.first", "hostile.second"] {
        assert!(Instant::now() < deadline, "the change was not followed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The storm's notifications are merged: one tools/list per second of it
    // or so, the first discovery and the session's opening besides.
    tokio::time::sleep(STORM).await;
    let lists = seen.lists.load(Ordering::SeqCst);
    assert!(lists <= 12, "{lists} tools/list for a storm of {} s", STORM.as_secs());
    let logged = orchestrator.logs().iter().filter(|line| line.contains("tools changed")).count();
    assert!(logged <= 12, "{logged} log lines about it");
}

/// `notifications/tools/list_changed` every 300 ms.
fn list_changed_now_and_then(_seen: Arc<Seen>) -> Body {
    stream_of(futures::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some((LIST_CHANGED.to_owned(), ()))
    }))
}

/// One `notifications/tools/list_changed` once the test has changed the tools.
fn list_changed_when_changed(seen: Arc<Seen>) -> Body {
    stream_of(futures::stream::unfold(false, move |sent| {
        let seen = Arc::clone(&seen);
        async move {
            if sent {
                std::future::pending::<()>().await;
            }
            while !seen.changed.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some((LIST_CHANGED.to_owned(), true))
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_tools_list_hangs_delays_no_other_servers_change() {
    let (hung, hung_seen) =
        start(Behaviour { list: one_tool, events: list_changed_now_and_then, hold_answers: false, hold_lists: true });
    let (other, other_seen) = start(Behaviour {
        list: changing_list,
        events: list_changed_when_changed,
        hold_answers: false,
        hold_lists: false,
    });
    let services =
        json!({"hung": format!("mcp+{}/mcp", hung.url()), "other": format!("mcp+{}/mcp", other.url())}).to_string();
    // The hung server's rediscoveries wait far longer than this test lasts,
    // and no periodic refresh comes to the other module's rescue.
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &services),
        ("DISCOVERY_TIMEOUT", "600"),
        ("REFRESH_INTERVAL", "3600"),
    ]);
    orchestrator.wait_for_module("hung", "up", Duration::from_secs(20)).await;
    orchestrator.wait_for_module("other", "up", Duration::from_secs(20)).await;
    // The first tools/list was answered, the second hangs. That may be the
    // startup's discovery; then `list_changed`, every 300 ms, has `hung`
    // rediscovered within the next second or two, and that hangs too.
    let deadline = Instant::now() + Duration::from_secs(20);
    while hung_seen.lists.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the hung server was not asked for its tools again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    other_seen.changed.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !orchestrator.tool_names("permission=user").await.contains(&"other.second".to_owned()) {
        assert!(Instant::now() < deadline, "the other server's change waited for the hung server's tools/list");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `retry: 0`, then the end of the stream.
fn closes_at_once(_seen: Arc<Seen>) -> Body {
    Body::from("retry: 0\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_closed_at_once_is_reopened_at_most_once_a_second() {
    let (server, seen) =
        start(Behaviour { list: one_tool, events: closes_at_once, hold_answers: false, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[]);
    orchestrator.wait_for_module("hostile", "up", Duration::from_secs(20)).await;
    let before = seen.streams.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let opened = seen.streams.load(Ordering::SeqCst) - before;
    assert!(opened <= 5, "{opened} event streams in 3 s");
    let done =
        orchestrator.execute(json!({"tool_name": "hostile.first", "arguments": {}, "user_permission": "user"})).await;
    assert_eq!(done["result"], "done", "the session still works: {done}");
}

/// Always one more page, with the same cursor.
fn looping_pages(_params: &Value, _seen: &Seen) -> Value {
    json!({"tools": [], "nextCursor": "again"})
}

/// An event stream that stays open and quiet.
fn quiet(_seen: Arc<Seen>) -> Body {
    stream_of(futures::stream::pending())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_pages_that_loop_are_refused_as_a_loop() {
    let (server, seen) =
        start(Behaviour { list: looping_pages, events: quiet, hold_answers: false, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[("DISCOVERY_TIMEOUT", "5")]);
    let status = orchestrator.wait_for_module("hostile", "down", Duration::from_secs(20)).await;
    let error = status["last_error"].as_str().unwrap();
    assert!(error.contains("cursor") && error.contains("\"again\"") && !error.contains("within"), "{status}");
    assert!(seen.lists.load(Ordering::SeqCst) >= 2, "the first page, then the repeated cursor's");
}

/// `first`, and `big` whose answer is [`BIG_ANSWER_BYTES`] long.
fn first_and_big(_params: &Value, _seen: &Seen) -> Value {
    json!({"tools": [tool("first"), tool("big")]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_to_read_fails_the_call_naming_the_budget_and_keeps_the_session() {
    let (server, _) = start(Behaviour { list: first_and_big, events: quiet, hold_answers: false, hold_lists: false });
    let limits = [("MAX_ANSWER_BYTES", "100000"), ("MAX_MANIFEST_BYTES", "100000")];
    let orchestrator = orchestrator_for(&server.url(), &limits);
    orchestrator.wait_for_module("hostile", "up", Duration::from_secs(20)).await;
    let call = |tool: &str| json!({"tool_name": tool, "arguments": {}, "user_permission": "user"});
    let big = orchestrator.execute(call("hostile.big")).await;
    assert_eq!(error_kind(&big), "execution_failed", "{big}");
    assert!(big["error"].as_str().unwrap().contains("MAX_ANSWER_BYTES (100000)"), "{big}");
    let done = orchestrator.execute(call("hostile.first")).await;
    assert_eq!(done["result"], "done", "the session is kept: {done}");
}

/// `first`, to be kept for a day (`ttlMs`); `first` and `second` when asked again.
fn cacheable_then_changed(_params: &Value, seen: &Seen) -> Value {
    match seen.lists.load(Ordering::SeqCst) {
        1 => json!({"tools": [tool("first")], "ttlMs": 86_400_000}),
        _ => json!({"tools": [tool("first"), tool("second")]}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_list_ttl_does_not_keep_the_server_from_being_asked_again() {
    let (server, seen) =
        start(Behaviour { list: cacheable_then_changed, events: quiet, hold_answers: false, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[("REFRESH_INTERVAL", "1")]);
    orchestrator.wait_for_module("hostile", "up", Duration::from_secs(20)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while orchestrator.tool_names("permission=user").await != ["hostile.first", "hostile.second"] {
        let lists = seen.lists.load(Ordering::SeqCst);
        assert!(Instant::now() < deadline, "a cached tools/list page was used: {lists} tools/list reached the server");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_that_describe_the_module_count_in_its_manifest_budget() {
    let (server, _) = start(Behaviour { list: one_tool, events: quiet, hold_answers: false, hold_lists: false });
    let orchestrator = orchestrator_for(&server.url(), &[("MAX_MANIFEST_BYTES", "2000")]);
    let status = orchestrator.wait_for_module("hostile", "down", Duration::from_secs(20)).await;
    assert!(status["last_error"].as_str().unwrap().contains("MAX_MANIFEST_BYTES (2000)"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_goes_to_the_tool_listed_not_to_an_unlisted_one_renamed_alike() {
    let (server, _) = start(Behaviour { list: one_tool, events: quiet, hold_answers: false, hold_lists: false });
    // The override renames a tool the server does not list to the name of one it does.
    let services = json!({"hostile": {
        "url": format!("mcp+{}/mcp", server.url()),
        "tools": {"delete-repo": {"name": "first", "permission": "admin"}}
    }});
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services.to_string())]);
    orchestrator.wait_for_module("hostile", "up", Duration::from_secs(20)).await;
    assert_eq!(orchestrator.tool_names("permission=user").await, ["hostile.first"], "`first` requires `user`");
    let call = json!({"tool_name": "hostile.first", "arguments": {}, "user_permission": "user"});
    let done = orchestrator.execute(call).await;
    assert_eq!(done["result"], "done", "the call went to the tool whose permission was checked: {done}");
}

/// One tool whose description is [`BIG_ANSWER_BYTES`] long.
fn huge_page(_params: &Value, _seen: &Seen) -> Value {
    json!({"tools": [{"name": "first", "description": "d".repeat(BIG_ANSWER_BYTES), "inputSchema": {}}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_list_page_too_large_to_read_names_the_manifest_budget() {
    let (server, _) = start(Behaviour { list: huge_page, events: quiet, hold_answers: false, hold_lists: false });
    let limits = [("MAX_ANSWER_BYTES", "100000"), ("MAX_MANIFEST_BYTES", "100000")];
    let orchestrator = orchestrator_for(&server.url(), &limits);
    let status = orchestrator.wait_for_module("hostile", "down", Duration::from_secs(20)).await;
    let error = status["last_error"].as_str().unwrap();
    assert!(error.contains("its tools/list is over MAX_MANIFEST_BYTES (100000)"), "{status}");
}

/// Whether process `pid` still runs (exists and is no zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])))
}

/// Kills process `pid` when dropped (a test that fails leaves nothing behind).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-9", &self.0.to_string()]).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_stdio_server_starts_dies_with_the_orchestrator() {
    let demo = built_binary("examples/demo");
    // As `npx` or `sh -c` does: the server is not alone in the child's tree.
    let script = format!("sleep 600 </dev/null >/dev/null 2>&1 & exec {demo:?} --stdio");
    let services = json!({"local": {"command": ["sh", "-c", script], "permission": "guest"}}).to_string();
    let mut orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    let sleeper = descendants(orchestrator.pid())
        .into_iter()
        .find(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|name| name.trim() == "sleep"))
        .expect("the server's own child runs");
    let _cleanup = KillOnDrop(sleeper);

    assert!(orchestrator.terminate().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(sleeper) {
        assert!(Instant::now() < deadline, "process {sleeper}, started by the stdio server, outlived the orchestrator");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A stdio MCP server in `sh` (2025-11-25): tools `big`, whose answer is a
/// line of about [`BIG_ANSWER_BYTES`] with its top-level `id` last (and a
/// nested `id` first), and `small`; it says `hello from the child` on
/// standard error as it starts.
fn big_answer_over_stdio() -> String {
    let reply = |id_first: bool, result: &str| {
        let (head, tail) = if id_first { (r#""id":'"$id"',"#, "") } else { ("", r#","id":'"$id"'"#) };
        format!(r#"printf '%s\n' '{{"jsonrpc":"2.0",{head}"result":{result}{tail}}}'"#)
    };
    let initialize = reply(
        true,
        r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}"#,
    );
    let tool = |name: &str| format!(r#"{{"name":"{name}","inputSchema":{{"type":"object"}}}}"#);
    let list = reply(true, &format!(r#"{{"tools":[{},{}]}}"#, tool("big"), tool("small")));
    let big = reply(false, r#"{"structuredContent":{"id":1},"content":[{"type":"text","text":"'"$big"'"}]}"#);
    let small = reply(true, r#"{"content":[{"type":"text","text":"done"}]}"#);
    format!(
        r#"echo 'hello from the child' >&2
big=$(head -c {BIG_ANSWER_BYTES} /dev/zero | tr '\0' x)
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^.*"id":\([0-9][0-9]*\).*$/\1/p')
  case "$line" in
    *'"method":"initialize"'*) {initialize} ;;
    *'"method":"tools/list"'*) {list} ;;
    *'"name":"big"'*) {big} ;;
    *'"method":"tools/call"'*) {small} ;;
  esac
done"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_answer_too_long_to_read_fails_its_call_naming_the_budget_and_keeps_the_session() {
    let command = ["sh", "-c", &big_answer_over_stdio()];
    let services = json!({"local": {"command": command, "permission": "guest", "timeout_seconds": 10}}).to_string();
    let limits = [("MAX_ANSWER_BYTES", "100000"), ("MAX_MANIFEST_BYTES", "100000")];
    let orchestrator = OrchestratorProcess::start(&[&[("MODULE_SERVICES", services.as_str())][..], &limits].concat());
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    let call = |tool: &str| json!({"tool_name": tool, "arguments": {}, "user_permission": "user"});
    let big = orchestrator.execute(call("local.big")).await;
    assert_eq!(error_kind(&big), "execution_failed", "{big}");
    assert!(big["error"].as_str().unwrap().contains("MAX_ANSWER_BYTES (100000)"), "{big}");
    let done = orchestrator.execute(call("local.small")).await;
    assert_eq!(done["result"], "done", "the session is kept: {done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_standard_error_is_logged_in_an_event_naming_the_module() {
    let command = ["sh", "-c", &big_answer_over_stdio()];
    let services = json!({"local": {"command": command, "permission": "guest"}}).to_string();
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", services.as_str())]);
    orchestrator.wait_for_module("local", "up", Duration::from_secs(20)).await;
    let logged = orchestrator.logged(|line| {
        serde_json::from_str::<Value>(line).is_ok_and(|event| {
            event.to_string().contains("hello from the child") && event.to_string().contains(r#""module":"local""#)
        })
    });
    assert!(logged, "no log event with the child's line and the module: {:?}", orchestrator.logs());
}
