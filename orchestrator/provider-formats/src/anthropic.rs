//! Anthropic Messages: `{name, description, input_schema}` definitions,
//! `tool_use` content blocks in, `tool_result` blocks (with `is_error`) out.

use module_sdk::contract::{ToolDefinition, ToolResult};
use serde_json::{Map, Value, json};

use super::calls::{arguments_from_value, generated_id, not_shape, result_text};
use super::compile::{self, Compiled, StrictBudget, StrictCost};
use super::json_object::object_text;
use super::{CallItems, ProviderError, RequestedCall};

/// How the text of a strict definition ends: `strict` is its last field.
const STRICT_SUFFIX: &str = ",\"strict\":true}";

/// An Anthropic tool definition, `strict: true` (the last field) when its
/// schema can be strict; the schema in JSON Schema 2020-12. Whether it stays
/// strict in a listing is for [`StrictLimit`] to say.
pub fn definition(tool: &ToolDefinition, name: &str) -> Value {
    let Compiled { schema, strict } = compile::anthropic(&compile::input_schema(tool));
    let mut fields = Map::new();
    fields.insert("name".into(), name.into());
    fields.insert("description".into(), tool.description.trim().into());
    fields.insert("input_schema".into(), schema);
    if strict {
        fields.insert("strict".into(), true.into());
    }
    Value::Object(fields)
}

/// [`definition`] as JSON text, written without building it as a `Value`
/// (the schema straight from its compiled tree), and when it is strict the
/// budget its schema takes.
pub fn definition_json(tool: &ToolDefinition, name: &str) -> (String, Option<StrictCost>) {
    compile::with_anthropic(&compile::input_schema(tool), |schema, strict| {
        let text = object_text(|object| {
            let object = object
                .string("name", name)
                .string("description", tool.description.trim())
                .field("input_schema", |out| schema.write(out));
            if strict { object.boolean("strict", true) } else { object }
        });
        (text, strict.then(|| StrictCost::of_node(compile::Node::from(schema))))
    })
}

/// Anthropic's per-request strict budget applied to one listing in order:
/// a strict definition keeps `strict: true` while it fits (at most 20 strict
/// tools, 24 optional and 16 union parameters in total), later ones are
/// sent without it (their schema stays the closed, strict-shaped one, which
/// non-strict tools take as well).
#[derive(Debug, Default)]
pub struct StrictLimit {
    budget: StrictBudget,
}

impl StrictLimit {
    /// A listing's limit, nothing spent yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a strict definition of `cost` may stay strict in this listing (spending it if so).
    fn keeps(&mut self, cost: StrictCost) -> bool {
        // Once 20 are strict the rest need not be measured.
        !self.budget.is_full() && self.budget.admit(cost)
    }

    /// `definition` as it goes into the listing.
    pub fn apply(&mut self, mut definition: Value) -> Value {
        let strict = definition.get("strict");
        if strict.is_some()
            && !(strict == Some(&Value::Bool(true))
                && self.keeps(StrictCost::of(definition.get("input_schema").unwrap_or(&Value::Null))))
            && let Value::Object(fields) = &mut definition
        {
            fields.remove("strict");
        }
        definition
    }

    /// Appends to `out` the JSON text `json` of a strict definition whose
    /// schema costs `cost`, as it goes into the listing.
    pub fn push_json(&mut self, cost: StrictCost, json: &str, out: &mut String) {
        if self.keeps(cost) {
            out.push_str(json);
            return;
        }
        match json.strip_suffix(STRICT_SUFFIX) {
            Some(head) => {
                out.push_str(head);
                out.push('}');
            }
            None => {
                let mut plain: Value = serde_json::from_str(json).unwrap_or(Value::Null);
                if let Value::Object(fields) = &mut plain {
                    fields.remove("strict");
                }
                out.push_str(&plain.to_string());
            }
        }
    }
}

/// The `tool_use` blocks of a message or Messages API response (its
/// `content`), or of a bare content list, not yet read.
pub fn tool_uses(body: &Value) -> Result<CallItems<'_>, ProviderError> {
    let blocks = match body.get("content").unwrap_or(body) {
        Value::Array(blocks) => blocks,
        Value::String(_) => return Ok(Vec::new()),
        _ => return Err(not_shape("anthropic", "expected a message with a `content` list of blocks")),
    };
    Ok(blocks
        .iter()
        .enumerate()
        .filter(|(_, block)| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .collect())
}

/// The content block `index` of [`tool_uses`].
pub fn read_tool_use(index: usize, block: &Value) -> Result<RequestedCall, ProviderError> {
    let name = block
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| not_shape("anthropic", format!("tool_use block {index} has no `name`")))?;
    Ok(RequestedCall {
        call_id: block.get("id").and_then(Value::as_str).map_or_else(|| generated_id(index), str::to_owned),
        provider_name: name.to_owned(),
        tool_name: None,
        arguments: arguments_from_value(block.get("input").unwrap_or(&Value::Null)),
        arguments_cut_short: false,
    })
}

/// One user message with a `tool_result` block per result.
pub fn results(results: &[(RequestedCall, ToolResult)]) -> Value {
    let blocks: Vec<Value> = results
        .iter()
        .map(|(call, result)| {
            json!({
                "type": "tool_result",
                "tool_use_id": call.call_id,
                "content": result_text(result),
                "is_error": !result.success,
            })
        })
        .collect();
    json!({"role": "user", "content": blocks})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallFormat, parse_any};

    #[test]
    fn text_only_messages_have_no_calls_and_bad_shapes_are_refused() {
        assert_eq!(
            parse_any(CallFormat::Anthropic, &json!({"role": "assistant", "content": "just text"})).unwrap(),
            []
        );
        assert_eq!(parse_any(CallFormat::Anthropic, &json!([{"type": "text", "text": "hi"}])).unwrap(), []);
        assert!(parse_any(CallFormat::Anthropic, &json!({"content": 5})).is_err());
        assert!(parse_any(CallFormat::Anthropic, &json!([{"type": "tool_use", "id": "t"}])).is_err());
    }

    #[test]
    fn strict_definitions_past_the_budget_lose_the_flag_in_value_and_text_alike() {
        let tool: ToolDefinition = serde_json::from_value(json!({
            "name": "m.t", "description": "d",
            "input_schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
        }))
        .unwrap();
        let strict = definition(&tool, "m__t");
        let text = strict.to_string();
        assert!(text.ends_with(STRICT_SUFFIX), "{text}");
        let cost = StrictCost::of(&strict["input_schema"]);
        let (mut values, mut texts) = (StrictLimit::new(), StrictLimit::new());
        let mut kept = 0;
        for _ in 0..20 {
            let listed = values.apply(strict.clone());
            let mut listed_text = String::new();
            texts.push_json(cost, &text, &mut listed_text);
            assert_eq!(serde_json::from_str::<Value>(&listed_text).unwrap(), listed);
            kept += usize::from(listed.get("strict").is_some());
        }
        // Two optional parameters each: twelve fit in the 24.
        assert_eq!(kept, 12);
    }

    #[test]
    fn input_that_is_not_an_object_is_reported_to_the_model() {
        let calls =
            parse_any(CallFormat::Anthropic, &json!([{"type": "tool_use", "id": "t1", "name": "m__t", "input": [1]}]))
                .unwrap();
        assert!(calls[0].arguments.as_ref().unwrap_err().contains("not an array"));
    }
}
