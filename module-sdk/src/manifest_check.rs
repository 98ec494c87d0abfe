//! The contract's rules for a manifest, in one function: the SDK applies
//! them to the manifest it builds, the orchestrator to every manifest it
//! receives, so a module built with the SDK can never serve what an
//! orchestrator refuses.

use std::collections::HashSet;

use crate::contract::{ModuleManifest, ToolParameter, is_valid_name};
use crate::schema::{is_object_schema, parameters_of, schema_from_parameters, unresolved_references};
use crate::validate::{MAX_PATTERN_COMPILED_BYTES, check_pattern};

#[path = "schema_budget.rs"]
mod schema_budget;
pub use schema_budget::{
    DEFAULT_MAX_MANIFEST_SCHEMA_BYTES, DEFAULT_MAX_SCHEMA_BYTES, DEFAULT_MAX_SCHEMA_DEPTH, DEFAULT_MAX_SCHEMA_NODES,
    DEFAULT_MAX_SCHEMA_PATTERNS, ManifestPatterns, SchemaBudget, SchemaBudgetError,
};

/// Why a manifest breaks the contract; the message names the module or tool
/// at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    /// `module_name` breaks `^[a-z][a-z0-9_]{0,39}$`.
    #[error("module_name `{0}` does not match ^[a-z][a-z0-9_]{{0,39}}$")]
    BadModuleName(String),
    /// The module or a tool has no description (`module `x`` or `tool `x.y``).
    #[error("{0} has an empty description")]
    MissingDescription(String),
    /// The manifest lists no tools.
    #[error("module `{0}` lists no tools")]
    NoTools(String),
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
    /// `input_schema` costs more than the [`SchemaBudget`] allows.
    #[error("tool `{tool}` has an input_schema over budget: {source}")]
    SchemaOverBudget {
        /// The tool's name.
        tool: String,
        /// The budget it exceeds.
        source: SchemaBudgetError,
    },
    /// Two of a tool's `parameters` share a name (one property of `input_schema`).
    #[error("tool `{tool}` lists parameter `{parameter}` twice")]
    DuplicateParameter {
        /// The tool's name.
        tool: String,
        /// The parameter's name.
        parameter: String,
    },
    /// A pattern of `input_schema` does not compile for the linear-time
    /// regex engine within its size (lookaround and backreferences never do).
    #[error(
        "tool `{tool}` has an input_schema pattern that does not compile for the linear-time regex engine \
         within {MAX_PATTERN_COMPILED_BYTES} bytes, the fixed size of each of MAX_SCHEMA_PATTERNS \
         (lookaround and backreferences are not supported): {reason}"
    )]
    BadPattern {
        /// The tool's name.
        tool: String,
        /// The engine's reason, naming the pattern.
        reason: String,
    },
    /// `parameters` and `input_schema` name different properties or requirements.
    #[error("tool `{0}`: parameters and input_schema disagree on the property names or the required set")]
    ParametersDisagree(String),
    /// A tool's provider-safe name `<module_name>__<tool>` is longer than
    /// [`MAX_PROVIDER_NAME_CHARS`] (only the SDK refuses it: an orchestrator
    /// cuts such a name for the providers).
    #[error(
        "tool `{tool}` would be `{provider_name}` to model providers, {length} characters; the contract \
         wants <module_name>__<tool> within {MAX_PROVIDER_NAME_CHARS} (module and tool names together at most \
         {max_together} characters)",
        max_together = MAX_PROVIDER_NAME_CHARS - 2
    )]
    ProviderNameTooLong {
        /// The tool's name.
        tool: String,
        /// Its provider-safe form.
        provider_name: String,
        /// That form's length.
        length: usize,
    },
    /// `timeout_seconds` is not a positive, finite number.
    #[error("tool `{tool}` has timeout_seconds {seconds}; expected a positive, finite number")]
    BadTimeout {
        /// The tool's name.
        tool: String,
        /// The value sent.
        seconds: f64,
    },
}

/// The longest provider-safe tool name `<module_name>__<tool>` the contract
/// allows: the longest name every model provider accepts.
pub const MAX_PROVIDER_NAME_CHARS: usize = 64;

