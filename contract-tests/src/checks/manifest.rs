//! `GET /manifest`: the fields, their JSON types, names, permissions and
//! descriptions, read from the raw JSON so a wrong type is named precisely.

use std::collections::HashMap;

use module_sdk::contract::{
    CONTRACT_VERSION, ModuleManifest, Permission, RiskLevel, SchemaBudget, check_manifest_within, is_valid_name,
};
use serde_json::Value;

use super::{ToolView, json_type, tools_of};
use crate::check::{Check, Findings};
use crate::client::{Auth, ModuleClient, shorten};

/// The manifest's extension fields.
const MANIFEST_EXTENSIONS: [&str; 2] = ["version", "contract_version"];

/// The tool extension fields `manifest.tool_extension_fields` checks, with their JSON types.
const TOOL_EXTENSIONS: [(&str, Expected); 6] = [
    ("input_schema", Expected::Object),
    ("output_schema", Expected::Object),
    ("annotations", Expected::Object),
    ("requires_approval", Expected::Boolean),
    ("timeout_seconds", Expected::PositiveNumber),
    ("risk_level", Expected::RiskLevel),
];

/// The JSON types a field may have.
#[derive(Debug, Clone, Copy)]
enum Expected {
    String,
    Boolean,
    Array,
    Object,
    PositiveNumber,
    RiskLevel,
}

impl Expected {
    fn accepts(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value.is_array(),
            Self::Object => value.is_object(),
            Self::PositiveNumber => value.as_f64().is_some_and(|n| n > 0.0),
            Self::RiskLevel => value.as_str().is_some_and(|level| level.parse::<RiskLevel>().is_ok()),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Boolean => "a boolean",
            Self::Array => "an array",
            Self::Object => "an object",
            Self::PositiveNumber => "a positive number",
            Self::RiskLevel => "one of \"low\", \"medium\", \"high\"",
        }
    }
}

/// Fetches the manifest; `None` (with `manifest.available` failed) when
/// there is no JSON object to check.
pub async fn fetch(client: &ModuleClient, findings: &mut Findings) -> Option<Value> {
    findings.ran(Check::ManifestAvailable);
    let problem = match client.get("/manifest", Auth::Configured).await {
        Err(failure) => failure.to_string(),
        Ok(reply) if reply.status == 401 && !client.has_token() => {
            "got 401: the module requires its service token; pass it with --token".to_owned()
        }
        Ok(reply) if reply.status != 200 => format!("expected 200, got {}", reply.status),
        Ok(reply) => match reply.body {
            Ok(manifest) if manifest.is_object() => return Some(manifest),
            Ok(other) => format!("expected a JSON object, got {}", json_type(&other)),
            Err(text) => format!("the body is not JSON: {}", shorten(&text)),
        },
    };
    findings.fail(Check::ManifestAvailable, format!("GET /manifest: {problem}"));
    None
}

/// Runs every manifest check on `manifest`.
pub fn check_manifest(manifest: &Value, findings: &mut Findings) {
    let tools = tools_of(manifest);
    check_module_fields(manifest, findings);
    check_tool_fields(&tools, findings);
    check_names(manifest, &tools, findings);
    check_permissions(&tools, findings);
    check_descriptions(manifest, &tools, findings);
    check_orchestrator_accepts(manifest, findings);
}

/// Reports `key` of `object` unless it is present (or, when `optional`,
/// absent or null) with the expected JSON type.
fn field(
    findings: &mut Findings,
    check: Check,
    owner: &str,
    object: &Value,
    key: &str,
    expected: Expected,
    optional: bool,
) {
    match object.get(key) {
        None | Some(Value::Null) if optional => {}
        None => findings.fail(check, format!("{owner}: `{key}` is missing (expected {})", expected.describe())),
        Some(value) if !expected.accepts(value) => findings.fail(
            check,
            format!(
                "{owner}: `{key}` must be {}, got {} {}",
                expected.describe(),
                json_type(value),
                shorten(&value.to_string())
            ),
        ),
        Some(_) => {}
    }
}

