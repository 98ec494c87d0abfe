//! Hostile inputs sent to the real orchestrator binary (issue 19): manifests
//! whose schemas explode when inlined (one tool's, or many tools' together), a manifest and a module answer of any
//! size sent chunked, a declared timeout of 1e300, a message of 20,000 tool
//! calls, a burst of calls at one module, non-JSON request bodies. Each gets the budget's error, the process keeps answering
//! `/health`, and its peak memory stays within budget.

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::{ModuleServer, OrchestratorProcess, module_services};
use serde_json::{Map, Value, json};

/// The most the orchestrator may hold at its peak through all of this.
const PEAK_RSS_BUDGET: u64 = 128 * 1024 * 1024;
/// The calls one module gets at once in this test (`MAX_CONCURRENT_CALLS_PER_MODULE`).
const SLOTS: usize = 4;

/// A tool definition of module `module` with `schema` as its `input_schema`.
fn manifest(module: &str, tool: Value) -> Value {
    let mut tool = tool;
    tool["name"] = json!(format!("{module}.{}", tool["name"].as_str().unwrap_or("work")));
    tool["description"] = json!("A tool.");
    tool["parameters"] = json!([]);
    tool["required_permission"] = json!("guest");
    json!({"module_name": module, "description": "A hostile module.", "tools": [tool]})
}

/// `$defs` `D0`..`D{length-1}`, each an object whose `fan_out` properties refer to the next.
fn chain(length: usize, fan_out: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..length {
        let next =
            if i + 1 < length { json!({"$ref": format!("#/$defs/D{}", i + 1)}) } else { json!({"type": "string"}) };
        let properties: Map<String, Value> = (0..fan_out).map(|k| (format!("p{k}"), next.clone())).collect();
        defs.insert(format!("D{i}"), json!({"type": "object", "properties": properties}));
    }
    json!({"type": "object", "properties": {"start": {"$ref": "#/$defs/D0"}}, "$defs": defs})
}

/// An object of `count` string properties, each with its own pattern that
/// is a few bytes of text and megabytes once compiled.
fn patterns(count: usize) -> Value {
    let properties: Map<String, Value> = (0..count)
        .map(|i| (format!("p{i}"), json!({"type": "string", "pattern": format!("[^x]{{40000}}y{i}")})))
        .collect();
    json!({"type": "object", "properties": properties})
}

/// Where a tool's `input_schema` may hold patterns that its validator
/// compiles, out of the way of a walk of `properties` and `$defs`.
const HIDING_PLACES: [&str; 5] = ["dependencies", "dynamic", "escaped", "resource", "anchor"];

/// An object schema with 65 patterns (one more than `MAX_SCHEMA_PATTERNS`)
/// hidden in `place`, each a subschema the validator compiles.
fn hidden_patterns(place: &str) -> Value {
    let many: Map<String, Value> =
        (0..65).map(|i| (format!("p{i}"), json!({"type": "string", "pattern": format!("^a{i}$")}))).collect();
    let hidden = json!({"properties": many});
    let mut schema = match place {
        // Draft 7's `dependentSchemas`, compiled in every draft.
        "dependencies" => json!({"dependencies": {"a": hidden}}),
        // A dynamic reference resolves as `$ref` does, here to an unknown keyword.
        "dynamic" => json!({"$dynamicRef": "#/x-hidden", "x-hidden": hidden}),
        // The validator percent-decodes the pointer: `x-hidden`, not `x%2Dhidden`.
        "escaped" => json!({"$ref": "#/x%2Dhidden", "x%2Dhidden": {}, "x-hidden": hidden}),
        // Under an `$id`, `#/x` is that resource's `x`, not the root's.
        "resource" => {
            json!({"x": {}, "properties": {"a": {"$id": "https://example.com/a", "$ref": "#/x", "x": hidden}}})
        }
        // An anchor inside `contentSchema`, which the validator indexes but does not compile in place.
        _ => json!({"$dynamicRef": "#h", "contentSchema": {"$anchor": "h", "properties": many}}),
    };
    schema["type"] = json!("object");
    schema
}

/// A manifest of `count` tools, each within every one-tool budget but large
/// once inlined: 10 levels of definitions, each with a 120-character
/// description and two properties referring to the next (~2.5 KB as
/// written, 9,179 subschemas and ~0.55 MiB once inlined as Gemini's form does).
fn wide_manifest(count: usize) -> Value {
    let mut schema = chain(10, 2);
    for definition in schema["$defs"].as_object_mut().unwrap().values_mut() {
        definition["description"] = json!("d".repeat(120));
    }
    let tool = |i: usize| json!({"name": format!("wide.t{i}"), "description": "A tool.", "parameters": [], "required_permission": "guest", "input_schema": schema});
    json!({"module_name": "wide", "description": "Many large tools.", "tools": (0..count).map(tool).collect::<Vec<_>>()})
}