/// Checks `manifest` against the contract's rules, with every tool's
/// `input_schema` within the default [`SchemaBudget`] and every pattern
/// compiled once (so a module's validators compile), and every tool's
/// provider-safe name within [`MAX_PROVIDER_NAME_CHARS`], and fills in every
/// tool's `input_schema` that a base-fields-only module left out (built from
/// its `parameters`).
pub fn check_manifest(manifest: &mut ModuleManifest) -> Result<(), ManifestError> {
    check_manifest_compiling(manifest, &SchemaBudget::default(), true)?;
    check_provider_names(manifest)
}

/// Whether every tool's `<module_name>__<tool>` fits [`MAX_PROVIDER_NAME_CHARS`]:
/// the SDK's own manifest is held to it, while an orchestrator accepts other
/// modules' longer names and cuts them for the providers.
fn check_provider_names(manifest: &ModuleManifest) -> Result<(), ManifestError> {
    for tool in &manifest.tools {
        let provider_name = tool.name.replacen('.', "__", 1);
        let length = provider_name.chars().count();
        if length > MAX_PROVIDER_NAME_CHARS {
            return Err(ManifestError::ProviderNameTooLong { tool: tool.name.clone(), provider_name, length });
        }
    }
    Ok(())
}

/// [`check_manifest`] with every tool's `input_schema` within `budget`, its
/// patterns counted but not compiled: what an orchestrator checks of other
/// modules' manifests, whose tools with a pattern its linear-time engine
/// cannot compile (lookaround, as zod's email pattern has) are not refused
/// for it, only left for the module to validate.
pub fn check_manifest_within(manifest: &mut ModuleManifest, budget: &SchemaBudget) -> Result<(), ManifestError> {
    check_manifest_compiling(manifest, budget, false)
}

