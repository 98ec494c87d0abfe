//! `parameters` against `input_schema`: the same names, the same required
//! set, compatible types and the same enumerations.

use std::collections::{BTreeSet, HashMap};

use module_sdk::schema::parameters_of;
use serde_json::Value;

use super::ToolView;
use crate::check::{Check, Findings};
use crate::schema_types::{accepts, value_types};

/// Runs the four consistency checks over every tool that has both; skips
/// them when no tool has.
pub fn check_parameters(tools: &[ToolView<'_>], findings: &mut Findings) {
    let checks = [Check::ParameterNames, Check::ParameterRequired, Check::ParameterTypes, Check::ParameterEnums];
    for tool in tools {
        if let (Some(declared), Some(schema)) = (tool.parameters(), tool.input_schema()) {
            checks.into_iter().for_each(|check| findings.ran(check));
            compare(&tool.label(), declared, schema, findings);
        }
    }
    for check in checks {
        findings.skip(check, "no tool has both parameters and an input_schema (an extension) to compare them with");
    }
}

fn compare(label: &str, declared: &[Value], schema: &Value, findings: &mut Findings) {
    let expected = parameters_of(schema);
    let mut by_name: HashMap<&str, &Value> = HashMap::new();
    for parameter in declared {
        let Some(name) = parameter.get("name").and_then(Value::as_str) else { continue };
        if by_name.insert(name, parameter).is_some() {
            findings.fail(Check::ParameterNames, format!("{label}: parameter `{name}` is listed twice"));
        }
    }
    for name in by_name.keys().filter(|name| !expected.iter().any(|e| e.name == **name)) {
        findings.fail(Check::ParameterNames, format!("{label}: parameter `{name}` is not a property of input_schema"));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for wanted in &expected {
        let name = wanted.name.as_str();
        let Some(parameter) = by_name.get(name) else {
            findings.fail(
                Check::ParameterNames,
                format!("{label}: input_schema property `{name}` is missing from parameters"),
            );
            continue;
        };
        if let Some(required) = parameter.get("required").and_then(Value::as_bool)
            && required != wanted.required
        {
            let listed = if wanted.required { "lists it" } else { "does not list it" };
            findings.fail(
                Check::ParameterRequired,
                format!(
                    "{label}: parameter `{name}` says required: {required}, but input_schema's `required` {listed}"
                ),
            );
        }
        let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Bool(true));
        if let Some(kind) = parameter.get("type").and_then(Value::as_str)
            && let Some(types) = value_types(schema, property)
            && !accepts(&types, kind)
        {
            let allowed: Vec<&str> = types.into_iter().collect();
            findings.fail(
                Check::ParameterTypes,
                format!(
                    "{label}: parameter `{name}` has type {kind:?}, but input_schema allows {}",
                    allowed.join(" or ")
                ),
            );
        }
        let declared_enum: Option<BTreeSet<&str>> = parameter
            .get("enum")
            .and_then(Value::as_array)
            .map(|values| values.iter().filter_map(Value::as_str).collect());
        let schema_enum: Option<BTreeSet<&str>> =
            wanted.allowed.as_ref().map(|values| values.iter().map(String::as_str).collect());
        if declared_enum != schema_enum {
            findings.fail(
                Check::ParameterEnums,
                format!(
                    "{label}: parameter `{name}` has enum {}, but input_schema allows {}",
                    show(&declared_enum),
                    show(&schema_enum)
                ),
            );
        }
    }
}

fn show(values: &Option<BTreeSet<&str>>) -> String {
    values.as_ref().map_or_else(|| "null".to_owned(), |set| format!("{set:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use serde_json::json;

    fn failed(parameters: Value) -> Vec<(&'static str, String)> {
        let schema = json!({"type": "object", "properties": {
            "q": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}]}
        }, "required": ["q"], "$defs": {"Mode": {"type": "string", "enum": ["a", "b"]}}});
        let tool = json!({"name": "m.t", "parameters": parameters, "input_schema": schema});
        let views = [ToolView { index: 0, entry: tool.as_object().unwrap() }];
        let mut findings = Findings::default();
        check_parameters(&views, &mut findings);
        findings
            .into_results(crate::Level::Full, "")
            .into_iter()
            .filter(|r| r.status == Status::Failed)
            .flat_map(|r| r.problems.into_iter().map(move |p| (r.check.name(), p)))
            .collect()
    }

    fn param(name: &str, kind: &str, required: bool, allowed: Value) -> Value {
        json!({"name": name, "type": kind, "description": "d", "required": required, "enum": allowed})
    }

    #[test]
    fn consistent_parameters_pass() {
        let ok = json!([
            param("q", "string", true, json!(null)),
            param("n", "integer", false, json!(null)),
            param("mode", "string", false, json!(["b", "a"]))
        ]);
        assert_eq!(failed(ok), vec![]);
    }

    #[test]
    fn each_disagreement_is_named() {
        let bad = json!([
            param("q", "integer", false, json!(null)),
            param("mode", "string", false, json!(["a"])),
            param("extra", "string", false, json!(null))
        ]);
        let found = failed(bad);
        let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            vec!["parameters.names", "parameters.names", "parameters.required", "parameters.types", "parameters.enums"],
            "{found:#?}"
        );
        assert!(found[1].1.contains("`n` is missing"), "{found:#?}");
    }
}
