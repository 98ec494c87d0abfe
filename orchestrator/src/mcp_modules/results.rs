//! An MCP `tools/call` outcome as the call's ToolResult: `structuredContent`
//! is the result, else the text content (one block: its text; several, or
//! other kinds: the content blocks as JSON); `isError` is `execution_failed`
//! with the server's text; JSON-RPC errors, timeouts and transport failures
//! map to the contract's error kinds.

use module_sdk::ErrorKind;
use module_sdk::contract::ToolResult;
use rmcp::ServiceError;
use rmcp::model::{CallToolResult, ErrorCode};
use serde_json::Value;

use super::{http_client, stdio_client};

/// The most characters of a failing tool's text kept in its error message.
pub const MAX_ERROR_CHARS: usize = 2000;

/// The ToolResult of `tool_name` answered with `answer`, failing with
/// `execution_failed` when its result takes more than `max_answer_bytes`
/// (`MAX_ANSWER_BYTES`) as JSON.
pub fn tool_result(tool_name: &str, answer: CallToolResult, max_answer_bytes: usize) -> ToolResult {
    if answer.is_error == Some(true) {
        let text = texts(&answer).unwrap_or_else(|| "the MCP tool failed without saying why".to_owned());
        return ToolResult::failure(tool_name, ErrorKind::ExecutionFailed, shortened(&text));
    }
    let result = match answer.structured_content {
        Some(structured) => structured,
        None => match texts(&answer) {
            Some(text) if answer.content.len() == 1 => Value::String(text),
            _ => serde_json::to_value(&answer.content).unwrap_or(Value::Null),
        },
    };
    let size = serde_json::to_vec(&result).map_or(usize::MAX, |bytes| bytes.len());
    if size > max_answer_bytes {
        let message = format!("the MCP server's answer of {size} bytes is over MAX_ANSWER_BYTES ({max_answer_bytes})");
        return ToolResult::failure(tool_name, ErrorKind::ExecutionFailed, message);
    }
    ToolResult::success(tool_name, result)
}

/// `text` (a server's words, in an error message) cut to its first
/// [`MAX_ERROR_CHARS`] characters.
pub fn shortened(text: &str) -> String {
    text.chars().take(MAX_ERROR_CHARS).collect()
}

