//! A module's tools as MCP sees them: the definitions of the manifest
//! turned into MCP `Tool`s once, and a contract result turned into a
//! `CallToolResult`.
//!
//! MCP names a tool without the module prefix (`greet`, not `demo.greet`):
//! the server already is the module, and MCP clients put the server's name in
//! front themselves (Claude Code's `mcp__demo__greet`).
//!
//! MCP wants `structuredContent` to be a JSON object and `outputSchema` an
//! object schema. A tool whose result is something else (a number, a list,
//! an optional struct) is described as `{"result": <its schema>}` and its
//! value sent as `{"result": value}`, the convention of other MCP SDKs.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::contract::{ModuleManifest, ToolDefinition, ToolResult};
use crate::mcp::serialized::{CallAnswer, SerializedResult};
use crate::module::Answer;

/// The key a non-object result is wrapped under.
pub(crate) const WRAPPED_RESULT_KEY: &str = "result";

/// One tool, as listed and called over MCP (by a module, and by the
/// orchestrator under its `module__tool` names).
#[derive(Debug, Clone)]
pub struct McpTool {
    /// The contract name, `module.tool`, which `/execute` is called with.
    pub full_name: String,
    /// The MCP listing.
    pub listing: Tool,
    /// Whether results are sent as `{"result": value}`.
    wraps_result: bool,
}

/// The module's tools in manifest order (the order `tools/list` pages through),
/// found by MCP name.
pub(crate) struct McpTools {
    tools: Vec<McpTool>,
    by_name: HashMap<String, usize>,
}

impl McpTools {
    /// The MCP view of every tool in `manifest`.
    pub(crate) fn new(manifest: &ModuleManifest) -> Self {
        let prefix = format!("{}.", manifest.module_name);
        let tools: Vec<McpTool> = manifest.tools.iter().map(|definition| McpTool::new(&prefix, definition)).collect();
        let by_name = tools.iter().enumerate().map(|(index, tool)| (tool.listing.name.to_string(), index)).collect();
        Self { tools, by_name }
    }

    /// Every tool, in the order `tools/list` gives them.
    pub(crate) fn all(&self) -> &[McpTool] {
        &self.tools
    }

    /// The tool MCP calls `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&McpTool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// The MCP names, for a message about an unknown tool.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.listing.name.as_ref()).collect()
    }
}

impl McpTool {
    fn new(prefix: &str, definition: &ToolDefinition) -> Self {
        Self::named(definition.name.strip_prefix(prefix).unwrap_or(&definition.name).to_owned(), definition)
    }

    /// The MCP view of `definition`, listed as `name`: its title, schemas and
    /// annotations (`readOnlyHint`, `destructiveHint`, ...) from the definition.
    pub fn named(name: String, definition: &ToolDefinition) -> Self {
        let input_schema = object_of(definition.input_schema.clone().unwrap_or_else(|| json!({"type": "object"})));
        let (output_schema, wraps_result) = match definition.output_schema.clone() {
            Some(schema) if is_object_schema(&schema) => (Some(object_of(schema)), false),
            Some(schema) => (Some(wrapped_schema(schema)), true),
            None => (None, false),
        };
        let title = title_of(definition.name.split_once('.').map_or(definition.name.as_str(), |(_, tool)| tool));
        let mut listing = Tool::new(name, definition.description.clone(), Arc::new(input_schema)).with_title(title);
        if let Some(schema) = output_schema {
            listing = listing.with_raw_output_schema(Arc::new(schema));
        }
        if let Some(hints) = definition.annotations {
            listing = listing.with_annotations(
                ToolAnnotations::new()
                    .read_only(hints.read_only)
                    .destructive(hints.destructive)
                    .idempotent(hints.idempotent)
                    .open_world(hints.open_world),
            );
        }
        Self { full_name: definition.name.clone(), listing, wraps_result }
    }

    /// A contract result as an MCP tool result: on success the value as
    /// `structuredContent` and as a JSON text block (a string of a tool
    /// without an output schema: its text alone), on failure the message
    /// (what a model can act on) as text with `isError: true`.
    pub fn call_result(&self, result: ToolResult) -> CallToolResult {
        if !result.success {
            let message = result.error.unwrap_or_else(|| "the tool failed without a message".to_owned());
            return CallToolResult::error(vec![ContentBlock::text(message)]);
        }
        structured(result.result, self.wraps_result)
    }

    /// A module's answer as MCP sends it, the result left as the handler's
    /// serialization wrote it.
    pub(crate) fn answer(&self, answer: Answer) -> CallAnswer {
        match answer.into_outcome() {
            Ok(json) => CallAnswer::Success(SerializedResult::new(json, self.wraps_result)),
            Err(message) => CallAnswer::Failure(message),
        }
    }
}

