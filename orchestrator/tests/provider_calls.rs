//! Round trips per provider, in process: a model response of the
//! provider's recorded shape goes in, the calls are mapped back to our tool
//! names and arguments and executed by a real SDK module, and the results
//! come out as the provider's own result messages.

mod provider_support;

use module_sdk::ModuleService;
use module_sdk::contract::ToolCall;
use orchestrator::providers::{
    CallFormat, ProviderError, RequestedCall, ToolFormat, parse_calls, render_results, render_tools,
};
use serde_json::{Value, json};

fn service() -> ModuleService {
    provider_support::trips().build().unwrap()
}

/// Parses `message`, runs every call through the module (or answers it
/// without running when it cannot run), and renders the results.
async fn round_trip(format: CallFormat, message: Value) -> (Vec<RequestedCall>, Value) {
    let service = service();
    let tools = service.manifest().tools.clone();
    let calls = parse_calls(format, &message, &tools, usize::MAX).unwrap();
    let mut pairs = Vec::new();
    for call in &calls {
        let result = match call.executable() {
            Err(refused) => *refused,
            Ok((tool_name, arguments)) => {
                let call_body = ToolCall {
                    tool_name: tool_name.to_owned(),
                    arguments: arguments.clone(),
                    user_id: Some("user-7".into()),
                };
                service.execute(call_body).await
            }
        };
        pairs.push((call.clone(), result));
    }
    (calls, render_results(format, &pairs))
}

#[test]
fn the_names_models_see_are_the_names_they_send_back() {
    let tools = service().manifest().tools.clone();
    let openai = render_tools(ToolFormat::OpenAiChat, &tools);
    let names: Vec<&str> = openai.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["trips__greet", "trips__plan_trip", "trips__search"]);
    let gemini = render_tools(ToolFormat::Gemini, &tools);
    let properties = &gemini[2]["parameters"]["properties"];
    assert!(properties.get("search_terms").is_some() && properties.get("search-terms").is_none());
}

#[tokio::test]
async fn openai_chat_tool_calls_round_trip() {
    let response = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "refusal": null,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "trips__greet",
                    "arguments": "{\"name\":\"Ada\",\"style\":null,\"excitement\":null}"}},
                {"id": "call_b", "type": "function", "function": {"name": "trips__plan_trip",
                    "arguments": "{\"origin\":{\"name\":\"Oslo\",\"coordinates\":null},\"stops\":[{\"name\":\"Bergen\",\"coordinates\":{\"lat\":60.4,\"lon\":5.3}}],\"max_hours_per_day\":null}"}},
                {"id": "call_c", "type": "function", "function": {"name": "trips__greet", "arguments": "{\"name\": \"Bob\""}},
                {"id": "call_d", "type": "function", "function": {"name": "trips__fly", "arguments": "{}"}}
            ]
        }}]
    });
    let (calls, rendered) = round_trip(CallFormat::OpenAi, response).await;
    // Strict mode made the model send nulls for optional fields; they are left out again.
    assert_eq!(calls[0].tool_name.as_deref(), Some("trips.greet"));
    assert_eq!(calls[0].arguments, Ok(json!({"name": "Ada"}).as_object().unwrap().clone()));
    assert_eq!(calls[1].tool_name.as_deref(), Some("trips.plan_trip"));
    assert_eq!(calls[3].tool_name, None);
    let messages = rendered.as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0], json!({"role": "tool", "tool_call_id": "call_a", "content": "{\"text\":\"Hello, Ada\"}"}));
    assert_eq!(
        messages[1],
        json!({"role": "tool", "tool_call_id": "call_b", "content": "{\"legs\":[\"Oslo -> Bergen\"],\"mode\":null,\"max_hours_per_day\":null,\"planned_for\":\"user-7\"}"})
    );
    let malformed = messages[2]["content"].as_str().unwrap();
    assert_eq!(messages[2]["tool_call_id"], "call_c");
    assert!(malformed.starts_with("Error (invalid_arguments): the arguments are not valid JSON (EOF"), "{malformed}");
    assert!(malformed.contains("send them again as one JSON object"), "{malformed}");
    let unknown = messages[3]["content"].as_str().unwrap();
    assert!(unknown.starts_with("Error (unknown_tool): there is no tool named `trips__fly`"), "{unknown}");
}

#[tokio::test]
async fn openai_responses_function_calls_round_trip() {
    let response = json!({
        "id": "resp_1", "object": "response", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "id": "fc_1", "call_id": "call_x", "name": "trips__greet",
             "arguments": "{\"name\":\"Ada\",\"style\":\"formal\",\"excitement\":1}", "status": "completed"},
            {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}
        ]
    });
    let (calls, rendered) = round_trip(CallFormat::OpenAiResponses, response).await;
    assert_eq!(calls.len(), 1);
    assert_eq!(
        rendered,
        json!([{"type": "function_call_output", "call_id": "call_x", "output": "{\"text\":\"Good day to you, Ada!\"}"}])
    );
}

