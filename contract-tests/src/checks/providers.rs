//! Whether every tool can be given to every model provider
//! (`shared/PROVIDERS.md`): the contract's own limits (the provider-safe
//! name, the description length), and the orchestrator's converters run on
//! each tool with their output put through the orchestrator's rule checker.

use module_sdk::contract::ToolDefinition;
use provider_formats::{PROVIDERS, render_tools, rules};
use serde_json::Value;

use super::ToolView;
use crate::check::{Check, Findings, Level};

/// The longest tool name any provider accepts.
pub const MAX_NAME_CHARS: usize = 64;

/// The longest tool description OpenAI accepts.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// Runs the provider checks over every tool.
pub fn check_providers(tools: &[ToolView<'_>], findings: &mut Findings) {
    for check in [Check::ProviderNames, Check::ProviderDescriptions, Check::ProviderConvertible] {
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
        // A tool whose base fields do not read is reported by the manifest checks.
        if let Ok(definition) = serde_json::from_value::<ToolDefinition>(Value::Object(tool.entry.clone())) {
            // What an orchestrator reading only the base fields converts:
            // the schema built from `parameters`.
            let base_view = ToolDefinition { input_schema: None, output_schema: None, ..definition.clone() };
            let base_problems = conversion_problems(&base_view);
            for problem in &base_problems {
                findings.fail(Check::ProviderConvertible, format!("{label} (from parameters): {problem}"));
            }
            if definition.input_schema.is_some() {
                for problem in conversion_problems(&definition).into_iter().filter(|p| !base_problems.contains(p)) {
                    findings.fail_at(Check::ProviderConvertible, Level::Full, format!("{label}: {problem}"));
                }
            }
        }
    }
}

/// What each provider's rules refuse in the orchestrator's conversion of `definition`.
fn conversion_problems(definition: &ToolDefinition) -> Vec<String> {
    let tools = std::slice::from_ref(definition);
    PROVIDERS
        .into_iter()
        .flat_map(|provider| {
            let converted = render_tools(provider.format(), tools);
            rules::check_all(provider, &converted)
                .into_iter()
                .map(move |violation| format!("as {} tool: {violation}", provider.format().as_str()))
        })
        .collect()
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
        return Some(format!(
            "the provider-safe name {safe:?} has {chars} characters; providers accept 1 to {MAX_NAME_CHARS}"
        ));
    }
    if let Some(bad) = safe.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Some(format!(
            "the provider-safe name {safe:?} contains {bad:?}; OpenAI, Anthropic and Bedrock accept only [a-zA-Z0-9_-]"
        ));
    }
    if safe.starts_with(|c: char| !(c.is_ascii_alphabetic() || c == '_')) {
        return Some(format!("the provider-safe name {safe:?} must start with a letter or underscore for Gemini"));
    }
    None
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
    fn conversion_is_checked_for_every_provider() {
        let tool = |schema: Value| -> ToolDefinition {
            serde_json::from_value(json!({"name": "m.t", "description": "d", "input_schema": schema})).unwrap()
        };
        let fine = tool(json!({"type": "object", "properties": {"a-b": {"type": "string"}}, "required": ["a-b"]}));
        assert_eq!(conversion_problems(&fine), Vec::<String>::new());
        let problems = conversion_problems(&tool(json!({"type": "object", "properties": {"a": {"type": "text"}}})));
        assert!(!problems.is_empty() && problems.iter().all(|p| p.starts_with("as ")), "{problems:?}");
        assert!(problems.iter().any(|p| p.starts_with("as gemini tool:")), "{problems:?}");
    }
}
