//! Model provider formats, both ways: our tool definitions out in each
//! provider's dialect, and each provider's tool calls back in.
//!
//! Out: [`render_tools`] (or, memoized per tool, [`ConvertedCache::render_tools_json`])
//! gives provider-safe names ([`names`]), schemas compiled for the provider
//! ([`compile`]) and descriptions within its limits; [`rules::check`] says
//! whether a definition is one the provider accepts. In: [`parse_calls`]
//! reads a model's tool calls in the provider's own shape and maps names and
//! arguments back; [`render_results`] writes the provider's own result
//! messages.

mod anthropic;
mod arguments;
mod cache;
mod calls;
pub mod compile;
mod gemini;
mod json_object;
pub mod names;
mod openai;
pub mod rules;
pub mod scan_budget;
mod text;
mod threads;

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::{Map, Value};

pub use anthropic::StrictLimit;
pub use arguments::MAX_MAPPING_STEPS;
pub use cache::{ConvertedCache, Listed};
use names::NameMap;
pub use threads::ConversionThreads;

/// A tool-list format a caller can ask for with `GET /tools?format=...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// A provider whose tool definitions have rules ([`rules::check`]): the
/// [`ToolFormat`]s other than `raw` and `prompt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini with OpenAPI-subset `parameters`.
    Gemini,
    /// Gemini with `parametersJsonSchema`.
    GeminiJsonSchema,
}

/// Every provider, for tests and tools that check all of them.
pub const PROVIDERS: [Provider; 5] = [
    Provider::OpenAiChat,
    Provider::OpenAiResponses,
    Provider::Anthropic,
    Provider::Gemini,
    Provider::GeminiJsonSchema,
];

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
    /// Whether mapping the arguments back to the tool's own names stopped
    /// at [`MAX_MAPPING_STEPS`]: the rest of them are as the model sent
    /// them (the module still checks them). [`parse_calls`] logs it at `warn`.
    pub arguments_cut_short: bool,
}

/// Why a request body could not be read as the given format at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The format name is not one we know.
    #[error("unknown format `{0}`")]
    UnknownFormat(String),
    /// The body is not the provider's shape.
    #[error("the body is not in the `{format}` format: {reason}")]
    NotProviderShape {
        /// The format that was expected.
        format: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// The message holds more calls than may be run at once; none was read.
    #[error("the message holds {count} tool calls, more than the {max} one message may hold; none was run")]
    TooManyCalls {
        /// The calls in the message.
        count: usize,
        /// The most one message may hold.
        max: usize,
    },
    /// Finding the bare JSON objects of a `text` message would read more
    /// than its scan budget ([`scan_budget`]); none of its calls was run.
    #[error(
        "finding the tool calls in this text would read more than {limit} bytes of JSON ({per_byte} times its length, at least {min}): it opens many JSON objects that never close; none was run. Fence each call in its own ```json block",
        per_byte = scan_budget::SCAN_BYTES_PER_TEXT_BYTE,
        min = scan_budget::MIN_SCAN_BYTES
    )]
    ScanOverBudget {
        /// The text's budget in bytes.
        limit: usize,
    },
}

impl ToolFormat {
    /// Every tool format, in the order the documentation lists them.
    pub const ALL: [ToolFormat; 7] = [
        Self::Raw,
        Self::OpenAiChat,
        Self::OpenAiResponses,
        Self::Anthropic,
        Self::Gemini,
        Self::GeminiJsonSchema,
        Self::Prompt,
    ];

    /// The name used in `?format=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::OpenAiChat => "openai",
            Self::OpenAiResponses => "openai-responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::GeminiJsonSchema => "gemini-json-schema",
            Self::Prompt => "prompt",
        }
    }

    /// The provider whose rules this format's definitions follow, if any.
    pub fn provider(self) -> Option<Provider> {
        match self {
            Self::Raw | Self::Prompt => None,
            Self::OpenAiChat => Some(Provider::OpenAiChat),
            Self::OpenAiResponses => Some(Provider::OpenAiResponses),
            Self::Anthropic => Some(Provider::Anthropic),
            Self::Gemini => Some(Provider::Gemini),
            Self::GeminiJsonSchema => Some(Provider::GeminiJsonSchema),
        }
    }
}

impl Provider {
    /// The tool format that produces this provider's definitions.
    pub fn format(self) -> ToolFormat {
        match self {
            Self::OpenAiChat => ToolFormat::OpenAiChat,
            Self::OpenAiResponses => ToolFormat::OpenAiResponses,
            Self::Anthropic => ToolFormat::Anthropic,
            Self::Gemini => ToolFormat::Gemini,
            Self::GeminiJsonSchema => ToolFormat::GeminiJsonSchema,
        }
    }
}

impl CallFormat {
    /// The name used in `?format=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::OpenAiResponses => "openai-responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Text => "text",
        }
    }
}

impl fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for CallFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolFormat {
    type Err = ProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|format| format.as_str() == s)
            .ok_or_else(|| ProviderError::UnknownFormat(s.to_owned()))
    }
}