fn check_module_fields(manifest: &Value, findings: &mut Findings) {
    findings.ran(Check::ManifestBaseFields);
    field(findings, Check::ManifestBaseFields, "manifest", manifest, "module_name", Expected::String, false);
    field(findings, Check::ManifestBaseFields, "manifest", manifest, "description", Expected::String, false);
    field(findings, Check::ManifestBaseFields, "manifest", manifest, "tools", Expected::Array, false);
    if let Some(tools) = manifest.get("tools").and_then(Value::as_array) {
        for (index, tool) in tools.iter().enumerate().filter(|(_, tool)| !tool.is_object()) {
            findings.fail(
                Check::ManifestBaseFields,
                format!("manifest: tools[{index}] must be an object, got {}", json_type(tool)),
            );
        }
    }

    if MANIFEST_EXTENSIONS.iter().all(|key| manifest.get(key).is_none_or(Value::is_null)) {
        findings
            .skip(Check::ManifestExtensionFields, "the manifest has no extension fields (version, contract_version)");
    } else {
        findings.ran(Check::ManifestExtensionFields);
    }
    field(findings, Check::ManifestExtensionFields, "manifest", manifest, "version", Expected::String, true);
    field(findings, Check::ManifestExtensionFields, "manifest", manifest, "contract_version", Expected::String, true);
    if let Some(version) = manifest.get("version").and_then(Value::as_str)
        && let Err(error) = semver::Version::parse(version)
    {
        findings.fail(
            Check::ManifestExtensionFields,
            format!("manifest: version {:?} is not a semantic version (MAJOR.MINOR.PATCH): {error}", shorten(version)),
        );
    }
    if let Some(version) = manifest.get("contract_version").and_then(Value::as_str).filter(|v| *v != CONTRACT_VERSION) {
        findings.fail(
            Check::ManifestExtensionFields,
            format!(
                "manifest: contract_version is {version:?}; this suite checks contract version {CONTRACT_VERSION:?}"
            ),
        );
    }

    findings.ran(Check::ModuleNameValid);
    if let Some(name) = manifest.get("module_name").and_then(Value::as_str).filter(|name| !is_valid_name(name)) {
        findings.fail(Check::ModuleNameValid, format!("module_name {name:?} does not match ^[a-z][a-z0-9_]{{0,39}}$"));
    }

    findings.ran(Check::HasTools);
    if manifest.get("tools").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        findings.fail(Check::HasTools, "manifest: `tools` is empty; a module serves at least one tool");
    }
}

