//! Validation at the gateway: a module written without the SDK, whose
//! manifest carries only `parameters`, gets the SDK's precise
//! `invalid_arguments` errors from the orchestrator, and its bad calls never
//! reach it; `SELF_VALIDATING_MODULES` and `GATEWAY_VALIDATION=false` forward
//! them unchecked. Arguments read in place are forwarded as the caller wrote
//! them; those an in-place reading refuses are judged and sent as a tree.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::modules::approval_module;
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::contract::{ToolCall, ToolResult};
use serde_json::{Value, json};

/// How many calls reached the module, and the body of the last one.
#[derive(Clone, Default)]
struct Calls(Arc<AtomicUsize>, Arc<Mutex<String>>);

impl Calls {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    fn last_body(&self) -> String {
        self.1.lock().unwrap().clone()
    }
}

/// A hand-written module with `plain.add(a: integer, b: integer, mode?: "fast" | "slow")`,
/// described by `parameters` only, answering every call with the sum; calls are counted and the last body kept.
fn parameters_only_module() -> (Router, Calls) {
    let calls = Calls::default();
    let manifest = json!({
        "module_name": "plain",
        "description": "Adds numbers.",
        "tools": [{
            "name": "plain.add",
            "description": "Add two integers.",
            "parameters": [
                {"name": "a", "type": "integer", "description": "First.", "required": true, "enum": null},
                {"name": "b", "type": "integer", "description": "Second.", "required": true, "enum": null},
                {"name": "mode", "type": "string", "description": "How.", "required": false, "enum": ["fast", "slow"]}
            ],
            "required_permission": "guest"
        }]
    });
    let counter = calls.clone();
    let router = Router::new().route("/manifest", get(move || std::future::ready(Json(manifest.clone())))).route(
        "/execute",
        post(move |body: String| {
            counter.0.fetch_add(1, Ordering::SeqCst);
            let call: ToolCall = serde_json::from_str(&body).unwrap();
            *counter.1.lock().unwrap() = body;
            let sum = call.arguments.values().filter_map(Value::as_i64).sum::<i64>();
            std::future::ready(Json(ToolResult::success(call.tool_name, json!(sum))))
        }),
    );
    (router, calls)
}

async fn start(extra: &[(&str, &str)]) -> (ModuleServer, Calls, OrchestratorProcess) {
    let (module, calls) = parameters_only_module();
    let module = ModuleServer::start(module);
    let services = module_services(&[("plain", module.url())]);
    let mut env = vec![("MODULE_SERVICES", services.as_str())];
    env.extend_from_slice(extra);
    let orchestrator = OrchestratorProcess::start(&env);
    orchestrator.wait_for_module("plain", "up", Duration::from_secs(10)).await;
    (module, calls, orchestrator)
}

async fn add(orchestrator: &OrchestratorProcess, arguments: Value) -> Value {
    orchestrator.execute(json!({"tool_name": "plain.add", "arguments": arguments})).await
}

