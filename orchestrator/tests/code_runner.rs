//! The code runner behind the orchestrator: `code_runner.execute_code`
//! declares `requires_approval` and `risk_level: high`, so a model's call
//! waits for a person; once approved, the stored code runs in the module's
//! sandbox and its output reaches the model. The real `code_runner` binary
//! (built by `cargo build --workspace`, which scripts/test.sh runs first).

mod common;

use std::process::Command;
use std::time::Duration;

use common::identities::{TestKey, keys_file};
use common::{OrchestratorProcess, module_services};
use serde_json::json;
use test_support::{Process, built_binary};

/// The operator's token, for watching the module come up.
const SERVICE_TOKEN: &str = "service-token-for-tests-0123456789";

#[tokio::test]
async fn execute_code_waits_for_approval_then_answers_its_stdout() {
    let mut command = Command::new(built_binary("code_runner"));
    command.env("RUST_LOG", "warn");
    let module = Process::start(command);
    let ada = TestKey::new("ada", "ada", "user");
    let keys = keys_file(std::slice::from_ref(&ada));
    let services = module_services(&[("code_runner", module.url())]);
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", services.as_str()),
        ("API_KEYS_FILE", keys.path().to_str().unwrap()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
    ])
    .with_token(SERVICE_TOKEN);
    orchestrator.wait_for_module("code_runner", "up", Duration::from_secs(20)).await;

    let code = "import sys\nprint(sum(map(int, sys.stdin.read().split())))";
    let arguments = json!({"code": code, "stdin": "40 2"}).to_string();
    let message = json!({"message": {"role": "assistant", "content": null, "tool_calls": [{
        "id": "call_1", "type": "function",
        "function": {"name": "code_runner__execute_code", "arguments": arguments}
    }]}});
    let path = "/v1/tool-calls?format=openai&envelope=true";
    let (status, answer) = orchestrator.post_with(path, Some(&ada.key), &message).await;
    assert_eq!(status, 200, "{answer}");
    let waiting = answer["messages"][0]["content"].as_str().unwrap();
    assert!(waiting.contains("waits for the user's approval"), "{answer}");
    let pending = &answer["pending_approvals"][0];
    assert_eq!(pending["tool_name"], "code_runner.execute_code", "{answer}");
    assert_eq!(pending["arguments"]["code"], code);

    let decision = format!("/approvals/{}", pending["id"].as_str().unwrap());
    let (status, decided) = orchestrator.post_with(&decision, Some(&ada.key), &json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["result"]["success"], true, "{decided}");
    assert_eq!(decided["result"]["result"]["stdout"], "42\n", "{decided}");
    assert_eq!(decided["result"]["result"]["exit_code"], 0, "{decided}");
    let for_the_model = &decided["message"][0];
    assert_eq!(for_the_model["tool_call_id"], "call_1");
    assert!(for_the_model["content"].as_str().unwrap().contains("42"), "{decided}");

    let (status, _) = orchestrator.post_with(&decision, Some(&ada.key), &json!({"decision": "approve"})).await;
    assert_eq!(status, 409, "an approved run does not run twice");
}
