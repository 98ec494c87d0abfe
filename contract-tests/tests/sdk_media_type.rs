//! The contract's "`200` ToolResult for every well-formed ToolCall" holds
//! for the SDK's demo module whatever `Content-Type` an orchestrator sends
//! (`curl -d` sends a form's, Python `requests.post(data=...)` none) once
//! it runs with a service token; the `415` against cross-site form posts
//! is for development mode (no token) only.

use std::process::Command;

use serde_json::{Value, json};
use test_support::{Process, built_binary};

const TOKEN: &str = "media-type-token";

#[tokio::test]
async fn a_tokened_module_answers_a_tool_call_of_any_content_type_with_200() {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("SERVICE_AUTH_TOKEN", TOKEN).env("RUST_LOG", "warn");
    let demo = Process::start(command);
    let call = json!({"tool_name": "demo.greet", "arguments": {"name": "Ann"}, "user_id": null}).to_string();
    let client = reqwest::Client::new();
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let mut request = client.post(format!("{}/execute", demo.url())).bearer_auth(TOKEN).body(call.clone());
        if let Some(content_type) = content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap();
        assert_eq!((status, &answer["success"]), (200, &json!(true)), "{content_type:?}: {answer}");
    }
    // Without the token such a call is refused as ever.
    let response =
        client.post(format!("{}/execute", demo.url())).header("content-type", "text/plain").body(call).send().await;
    assert_eq!(response.unwrap().status().as_u16(), 401);
}
