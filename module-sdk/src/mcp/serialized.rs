//! A `tools/call` answer made from the result as the handler's
//! serialization wrote it: on `/mcp`'s direct path the same bytes are
//! spliced in as `structuredContent` and escaped once into the text block,
//! never parsed back into a tree and written out twice. The JSON is the one
//! rmcp writes for the parsed result (tested byte for byte in `direct.rs`).

use std::borrow::Cow;

use rmcp::model::{CallToolResult, ContentBlock, RequestId};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::mcp::tools::structured;
use crate::module::read_back;

/// What a module answered to a `tools/call`.
pub(crate) enum CallAnswer {
    /// The call succeeded.
    Success(SerializedResult),
    /// The call failed: the message a model can act on.
    Failure(String),
}

/// A successful result as the handler's serialization wrote it.
pub(crate) struct SerializedResult {
    json: Box<RawValue>,
    /// Whether it is sent as `{"result": value}` (a tool whose output is not an object).
    wrapped: bool,
}

impl SerializedResult {
    /// `json`, sent wrapped as `{"result": json}` when `wrapped`.
    pub(crate) fn new(json: Box<RawValue>, wrapped: bool) -> Self {
        Self { json, wrapped }
    }

    /// The JSON-RPC response with `id` that rmcp writes for this result to
    /// a client of a protocol before 2026-07-28 (no `resultType`, and no
    /// `structuredContent` unless it is an object, the text block holding
    /// the structured content, or the result when there is none: a string
    /// as its text, as [`structured`] makes it).
    pub(crate) fn legacy_response(&self, id: &RequestId) -> serde_json::Result<Vec<u8>> {
        let (structured_content, text) = if self.wrapped {
            let wrapped = Structured::Wrapped { result: &self.json };
            let text = serde_json::to_string(&wrapped)?;
            (Some(wrapped), Cow::Owned(text))
        } else if self.json.get().starts_with('"') {
            (None, Cow::Owned(serde_json::from_str::<String>(self.json.get())?))
        } else {
            // serde_json writes no whitespace before a value.
            let object = self.json.get().starts_with('{');
            (object.then_some(Structured::Plain(&self.json)), Cow::Borrowed(self.json.get()))
        };
        let content = [TextBlock { r#type: "text", text: &text }];
        let result = Body { content, structured_content, is_error: false };
        // The result twice (once escaped) and the frame: no reallocation while it grows.
        let mut written = Vec::with_capacity(2 * text.len() + 160);
        serde_json::to_writer(&mut written, &Response { jsonrpc: "2.0", id, result })?;
        Ok(written)
    }
}

impl CallAnswer {
    /// The answer as rmcp's `CallToolResult`, the result parsed back into a
    /// tree (for rmcp's transport and stdio).
    pub(crate) fn into_call_result(self) -> CallToolResult {
        let message = match self {
            Self::Success(result) => match read_back(&result.json) {
                Ok(value) => return structured(value, result.wrapped),
                Err(message) => message,
            },
            Self::Failure(message) => message,
        };
        CallToolResult::error(vec![ContentBlock::text(message)])
    }
}

/// A JSON-RPC response, as rmcp's `JsonRpcResponse` writes it.
#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: Body<'a>,
}

/// A successful `CallToolResult`, as rmcp writes it (fields in its order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    content: [TextBlock<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<Structured<'a>>,
    is_error: bool,
}

/// A text content block without annotations.
#[derive(Serialize)]
struct TextBlock<'a> {
    r#type: &'static str,
    text: &'a str,
}

/// `structuredContent`: the result, or `{"result": result}`
/// (the key is [`crate::mcp::tools::WRAPPED_RESULT_KEY`]).
#[derive(Serialize)]
#[serde(untagged)]
enum Structured<'a> {
    Plain(&'a RawValue),
    Wrapped { result: &'a RawValue },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::tools::WRAPPED_RESULT_KEY;

    #[test]
    fn the_wrapping_key_is_the_listed_one() {
        let raw = serde_json::value::to_raw_value(&[1]).unwrap();
        let written = serde_json::to_value(Structured::Wrapped { result: &raw }).unwrap();
        assert_eq!(written, json!({ WRAPPED_RESULT_KEY: [1] }));
    }
}
