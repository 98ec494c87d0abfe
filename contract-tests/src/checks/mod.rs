//! The checks, grouped by what they look at, and the lenient view of a
//! manifest's tools they share.

pub mod auth;
pub mod endpoints;
pub mod execute;
pub mod manifest;
pub mod parameters;
pub mod providers;
pub mod schemas;

use serde_json::{Map, Value};

/// One entry of a manifest's `tools`, read from the raw JSON so that each
/// check can still run when other fields have the wrong type.
#[derive(Debug, Clone, Copy)]
pub struct ToolView<'a> {
    /// Where the entry sits in `tools`.
    pub index: usize,
    /// The entry itself.
    pub entry: &'a Map<String, Value>,
}

impl<'a> ToolView<'a> {
    /// The tool's name, when it is a string.
    pub fn name(&self) -> Option<&'a str> {
        self.entry.get("name").and_then(Value::as_str)
    }

    /// How messages refer to the tool: its name, or `tools[i]`.
    pub fn label(&self) -> String {
        self.name().map_or_else(|| format!("tools[{}]", self.index), str::to_owned)
    }

    /// A field when it is present and not null.
    pub fn field(&self, key: &str) -> Option<&'a Value> {
        self.entry.get(key).filter(|value| !value.is_null())
    }

    /// `input_schema`, when it is a JSON object.
    pub fn input_schema(&self) -> Option<&'a Value> {
        self.field("input_schema").filter(|schema| schema.is_object())
    }

    /// `output_schema`, when it is a JSON object.
    pub fn output_schema(&self) -> Option<&'a Value> {
        self.field("output_schema").filter(|schema| schema.is_object())
    }

    /// The parameter entries, when `parameters` is an array.
    pub fn parameters(&self) -> Option<&'a Vec<Value>> {
        self.entry.get("parameters").and_then(Value::as_array)
    }

    /// Whether the tool is annotated `destructive`.
    pub fn is_destructive(&self) -> bool {
        self.field("annotations").and_then(|a| a.get("destructive")).and_then(Value::as_bool) == Some(true)
    }

    /// `timeout_seconds`, when it is a positive number.
    pub fn timeout_seconds(&self) -> Option<f64> {
        self.field("timeout_seconds").and_then(Value::as_f64).filter(|s| *s > 0.0)
    }
}

/// The object entries of `manifest.tools` (other entries are reported by
/// `manifest.base_fields`).
pub fn tools_of(manifest: &Value) -> Vec<ToolView<'_>> {
    manifest
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .enumerate()
                .filter_map(|(index, tool)| tool.as_object().map(|entry| ToolView { index, entry }))
                .collect()
        })
        .unwrap_or_default()
}

/// The name of a JSON value's type, for messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