fn check_tool_fields(tools: &[ToolView<'_>], findings: &mut Findings) {
    findings.ran(Check::ToolBaseFields);
    findings.ran(Check::ParameterFields);
    for tool in tools {
        let label = tool.label();
        let raw = Value::Object(tool.entry.clone());
        let base = [("name", Expected::String), ("description", Expected::String), ("parameters", Expected::Array)];
        for (key, expected) in base {
            field(findings, Check::ToolBaseFields, &label, &raw, key, expected, false);
        }
        // The contract gives `required_permission` a default: missing, it is `guest`, not a fault.
        field(findings, Check::ToolBaseFields, &label, &raw, "required_permission", Expected::String, true);
        if tool.field("required_permission").is_none() {
            findings.note(
                Check::ToolBaseFields,
                format!("{label}: no required_permission, so the contract's default `guest` applies (any caller)"),
            );
        }
        for (key, expected) in TOOL_EXTENSIONS {
            if tool.field(key).is_some() {
                findings.ran(Check::ToolExtensionFields);
                field(findings, Check::ToolExtensionFields, &label, &raw, key, expected, true);
            }
        }
        if let Some(annotations) = tool.field("annotations").filter(|a| a.is_object()) {
            for hint in ["read_only", "destructive", "idempotent", "open_world"] {
                let owner = format!("{label} annotations");
                field(findings, Check::ToolExtensionFields, &owner, annotations, hint, Expected::Boolean, true);
            }
        }
        for (index, parameter) in tool.parameters().into_iter().flatten().enumerate() {
            check_parameter_fields(&format!("{label} parameters[{index}]"), parameter, findings);
        }
    }
    findings.skip(
        Check::ToolExtensionFields,
        "no tool has an extension field (input_schema, output_schema, annotations, requires_approval, timeout_seconds, risk_level)",
    );
}

fn check_parameter_fields(owner: &str, parameter: &Value, findings: &mut Findings) {
    if !parameter.is_object() {
        findings.fail(Check::ParameterFields, format!("{owner}: must be an object, got {}", json_type(parameter)));
        return;
    }
    for (key, expected) in [
        ("name", Expected::String),
        ("type", Expected::String),
        ("description", Expected::String),
        ("required", Expected::Boolean),
    ] {
        field(findings, Check::ParameterFields, owner, parameter, key, expected, false);
    }
    if let Some(kind) = parameter.get("type").and_then(Value::as_str)
        && module_sdk::contract::ParameterType::from_schema_type(kind).is_none()
    {
        findings.fail(
            Check::ParameterFields,
            format!("{owner}: type {kind:?} is not one of string, integer, number, boolean, array, object"),
        );
    }
    match parameter.get("enum") {
        None | Some(Value::Null) => {}
        Some(Value::Array(values)) if values.iter().all(Value::is_string) => {}
        Some(other) => findings.fail(
            Check::ParameterFields,
            format!("{owner}: `enum` must be an array of strings or null, got {}", shorten(&other.to_string())),
        ),
    }
}

fn check_names(manifest: &Value, tools: &[ToolView<'_>], findings: &mut Findings) {
    let module_name = manifest.get("module_name").and_then(Value::as_str);
    findings.ran(Check::ToolNamesValid);
    findings.ran(Check::ToolNamesPrefixed);
    findings.ran(Check::ToolNamesUnique);
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for tool in tools {
        let Some(name) = tool.name() else { continue };
        *seen.entry(name).or_default() += 1;
        match name.split_once('.') {
            Some((_, tool_part)) if tool_part.contains('.') => {
                findings.fail(Check::ToolNamesValid, format!("{name:?} has more than one dot"));
            }
            Some((_, tool_part)) if !is_valid_name(tool_part) => findings.fail(
                Check::ToolNamesValid,
                format!("{name:?}: the tool part {tool_part:?} does not match ^[a-z][a-z0-9_]{{0,39}}$"),
            ),
            Some(_) => {}
            None => findings.fail(Check::ToolNamesValid, format!("{name:?} has no dot; expected <module_name>.<tool>")),
        }
        if let Some(module_name) = module_name
            && !name.strip_prefix(module_name).is_some_and(|rest| rest.starts_with('.'))
        {
            findings.fail(Check::ToolNamesPrefixed, format!("{name:?} does not start with \"{module_name}.\""));
        }
    }
    let mut duplicates: Vec<_> = seen.into_iter().filter(|(_, count)| *count > 1).collect();
    duplicates.sort_unstable();
    for (name, count) in duplicates {
        findings.fail(Check::ToolNamesUnique, format!("{name:?} is listed {count} times"));
    }
}

fn check_permissions(tools: &[ToolView<'_>], findings: &mut Findings) {
    findings.ran(Check::PermissionsValid);
    for tool in tools {
        if let Some(permission) = tool.entry.get("required_permission").and_then(Value::as_str)
            && let Err(error) = permission.parse::<Permission>()
        {
            findings.fail(Check::PermissionsValid, format!("{}: {error}", tool.label()));
        }
    }
}

fn check_descriptions(manifest: &Value, tools: &[ToolView<'_>], findings: &mut Findings) {
    findings.ran(Check::DescriptionsNonEmpty);
    let blank = |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|text| text.trim().is_empty());
    if blank(manifest.get("description")) {
        findings.fail(Check::DescriptionsNonEmpty, "manifest: the module description is empty");
    }
    for tool in tools {
        if blank(tool.entry.get("description")) {
            findings.fail(Check::DescriptionsNonEmpty, format!("{}: the description is empty", tool.label()));
        }
        for parameter in tool.parameters().into_iter().flatten() {
            if blank(parameter.get("description")) {
                let name = parameter.get("name").and_then(Value::as_str).unwrap_or("?");
                findings.fail(
                    Check::DescriptionsNonEmpty,
                    format!("{} parameter `{name}`: the description is empty", tool.label()),
                );
            }
        }
    }
}

/// Runs the orchestrator's own manifest check on `manifest`, so that what
/// an orchestrator refuses (a duplicate parameter, parameters that disagree
/// with `input_schema`, a `timeout_seconds` of 0...) fails at every level,
/// whatever the other checks say; its error names the rule broken.
fn check_orchestrator_accepts(manifest: &Value, findings: &mut Findings) {
    findings.ran(Check::OrchestratorAccepts);
    let refused = |reason: String| format!("an orchestrator refuses the whole manifest: {reason}");
    match serde_json::from_value::<ModuleManifest>(manifest.clone()) {
        Err(error) => findings.fail(Check::OrchestratorAccepts, refused(format!("it does not parse: {error}"))),
        Ok(mut parsed) => {
            if let Err(error) = check_manifest_within(&mut parsed, &SchemaBudget::default()) {
                findings.fail(Check::OrchestratorAccepts, refused(error.to_string()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use serde_json::json;

    fn failures(manifest: Value) -> Vec<(String, String)> {
        let mut findings = Findings::default();
        check_manifest(&manifest, &mut findings);
        findings
            .into_results(crate::Level::Full, "")
            .into_iter()
            .filter(|r| r.status == Status::Failed)
            .flat_map(|r| r.problems.into_iter().map(move |p| (r.check.name().to_owned(), p)))
            .collect()
    }

    fn good() -> Value {
        json!({"module_name": "demo", "description": "Demo.", "version": "1.0.0", "contract_version": "1", "tools": [
            {"name": "demo.greet", "description": "Greet.", "required_permission": "guest",
             "parameters": [{"name": "who", "type": "string", "description": "Who.", "required": true, "enum": null}],
             "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
             "annotations": {"read_only": true}, "timeout_seconds": 30}
        ]})
    }

    #[test]
    fn a_good_manifest_has_no_problems() {
        assert_eq!(failures(good()), vec![]);
    }

    #[test]
    fn each_problem_is_named_by_its_check() {
        let mut m = good();
        m["tools"][0]["name"] = json!("other.greet.x");
        m["tools"][0]["required_permission"] = json!("root");
        m["tools"][0]["timeout_seconds"] = json!("30");
        m["tools"][0]["parameters"][0]["required"] = json!("yes");
        m["tools"][0]["parameters"][0]["description"] = json!(" ");
        m["contract_version"] = json!(1);
        let found = failures(m);
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "manifest.extension_fields",
                "manifest.tool_extension_fields",
                "manifest.parameter_fields",
                "manifest.tool_names_valid",
                "manifest.tool_names_prefixed",
                "manifest.permissions_valid",
                "manifest.descriptions_nonempty",
                "manifest.orchestrator_accepts",
            ],
            "{found:#?}"
        );
        assert!(
            found[1].1.contains("`timeout_seconds` must be a positive number, got string \"30\""),
            "{}",
            found[1].1
        );
        assert!(found[2].1.contains("`required` must be a boolean, got string"), "{}", found[2].1);
    }

    #[test]
    fn extension_checks_skip_a_manifest_of_base_fields_only() {
        let mut m = good();
        for key in ["version", "contract_version"] {
            m.as_object_mut().unwrap().remove(key);
        }
        for key in ["input_schema", "annotations", "timeout_seconds"] {
            m["tools"][0].as_object_mut().unwrap().remove(key);
        }
        let mut findings = Findings::default();
        check_manifest(&m, &mut findings);
        let results = findings.into_results(crate::Level::Full, "");
        let status = |check| results.iter().find(|r| r.check == check).unwrap().status;
        assert_eq!(status(Check::ManifestExtensionFields), Status::Skipped);
        assert_eq!(status(Check::ToolExtensionFields), Status::Skipped);
        assert_eq!(status(Check::ToolBaseFields), Status::Passed);
    }

    #[test]
    fn missing_base_fields_and_duplicates_are_reported() {
        let mut m = good();
        let tool = m["tools"][0].clone();
        m["tools"] = json!([tool.clone(), tool, 7]);
        m.as_object_mut().unwrap().remove("description");
        m["tools"][0].as_object_mut().unwrap().remove("parameters");
        let found = failures(m);
        assert!(found.contains(&(
            "manifest.base_fields".into(),
            "manifest: `description` is missing (expected a string)".into()
        )));
        assert!(
            found
                .contains(&("manifest.base_fields".into(), "manifest: tools[2] must be an object, got integer".into()))
        );
        assert!(found.contains(&(
            "manifest.tool_base_fields".into(),
            "demo.greet: `parameters` is missing (expected an array)".into()
        )));
        assert!(found.contains(&("manifest.tool_names_unique".into(), "\"demo.greet\" is listed 2 times".into())));
    }

    #[test]
    fn what_the_orchestrator_refuses_fails_at_base() {
        let mut m = good();
        m["tools"][0].as_object_mut().unwrap().remove("input_schema");
        let twice = m["tools"][0]["parameters"][0].clone();
        m["tools"][0]["parameters"].as_array_mut().unwrap().push(twice);
        let found = failures(m.clone());
        assert_eq!(
            found,
            vec![(
                "manifest.orchestrator_accepts".to_owned(),
                "an orchestrator refuses the whole manifest: tool `demo.greet` lists parameter `who` twice".to_owned()
            )]
        );
        let mut findings = Findings::default();
        check_manifest(&m, &mut findings);
        let results = findings.into_results(crate::Level::Base, "");
        let result = results.iter().find(|r| r.check == Check::OrchestratorAccepts).unwrap();
        assert_eq!(result.status, Status::Failed);

        let mut m = good();
        m["tools"][0]["timeout_seconds"] = json!(0);
        assert!(
            failures(m).iter().any(|(n, p)| n == "manifest.orchestrator_accepts" && p.contains("timeout_seconds 0"))
        );
    }

    #[test]
    fn a_missing_required_permission_is_the_contracts_default_not_a_failure() {
        let mut m = good();
        m["tools"][0].as_object_mut().unwrap().remove("required_permission");
        assert_eq!(failures(m.clone()), vec![]);
        let mut findings = Findings::default();
        check_manifest(&m, &mut findings);
        let results = findings.into_results(crate::Level::Full, "");
        let base_fields = results.iter().find(|r| r.check == Check::ToolBaseFields).unwrap();
        assert_eq!(base_fields.status, Status::Passed);
        assert_eq!(
            base_fields.notes,
            vec!["demo.greet: no required_permission, so the contract's default `guest` applies (any caller)"]
        );
        m["tools"][0]["required_permission"] = json!(3);
        assert!(failures(m).iter().any(|(n, p)| n == "manifest.tool_base_fields" && p.contains("required_permission")));
    }

    #[test]
    fn a_version_that_is_not_semver_and_an_unknown_risk_level_fail_at_full() {
        let mut m = good();
        m["version"] = json!("1.0");
        m["tools"][0]["risk_level"] = json!("extreme");
        let found = failures(m.clone());
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].0, "manifest.extension_fields");
        assert!(found[0].1.starts_with("manifest: version \"1.0\" is not a semantic version"), "{}", found[0].1);
        assert_eq!(
            found[1],
            (
                "manifest.tool_extension_fields".to_owned(),
                "demo.greet: `risk_level` must be one of \"low\", \"medium\", \"high\", got string \"extreme\""
                    .to_owned()
            )
        );
        m["version"] = json!("1.2.3-beta.1");
        m["tools"][0]["risk_level"] = json!("medium");
        assert_eq!(failures(m), vec![]);
    }
}