impl FromStr for CallFormat {
    type Err = ProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::OpenAi, Self::OpenAiResponses, Self::Anthropic, Self::Gemini, Self::Text]
            .into_iter()
            .find(|format| format.as_str() == s)
            .ok_or_else(|| ProviderError::UnknownFormat(s.to_owned()))
    }
}

impl RequestedCall {
    /// The tool name and arguments to run this call with; or, when it
    /// cannot run (the name maps to no tool of the caller, the arguments
    /// could not be read), the failed result to answer with instead, whose
    /// message tells the model what to fix.
    pub fn executable(&self) -> Result<(&str, &Map<String, Value>), Box<ToolResult>> {
        calls::executable(self)
    }
}

/// The caller's tools in `format`: a JSON array of tool definitions for the
/// provider formats, the manifest form for `raw`, `{"prompt": "..."}` for `prompt`.
/// The provider formats leave out tools whose provider-safe names clash
/// across modules ([`names::Clash`]).
pub fn render_tools<T: std::borrow::Borrow<ToolDefinition>>(format: ToolFormat, tools: &[T]) -> Value {
    let names = NameMap::new(tools);
    let listed = tools.iter().map(T::borrow).filter(|tool| names.lists(format, &tool.name));
    assemble(format, listed, |tool| convert_tool(format, tool, &names.provider_name(&tool.name)))
}

/// Some of the caller's tools (`chosen`, indices into `tools`, in that
/// order) in `format`, under the provider-safe names they have in the
/// whole set `tools`, so that a model's calls of them map back as calls of
/// any listed tool do.
pub fn render_chosen<T: std::borrow::Borrow<ToolDefinition>>(
    format: ToolFormat,
    tools: &[T],
    chosen: &[usize],
) -> Value {
    let names = NameMap::new(tools);
    let chosen: Vec<&ToolDefinition> = chosen
        .iter()
        .filter_map(|&index| tools.get(index))
        .map(T::borrow)
        .filter(|tool| names.lists(format, &tool.name))
        .collect();
    assemble(format, chosen, |tool| convert_tool(format, tool, &names.provider_name(&tool.name)))
}

/// One tool converted to `format` under the provider-safe `name`.
fn convert_tool(format: ToolFormat, tool: &ToolDefinition, name: &str) -> Value {
    match format {
        ToolFormat::Raw => serde_json::to_value(tool).expect("a ToolDefinition always serializes"),
        ToolFormat::OpenAiChat => openai::chat_definition(tool, name),
        ToolFormat::OpenAiResponses => openai::responses_definition(tool, name),
        ToolFormat::Anthropic => anthropic::definition(tool, name),
        ToolFormat::Gemini => gemini::definition(tool, name),
        ToolFormat::GeminiJsonSchema => gemini::json_schema_definition(tool, name),
        ToolFormat::Prompt => Value::String(text::tool_section(tool)),
    }
}