#[tokio::test]
async fn anthropic_tool_use_round_trip() {
    let response = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "I'll greet Ada twice."},
            {"type": "tool_use", "id": "toolu_01", "name": "trips__greet", "input": {"name": "Ada", "style": "formal", "excitement": 2}},
            {"type": "tool_use", "id": "toolu_02", "name": "trips__greet", "input": {"name": "Ada", "excitement": 9}}
        ]
    });
    let (calls, rendered) = round_trip(CallFormat::Anthropic, response).await;
    assert_eq!(calls.iter().map(|c| c.call_id.as_str()).collect::<Vec<_>>(), ["toolu_01", "toolu_02"]);
    assert_eq!(rendered["role"], "user");
    let blocks = rendered["content"].as_array().unwrap();
    assert_eq!(
        blocks[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_01", "content": "{\"text\":\"Good day to you, Ada!!\"}", "is_error": false})
    );
    assert_eq!((blocks[1]["tool_use_id"].clone(), blocks[1]["is_error"].clone()), (json!("toolu_02"), json!(true)));
    let error = blocks[1]["content"].as_str().unwrap();
    assert!(error.starts_with("Error (invalid_arguments):") && error.contains("excitement"), "{error}");
}

#[tokio::test]
async fn gemini_function_calls_round_trip_with_safe_property_names() {
    let response = json!({
        "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
            {"text": "Searching."},
            {"functionCall": {"name": "trips__search", "args": {"search_terms": "fjords", "max_results": 2}}},
            {"functionCall": {"id": "fc-9", "name": "trips__greet", "args": {"name": "Ada", "style": null}}}
        ]}}],
        "usageMetadata": {"promptTokenCount": 10}
    });
    let (calls, rendered) = round_trip(CallFormat::Gemini, response).await;
    assert_eq!(
        calls[0].arguments,
        Ok(json!({"search-terms": "fjords", "max-results": 2}).as_object().unwrap().clone())
    );
    assert_eq!(
        rendered,
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "trips__search", "response": {"output": {"search-terms": "fjords", "max-results": 2}}}},
            {"functionResponse": {"id": "fc-9", "name": "trips__greet", "response": {"output": {"text": "Hello, Ada"}}}}
        ]})
    );
}

#[tokio::test]
async fn gemini_failures_come_back_under_error() {
    let content = json!({"role": "model", "parts": [{"functionCall": {"name": "trips__greet", "args": {}}}]});
    let (_, rendered) = round_trip(CallFormat::Gemini, content).await;
    let response = &rendered["parts"][0]["functionResponse"]["response"];
    assert_eq!(response["error"]["kind"], "invalid_arguments");
    assert!(response["error"]["message"].as_str().unwrap().contains("name"), "{response}");
}

#[tokio::test]
async fn text_protocol_calls_round_trip() {
    let text = "Let me greet first.\n```json\n{\"tool\": \"trips.greet\", \"args\": {\"name\": \"Ada\"}}\n```\nand search: {\"tool\": \"trips__search\", \"args\": {\"search-terms\": \"lakes\"}} — that's all.";
    let (calls, rendered) = round_trip(CallFormat::Text, json!({"role": "assistant", "content": text})).await;
    assert_eq!(
        calls.iter().map(|c| c.tool_name.as_deref().unwrap()).collect::<Vec<_>>(),
        ["trips.greet", "trips.search"]
    );
    let content = rendered["content"].as_str().unwrap();
    assert_eq!(rendered["role"], "user");
    assert!(content.contains("### trips.greet (generated_call_1) result\n{\"text\":\"Hello, Ada\"}"), "{content}");
    assert!(
        content.contains("### trips.search (generated_call_2) result\n{\"search-terms\":\"lakes\",\"max-results\":3}"),
        "{content}"
    );
}

#[test]
fn bodies_that_are_not_the_providers_shape_are_errors() {
    let tools = service().manifest().tools.clone();
    for (format, body) in [
        (CallFormat::OpenAi, json!(42)),
        (CallFormat::OpenAiResponses, json!({"output": {}})),
        (CallFormat::Anthropic, json!({"content": {}})),
        (CallFormat::Gemini, json!({"candidates": [{"content": {"parts": "x"}}]})),
        (CallFormat::Text, json!([1])),
    ] {
        let error = parse_calls(format, &body, &tools, usize::MAX).unwrap_err();
        assert!(error.to_string().starts_with(&format!("the body is not in the `{format}` format")), "{error}");
    }
}

#[test]
fn a_message_over_the_call_budget_is_refused_before_any_call_is_read() {
    let tools = service().manifest().tools.clone();
    // Three calls whose items are all malformed: counting comes first, so the
    // budget, not the first broken item, is what the caller hears about.
    for (format, body) in [
        (CallFormat::OpenAi, json!({"tool_calls": [{}, {}, {}]})),
        (
            CallFormat::OpenAiResponses,
            json!([{"type": "function_call"}, {"type": "message"}, {"type": "function_call"}, {"type": "function_call"}]),
        ),
        (
            CallFormat::Anthropic,
            json!([{"type": "tool_use"}, {"type": "tool_use"}, {"type": "text"}, {"type": "tool_use"}]),
        ),
        (CallFormat::Gemini, json!([{"functionCall": {}}, {"functionCall": {}}, {"text": "x"}, {"functionCall": {}}])),
        (CallFormat::Text, json!("[{\"tool\": \"a\"}, {\"tool\": \"b\"}, {\"tool\": \"c\"}]")),
    ] {
        let error = parse_calls(format, &body, &tools, 2).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the message holds 3 tool calls, more than the 2 one message may hold; none was run",
            "{format}"
        );
        let at_the_budget = parse_calls(format, &body, &tools, 3);
        assert!(!matches!(at_the_budget, Err(ProviderError::TooManyCalls { .. })), "{format}: {at_the_budget:?}");
    }
}