/// `megabytes` MiB of spaces, sent chunked (no `Content-Length`).
fn chunked(megabytes: usize) -> Body {
    static CHUNK: [u8; 64 * 1024] = [b' '; 64 * 1024];
    let chunks = std::iter::repeat_n(Bytes::from_static(&CHUNK), megabytes * 16).map(Ok::<_, Infallible>);
    Body::from_stream(futures::stream::iter(chunks))
}

/// One server standing in for every hostile module, each under its own path.
fn hostile_modules(in_flight: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> Router {
    let serve = |value: Value| get(move || async move { Json(value) });
    Router::new()
        .route("/chain/manifest", serve(manifest("chain", json!({"name": "work", "input_schema": chain(2_000, 1)}))))
        .route("/graph/manifest", serve(manifest("graph", json!({"name": "work", "input_schema": chain(20, 2)}))))
        .route("/patterns/manifest", serve(manifest("patterns", json!({"name": "work", "input_schema": patterns(3_000)}))))
        .route("/lookaround/manifest", serve(manifest("lookaround", json!({"name": "work", "input_schema": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string", "pattern": "^(?:(a|(?=a)a)*c|a*b)$"}}}
        }}))))
        .route("/wide/manifest", serve(wide_manifest(40)))
        .route("/huge/manifest", get(|| async { chunked(50) }))
        .route("/forever/manifest", serve(manifest("forever", json!({"name": "work", "timeout_seconds": 1e300}))))
        .route(
            "/forever/execute",
            post(|| async {
                Json(json!({"tool_name": "forever.work", "success": true, "result": "done", "error": null}))
            }),
        )
        .route("/big/manifest", serve(manifest("big", json!({"name": "work"}))))
        .route("/big/execute", post(|| async { chunked(200) }))
        .route("/busy/manifest", serve(manifest("busy", json!({"name": "work"}))))
        .route(
            "/busy/execute",
            post(move || async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Json(json!({"tool_name": "busy.work", "success": true, "result": now, "error": null}))
            }),
        )
}

async fn last_error(orchestrator: &OrchestratorProcess, module: &str) -> String {
    let status = orchestrator.wait_for_module(module, "down", Duration::from_secs(20)).await;
    status["last_error"].as_str().unwrap_or_default().to_owned()
}

async fn assert_alive(orchestrator: &OrchestratorProcess) {
    assert_eq!(orchestrator.get("/health").await["status"], "ok");
}

#[tokio::test]
async fn patterns_hidden_where_the_validator_compiles_them_are_counted() {
    let router = HIDING_PLACES.iter().fold(Router::new(), |router, place| {
        let tool = manifest(place, json!({"name": "work", "input_schema": hidden_patterns(place)}));
        router.route(&format!("/{place}/manifest"), get(move || async move { Json(tool) }))
    });
    let server = ModuleServer::start(router);
    let modules: Vec<(&str, String)> =
        HIDING_PLACES.iter().map(|place| (*place, format!("{}/{place}", server.url()))).collect();
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&modules))]);
    for place in HIDING_PLACES {
        let error = last_error(&orchestrator, place).await;
        assert!(error.contains(&format!("{place}.work")) && error.contains("MAX_SCHEMA_PATTERNS"), "{place}: {error}");
    }
}

