//! Validation at the gateway: a module written without the SDK, whose
//! manifest carries only `parameters`, gets the SDK's precise
//! `invalid_arguments` errors from the orchestrator, and its bad calls never
//! reach it; `SELF_VALIDATING_MODULES` and `GATEWAY_VALIDATION=false` forward
//! them unchecked.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::modules::approval_module;
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::contract::{ToolCall, ToolResult};
use serde_json::{Value, json};

/// How many calls reached the module.
#[derive(Clone, Default)]
struct Calls(Arc<AtomicUsize>);

impl Calls {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A hand-written module with `plain.add(a: integer, b: integer, mode?: "fast" | "slow")`,
/// described by `parameters` only, answering every call with the sum; calls are counted.
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
        post(move |Json(call): Json<ToolCall>| {
            counter.0.fetch_add(1, Ordering::SeqCst);
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
