//! The text protocol, for models without native tool calling: a
//! system-prompt section that lists the tools, and a parser that finds
//! `{"tool": ..., "args": {...}}` objects in free model text, fenced in
//! ```` ```json ```` blocks or bare, several per message. Prose around them is
//! ignored; only objects of exactly that shape are executed, and code
//! blocks in other languages never are.

use module_sdk::contract::{ToolDefinition, ToolResult};
use module_sdk::schema::parameters_of;
use serde_json::{Map, Value, json};

use super::calls::{arguments_from_value, generated_id, not_shape, result_text};
use super::compile;
use super::scan_budget::ScanBudget;
use super::{ProviderError, RequestedCall};

/// The fence that opens and closes a code block.
const FENCE: &str = "```";

/// The instructions above the tool list.
const HEADER: &str = r#"## Tools

You can call the tools listed below. To call one, write a JSON object with the tool's exact name and its arguments in a fenced block:

```json
{"tool": "module.tool", "args": {"argument": "value"}}
```

Write one block per call; several blocks in one message make several calls. Use only the listed tools and arguments. The results come back in the next message."#;

/// The whole prompt section, from the sections of the caller's tools.
pub fn prompt(sections: &[String]) -> String {
    if sections.is_empty() {
        return format!("{HEADER}\n\nNo tools are available right now.\n");
    }
    format!("{HEADER}\n\n{}\n", sections.join("\n\n"))
}

/// `{"prompt": ...}` with [`prompt`] of the sections, as JSON text, from
/// the sections already escaped ([`escaped`]): no section is escaped again.
pub fn prompt_json(escaped_sections: &[&str]) -> String {
    if escaped_sections.is_empty() {
        return json!({ "prompt": prompt(&[]) }).to_string();
    }
    let header = escaped(&format!("{HEADER}\n\n"));
    let length = escaped_sections.iter().map(|section| section.len() + 4).sum::<usize>();
    let mut out = String::with_capacity(header.len() + length + 16);
    out.push_str("{\"prompt\":\"");
    out.push_str(&header);
    for (index, section) in escaped_sections.iter().enumerate() {
        if index > 0 {
            out.push_str("\\n\\n");
        }
        out.push_str(section);
    }
    out.push_str("\\n\"}");
    out
}

/// `text` as the inside of a JSON string (what goes between its quotes).
pub fn escaped(text: &str) -> String {
    let mut quoted = serde_json::to_string(text).expect("a string always serializes");
    quoted.pop();
    quoted.remove(0);
    quoted
}

/// One tool's part of the prompt: name, description, arguments, and the
/// full schema when arguments nest.
pub fn tool_section(tool: &ToolDefinition) -> String {
    let schema = compile::input_schema(tool);
    let parameters = parameters_of(&schema);
    let mut out = format!("### {}\n{}\n", tool.name, tool.description.trim());
    if parameters.is_empty() {
        out.push_str("Arguments: none (send `\"args\": {}`).\n");
        return out;
    }
    out.push_str("Arguments:\n");
    for parameter in &parameters {
        let allowed = parameter.allowed.as_ref().map_or(String::new(), |values| {
            let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
            format!(", one of {}", quoted.join(", "))
        });
        let need = if parameter.required { "required" } else { "optional" };
        out.push_str(&format!(
            "- `{}` ({}{allowed}, {need}): {}\n",
            parameter.name,
            parameter.kind.as_str(),
            parameter.description
        ));
    }
    let nested = parameters.iter().any(|p| matches!(p.kind.as_str(), "object" | "array"));
    if nested {
        out.push_str("Arguments schema: ");
        let mut json = Vec::new();
        compile::prepare_json(&schema, &mut json);
        // serde_json's bytes are UTF-8: checked at once, not read as lossy chunks.
        match std::str::from_utf8(&json) {
            Ok(text) => out.push_str(text),
            Err(_) => out.push_str(&String::from_utf8_lossy(&json)),
        }
        out.push('\n');
    }
    out
}

