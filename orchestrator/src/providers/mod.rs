//! Model provider formats, both ways: our tool definitions out in each
//! provider's dialect, and each provider's tool calls back in.
//!
//! INTERFACE AGREED BETWEEN THE ORCHESTRATOR AND PROVIDER-FORMATS WORK.
//! The bodies below are placeholders until the provider-formats issue lands;
//! the HTTP layer codes against these signatures.

use std::str::FromStr;

use module_sdk::{ToolDefinition, ToolResult};
use serde_json::{Map, Value};

/// A tool-list format a caller can ask for with `GET /tools?format=...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `raw`: our manifest form (the default).
    Raw,
    /// `openai`: Chat Completions `{"type":"function","function":{...}}`.
    OpenAiChat,
    /// `openai-responses`: Responses API, the function fields flat.
    OpenAiResponses,
    /// `anthropic`: Messages API `{name, description, input_schema}`.
    Anthropic,
    /// `gemini`: `functionDeclarations` with OpenAPI-subset `parameters`.
    Gemini,
    /// `gemini-json-schema`: `functionDeclarations` with `parametersJsonSchema`.
    GeminiJsonSchema,
    /// `prompt`: a system-prompt section for models without native tool calling.
    Prompt,
}

/// The shape of a model's tool calls at `POST /v1/tool-calls?format=...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFormat {
    /// `openai`: an assistant message (or Chat Completions response) with `tool_calls`.
    OpenAi,
    /// `openai-responses`: Responses API output items of type `function_call`.
    OpenAiResponses,
    /// `anthropic`: a message (or content list) with `tool_use` blocks.
    Anthropic,
    /// `gemini`: a candidate/content with `functionCall` parts.
    Gemini,
    /// `text`: free model text with fenced or bare `{"tool": ..., "args": ...}` objects.
    Text,
}

/// One tool call a model asked for, mapped back to our names.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedCall {
    /// The provider's id for the call (generated when the provider has none).
    pub call_id: String,
    /// The name the model used (provider-safe form).
    pub provider_name: String,
    /// Our `module.tool` name, when the provider name maps to a known tool.
    pub tool_name: Option<String>,
    /// The arguments, or why they could not be read (e.g. malformed JSON).
    pub arguments: Result<Map<String, Value>, String>,
}

/// Why a request body could not be read as the given format at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The format name is not one we know.
    #[error("unknown format `{0}`")]
    UnknownFormat(String),
    /// The body is not the provider's shape.
    #[error("the body is not a {format} message: {reason}")]
    NotProviderShape {
        /// The format that was expected.
        format: &'static str,
        /// What was wrong.
        reason: String,
    },
}

impl FromStr for ToolFormat {
    type Err = ProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "raw" => Self::Raw,
            "openai" => Self::OpenAiChat,
            "openai-responses" => Self::OpenAiResponses,
            "anthropic" => Self::Anthropic,
            "gemini" => Self::Gemini,
            "gemini-json-schema" => Self::GeminiJsonSchema,
            "prompt" => Self::Prompt,
            other => return Err(ProviderError::UnknownFormat(other.to_owned())),
        })
    }
}

impl FromStr for CallFormat {
    type Err = ProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "openai" => Self::OpenAi,
            "openai-responses" => Self::OpenAiResponses,
            "anthropic" => Self::Anthropic,
            "gemini" => Self::Gemini,
            "text" => Self::Text,
            other => return Err(ProviderError::UnknownFormat(other.to_owned())),
        })
    }
}

/// The caller's tools in `format`: a JSON array of tool definitions for the
/// provider formats, the manifest form for `raw`, `{"prompt": "..."}` for `prompt`.
pub fn render_tools(format: ToolFormat, tools: &[ToolDefinition]) -> Value {
    let _ = (format, tools);
    todo!("provider-formats issue")
}

/// Reads the tool calls out of a model's message in `format`; `tools` are
/// the caller's tools, used to map provider-safe names back.
pub fn parse_calls(format: CallFormat, body: &Value, tools: &[ToolDefinition]) -> Result<Vec<RequestedCall>, ProviderError> {
    let _ = (format, body, tools);
    todo!("provider-formats issue")
}

/// The provider's own result messages for executed calls, in call order.
pub fn render_results(format: CallFormat, results: &[(RequestedCall, ToolResult)]) -> Value {
    let _ = (format, results);
    todo!("provider-formats issue")
}
