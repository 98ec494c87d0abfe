//! The registry's snapshot swap under load, through the real binary: while
//! many listings and calls run at once, a module's manifest changes and
//! `POST /refresh-tools` publishes the new one. Every listing answer is
//! wholly one generation (its tool set is the old one or the new one, never
//! a mix), calls of a tool in both sets never fail, calls of a tool that
//! went away fail only as `unknown_tool`, and once the refresh has answered
//! only the new set is served.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::contract::{ToolCall, ToolResult};
use serde_json::{Value, json};

/// Concurrent listing tasks and calling tasks.
const LISTERS: usize = 8;
const CALLERS: usize = 8;

/// The manifest of module `shift` with `tools` (each a guest tool without parameters).
fn manifest(tools: &[&str]) -> Value {
    json!({
        "module_name": "shift",
        "description": "Changes its tools.",
        "tools": tools.iter().map(|name| json!({
            "name": format!("shift.{name}"),
            "description": format!("Tool {name}."),
            "parameters": [],
            "required_permission": "guest"
        })).collect::<Vec<_>>()
    })
}

/// A module serving whatever manifest `current` holds, whose `/execute`
/// answers every call with a successful echo.
fn changeable_module(current: Arc<RwLock<Value>>) -> Router {
    Router::new().route("/manifest", get(move || std::future::ready(Json(current.read().unwrap().clone())))).route(
        "/execute",
        post(|Json(call): Json<ToolCall>| async move { Json(ToolResult::success(call.tool_name, json!("done"))) }),
    )
}

fn names(tools: &[&str], format: &str) -> BTreeSet<String> {
    let separator = if format == "raw" { "." } else { "__" };
    tools.iter().map(|tool| format!("shift{separator}{tool}")).collect()
}

/// The tool names of one listing answer in `format` (raw or anthropic: both a list of `{name, ...}`).
fn listed(answer: &Value) -> BTreeSet<String> {
    answer.as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listings_and_calls_never_see_a_torn_or_stale_snapshot() {
    let old_tools = ["common", "old_a", "old_b", "old_c"];
    let new_tools = ["common", "new_a", "new_b"];
    let current = Arc::new(RwLock::new(manifest(&old_tools)));
    let module = ModuleServer::start(changeable_module(Arc::clone(&current)));
    let orchestrator = Arc::new(OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&[("shift", module.url())])),
        ("REFRESH_INTERVAL", "3600"),
        ("RUST_LOG", "warn,orchestrator::server=info"),
    ]));
    orchestrator.wait_for_module("shift", "up", Duration::from_secs(10)).await;
    assert_eq!(orchestrator.tool_names("").await.into_iter().collect::<BTreeSet<_>>(), names(&old_tools, "raw"));

    let swapped = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let client = reqwest::Client::new();
    let mut listers = Vec::new();
    for index in 0..LISTERS {
        let format = if index % 2 == 0 { "raw" } else { "anthropic" };
        let (url, client, swapped, stop) =
            (format!("{}/tools?format={format}", orchestrator.url), client.clone(), swapped.clone(), stop.clone());
        let (old, new) = (names(&old_tools, format), names(&new_tools, format));
        listers.push(tokio::spawn(async move {
            let (mut saw_old, mut saw_new) = (0, 0);
            while !stop.load(Ordering::Acquire) {
                let after_swap = swapped.load(Ordering::Acquire);
                let answer: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
                let tools = listed(&answer);
                if tools == old {
                    assert!(!after_swap, "the old tool set was listed after the refresh answered: {answer}");
                    saw_old += 1;
                } else {
                    assert_eq!(tools, new, "a listing is wholly the old or the new set: {answer}");
                    saw_new += 1;
                }
            }
            (saw_old, saw_new)
        }));
    }
    let mut callers = Vec::new();
    for index in 0..CALLERS {
        // Half call a tool of both sets, half one that goes away.
        let tool = if index % 2 == 0 { "shift.common" } else { "shift.old_a" };
        let (orchestrator, swapped, stop) = (orchestrator.clone(), swapped.clone(), stop.clone());
        callers.push(tokio::spawn(async move {
            let mut calls = 0;
            while !stop.load(Ordering::Acquire) {
                let after_swap = swapped.load(Ordering::Acquire);
                let result = orchestrator.execute(json!({"tool_name": tool, "arguments": {}})).await;
                match (tool, result["success"].as_bool()) {
                    (_, Some(true)) if tool == "shift.common" || !after_swap => {}
                    ("shift.old_a", Some(false)) => assert_eq!(result["error_kind"], "unknown_tool", "{result}"),
                    _ => panic!("{tool} answered {result} (after the refresh: {after_swap})"),
                }
                calls += 1;
            }
            calls
        }));
    }

    tokio::time::sleep(Duration::from_millis(500)).await;
    *current.write().unwrap() = manifest(&new_tools);
    let (status, refreshed) = orchestrator.post("/refresh-tools", &Value::Null).await;
    assert_eq!(status, 200, "{refreshed}");
    swapped.store(true, Ordering::Release);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Release);

    let (mut saw_old, mut saw_new) = (0, 0);
    for lister in listers {
        let (old, new) = lister.await.unwrap();
        saw_old += old;
        saw_new += new;
    }
    let mut calls = 0;
    for caller in callers {
        calls += caller.await.unwrap();
    }
    assert!(saw_old > 0 && saw_new > 0, "listings ran on both sides of the swap ({saw_old} old, {saw_new} new)");
    assert!(calls > 0);
    assert_eq!(
        orchestrator.tool_names("format=raw").await.into_iter().collect::<BTreeSet<_>>(),
        names(&new_tools, "raw")
    );
    let gone = orchestrator.execute(json!({"tool_name": "shift.old_a", "arguments": {}})).await;
    assert_eq!(gone["error_kind"], "unknown_tool", "{gone}");
}
