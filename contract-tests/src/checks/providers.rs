//! Whether every tool can be given to every model provider
//! (`shared/PROVIDERS.md`): the provider-safe name, the description length
//! and the schema shape the converters need.
//!
//! The orchestrator's full rule checker is not available yet; these are the
//! rules the converters cannot repair. Replacing this file's body with a
//! call to that checker is the whole integration.

use serde_json::Value;

use super::ToolView;
use crate::check::{Check, Findings};

/// The longest tool name any provider accepts.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest tool description OpenAI accepts.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Keywords that may not sit at the root of a tool's parameters (OpenAI
/// rejects a root union; Gemini needs a single root `type`).
const ROOT_UNIONS: [&str; 4] = ["anyOf", "oneOf", "allOf", "not"];

/// Runs the provider checks over every tool.
pub fn check_providers(tools: &[ToolView<'_>], findings: &mut Findings) {
    for check in [Check::ProviderNames, Check::ProviderDescriptions, Check::ProviderSchemaShape] {
        findings.ran(check);
    }
    for tool in tools {
        let label = tool.label();
        if let Some(name) = tool.name()
            && let Some(problem) = provider_name_problem(name)
        {
            findings.fail(Check::ProviderNames, format!("{label}: {problem}"));
        }
        if let Some(description) = tool.entry.get("description").and_then(Value::as_str) {
            let chars = description.chars().count();
            if chars > MAX_DESCRIPTION_CHARS {
                findings.fail(
                    Check::ProviderDescriptions,
                    format!("{label}: the description has {chars} characters; OpenAI accepts at most {MAX_DESCRIPTION_CHARS}"),
                );
            }
        }
        if let Some(schema) = tool.input_schema() {
            for problem in schema_shape_problems(schema) {
                findings.fail(Check::ProviderSchemaShape, format!("{label} input_schema: {problem}"));
            }
        }
    }
}

/// The provider-safe form of a tool name: `research.web_search` becomes `research__web_search`.
pub fn provider_safe_name(name: &str) -> String {
    name.replacen('.', "__", 1)
}

/// Why the provider-safe form of `name` would be refused, if it would.
fn provider_name_problem(name: &str) -> Option<String> {
    let safe = provider_safe_name(name);
    let chars = safe.chars().count();
    if chars == 0 || chars > MAX_NAME_CHARS {
        return Some(format!("the provider-safe name {safe:?} has {chars} characters; providers accept 1 to {MAX_NAME_CHARS}"));
    }
    if let Some(bad) = safe.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Some(format!("the provider-safe name {safe:?} contains {bad:?}; OpenAI, Anthropic and Bedrock accept only [a-zA-Z0-9_-]"));
    }
    if safe.starts_with(|c: char| !(c.is_ascii_alphabetic() || c == '_')) {
        return Some(format!("the provider-safe name {safe:?} must start with a letter or underscore for Gemini"));
    }
    None
}

/// Where a schema breaks what every provider's converter needs.
fn schema_shape_problems(schema: &Value) -> Vec<String> {
    let mut problems: Vec<String> = ROOT_UNIONS
        .iter()
        .filter(|keyword| schema.get(**keyword).is_some())
        .map(|keyword| format!("`{keyword}` at the root; providers need a plain object root"))
        .collect();
    property_name_problems(schema, "", &mut problems);
    problems
}

/// Property names Gemini refuses (`^[A-Za-z_][A-Za-z0-9_]*$`), anywhere in the schema.
fn property_name_problems(node: &Value, at: &str, problems: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            if let Some(properties) = map.get("properties").and_then(Value::as_object) {
                for name in properties.keys().filter(|name| !is_gemini_property_name(name)) {
                    problems.push(format!("property {name:?} at {}/properties: Gemini accepts only [A-Za-z_][A-Za-z0-9_]*", if at.is_empty() { "#" } else { at }));
                }
            }
            for (key, child) in map {
                property_name_problems(child, &format!("{at}/{key}"), problems);
            }
        }
        Value::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                property_name_problems(child, &format!("{at}/{index}"), problems);
            }
        }
        _ => {}
    }
}

fn is_gemini_property_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_must_fit_every_provider() {
        assert_eq!(provider_name_problem("research.web_search"), None);
        let long = format!("{}.{}", "a".repeat(30), "b".repeat(33));
        assert!(provider_name_problem(&long).unwrap().contains("65 characters"));
        assert!(provider_name_problem("mod.tool name").unwrap().contains("' '"));
        assert!(provider_name_problem("9mod.tool").unwrap().contains("Gemini"));
    }

    #[test]
    fn schema_shape_finds_root_unions_and_bad_property_names() {
        let ok = json!({"type": "object", "properties": {"a_b": {"type": "object", "properties": {"_c": {}}}}});
        assert!(schema_shape_problems(&ok).is_empty());
        let bad = json!({"type": "object", "anyOf": [{}], "properties": {"x": {"properties": {"a-b": {}}}},
            "$defs": {"D": {"properties": {"1x": {}}}}});
        let problems = schema_shape_problems(&bad);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[1].contains("\"a-b\" at /properties/x/properties"), "{problems:?}");
    }
}