/// The text blocks of `answer`, joined by new lines; `None` when it has none.
fn texts(answer: &CallToolResult) -> Option<String> {
    let texts: Vec<&str> = answer.content.iter().filter_map(|block| block.as_text()).map(|t| t.text.as_str()).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// Whether `error` is an answer the session refused to read for its size,
/// over HTTP or stdio: the session is still usable.
pub fn is_too_large(error: &ServiceError) -> bool {
    http_client::is_too_large(error) || stdio_client::is_too_long(error)
}

/// Whether the session that answered a call with `error` can still be used:
/// the server answered (an error, or something other than a tool result),
/// the call ran out of time, or its answer was too large to read.
pub fn keeps_session(error: &ServiceError) -> bool {
    matches!(error, ServiceError::McpError(_) | ServiceError::Timeout { .. } | ServiceError::UnexpectedResponse)
        || is_too_large(error)
}

/// The ToolResult of `tool_name` whose call to module `module` failed with
/// `error`; an answer too large to read names `max_answer_bytes`
/// (`MAX_ANSWER_BYTES`).
pub fn failure(module: &str, tool_name: &str, error: &ServiceError, max_answer_bytes: usize) -> ToolResult {
    let (kind, message) = match error {
        _ if is_too_large(error) => (
            ErrorKind::ExecutionFailed,
            format!("module `{module}` sent an answer over MAX_ANSWER_BYTES ({max_answer_bytes}); it was not read"),
        ),
        ServiceError::UnexpectedResponse => (
            ErrorKind::ExecutionFailed,
            format!("module `{module}` answered with something other than a tool result (such as a request for input)"),
        ),
        ServiceError::McpError(data) if data.code == ErrorCode::INVALID_PARAMS => {
            (ErrorKind::InvalidArguments, format!("module `{module}` refused the call: {}", data.message))
        }
        ServiceError::McpError(data) if data.code == ErrorCode::METHOD_NOT_FOUND => {
            (ErrorKind::UnknownTool, format!("module `{module}` has no such tool: {}", data.message))
        }
        ServiceError::McpError(data) => {
            (ErrorKind::ExecutionFailed, format!("module `{module}` answered an error: {}", data.message))
        }
        ServiceError::Timeout { timeout } => (
            ErrorKind::Timeout,
            format!("`{tool_name}` did not finish within {} s; it may still be running", timeout.as_secs_f64()),
        ),
        other => (
            ErrorKind::Unavailable,
            format!("the MCP server of module `{module}` cannot be reached: {}", module_sdk::error_chain(other)),
        ),
    };
    ToolResult::failure(tool_name, kind, shortened(&message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock as Content, ErrorData};
    use serde_json::json;

    #[test]
    fn structured_content_wins_then_text_then_the_blocks() {
        let structured = CallToolResult::structured(json!({"n": 1}));
        assert_eq!(tool_result("m.t", structured, 100).result, json!({"n": 1}));
        let text = CallToolResult::success(vec![Content::text("hello")]);
        assert_eq!(tool_result("m.t", text, 100).result, json!("hello"));
        let two = CallToolResult::success(vec![Content::text("a"), Content::text("b")]);
        assert_eq!(tool_result("m.t", two, 1000).result[1]["text"], "b");
        let large = CallToolResult::success(vec![Content::text("x".repeat(200))]);
        let cut = tool_result("m.t", large, 100);
        assert_eq!(cut.error_kind, Some(ErrorKind::ExecutionFailed));
        assert!(cut.error.unwrap().contains("MAX_ANSWER_BYTES"));
    }

    #[test]
    fn errors_keep_their_message_and_get_a_kind() {
        let failed = tool_result("m.t", CallToolResult::error(vec![Content::text("no such issue")]), 100);
        assert_eq!(
            (failed.error_kind, failed.error.as_deref()),
            (Some(ErrorKind::ExecutionFailed), Some("no such issue"))
        );
        let invalid = ServiceError::McpError(ErrorData::invalid_params("missing `name`", None));
        assert_eq!(failure("m", "m.t", &invalid, 100).error_kind, Some(ErrorKind::InvalidArguments));
        let timeout = ServiceError::Timeout { timeout: std::time::Duration::from_secs(2) };
        assert_eq!(failure("m", "m.t", &timeout, 100).error_kind, Some(ErrorKind::Timeout));
        assert_eq!(failure("m", "m.t", &ServiceError::TransportClosed, 100).error_kind, Some(ErrorKind::Unavailable));
        assert!(keeps_session(&timeout) && !keeps_session(&ServiceError::TransportClosed));
    }

    #[test]
    fn a_stdio_answer_too_long_to_read_names_the_budget_and_keeps_the_session() {
        let skipped = ServiceError::McpError(stdio_client::too_long_error(5000));
        let failed = failure("m", "m.t", &skipped, 100);
        assert_eq!(failed.error_kind, Some(ErrorKind::ExecutionFailed));
        assert!(failed.error.unwrap().contains("MAX_ANSWER_BYTES (100)"));
        assert!(keeps_session(&skipped) && is_too_large(&skipped));
    }

    #[test]
    fn a_long_server_error_is_shortened() {
        let long = ServiceError::McpError(ErrorData::internal_error("e".repeat(3 * MAX_ERROR_CHARS), None));
        let failed = failure("m", "m.t", &long, 100);
        assert_eq!(failed.error.unwrap().chars().count(), MAX_ERROR_CHARS);
    }

    #[test]
    fn an_answer_that_is_no_tool_result_fails_the_call_and_keeps_the_session() {
        let unexpected = ServiceError::UnexpectedResponse;
        assert_eq!(failure("m", "m.t", &unexpected, 100).error_kind, Some(ErrorKind::ExecutionFailed));
        assert!(keeps_session(&unexpected));
    }
}