/// The tool calls in a model's text: the body is the text itself, or an
/// object with the text under `text` or `content`.
pub fn parse(body: &Value) -> Result<Vec<RequestedCall>, ProviderError> {
    let text = match body {
        Value::String(text) => text,
        Value::Object(map) => match map.get("text").or_else(|| map.get("content")) {
            Some(Value::String(text)) => text,
            _ => {
                return Err(not_shape(
                    "text",
                    "expected a string, or an object with the text under `text` or `content`",
                ));
            }
        },
        _ => return Err(not_shape("text", "expected the model's text as a JSON string")),
    };
    let mut calls = Vec::new();
    for found in scan(text)? {
        match found {
            Found::Value(Value::Array(values)) => {
                for value in values {
                    calls.extend(call_from(&value, calls.len()));
                }
            }
            Found::Value(value) => calls.extend(call_from(&value, calls.len())),
            Found::Malformed { name, error } => calls.push(RequestedCall {
                call_id: generated_id(calls.len()),
                provider_name: name,
                tool_name: None,
                arguments_cut_short: false,
                arguments: Err(format!(
                    "the JSON of this tool call is malformed ({error}); write it again as {{\"tool\": \"<name>\", \"args\": {{...}}}}"
                )),
            }),
        }
    }
    Ok(calls)
}

/// Something in the text that may be a call.
enum Found {
    /// A JSON value: a fenced block's content (an object or a list of them) or a bare object.
    Value(Value),
    /// A fenced JSON block that mentions a tool but does not parse.
    Malformed { name: String, error: String },
}

/// Every JSON value in fenced JSON blocks and every bare JSON object
/// outside fences, in order; an error when the bare objects would take
/// more reading than the text's [`ScanBudget`].
fn scan(text: &str) -> Result<Vec<Found>, ProviderError> {
    scan_within(text, &mut ScanBudget::of(text))
}

/// [`scan`], reading bare objects within `budget`.
fn scan_within(text: &str, budget: &mut ScanBudget) -> Result<Vec<Found>, ProviderError> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        if rest.starts_with(FENCE) {
            let open_end = rest.find('\n').unwrap_or(rest.len());
            let language = rest[FENCE.len()..open_end].trim().to_ascii_lowercase();
            let body_start = (open_end + 1).min(rest.len());
            let close = rest[body_start..].find(FENCE).map_or(rest.len(), |i| body_start + i);
            if language.is_empty() || language == "json" {
                found.extend(fenced(&rest[body_start..close]));
            }
            at += (close + FENCE.len()).min(rest.len());
            continue;
        }
        if rest.starts_with('{')
            && let Some((value, length)) = budget.object(rest)?
        {
            found.push(Found::Value(value));
            at += length;
            continue;
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    Ok(found)
}

/// The content of one fenced block.
fn fenced(body: &str) -> Option<Found> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(body) {
        Ok(value) => Some(Found::Value(value)),
        Err(e) if body.contains("\"tool\"") => {
            Some(Found::Malformed { name: quoted_tool_name(body), error: e.to_string() })
        }
        Err(_) => None,
    }
}

/// The string after `"tool":` in text that is not valid JSON, if there is one.
fn quoted_tool_name(text: &str) -> String {
    let after = text.split_once("\"tool\"").map_or("", |(_, after)| after).trim_start();
    let Some(value) = after.strip_prefix(':').map(str::trim_start).and_then(|v| v.strip_prefix('"')) else {
        return String::new();
    };
    value.split('"').next().unwrap_or_default().to_owned()
}

/// The call a found value stands for: an object with a string `tool` and
/// optionally `args` (or `arguments`) and nothing else.
fn call_from(value: &Value, index: usize) -> Option<RequestedCall> {
    let map: &Map<String, Value> = value.as_object()?;
    let name = map.get("tool")?.as_str()?;
    if !map.keys().all(|k| matches!(k.as_str(), "tool" | "args" | "arguments")) {
        return None;
    }
    let arguments = map.get("args").or_else(|| map.get("arguments")).unwrap_or(&Value::Null);
    Some(RequestedCall {
        call_id: generated_id(index),
        provider_name: name.to_owned(),
        tool_name: None,
        arguments_cut_short: false,
        arguments: arguments_from_value(arguments),
    })
}