/// A successful result: `value` as `structuredContent` (wrapped as
/// `{"result": value}` when `wrapped`) and as a JSON text block; a string
/// that is not wrapped (the result of a tool without an output schema, such
/// as a relayed MCP server's text) as its text alone, as `/execute` and
/// `/v1/tool-calls` give it, not quoted as JSON.
pub(crate) fn structured(value: Value, wrapped: bool) -> CallToolResult {
    match value {
        Value::String(text) if !wrapped => CallToolResult::success(vec![ContentBlock::text(text)]),
        value if wrapped => {
            CallToolResult::structured(Value::Object(Map::from_iter([(WRAPPED_RESULT_KEY.to_owned(), value)])))
        }
        value => CallToolResult::structured(value),
    }
}

/// Whether a schema describes JSON objects only.
fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// `{"type": "object", "properties": {"result": schema}, "required": ["result"]}`,
/// with the schema's `$defs` and `$schema` kept at the root, where its
/// `#/$defs/...` references point.
fn wrapped_schema(mut schema: Value) -> JsonObject {
    let mut root = Map::new();
    if let Some(inner) = schema.as_object_mut() {
        for key in ["$schema", "$defs", "definitions"] {
            if let Some(value) = inner.remove(key) {
                root.insert(key.to_owned(), value);
            }
        }
    }
    root.insert("type".to_owned(), json!("object"));
    root.insert("properties".to_owned(), json!({ WRAPPED_RESULT_KEY: schema }));
    root.insert("required".to_owned(), json!([WRAPPED_RESULT_KEY]));
    root
}

/// The object of a schema; `true` and other non-objects (never produced by
/// the SDK) become the empty schema.
fn object_of(schema: Value) -> JsonObject {
    match schema {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}

/// A display title from a tool name: `plan_trip` reads `Plan trip`.
fn title_of(name: &str) -> String {
    let spaced = name.replace(['_', '-', '.'], " ");
    let mut chars = spaced.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ToolAnnotations as Hints;
    use crate::contract::{ErrorKind, Permission};

    fn definition(name: &str, output_schema: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: "Do it.".to_owned(),
            parameters: Vec::new(),
            required_permission: Permission::User,
            input_schema: Some(json!({"type": "object", "properties": {}})),
            output_schema: Some(output_schema),
            annotations: Some(Hints { read_only: true, destructive: false, idempotent: true, open_world: false }),
            requires_approval: None,
            timeout_seconds: None,
            risk_level: None,
        }
    }

    #[test]
    fn tools_are_named_without_the_module_and_keep_their_hints() {
        let tool = McpTool::new("demo.", &definition("demo.plan_trip", json!({"type": "object"})));
        assert_eq!(tool.full_name, "demo.plan_trip");
        assert_eq!(tool.listing.name, "plan_trip");
        assert_eq!(tool.listing.title.as_deref(), Some("Plan trip"));
        let hints = tool.listing.annotations.clone().unwrap();
        assert_eq!(
            (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint),
            (Some(true), Some(false), Some(true), Some(false))
        );
        let result = tool.call_result(ToolResult::success("demo.plan_trip", json!({"stops": 2})));
        assert_eq!(result.structured_content, Some(json!({"stops": 2})));
        assert_eq!(result.content[0].as_text().unwrap().text, r#"{"stops":2}"#);
        assert_eq!(result.is_error, Some(false));
    }

    #[test]
    fn non_object_results_are_wrapped_with_their_definitions_at_the_root() {
        let schema = json!({"$schema": "s", "type": "array", "items": {"$ref": "#/$defs/X"}, "$defs": {"X": {}}});
        let tool = McpTool::new("m.", &definition("m.list", schema));
        let output = Value::Object(tool.listing.output_schema.as_deref().unwrap().clone());
        assert_eq!(
            output,
            json!({"$schema": "s", "$defs": {"X": {}}, "type": "object",
                   "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/X"}}}, "required": ["result"]})
        );
        let result = tool.call_result(ToolResult::success("m.list", json!([1])));
        assert_eq!(result.structured_content, Some(json!({"result": [1]})));
        let wrapped = McpTool::new("m.", &definition("m.name", json!({"type": "string"})));
        let result = wrapped.call_result(ToolResult::success("m.name", json!("Ann")));
        assert_eq!(result.structured_content, Some(json!({"result": "Ann"})), "matching its output schema");
    }

    #[test]
    fn a_text_result_without_an_output_schema_is_that_text() {
        let mut schemaless = definition("m.say", json!({}));
        schemaless.output_schema = None;
        let result = McpTool::new("m.", &schemaless).call_result(ToolResult::success("m.say", json!("done")));
        assert_eq!((result.content[0].as_text().unwrap().text.as_str(), result.structured_content), ("done", None));
        assert_eq!(result.is_error, Some(false));
    }

    #[test]
    fn failures_carry_the_message_as_an_error_result() {
        let tool = McpTool::new("m.", &definition("m.x", json!({"type": "object"})));
        let result = tool.call_result(ToolResult::failure("m.x", ErrorKind::Timeout, "too slow; try less"));
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, None);
        assert_eq!(result.content[0].as_text().unwrap().text, "too slow; try less");
    }
}
