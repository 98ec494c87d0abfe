//! The whole round trip over HTTP, per provider format, through the real
//! orchestrator binary and a real SDK module: `GET /tools?format=...` gives
//! definitions the provider accepts, a model message that uses those names
//! goes to `POST /v1/tool-calls?format=...`, the module runs the calls with
//! the caller's user id, and the answer is the provider's result messages.

mod common;
mod provider_support;

use std::time::Duration;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::{ModuleServer, OrchestratorProcess, module_services};
use module_sdk::contract::{ToolCall, ToolResult};
use orchestrator::providers::{PROVIDERS, Provider, rules};
use serde_json::{Value, json};

/// An orchestrator in front of the `trips` module, once the module is up.
async fn start() -> (ModuleServer, OrchestratorProcess) {
    let trips = ModuleServer::sdk(provider_support::trips());
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("trips", trips.url())]))]);
    orchestrator.wait_for_module("trips", "up", Duration::from_secs(10)).await;
    (trips, orchestrator)
}

/// The name of tool `index` in a provider's listing.
fn name_at(provider: Provider, listing: &Value, index: usize) -> String {
    let definition = &listing[index];
    let name = match provider {
        Provider::OpenAiChat => &definition["function"]["name"],
        _ => &definition["name"],
    };
    name.as_str().unwrap().to_owned()
}

/// A model message in `provider`'s shape that greets Ada and plans a trip
/// Oslo -> Bergen, calling the tools by the names the listing gave.
fn message(provider: Provider, greet: &str, plan: &str) -> Value {
    let greet_args = json!({"name": "Ada", "style": null, "excitement": 1});
    let plan_args = json!({"origin": {"name": "Oslo", "coordinates": null}, "stops": [{"name": "Bergen", "coordinates": null}], "max_hours_per_day": null});
    match provider {
        Provider::OpenAiChat => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": greet, "arguments": greet_args.to_string()}},
            {"id": "call_2", "type": "function", "function": {"name": plan, "arguments": plan_args.to_string()}}
        ]}),
        Provider::OpenAiResponses => json!({"output": [
            {"type": "function_call", "call_id": "call_1", "name": greet, "arguments": greet_args.to_string()},
            {"type": "function_call", "call_id": "call_2", "name": plan, "arguments": plan_args.to_string()}
        ]}),
        Provider::Anthropic => json!({"role": "assistant", "content": [
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "id": "call_1", "name": greet, "input": greet_args},
            {"type": "tool_use", "id": "call_2", "name": plan, "input": plan_args}
        ]}),
        Provider::Gemini | Provider::GeminiJsonSchema => json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": "call_1", "name": greet, "args": greet_args}},
            {"functionCall": {"id": "call_2", "name": plan, "args": plan_args}}
        ]}}]}),
    }
}

/// The call format that reads what a provider's model sends.
fn call_format(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAiChat => "openai",
        Provider::OpenAiResponses => "openai-responses",
        Provider::Anthropic => "anthropic",
        Provider::Gemini | Provider::GeminiJsonSchema => "gemini",
    }
}