/// [`check_manifest_within`], also compiling every distinct pattern once when `compile`.
fn check_manifest_compiling(
    manifest: &mut ModuleManifest,
    budget: &SchemaBudget,
    compile: bool,
) -> Result<(), ManifestError> {
    let module = manifest.module_name.clone();
    if !is_valid_name(&module) {
        return Err(ManifestError::BadModuleName(module));
    }
    if manifest.description.trim().is_empty() {
        return Err(ManifestError::MissingDescription(format!("module `{module}`")));
    }
    if manifest.tools.is_empty() {
        return Err(ManifestError::NoTools(module));
    }
    let mut seen = HashSet::new();
    let mut patterns = ManifestPatterns::default();
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
        let mut parameter_names = HashSet::new();
        if let Some(twice) = tool.parameters.iter().find(|p| !parameter_names.insert(p.name.as_str())) {
            return Err(ManifestError::DuplicateParameter { tool: name, parameter: twice.name.clone() });
        }
        let over_budget = |source| ManifestError::SchemaOverBudget { tool: name.clone(), source };
        match &tool.input_schema {
            // Built from `parameters`, it costs what they send: the same budget.
            None => {
                let schema = schema_from_parameters(&tool.parameters);
                budget.check(&schema).map_err(over_budget)?;
                tool.input_schema = Some(schema);
            }
            Some(schema) => {
                let bad = |reason: String| ManifestError::BadSchema { tool: name.clone(), reason };
                if !is_object_schema(schema) {
                    let found = schema.get("type").map_or_else(|| "no type".to_owned(), |t| format!("type {t}"));
                    return Err(bad(format!("its root is not `\"type\": \"object\"` (found {found})")));
                }
                let new_patterns = budget.check_sharing(schema, &mut patterns).map_err(over_budget)?;
                for pattern in new_patterns.into_iter().filter(|_| compile) {
                    check_pattern(pattern)
                        .map_err(|reason| ManifestError::BadPattern { tool: name.clone(), reason })?;
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
    Ok(())
}

/// Whether two parameter lists name the same properties with the same required set.
fn same_shape(a: &[ToolParameter], b: &[ToolParameter]) -> bool {
    let shape = |list: &[ToolParameter]| -> HashSet<(String, bool)> {
        list.iter().map(|p| (p.name.clone(), p.required)).collect()
    };
    shape(a) == shape(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn checked(value: Value) -> Result<ModuleManifest, ManifestError> {
        let mut manifest: ModuleManifest = serde_json::from_value(value).unwrap();
        check_manifest(&mut manifest).map(|()| manifest)
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
        let manifest = checked(good()).unwrap();
        let schema = manifest.tools[0].input_schema.as_ref().unwrap();
        assert_eq!(schema["properties"]["text"]["type"], "string");
        assert_eq!(schema["required"], json!(["text"]));
    }

    #[test]
    fn every_contract_break_is_named() {
        type Break = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(Break, &str)> = vec![
            (Box::new(|m| m["module_name"] = json!("Notes")), "module_name `Notes`"),
            (Box::new(|m| m["description"] = json!(" ")), "module `notes` has an empty description"),
            (Box::new(|m| m["tools"] = json!([])), "module `notes` lists no tools"),
            (Box::new(|m| m["tools"][0]["name"] = json!("files.add")), "`files.add`"),
            (Box::new(|m| m["tools"][0]["name"] = json!("notes.add.x")), "`notes.add.x`"),
            (Box::new(|m| m["tools"][0]["name"] = json!("notesadd")), "`notesadd`"),
            (
                Box::new(|m| {
                    let t = m["tools"][0].clone();
                    m["tools"].as_array_mut().unwrap().push(t);
                }),
                "listed twice",
            ),
            (Box::new(|m| m["tools"][0]["description"] = json!("")), "tool `notes.add` has an empty"),
            (Box::new(|m| m["tools"][0]["timeout_seconds"] = json!(0)), "timeout_seconds 0"),
            (Box::new(|m| m["tools"][0]["input_schema"] = json!({"type": "array"})), "not `\"type\": \"object\"`"),
            (
                Box::new(
                    |m| m["tools"][0]["input_schema"] = json!({"type": "object", "properties": {"text": {"$ref": "http://x/y.json"}}, "required": ["text"]}),
                ),
                "http://x/y.json",
            ),
            (
                Box::new(|m| {
                    m["tools"][0]["input_schema"] =
                        json!({"type": "object", "properties": {"body": {"type": "string"}}})
                }),
                "disagree",
            ),
            (
                Box::new(|m| {
                    let mut defs = serde_json::Map::new();
                    for i in 0..2_000 {
                        defs.insert(
                            format!("D{i}"),
                            json!({"type": "object", "properties": {"next": {"$ref": format!("#/$defs/D{}", i + 1)}}}),
                        );
                    }
                    m["tools"][0]["input_schema"] = json!({"type": "object", "properties": {"text": {"$ref": "#/$defs/D0"}}, "required": ["text"], "$defs": defs});
                }),
                "tool `notes.add` has an input_schema over budget: its subschemas nest deeper than 32 levels",
            ),
        ];
        for (break_it, expected) in cases {
            let mut value = good();
            break_it(&mut value);
            let error = checked(value).unwrap_err().to_string();
            assert!(error.contains(expected), "expected `{expected}` in `{error}`");
        }
    }

    #[test]
    fn a_schema_built_from_parameters_is_held_to_the_budget() {
        let mut value = good();
        let parameter = value["tools"][0]["parameters"][0].clone();
        let parameters: Vec<Value> = (0..5)
            .map(|i| {
                let mut parameter = parameter.clone();
                parameter["name"] = json!(format!("p{i}"));
                parameter
            })
            .collect();
        value["tools"][0]["parameters"] = json!(parameters);
        let mut manifest: ModuleManifest = serde_json::from_value(value).unwrap();
        let budget = SchemaBudget { max_nodes: 4, ..SchemaBudget::default() };
        let error = check_manifest_within(&mut manifest.clone(), &budget).unwrap_err().to_string();
        assert!(error.contains("tool `notes.add` has an input_schema over budget"), "{error}");
        assert!(error.contains("MAX_SCHEMA_NODES"), "{error}");
        check_manifest_within(&mut manifest, &SchemaBudget { max_nodes: 6, ..budget }).unwrap();
    }

    #[test]
    fn a_provider_safe_name_over_64_characters_is_refused_here_only() {
        let named = |module: &str, tool: &str| {
            let mut value = good();
            value["module_name"] = json!(module);
            value["tools"][0]["name"] = json!(format!("{module}.{tool}"));
            value
        };
        // 30 + 2 + 32 = 64: the longest the providers accept.
        assert!(checked(named(&"m".repeat(30), &"t".repeat(32))).is_ok());
        let (module, tool) = ("m".repeat(40), "t".repeat(40));
        let error = checked(named(&module, &tool)).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "tool `{module}.{tool}` would be `{module}__{tool}` to model providers, 82 characters"
            )),
            "{error}"
        );
        assert!(error.contains("within 64 (module and tool names together at most 62 characters)"), "{error}");
        // An orchestrator accepts it (and cuts it for the providers).
        let mut theirs: ModuleManifest = serde_json::from_value(named(&module, &tool)).unwrap();
        check_manifest_within(&mut theirs, &SchemaBudget::default()).unwrap();
    }

    #[test]
    fn a_parameter_listed_twice_is_refused() {
        let mut value = good();
        let parameter = value["tools"][0]["parameters"][0].clone();
        value["tools"][0]["parameters"].as_array_mut().unwrap().push(parameter);
        let error = checked(value.clone()).unwrap_err().to_string();
        assert_eq!(error, "tool `notes.add` lists parameter `text` twice");
        // Also beside a schema: `parameters` is a view of its properties, each once.
        value["tools"][0]["input_schema"] =
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
        assert_eq!(checked(value).unwrap_err().to_string(), "tool `notes.add` lists parameter `text` twice");
    }

    #[test]
    fn patterns_are_counted_and_compiled_over_the_whole_manifest() {
        let with_pattern = |tool: usize, pattern: &str| {
            json!({"name": format!("notes.t{tool}"), "description": "T.", "parameters": [], "required_permission": "user",
                "input_schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}})
        };
        let mut value = good();
        value["tools"] = (0..=DEFAULT_MAX_SCHEMA_PATTERNS).map(|i| with_pattern(i, &format!("^a{i}$"))).collect();
        let error = checked(value.clone()).unwrap_err().to_string();
        assert!(error.contains(&format!("tool `notes.t{DEFAULT_MAX_SCHEMA_PATTERNS}`")), "{error}");
        assert!(error.contains("MAX_SCHEMA_PATTERNS"), "{error}");
        value["tools"].as_array_mut().unwrap().pop();
        assert!(checked(value).is_ok());
        // The same pattern in every tool: each tool's validator compiles its own.
        let mut value = good();
        value["tools"] = (0..=DEFAULT_MAX_SCHEMA_PATTERNS).map(|i| with_pattern(i, "^a$")).collect();
        assert!(checked(value).unwrap_err().to_string().contains("MAX_SCHEMA_PATTERNS"));
        let mut value = good();
        value["tools"] = json!([with_pattern(0, "^a$"), with_pattern(1, "^(?:(a|(?=a)a)*c|a*b)$")]);
        // Another module's manifest (an orchestrator's check) is not refused for it: the module validates alone.
        let mut theirs: ModuleManifest = serde_json::from_value(value.clone()).unwrap();
        check_manifest_within(&mut theirs, &SchemaBudget::default()).unwrap();
        let error = checked(value).unwrap_err().to_string();
        assert!(error.starts_with("tool `notes.t1` has an input_schema pattern that does not compile"), "{error}");
        assert!(error.contains("MAX_SCHEMA_PATTERNS") && error.contains("(?=a)"), "{error}");
        let mut value = good();
        value["tools"] = json!([with_pattern(0, "[^x]{40000}y")]);
        assert!(checked(value).unwrap_err().to_string().contains("does not compile"));
    }

    #[test]
    fn a_full_schema_that_agrees_is_kept() {
        let mut value = good();
        let schema = json!({"type": "object", "properties": {"text": {"type": "string", "description": "The note.", "maxLength": 9}}, "required": ["text"]});
        value["tools"][0]["input_schema"] = schema.clone();
        assert_eq!(checked(value).unwrap().tools[0].input_schema, Some(schema));
    }
}
