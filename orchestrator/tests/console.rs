//! The console in a real headless Chromium: the page without a key shows
//! the 401 clearly; with a key it lists modules and tools, calls
//! `research.summarize_text` from the form generated from its schema, and
//! approves a pending call, which then runs once; tools with malformed
//! schemas hide no other tool; parameters named like a form's own
//! properties are sent like any other, and a module's invisible or
//! direction-changing characters are shown spelled out. Each step leaves a
//! screenshot under `target/console-screenshots/`.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::{Json, Router};

use common::browser::{ChromeDriver, screenshot, wait_for};
use common::identities::{TestKey, keys_file};
use common::modules::{approval_module, manifest_module, sdk_module};
use common::{ModuleServer, OrchestratorProcess, module_services, research_binary};
use fantoccini::Locator;
use module_sdk::contract::{ToolCall, ToolResult};
use serde_json::{Value, json};
use test_support::Process;

#[tokio::test]
async fn a_person_with_a_key_lists_tools_calls_one_and_approves_a_pending_call() {
    let Some(research) = research_binary() else { return };
    let Some(driver) = ChromeDriver::start() else { return };
    let mut command = Command::new(research);
    command.env("PORT", "0").env("RUST_LOG", "warn");
    let research = Process::start(command);
    let (bank, bank_calls) = approval_module("bank");
    let bank = ModuleServer::sdk(bank);
    let services = module_services(&[("research", research.url()), ("bank", bank.url())]);
    let keys = keys_file(&[TestKey::new("ada", "ada", "user")]);
    let key = TestKey::new("ada", "", "").key;
    let env = [("MODULE_SERVICES", services.as_str()), ("API_KEYS_FILE", keys.path().to_str().unwrap())];
    let orchestrator = OrchestratorProcess::start(&env).with_token(&key);
    orchestrator.wait_for_module("research", "up", Duration::from_secs(10)).await;
    orchestrator.wait_for_module("bank", "up", Duration::from_secs(10)).await;

    // Ada's model asked for a transfer: it waits for her.
    let message = json!({"message": {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "bank__transfer", "arguments": "{\"to\": \"carol\", \"cents\": 700}"}}]}});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai&envelope=true", &message).await;
    assert_eq!(status, 200, "{answer}");
    let approval_id = answer["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    // A hostile model's call whose arguments would read `"to": "carol"` reversed by a
    // right-to-left override, with a zero-width space: the person sees every character,
    // and the exact amount (past 2^53, which a JavaScript number would round).
    let hostile = json!({"message": {"role": "assistant", "tool_calls": [{"id": "call_2", "type": "function",
        "function": {"name": "bank__transfer", "arguments": "{\"to\": \"\\u202elorac\\u200b\\u3164\", \"cents\": 9007199254740993}"}}]}});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai&envelope=true", &hostile).await;
    assert_eq!(status, 200, "{answer}");
    let hostile_id = answer["pending_approvals"][0]["id"].as_str().unwrap().to_owned();

    let browser = driver.session().await;
    browser.goto(&orchestrator.url).await.unwrap();
    wait_for(&browser, "body[data-loaded=error]").await;
    let error = browser.find(Locator::Css("#error")).await.unwrap().text().await.unwrap();
    assert!(error.contains("401") && error.contains("API key"), "without a key the page says why: {error}");
    screenshot(&browser, "1-without-a-key").await;

    // The key, entered once, lists modules, tools and the pending approval.
    browser.find(Locator::Css("#key")).await.unwrap().send_keys(&key).await.unwrap();
    browser.find(Locator::Css("#save-key")).await.unwrap().click().await.unwrap();
    wait_for(&browser, "body[data-loaded=ok]").await;
    let research_row = wait_for(&browser, "tr[data-module=research]").await.text().await.unwrap();
    assert!(research_row.contains("up") && research_row.contains('4'), "{research_row}");
    let tool = wait_for(&browser, ".tool[data-name='research.summarize_text']").await;
    assert!(tool.text().await.unwrap().contains("max_sentences"), "the schema is shown");
    wait_for(&browser, &format!(".approval[data-id='{approval_id}']")).await;
    let shown = wait_for(&browser, &format!(".approval[data-id='{hostile_id}'] pre.arguments")).await;
    let shown = shown.text().await.unwrap();
    assert!(shown.contains(r#""to": "\u202elorac\u200b\u3164""#), "invisible characters are spelled out: {shown}");
    assert!(!shown.contains(['\u{202e}', '\u{200b}', '\u{3164}']), "{shown}");
    assert!(shown.contains(r#""cents": 9007199254740993"#), "the exact integer, not 2^53: {shown}");
    screenshot(&browser, "2-tools-and-approvals").await;

    // The form generated from summarize_text's schema runs it.
    tool.find(Locator::Css("button.use")).await.unwrap().click().await.unwrap();
    let text = "Rust is a language. Rust programs are fast and Rust programs are safe. Cats sleep.";
    wait_for(&browser, "#arg-text").await.send_keys(text).await.unwrap();
    browser.find(Locator::Css("#arg-max_sentences")).await.unwrap().send_keys("1").await.unwrap();
    browser.find(Locator::Css("#call-submit")).await.unwrap().click().await.unwrap();
    let result = wait_for(&browser, "#result[data-success]").await;
    let shown = result.text().await.unwrap();
    assert_eq!(result.attr("data-success").await.unwrap().as_deref(), Some("true"), "{shown}");
    assert!(shown.contains("\"summary\": \"Rust"), "{shown}");
    screenshot(&browser, "3-summarize-result").await;

    // Approving the pending transfer runs it, once.
    let card = format!(".approval[data-id='{approval_id}']");
    browser.find(Locator::Css(&format!("{card} button.approve"))).await.unwrap().click().await.unwrap();
    let outcome = wait_for(&browser, &format!("{card} .outcome[data-status=approved]")).await;
    assert!(outcome.text().await.unwrap().contains("carol"));
    screenshot(&browser, "4-approved").await;
    assert_eq!(bank_calls.count(), 1);
    browser.close().await.unwrap();
}

/// A tool of the module `odd` with `schema` as its `input_schema`.
fn odd_tool(name: &str, schema: serde_json::Value) -> serde_json::Value {
    json!({"name": format!("odd.{name}"), "description": format!("A tool whose schema has {name}."),
           "required_permission": "guest", "input_schema": schema})
}

#[tokio::test]
async fn tools_with_malformed_schemas_hide_no_other_tool() {
    let Some(driver) = ChromeDriver::start() else { return };
    // The manifest check looks at a schema's root only: these pass it.
    let odd = ModuleServer::start(manifest_module(json!({
        "module_name": "odd",
        "description": "Tools whose schemas are not what JSON Schema says.",
        "tools": [
            odd_tool("enum_text", json!({"type": "object", "properties": {"a": {"enum": "zzz"}}})),
            odd_tool("null_property", json!({"type": "object", "properties": {"a": null}})),
            odd_tool("required_number", json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": 5})),
            odd_tool("any_value", json!({"type": "object", "properties": {"a": true, "b": {"anyOf": [null, {"type": 7}]}}})),
        ]
    })));
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("odd", odd.url()), ("alpha", alpha.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", services.as_str())]);
    orchestrator.wait_for_module("odd", "up", Duration::from_secs(10)).await;
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    let browser = driver.session().await;
    browser.goto(&orchestrator.url).await.unwrap();
    wait_for(&browser, "body[data-loaded=ok]").await;
    for name in ["alpha.echo", "odd.enum_text", "odd.null_property", "odd.required_number", "odd.any_value"] {
        let card = wait_for(&browser, &format!(".tool[data-name='{name}']")).await;
        assert_eq!(card.attr("data-broken").await.unwrap(), None, "{name} is shown whole");
    }
    // A property that takes any value gets a JSON field.
    let any_value = browser.find(Locator::Css(".tool[data-name='odd.any_value']")).await.unwrap();
    any_value.find(Locator::Css("button.use")).await.unwrap().click().await.unwrap();
    wait_for(&browser, "textarea#arg-a").await;
    wait_for(&browser, "#arg-b").await;
    screenshot(&browser, "5-malformed-schemas").await;
    browser.close().await.unwrap();
}

/// Module `named`: `named.fill` takes parameters named like a form's own
/// properties (`length`, `item`, `__proto__`, `replaceChildren`) and one
/// whose name holds a right-to-left override, with descriptions holding
/// invisible characters, and answers a result holding a right-to-left
/// override and a C1 control character; `named.other` takes `note`. The
/// arguments of every call are kept.
fn named_module() -> (Router, Arc<Mutex<Vec<Value>>>) {
    let fill = json!({
        "name": "named.fill", "description": "Fills a form\u{202e}\u{9b}.", "required_permission": "guest",
        "input_schema": {"type": "object", "properties": {
            "length": {"type": "integer", "description": "How many."},
            "item": {"type": "string", "description": "Which one\u{200b}."},
            "__proto__": {"type": "object", "description": "Settings."},
            "replaceChildren": {"type": "boolean", "description": "Whether to replace."},
            "note\u{202e}": {"type": "string", "description": "A note."}
        }, "required": ["length", "item", "__proto__", "note\u{202e}"]}
    });
    let other = json!({"name": "named.other", "description": "Another tool.", "required_permission": "guest",
        "input_schema": {"type": "object", "properties": {"note": {"type": "string"}}}});
    let manifest = json!({"module_name": "named", "description": "Tools with odd names.", "tools": [fill, other]});
    let received = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&received);
    let router = manifest_module(manifest).route(
        "/execute",
        post(move |Json(call): Json<ToolCall>| {
            kept.lock().unwrap().push(Value::Object(call.arguments));
            let result = json!({"file": "report\u{202e}fdp.exe\u{9b}"});
            std::future::ready(Json(ToolResult::success(call.tool_name, result)))
        }),
    );
    (router, received)
}

#[tokio::test]
async fn parameters_named_like_a_forms_own_properties_are_sent_and_a_modules_invisible_text_is_spelled_out() {
    let Some(driver) = ChromeDriver::start() else { return };
    let (named, received) = named_module();
    let named = ModuleServer::start(named);
    let services = module_services(&[("named", named.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", services.as_str())]);
    orchestrator.wait_for_module("named", "up", Duration::from_secs(10)).await;

    let browser = driver.session().await;
    browser.goto(&orchestrator.url).await.unwrap();
    wait_for(&browser, "body[data-loaded=ok]").await;
    let card = wait_for(&browser, ".tool[data-name='named.fill']").await;
    let shown = card.text().await.unwrap();
    for spelled in [r"Fills a form\u202e\u009b.", r"Which one\u200b.", r"note\u202e"] {
        assert!(shown.contains(spelled), "the card spells out {spelled}: {shown}");
    }
    assert!(!shown.contains(['\u{202e}', '\u{9b}', '\u{200b}']), "{shown}");

    card.find(Locator::Css("button.use")).await.unwrap().click().await.unwrap();
    wait_for(&browser, "#arg-length").await.send_keys("3").await.unwrap();
    browser.find(Locator::Css("#arg-item")).await.unwrap().send_keys("spoon").await.unwrap();
    browser.find(Locator::Css("#arg-__proto__")).await.unwrap().send_keys(r#"{"a": 1}"#).await.unwrap();
    browser.find(Locator::Css("#arg-replaceChildren")).await.unwrap().click().await.unwrap();
    let label = browser.find(Locator::Css("label[for='arg-note\u{202e}']")).await.unwrap().text().await.unwrap();
    assert_eq!(label, r"note\u202e *");
    // The required note left empty: the error names it, spelled out.
    browser.find(Locator::Css("#call-submit")).await.unwrap().click().await.unwrap();
    let error = wait_for(&browser, "#error:not([hidden])").await.text().await.unwrap();
    assert_eq!(error, r"`note\u202e` is required");
    browser.find(Locator::Css("[id='arg-note\u{202e}']")).await.unwrap().send_keys("x").await.unwrap();
    browser.find(Locator::Css("#call-submit")).await.unwrap().click().await.unwrap();
    let result = wait_for(&browser, "#result[data-success]").await;
    let shown = result.text().await.unwrap();
    assert_eq!(result.attr("data-success").await.unwrap().as_deref(), Some("true"), "{shown}");
    assert!(shown.contains(r#""file": "report\u202efdp.exe\u009b""#), "the result is spelled out: {shown}");
    assert!(!shown.contains(['\u{202e}', '\u{9b}']), "{shown}");
    let sent =
        json!({"length": 3, "item": "spoon", "__proto__": {"a": 1}, "replaceChildren": true, "note\u{202e}": "x"});
    assert_eq!(*received.lock().unwrap(), [sent], "the module gets every argument as typed");
    screenshot(&browser, "6-parameters-named-like-form-properties").await;

    // Another tool's form replaces this one: no input hid the form's own methods.
    let other = browser.find(Locator::Css(".tool[data-name='named.other'] button.use")).await.unwrap();
    other.click().await.unwrap();
    wait_for(&browser, "#arg-note").await;
    browser.close().await.unwrap();
}