/// The result texts of a provider's answer, in call order.
fn result_texts(provider: Provider, answer: &Value) -> Vec<String> {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    match provider {
        Provider::OpenAiChat => answer.as_array().unwrap().iter().map(|m| text(&m["content"])).collect(),
        Provider::OpenAiResponses => answer.as_array().unwrap().iter().map(|m| text(&m["output"])).collect(),
        Provider::Anthropic => answer["content"].as_array().unwrap().iter().map(|b| text(&b["content"])).collect(),
        Provider::Gemini | Provider::GeminiJsonSchema => answer["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| text(&p["functionResponse"]["response"]["output"]))
            .collect(),
    }
}

#[tokio::test]
async fn every_format_lists_accepted_tools_and_runs_the_calls_it_gets_back() {
    let (_trips, orchestrator) = start().await;
    for provider in PROVIDERS {
        let format = provider.format();
        let listing = orchestrator.get(&format!("/tools?format={format}&permission=user")).await;
        let violations = rules::check_all(provider, &listing);
        assert!(violations.is_empty(), "{format}: {violations:#?}");
        let (greet, plan) = (name_at(provider, &listing, 0), name_at(provider, &listing, 1));
        assert_eq!((greet.as_str(), plan.as_str()), ("trips__greet", "trips__plan_trip"));

        let request =
            json!({"user_id": "user-7", "user_permission": "user", "message": message(provider, &greet, &plan)});
        let (status, answer) =
            orchestrator.post(&format!("/v1/tool-calls?format={}", call_format(provider)), &request).await;
        assert_eq!(status, 200, "{format}: {answer}");
        assert_eq!(
            result_texts(provider, &answer),
            [
                r#"{"text":"Hello, Ada!"}"#,
                r#"{"legs":["Oslo -> Bergen"],"mode":null,"max_hours_per_day":null,"planned_for":"user-7"}"#
            ],
            "{format}: {answer:#}"
        );
    }
}

#[tokio::test]
async fn the_text_protocol_lists_a_prompt_and_runs_calls_found_in_prose() {
    let (_trips, orchestrator) = start().await;
    let prompt = orchestrator.get("/tools?format=prompt&permission=guest").await;
    let prompt = prompt["prompt"].as_str().unwrap();
    assert!(prompt.contains("### trips.greet\n") && prompt.contains("### trips.search\n"), "{prompt}");
    assert!(!prompt.contains("trips.plan_trip"), "a guest is not shown a user tool: {prompt}");
    assert!(prompt.contains("- `search-terms` (string, required): What to look for."), "{prompt}");

    let text = "I'll search.\n```json\n{\"tool\": \"trips.search\", \"args\": {\"search-terms\": \"fjords\", \"max-results\": 2}}\n```\nAlso {\"tool\": \"trips.plan_trip\", \"args\": {\"origin\": {\"name\": \"A\"}, \"stops\": []}}.";
    let request = json!({"user_permission": "guest", "message": text});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=text", &request).await;
    assert_eq!(status, 200, "{answer}");
    let content = answer["content"].as_str().unwrap();
    assert!(content.contains(r#"{"search-terms":"fjords","max-results":2}"#), "{content}");
    assert!(content.contains("### trips.plan_trip (generated_call_2) failed\nError (unknown_tool)"), "{content}");

    // Objects that never close would be read again from every `{`: refused once the text's budget is read.
    let hostile = format!("{{\"a\":[{}", "0,".repeat(400)).repeat(300);
    let (status, answer) =
        orchestrator.post("/v1/tool-calls?format=text", &json!({"user_permission": "guest", "message": hostile})).await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("bytes of JSON (8 times its length, at least 1048576)"),
        "{answer}"
    );
}

#[tokio::test]
async fn malformed_arguments_get_an_answer_the_model_can_act_on_and_bad_bodies_an_error() {
    let (_trips, orchestrator) = start().await;
    let message = json!({"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "trips__greet", "arguments": "{\"name\": \"Ada\""}}
    ]});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &json!({"message": message})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer[0]["tool_call_id"], "call_1");
    let content = answer[0]["content"].as_str().unwrap();
    assert!(content.contains("invalid_arguments") && content.contains("not valid JSON"), "{content}");

    let (status, answer) =
        orchestrator.post("/v1/tool-calls?format=anthropic", &json!({"message": {"content": 5}})).await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("not in the `anthropic` format: expected a message with a `content` list"),
        "{answer}"
    );
    let (status, _) = orchestrator.post("/v1/tool-calls?format=cohere", &json!({"message": {}})).await;
    assert_eq!(status, 400);
    let (status, _) = orchestrator.get_with("/tools?format=cohere", None).await;
    assert_eq!(status, 400);
}

/// A module called `module` whose one tool `{module}.{tool}` answers which
/// module ran it, and for whom.
fn naming_module(module: &str, tool: &str) -> Router {
    let manifest = json!({
        "module_name": module,
        "description": "Says which module it is.",
        "tools": [{"name": format!("{module}.{tool}"), "description": "Say which module this is.", "parameters": [], "required_permission": "guest"}]
    });
    let module = module.to_owned();
    Router::new().route("/manifest", get(move || std::future::ready(Json(manifest.clone())))).route(
        "/execute",
        post(move |Json(call): Json<ToolCall>| {
            let ran = json!({"module": module, "user_id": call.user_id});
            std::future::ready(Json(ToolResult::success(call.tool_name, ran)))
        }),
    )
}

#[tokio::test]
async fn a_module_cannot_take_the_provider_name_of_another_modules_tool() {
    // Module `x__y`'s tool `z` is `x__y__z` to a model; module `x` names a tool `y__z`, which is too.
    let real = ModuleServer::start(naming_module("x__y", "z"));
    let other = ModuleServer::start(naming_module("x", "y__z"));
    let services = module_services(&[("x__y", real.url()), ("x", other.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    for name in ["x", "x__y"] {
        orchestrator.wait_for_module(name, "up", Duration::from_secs(10)).await;
    }
    for name in ["x", "x__y"] {
        let module = orchestrator.module(name).await;
        let error = module["last_error"].as_str().unwrap_or_default();
        assert!(error.contains("tools `x.y__z` and `x__y.z` would both be `x__y__z`"), "{module}");
    }
    assert_eq!(orchestrator.get("/tools?format=openai").await, json!([]), "neither is offered under the name");
    assert_eq!(orchestrator.tool_names("format=raw").await, ["x.y__z", "x__y.z"]);

    let message = json!({"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "x__y__z", "arguments": "{}"}}
    ]});
    let request = json!({"user_id": "user-7", "message": message});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &request).await;
    assert_eq!(status, 200, "{answer}");
    let content = answer[0]["content"].as_str().unwrap();
    assert!(content.contains("unknown_tool") && !content.contains("\"module\""), "ran somewhere: {content}");

    // By its own name (the text format's), each still runs in its own module.
    let request = json!({"user_id": "user-7", "message": "{\"tool\": \"x__y.z\", \"args\": {}}"});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=text", &request).await;
    assert_eq!(status, 200, "{answer}");
    let content = answer["content"].as_str().unwrap();
    assert!(content.contains(r#"{"module":"x__y","user_id":"user-7"}"#), "{content}");
}
