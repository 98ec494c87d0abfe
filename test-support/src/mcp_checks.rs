//! Checks of MCP tool results, as the rmcp client receives them, shared by
//! the SDK's and the orchestrator's MCP tests.

use rmcp::model::{CallToolResult, Tool};
use serde_json::Value;

/// The text of the result's first content block (which must be text).
pub fn text_of(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

/// Checks a successful result: its structured content matches the tool's
/// `outputSchema`, and the text block is the same JSON.
pub fn assert_matches_output_schema(tool: &Tool, result: &CallToolResult) {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let structured = result.structured_content.as_ref().expect("structured content");
    let schema = Value::Object(tool.output_schema.as_deref().expect("an outputSchema").clone());
    let validator = jsonschema::validator_for(&schema).expect("a valid outputSchema");
    let problems: Vec<String> = validator.iter_errors(structured).map(|e| e.to_string()).collect();
    assert!(problems.is_empty(), "{structured} against {schema}: {problems:?}");
    assert_eq!(serde_json::from_str::<Value>(text_of(result)).expect("the text is JSON"), *structured);
}