#[tokio::test]
async fn hostile_modules_and_callers_cost_a_bounded_amount() {
    let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let server = ModuleServer::start(hostile_modules(Arc::clone(&in_flight), Arc::clone(&most)));
    let modules: Vec<(&str, String)> =
        ["chain", "graph", "patterns", "lookaround", "wide", "huge", "forever", "big", "busy"]
            .into_iter()
            .map(|name| (name, format!("{}/{name}", server.url())))
            .collect();
    let slots = SLOTS.to_string();
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&modules)),
        ("MAX_CONCURRENT_CALLS_PER_MODULE", &slots),
    ]);

    // Schemas that explode when inlined are refused at discovery, naming the tool and the budget.
    let chain = last_error(&orchestrator, "chain").await;
    assert!(chain.contains("chain.work") && chain.contains("MAX_SCHEMA_DEPTH"), "{chain}");
    let graph = last_error(&orchestrator, "graph").await;
    assert!(graph.contains("graph.work") && graph.contains("MAX_SCHEMA_NODES"), "{graph}");
    // Patterns are few (each tool's validator compiles its own, for a linear-time engine).
    let patterns = last_error(&orchestrator, "patterns").await;
    assert!(patterns.contains("patterns.work") && patterns.contains("MAX_SCHEMA_PATTERNS"), "{patterns}");
    // A pattern that engine cannot compile (lookaround, as zod's email pattern has) does not take the
    // module down: its tool's arguments are left to the module.
    orchestrator.wait_for_module("lookaround", "up", Duration::from_secs(20)).await;
    // A manifest of 40 tools, each within every one-tool budget, would inline to ~22 MiB in all (and a
    // 1,600-tool one under MAX_MANIFEST_BYTES to ~0.9 GiB, held by every Gemini listing): refused.
    let wide = last_error(&orchestrator, "wide").await;
    assert!(wide.contains("`wide`") && wide.contains("MAX_MANIFEST_SCHEMA_BYTES"), "{wide}");
    for format in ["gemini", "openai-responses", "anthropic"] {
        orchestrator.get(&format!("/tools?format={format}")).await;
        orchestrator.get(&format!("/tools?format={format}&query=a&limit=50")).await;
    }
    // A 50 MB manifest sent chunked is cut off at MAX_MANIFEST_BYTES.
    let huge = last_error(&orchestrator, "huge").await;
    assert!(huge.contains("MAX_MANIFEST_BYTES"), "{huge}");
    assert_alive(&orchestrator).await;

    // A timeout of 1e300 s is lowered to MAX_TOOL_TIMEOUT, and the call runs.
    orchestrator.wait_for_module("forever", "up", Duration::from_secs(20)).await;
    let tools = orchestrator.get("/tools?modules=forever").await;
    assert_eq!(tools[0]["timeout_seconds"], 3600.0, "{tools}");
    let done = orchestrator.execute(json!({"tool_name": "forever.work"})).await;
    assert_eq!(done["result"], "done", "{done}");

    // A 200 MB answer sent chunked is cut off at MAX_ANSWER_BYTES.
    orchestrator.wait_for_module("big", "up", Duration::from_secs(20)).await;
    let big = orchestrator.execute(json!({"tool_name": "big.work"})).await;
    assert_eq!(big["error_kind"], "execution_failed", "{big}");
    assert!(big["error"].as_str().unwrap().contains("MAX_ANSWER_BYTES"), "{big}");
    assert_alive(&orchestrator).await;

    // 20,000 calls in one message are refused whole; 128 run, at most SLOTS at once.
    orchestrator.wait_for_module("busy", "up", Duration::from_secs(20)).await;
    let calls = |n: usize| -> Value {
        let calls: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("c{i}"), "type": "function", "function": {"name": "busy__work", "arguments": "{}"}}))
            .collect();
        json!({"message": {"role": "assistant", "tool_calls": calls}})
    };
    let (status, refused) = orchestrator.post("/v1/tool-calls?format=openai", &calls(20_000)).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("MAX_CALLS_PER_MESSAGE (128)"), "{refused}");
    // `/health` answers while the 128 calls queue for the module's slots.
    let health_under_load = async {
        while in_flight.load(Ordering::SeqCst) == 0 && most.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_alive(&orchestrator).await;
    };
    let message = calls(128);
    let ((status, results), ()) =
        tokio::join!(orchestrator.post("/v1/tool-calls?format=openai", &message), health_under_load);
    assert_eq!(status, 200, "{results}");
    assert_eq!(results.as_array().map(Vec::len), Some(128));
    let peak = most.load(Ordering::SeqCst);
    assert!((1..=SLOTS).contains(&peak), "{peak} calls reached the module at once");
    assert!(
        !orchestrator.logs().iter().any(|line| line.contains("routed call")),
        "per-call log lines are at debug, not info"
    );

    // Request bodies that are not JSON get 415, unknown routes and methods JSON 404/405. (Chunked
    // bodies past MAX_BODY_BYTES get 413 from the shared serve_router: tests/slow_clients.rs.)
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", orchestrator.url);
    let form = client
        .post(url("/execute"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("tool_name=busy.work");
    let form = form.send().await.unwrap();
    assert_eq!(form.status(), 415);
    assert!(form.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("application/json"));
    // `POST /execute` skips the router; its neighbours still go through it.
    let neighbours = [
        (reqwest::Method::GET, "/nowhere", 404),
        (reqwest::Method::DELETE, "/execute", 405),
        (reqwest::Method::GET, "/execute", 405),
        (reqwest::Method::POST, "/execute/", 404),
        (reqwest::Method::POST, "/execute/more", 404),
    ];
    for (method, path, status) in neighbours {
        let answer = client.request(method, url(path)).send().await.unwrap();
        assert_eq!(answer.status(), status, "{path}");
        assert!(answer.json::<Value>().await.unwrap()["error"].is_string(), "{path}");
    }

    assert_alive(&orchestrator).await;
    let peak_rss = orchestrator.peak_rss_bytes();
    println!("orchestrator peak RSS: {} MiB", peak_rss / (1024 * 1024));
    assert!(peak_rss < PEAK_RSS_BUDGET, "peak RSS {peak_rss} bytes is over {PEAK_RSS_BUDGET}");
}
