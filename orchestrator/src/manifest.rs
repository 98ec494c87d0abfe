//! Checking a module's manifest against the contract before any of its
//! tools is listed, and filling in what a base-fields-only module leaves out.

use std::collections::HashSet;

use module_sdk::ModuleManifest;
use module_sdk::contract::is_valid_name;
use module_sdk::schema::{is_object_schema, parameters_of, schema_from_parameters, unresolved_references};

/// Why a manifest was rejected; the message names the module or tool at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    /// `module_name` breaks `^[a-z][a-z0-9_]{0,39}$`.
    #[error("module_name `{0}` does not match ^[a-z][a-z0-9_]{{0,39}}$")]
    BadModuleName(String),
    /// The module calls itself something other than its `MODULE_SERVICES` key.
    #[error("the module at this URL calls itself `{found}`, but MODULE_SERVICES configures it as `{configured}`")]
    NameMismatch {
        /// The name in `MODULE_SERVICES`.
        configured: String,
        /// The manifest's `module_name`.
        found: String,
    },
    /// The module or a tool has no description.
    #[error("{0} has an empty description")]
    MissingDescription(String),
    /// The manifest lists no tools.
    #[error("the manifest lists no tools")]
    NoTools,
    /// A tool name is not `<module_name>.<tool>` with a valid `<tool>`.
    #[error("tool `{name}` is not named `{module}.<tool>` with <tool> matching ^[a-z][a-z0-9_]{{0,39}}$")]
    BadToolName {
        /// The module's name.
        module: String,
        /// The tool's name as sent.
        name: String,
    },
    /// Two tools share a name.
    #[error("tool `{0}` is listed twice")]
    DuplicateTool(String),
    /// `input_schema` is not an object schema, or refers outside itself.
    #[error("tool `{tool}` has an unusable input_schema: {reason}")]
    BadSchema {
        /// The tool's name.
        tool: String,
        /// What is wrong with the schema.
        reason: String,
    },
    /// `parameters` and `input_schema` name different properties or requirements.
    #[error("tool `{0}`: parameters and input_schema disagree on the property names or the required set")]
    ParametersDisagree(String),
    /// `timeout_seconds` is not a positive number.
    #[error("tool `{tool}` has timeout_seconds {seconds}; expected a positive number")]
    BadTimeout {
        /// The tool's name.
        tool: String,
        /// The value sent.
        seconds: f64,
    },
}

/// Checks `manifest`, fetched for the module configured as `configured`,
/// and returns it with every tool's `input_schema` present (built from
/// `parameters` when the module sent only the base fields).
pub fn validate(configured: &str, mut manifest: ModuleManifest) -> Result<ModuleManifest, ManifestError> {
    let module = manifest.module_name.clone();
    if !is_valid_name(&module) {
        return Err(ManifestError::BadModuleName(module));
    }
    if module != configured {
        return Err(ManifestError::NameMismatch { configured: configured.to_owned(), found: module });
    }
    if manifest.description.trim().is_empty() {
        return Err(ManifestError::MissingDescription(format!("module `{module}`")));
    }
    if manifest.tools.is_empty() {
        return Err(ManifestError::NoTools);
    }
    let mut seen = HashSet::new();
    for tool in &mut manifest.tools {
        let name = tool.name.clone();
        let suffix = name.strip_prefix(&module).and_then(|rest| rest.strip_prefix('.'));
        if !suffix.is_some_and(is_valid_name) {
            return Err(ManifestError::BadToolName { module: module.clone(), name });
        }
        if !seen.insert(name.clone()) {
            return Err(ManifestError::DuplicateTool(name));
        }
        if tool.description.trim().is_empty() {
            return Err(ManifestError::MissingDescription(format!("tool `{name}`")));
        }
        if let Some(seconds) = tool.timeout_seconds.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(ManifestError::BadTimeout { tool: name, seconds });
        }
        match &tool.input_schema {
            None => tool.input_schema = Some(schema_from_parameters(&tool.parameters)),
            Some(schema) => {
                let bad = |reason: String| ManifestError::BadSchema { tool: name.clone(), reason };
                if !is_object_schema(schema) {
                    return Err(bad("its root is not `\"type\": \"object\"`".into()));
                }
                let outside = unresolved_references(schema);
                if !outside.is_empty() {
                    return Err(bad(format!("references that do not resolve inside it: {}", outside.join(", "))));
                }
                if !tool.parameters.is_empty() && !same_shape(&parameters_of(schema), &tool.parameters) {
                    return Err(ManifestError::ParametersDisagree(name));
                }
            }
        }
    }
    Ok(manifest)
}