#[tokio::test]
async fn bad_arguments_get_precise_errors_and_never_reach_a_parameters_only_module() {
    let (_module, calls, orchestrator) = start(&[]).await;
    let cases = [
        (json!({"a": "one", "b": 2}), r#"arguments.a: expected integer, got "one""#),
        (json!({"a": 1}), "arguments.b: required field is missing"),
        (json!({"a": 1, "b": 2, "mode": "medium"}), "arguments.mode"),
    ];
    for (arguments, expected) in cases {
        let result = add(&orchestrator, arguments).await;
        assert_eq!(result["error_kind"], "invalid_arguments", "{result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains(expected), "{expected:?} not in {error:?}");
    }
    assert_eq!(calls.count(), 0, "no invalid call reached the module");
    let sum = add(&orchestrator, json!({"a": 2, "b": 3, "mode": "fast"})).await;
    assert_eq!((&sum["success"], &sum["result"]), (&json!(true), &json!(5)), "{sum}");
    assert_eq!(calls.count(), 1);
}

#[tokio::test]
async fn modules_that_validate_alone_get_calls_unchecked() {
    for setting in [("SELF_VALIDATING_MODULES", "plain"), ("GATEWAY_VALIDATION", "false")] {
        let (_module, calls, orchestrator) = start(&[setting]).await;
        let result = add(&orchestrator, json!({"a": "one"})).await;
        assert_eq!(result["success"], true, "{setting:?}: {result}");
        assert_eq!(calls.count(), 1, "{setting:?}: the call was forwarded");
    }
}

#[tokio::test]
async fn a_call_that_needs_approval_is_refused_for_bad_arguments_before_anyone_is_asked() {
    let (bank, _) = approval_module("bank");
    let bank = ModuleServer::sdk(bank);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("bank", bank.url())]))]);
    orchestrator.wait_for_module("bank", "up", Duration::from_secs(10)).await;
    let result =
        orchestrator.execute(json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": "all"}})).await;
    assert_eq!(result["error_kind"], "invalid_arguments", "{result}");
    assert!(result["error"].as_str().unwrap().contains("arguments.cents"), "{result}");
    assert_eq!(orchestrator.get("/approvals").await["approvals"], json!([]), "no approval was asked for");
    let pending =
        orchestrator.execute(json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": 5}})).await;
    assert!(pending["error"].as_str().unwrap().contains("approval"), "{pending}");
}

/// `body`, sent to the orchestrator's `POST /execute` as it is written.
async fn post_text(orchestrator: &OrchestratorProcess, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/execute", orchestrator.url))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn arguments_go_on_as_the_caller_wrote_them_and_odd_ones_are_judged_as_a_tree() {
    let (_module, calls, orchestrator) = start(&[]).await;
    // Read in place: checked, then forwarded as written (spacing, order, escapes), with the caller's user.
    let written = r#"{ "b" : 3,  "a":2, "mode": "f\u0061st" }"#;
    let body = format!(r#"{{"tool_name":"plain.add","arguments":{written},"user_id":"ann"}}"#);
    let (status, result) = post_text(&orchestrator, &body).await;
    assert_eq!((status, &result["result"]), (200, &json!(5)), "{result}");
    let forwarded = calls.last_body();
    assert!(forwarded.contains(written), "{forwarded}");
    let forwarded: Value = serde_json::from_str(&forwarded).unwrap();
    assert_eq!(forwarded["user_id"], "ann");
    assert_eq!(forwarded["arguments"], json!({"a": 2, "b": 3, "mode": "fast"}));

    // A duplicate name is judged as the tree reads it (the last one wins) and never forwarded.
    let (status, result) =
        post_text(&orchestrator, r#"{"tool_name":"plain.add","arguments":{"a":1,"b":2,"a":"one"}}"#).await;
    assert_eq!((status, &result["error_kind"]), (200, &json!("invalid_arguments")), "{result}");
    assert!(result["error"].as_str().unwrap().contains("arguments.a: expected integer"), "{result}");
    // Valid as a tree: forwarded as the tree, written anew.
    let (status, result) =
        post_text(&orchestrator, r#"{"tool_name":"plain.add","arguments":{"a":"one","b":2,"a":4}}"#).await;
    assert_eq!((status, &result["result"]), (200, &json!(6)), "{result}");
    assert_eq!(serde_json::from_str::<Value>(&calls.last_body()).unwrap()["arguments"], json!({"a": 4, "b": 2}));
    assert_eq!(calls.count(), 2);

    // What a tree cannot hold is refused as it always was, by axum's `Json`:
    // a number out of range as JSON it cannot parse, the rest as no ExecuteRequest.
    for (arguments, expected) in [(r#"{"a":1e400,"b":1}"#, 400), ("null", 422), ("[1, 2]", 422), (r#""a""#, 422)] {
        let body = format!(r#"{{"tool_name":"plain.add","arguments":{arguments}}}"#);
        let (status, refusal) = post_text(&orchestrator, &body).await;
        assert_eq!(status, expected, "{body}: {refusal}");
        assert!(refusal["error"].as_str().unwrap().contains("arguments"), "{body}: {refusal}");
    }
    // Nested past what the request's tree reading allows (126 levels of arguments): refused, not forwarded.
    let deep = format!("{}{}", r#"{"a":"#.repeat(126) + "{", "}".repeat(127));
    let (status, refusal) =
        post_text(&orchestrator, &format!(r#"{{"tool_name":"plain.add","arguments":{deep}}}"#)).await;
    assert_eq!(status, 400, "{refusal}");
    assert!(refusal["error"].as_str().unwrap().contains("recursion limit"), "{refusal}");
    assert_eq!(calls.count(), 2, "no refused call reached the module");
}
