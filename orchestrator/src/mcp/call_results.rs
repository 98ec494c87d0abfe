//! A call's result as `/mcp` answers it, held to the tool's listing: the
//! specification says a tool with an `outputSchema` MUST give structured
//! results, and clients (the official TypeScript SDK's) refuse a successful
//! result without `structuredContent`, or with one that is not a JSON
//! object, for such a tool: the client throws, and the model sees nothing.
//! A relayed MCP server that lists an `outputSchema` yet answers text only
//! (or a module whose result breaks its schema) would do that; its result
//! is answered as a tool error (`isError: true`) naming what is missing, so
//! the call fails as a call, which a model can read, and the listing keeps
//! the schema for the tools that do keep to it.

use module_sdk::contract::ToolResult;
use module_sdk::mcp::McpTool;
use rmcp::model::{CallToolResult, ContentBlock};

/// `result`, the outcome of a call of `tool`, as its MCP tool result: a
/// success of a tool with an `outputSchema` that is not structured content
/// (a JSON object) is an error saying so.
pub fn call_result(tool: &McpTool, result: ToolResult) -> CallToolResult {
    let answer = tool.call_result(result);
    let unstructured = !answer.structured_content.as_ref().is_some_and(serde_json::Value::is_object);
    if tool.listing.output_schema.is_none() || answer.is_error == Some(true) || !unstructured {
        return answer;
    }
    let message = format!(
        "the tool `{}` has an outputSchema but its result is not structured content (a JSON object): \
         the module answered {}",
        tool.listing.name,
        if answer.structured_content.is_some() { "a value of another kind" } else { "text only" }
    );
    CallToolResult::error(vec![ContentBlock::text(message)])
}

#[cfg(test)]
mod tests {
    use module_sdk::contract::ToolDefinition;
    use serde_json::{Value, json};

    use super::*;

    fn tool(output_schema: Option<Value>) -> McpTool {
        let definition: ToolDefinition = serde_json::from_value(json!({
            "name": "m.t", "description": "d", "input_schema": {"type": "object"}, "output_schema": output_schema,
        }))
        .unwrap();
        McpTool::named("m__t".to_owned(), &definition)
    }

    fn text_of(answer: &CallToolResult) -> &str {
        answer.content[0].as_text().map(|text| text.text.as_str()).unwrap()
    }

    #[test]
    fn a_tool_with_an_output_schema_answering_text_only_fails_saying_so() {
        let object = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let answer = call_result(&tool(Some(object.clone())), ToolResult::success("m.t", json!("n is 1")));
        assert_eq!(answer.is_error, Some(true));
        assert!(text_of(&answer).contains("`m__t` has an outputSchema") && text_of(&answer).contains("text only"));
        let answer = call_result(&tool(Some(object.clone())), ToolResult::success("m.t", json!(7)));
        assert_eq!(answer.is_error, Some(true), "a number is no structured content");
        let answer = call_result(&tool(Some(object)), ToolResult::success("m.t", json!({"n": 1})));
        assert_eq!((answer.is_error, answer.structured_content), (Some(false), Some(json!({"n": 1}))));
    }

    #[test]
    fn other_results_are_as_the_tool_gives_them() {
        let answer = call_result(&tool(None), ToolResult::success("m.t", json!("n is 1")));
        assert_eq!((answer.is_error, text_of(&answer)), (Some(false), "n is 1"), "no schema: text is fine");
        let wrapped = call_result(&tool(Some(json!({"type": "integer"}))), ToolResult::success("m.t", json!(7)));
        assert_eq!(wrapped.structured_content, Some(json!({"result": 7})));
        let failed = ToolResult::failure("m.t", module_sdk::ErrorKind::ExecutionFailed, "broke".to_owned());
        let answer = call_result(&tool(Some(json!({"type": "object"}))), failed);
        assert_eq!((answer.is_error, text_of(&answer)), (Some(true), "broke"), "a failure stays its own");
    }
}