/// Whether two parameter lists name the same properties with the same required set.
fn same_shape(a: &[module_sdk::ToolParameter], b: &[module_sdk::ToolParameter]) -> bool {
    let shape = |list: &[module_sdk::ToolParameter]| -> HashSet<(String, bool)> {
        list.iter().map(|p| (p.name.clone(), p.required)).collect()
    };
    shape(a) == shape(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn manifest(value: Value) -> ModuleManifest {
        serde_json::from_value(value).unwrap()
    }

    fn good() -> Value {
        json!({
            "module_name": "notes",
            "description": "Keeps notes.",
            "tools": [{
                "name": "notes.add",
                "description": "Add a note.",
                "parameters": [{"name": "text", "type": "string", "description": "The note.", "required": true, "enum": null}],
                "required_permission": "user"
            }]
        })
    }

    #[test]
    fn a_base_fields_manifest_gets_its_schema_from_parameters() {
        let checked = validate("notes", manifest(good())).unwrap();
        let schema = checked.tools[0].input_schema.as_ref().unwrap();
        assert_eq!(schema["properties"]["text"]["type"], "string");
        assert_eq!(schema["required"], json!(["text"]));
    }

    #[test]
    fn every_contract_break_is_named() {
        type Break = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Break, &str)> = vec![
            ("notes", Box::new(|m| m["module_name"] = json!("Notes")), "module_name `Notes`"),
            ("other", Box::new(|_| {}), "configures it as `other`"),
            ("notes", Box::new(|m| m["description"] = json!(" ")), "module `notes` has an empty description"),
            ("notes", Box::new(|m| m["tools"] = json!([])), "no tools"),
            ("notes", Box::new(|m| m["tools"][0]["name"] = json!("files.add")), "`files.add`"),
            ("notes", Box::new(|m| m["tools"][0]["name"] = json!("notes.add.x")), "`notes.add.x`"),
            ("notes", Box::new(|m| m["tools"][0]["name"] = json!("notesadd")), "`notesadd`"),
            (
                "notes",
                Box::new(|m| {
                    let t = m["tools"][0].clone();
                    m["tools"].as_array_mut().unwrap().push(t);
                }),
                "listed twice",
            ),
            ("notes", Box::new(|m| m["tools"][0]["description"] = json!("")), "tool `notes.add` has an empty"),
            ("notes", Box::new(|m| m["tools"][0]["timeout_seconds"] = json!(0)), "timeout_seconds 0"),
            (
                "notes",
                Box::new(|m| m["tools"][0]["input_schema"] = json!({"type": "array"})),
                "not `\"type\": \"object\"`",
            ),
            (
                "notes",
                Box::new(
                    |m| m["tools"][0]["input_schema"] = json!({"type": "object", "properties": {"text": {"$ref": "http://x/y.json"}}, "required": ["text"]}),
                ),
                "http://x/y.json",
            ),
            (
                "notes",
                Box::new(|m| {
                    m["tools"][0]["input_schema"] =
                        json!({"type": "object", "properties": {"body": {"type": "string"}}})
                }),
                "disagree",
            ),
        ];
        for (configured, break_it, expected) in cases {
            let mut value = good();
            break_it(&mut value);
            let error = validate(configured, manifest(value)).unwrap_err().to_string();
            assert!(error.contains(expected), "expected `{expected}` in `{error}`");
        }
    }

    #[test]
    fn a_full_schema_that_agrees_is_kept() {
        let mut value = good();
        let schema = json!({"type": "object", "properties": {"text": {"type": "string", "description": "The note.", "maxLength": 9}}, "required": ["text"]});
        value["tools"][0]["input_schema"] = schema.clone();
        let checked = validate("notes", manifest(value)).unwrap();
        assert_eq!(checked.tools[0].input_schema, Some(schema));
    }
}