/// The results as the next user message: one titled part per call.
pub fn results(results: &[(RequestedCall, ToolResult)]) -> Value {
    let parts: Vec<String> = results
        .iter()
        .map(|(call, result)| {
            let name = call.tool_name.as_deref().unwrap_or(&call.provider_name);
            let outcome = if result.success { "result" } else { "failed" };
            format!("### {name} ({}) {outcome}\n{}", call.call_id, result_text(result))
        })
        .collect();
    json!({"role": "user", "content": format!("Tool results:\n\n{}", parts.join("\n\n"))})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan_budget::SCAN_BYTES_PER_TEXT_BYTE;

    #[test]
    fn the_prompt_from_escaped_sections_is_the_same_text() {
        for sections in [vec![], vec!["### a.b\nSay \"hi\"\t\\ é\u{1}".to_owned(), "### c.d\n".to_owned()]] {
            let escaped_sections: Vec<String> = sections.iter().map(|section| escaped(section)).collect();
            let borrowed: Vec<&str> = escaped_sections.iter().map(String::as_str).collect();
            assert_eq!(prompt_json(&borrowed), json!({ "prompt": prompt(&sections) }).to_string());
        }
    }

    /// A found call's name and arguments.
    type Found = (String, Result<Map<String, Value>, String>);

    fn names(text: &str) -> Vec<Found> {
        parse(&json!(text)).unwrap().into_iter().map(|c| (c.provider_name, c.arguments)).collect()
    }

    #[test]
    fn fenced_and_bare_calls_are_found_in_order_among_prose() {
        let text = "Let me look.\n```json\n{\"tool\": \"research.web_search\", \"args\": {\"query\": \"rust\"}}\n```\nAnd also {\"tool\": \"demo.greet\", \"args\": {\"name\": \"Ada\"}} then done.";
        let calls = parse(&json!(text)).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].provider_name, "research.web_search");
        assert_eq!(calls[0].arguments.as_ref().unwrap()["query"], "rust");
        assert_eq!(calls[1].provider_name, "demo.greet");
        assert_eq!(calls[1].call_id, generated_id(1));
        let listed = "```\n[{\"tool\": \"a.b\"}, {\"tool\": \"c.d\", \"args\": {}}]\n```";
        assert_eq!(names(listed).len(), 2);
    }

    #[test]
    fn only_exact_call_objects_are_taken() {
        let text = r#"Example config: {"name": "x"}. A result: {"tool": "demo.greet", "success": true}.
```python
{"tool": "demo.greet", "args": {}}
```
Nested: {"outer": {"tool": "demo.greet", "args": {}}}
{"tool": 5, "args": {}}"#;
        assert!(names(text).is_empty());
    }

    #[test]
    fn malformed_fenced_calls_and_bad_args_explain_themselves() {
        let text = "```json\n{\"tool\": \"demo.greet\", \"args\": {\"name\": \"Ada\"\n```\n{\"tool\": \"demo.greet\", \"args\": \"Ada\"}";
        let found = names(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, "demo.greet");
        assert!(found[0].1.as_ref().unwrap_err().starts_with("the JSON of this tool call is malformed"));
        assert!(found[1].1.as_ref().unwrap_err().contains("not a string"));
    }

    #[test]
    fn objects_that_never_close_cost_a_bounded_read_then_an_error_naming_the_budget() {
        // The audit's shape, smaller: every `{` opens an object that holds the next, none closes.
        let hostile = format!("{{\"a\":[{}", "0,".repeat(400)).repeat(300);
        let mut budget = ScanBudget::of(&hostile);
        let error = scan_within(&hostile, &mut budget).err().expect("over budget");
        assert_eq!(error, ProviderError::ScanOverBudget { limit: SCAN_BYTES_PER_TEXT_BYTE * hostile.len() });
        assert!(budget.read() <= SCAN_BYTES_PER_TEXT_BYTE * hostile.len(), "{}", budget.read());
        let message = parse(&json!(hostile)).unwrap_err().to_string();
        assert!(message.contains("8 times its length") && message.contains("```json"), "{message}");
        // A long answer cut off inside a call's arguments reads each byte about twice.
        let content = "Use {braces} and \\\"quotes\\\" freely. ".repeat(10_000);
        let cut = format!(
            "{{\"tool\": \"a.b\", \"args\": {{}}}} then {{\"tool\": \"c.d\", \"args\": {{\"text\": \"{content}"
        );
        let mut budget = ScanBudget::of(&cut);
        let found = scan_within(&cut, &mut budget).unwrap();
        assert_eq!(found.len(), 1);
        assert!(budget.read() <= 3 * cut.len(), "{} for {}", budget.read(), cut.len());
    }

    #[test]
    fn an_unclosed_fence_and_unicode_prose_do_not_trip_the_scanner() {
        let text = "Voilà — {not json} ```json\n{\"tool\": \"demo.greet\"}";
        let found = names(text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1, Ok(Map::new()));
        assert!(parse(&json!({"content": 1})).is_err());
        assert_eq!(parse(&json!({"text": "no calls"})).unwrap(), []);
    }
}