/// Puts converted tools together into the answer for `format`, with what
/// the whole listing decides ([`ListingLimits`]).
fn assemble<I: IntoIterator>(format: ToolFormat, tools: I, convert: impl FnMut(I::Item) -> Value) -> Value {
    let mut limits = ListingLimits::new(format);
    let converted = tools.into_iter().map(convert).map(|definition| limits.value(definition));
    match format {
        ToolFormat::Prompt => {
            let sections: Vec<String> = converted
                .map(|section| match section {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
                .collect();
            serde_json::json!({ "prompt": text::prompt(&sections) })
        }
        _ => Value::Array(converted.collect()),
    }
}

/// What one listing decides beyond each tool: for `anthropic`, which
/// strict definitions stay strict within the per-request budget
/// ([`compile::MAX_STRICT_TOOLS`] and its siblings), in listing order.
pub(crate) struct ListingLimits {
    strict: Option<anthropic::StrictLimit>,
}

impl ListingLimits {
    /// The limits of a listing in `format`, nothing spent yet.
    pub(crate) fn new(format: ToolFormat) -> Self {
        Self { strict: (format == ToolFormat::Anthropic).then(anthropic::StrictLimit::new) }
    }

    /// The next converted definition as it goes into the listing.
    pub(crate) fn value(&mut self, definition: Value) -> Value {
        match &mut self.strict {
            Some(limit) => limit.apply(definition),
            None => definition,
        }
    }
}

/// The calls a message holds, each with its index there, before any is read.
pub(crate) type CallItems<'b> = Vec<(usize, &'b Value)>;

/// Reads the tool calls out of a model's message in `format`; `tools` are
/// the caller's tools, used to map provider-safe names back. A message of
/// more than `max_calls` calls is refused before any call is read.
pub fn parse_calls<T: Borrow<ToolDefinition>>(
    format: CallFormat,
    body: &Value,
    tools: &[T],
    max_calls: usize,
) -> Result<Vec<RequestedCall>, ProviderError> {
    let mut calls = match format {
        CallFormat::OpenAi => read_calls(openai::chat_calls(body)?, max_calls, openai::read_chat_call)?,
        CallFormat::OpenAiResponses => {
            read_calls(openai::responses_calls(body)?, max_calls, openai::read_responses_call)?
        }
        CallFormat::Anthropic => read_calls(anthropic::tool_uses(body)?, max_calls, anthropic::read_tool_use)?,
        CallFormat::Gemini => read_calls(gemini::function_calls(body)?, max_calls, gemini::read_function_call)?,
        CallFormat::Text => at_most(text::parse(body)?, max_calls)?,
    };
    let names = NameMap::new(tools);
    // Each tool called is prepared once, however often the message calls it.
    let mut prepared: Vec<(&str, Value)> = Vec::new();
    // A scan per call: the calls are at most `max_calls`, and a message
    // usually holds one to three, fewer than a map of every tool would cost.
    for call in &mut calls {
        let tool = names
            .tool_for(&call.provider_name)
            .and_then(|name| tools.iter().map(|t| t.borrow()).find(|t: &&ToolDefinition| t.name == name));
        call.tool_name = tool.map(|t| t.name.clone());
        if let (Some(tool), Ok(arguments)) = (tool, &mut call.arguments) {
            let index = match prepared.iter().position(|(name, _)| *name == tool.name) {
                Some(index) => index,
                None => {
                    prepared.push((tool.name.as_str(), compile::prepare(&compile::input_schema(tool))));
                    prepared.len() - 1
                }
            };
            let renamed = matches!(format, CallFormat::Gemini);
            call.arguments_cut_short = !arguments::restore(&prepared[index].1, arguments, renamed);
            if call.arguments_cut_short {
                tracing::warn!(
                    tool = %tool.name,
                    call_id = %call.call_id,
                    "mapping the call's arguments back to the tool's names stopped at {MAX_MAPPING_STEPS} steps \
                     (MAX_MAPPING_STEPS, fixed); the rest goes to the module as the model sent it"
                );
            }
        }
    }
    Ok(calls)
}

/// Each of `items` read with `read`, once their count is known to be at most `max`.
fn read_calls(
    items: CallItems<'_>,
    max: usize,
    read: fn(usize, &Value) -> Result<RequestedCall, ProviderError>,
) -> Result<Vec<RequestedCall>, ProviderError> {
    let items = at_most(items, max)?;
    items.into_iter().map(|(index, item)| read(index, item)).collect()
}

/// `calls`, unless there are more than `max` of them.
fn at_most<C>(calls: Vec<C>, max: usize) -> Result<Vec<C>, ProviderError> {
    match calls.len() {
        count if count > max => Err(ProviderError::TooManyCalls { count, max }),
        _ => Ok(calls),
    }
}

/// Every call of `body` in `format`, for the formats' own tests.
#[cfg(test)]
pub(crate) fn parse_any(format: CallFormat, body: &Value) -> Result<Vec<RequestedCall>, ProviderError> {
    parse_calls(format, body, &[] as &[ToolDefinition], usize::MAX)
}

/// The provider's own result messages for executed calls, in call order.
pub fn render_results(format: CallFormat, results: &[(RequestedCall, ToolResult)]) -> Value {
    match format {
        CallFormat::OpenAi => openai::chat_results(results),
        CallFormat::OpenAiResponses => openai::responses_results(results),
        CallFormat::Anthropic => anthropic::results(results),
        CallFormat::Gemini => gemini::results(results),
        CallFormat::Text => text::results(results),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_read_back() {
        for format in ToolFormat::ALL {
            assert_eq!(format.as_str().parse::<ToolFormat>(), Ok(format));
        }
        for provider in PROVIDERS {
            assert_eq!(provider.format().provider(), Some(provider));
        }
        assert_eq!("text".parse::<CallFormat>(), Ok(CallFormat::Text));
        assert_eq!("xml".parse::<ToolFormat>(), Err(ProviderError::UnknownFormat("xml".into())));
        assert!("prompt".parse::<CallFormat>().is_err());
    }

    #[test]
    fn a_call_whose_arguments_map_back_past_the_steps_says_so() {
        // A union of 3,000 branches, each scored against a sent object of 1,000 names: past the steps.
        let branches: Vec<Value> = (0..3000)
            .map(|i| serde_json::json!({"type": "object", "properties": {format!("b-{i}"): {"type": "string"}}}))
            .collect();
        let sent: Map<String, Value> = (0..1000).map(|i| (format!("k{i}"), Value::Null)).collect();
        for (schema, cut) in
            [(serde_json::json!({"anyOf": branches}), true), (serde_json::json!({"type": "object"}), false)]
        {
            let tool: ToolDefinition = serde_json::from_value(serde_json::json!({
                "name": "m.t", "description": "d", "parameters": [], "required_permission": "guest",
                "input_schema": {"type": "object", "properties": {"v": schema}}
            }))
            .unwrap();
            let message = serde_json::json!({"parts": [{"functionCall": {"name": "m__t", "args": {"v": sent}}}]});
            let calls = parse_calls(CallFormat::Gemini, &message, &[tool], 1).unwrap();
            assert_eq!(calls[0].arguments_cut_short, cut);
        }
    }
}
