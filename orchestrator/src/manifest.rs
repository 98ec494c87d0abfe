//! Checking a module's manifest before any of its tools is listed: the
//! contract's rules (`module_sdk::contract::check_manifest`, the SDK's own
//! check, with the schema budget of this orchestrator's settings), the
//! orchestrator's one rule of its own, that a module is called what
//! `MODULE_SERVICES` calls it, the tools' schemas within
//! `MAX_MANIFEST_SCHEMA_BYTES` together, and declared timeouts lowered to
//! `MAX_TOOL_TIMEOUT`.

use module_sdk::contract::{ModuleManifest, check_manifest_within};

use crate::limits::Budgets;

/// Why a manifest was rejected; the message names the module or tool at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    /// The manifest breaks a rule of the contract.
    #[error(transparent)]
    Contract(#[from] module_sdk::contract::ManifestError),
    /// The module calls itself something other than its `MODULE_SERVICES` key.
    #[error("the module at this URL calls itself `{found}`, but MODULE_SERVICES configures it as `{configured}`")]
    NameMismatch {
        /// The name in `MODULE_SERVICES`.
        configured: String,
        /// The manifest's `module_name`.
        found: String,
    },
    /// The tools' `input_schema`s cost more than `MAX_MANIFEST_SCHEMA_BYTES` together.
    #[error(
        "the input_schemas of module `{module}`'s tools take more than {max} bytes together once references \
         are inlined (budget MAX_MANIFEST_SCHEMA_BYTES): provider formats and listings would hold them so"
    )]
    SchemasOverBudget {
        /// The module's name.
        module: String,
        /// The budget.
        max: usize,
    },
}

/// Checks `manifest`, fetched for the module configured as `configured`,
/// within `budgets`, and returns it with every tool's `input_schema` present
/// (built from `parameters` when the module sent only the base fields) and
/// every declared timeout at most `MAX_TOOL_TIMEOUT`.
pub fn validate(
    configured: &str,
    mut manifest: ModuleManifest,
    budgets: &Budgets,
) -> Result<ModuleManifest, ManifestError> {
    check_manifest_within(&mut manifest, &budgets.schema)?;
    if manifest.module_name != configured {
        return Err(ManifestError::NameMismatch { configured: configured.to_owned(), found: manifest.module_name });
    }
    within_manifest_schema_budget(&manifest, budgets)?;
    for tool in &mut manifest.tools {
        if let Some(seconds) = tool.timeout_seconds {
            let capped = budgets.capped_timeout(seconds);
            if capped < seconds {
                tracing::warn!(tool = %tool.name, declared = seconds, capped, "timeout_seconds lowered to MAX_TOOL_TIMEOUT");
                tool.timeout_seconds = Some(capped);
            }
        }
    }
    Ok(manifest)
}

/// Whether the `input_schema`s of `manifest`'s tools (each already within
/// the schema budget) cost at most `MAX_MANIFEST_SCHEMA_BYTES` together; the
/// walk stops at the first tool past it, so this costs at most that budget
/// and one schema's.
fn within_manifest_schema_budget(manifest: &ModuleManifest, budgets: &Budgets) -> Result<(), ManifestError> {
    let max = budgets.max_manifest_schema_bytes;
    let mut total = 0usize;
    for schema in manifest.tools.iter().filter_map(|tool| tool.input_schema.as_ref()) {
        // Every schema passed `check_manifest_within` with this budget, so `Err` is unreachable; counted as over.
        let cost = budgets.schema.check(schema).unwrap_or(usize::MAX);
        total = total.saturating_add(cost);
        if total > max {
            return Err(ManifestError::SchemasOverBudget { module: manifest.module_name.clone(), max });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn contract_breaks_and_a_name_mismatch_are_refused() {
        let good = json!({
            "module_name": "notes",
            "description": "Keeps notes.",
            "tools": [{"name": "notes.add", "description": "Add a note.", "parameters": [], "required_permission": "user"}]
        });
        let manifest: ModuleManifest = serde_json::from_value(good).unwrap();
        let budgets = Budgets::default();
        assert!(validate("notes", manifest.clone(), &budgets).unwrap().tools[0].input_schema.is_some());
        let mismatch = validate("other", manifest.clone(), &budgets).unwrap_err().to_string();
        assert!(mismatch.contains("configures it as `other`"), "{mismatch}");
        let mut unnamed = manifest;
        unnamed.module_name = "Notes".into();
        let error = validate("Notes", unnamed, &budgets).unwrap_err();
        assert!(matches!(error, ManifestError::Contract(_)), "{error}");
    }

    #[test]
    fn declared_timeouts_are_capped_and_schemas_over_budget_refused() {
        let mut manifest: ModuleManifest = serde_json::from_value(json!({
            "module_name": "slow",
            "description": "Takes its time.",
            "tools": [{"name": "slow.wait", "description": "Waits.", "parameters": [], "required_permission": "guest", "timeout_seconds": 1e300}]
        }))
        .unwrap();
        let budgets = Budgets::default();
        let checked = validate("slow", manifest.clone(), &budgets).unwrap();
        assert_eq!(checked.tools[0].timeout_seconds, Some(3600.0));
        manifest.tools[0].input_schema =
            Some(json!({"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}}}));
        let tight =
            Budgets { schema: module_sdk::contract::SchemaBudget { max_nodes: 5, ..budgets.schema }, ..budgets };
        let error = validate("slow", manifest, &tight).unwrap_err().to_string();
        assert!(error.contains("slow.wait") && error.contains("MAX_SCHEMA_NODES"), "{error}");
    }

    /// A manifest of `count` tools named `wide.t0`..., each with `schema`.
    fn tools_with(count: usize, schema: serde_json::Value) -> ModuleManifest {
        let tool = |i: usize| json!({"name": format!("wide.t{i}"), "description": "A tool.", "parameters": [], "required_permission": "guest", "input_schema": schema});
        let tools: Vec<_> = (0..count).map(tool).collect();
        serde_json::from_value(json!({"module_name": "wide", "description": "Wide.", "tools": tools})).unwrap()
    }

    #[test]
    fn schemas_over_budget_together_are_refused() {
        // Definitions each referred to twice: the 1,000 characters of `S` count seven times per tool.
        let described = json!({"type": "string", "description": "x".repeat(1_000)});
        let pair = json!({"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}});
        let schema = json!({"type": "object", "properties": pair, "$defs": {"P": {"type": "object", "properties": {"x": {"$ref": "#/$defs/S"}, "y": {"$ref": "#/$defs/S"}}}, "S": described}});
        let budgets = Budgets { max_manifest_schema_bytes: 100_000, ..Budgets::default() };
        let one = budgets.schema.check(&schema).unwrap();
        assert!(one > 4 * 1_000 && one < 10_000, "{one}");
        let fitting = 100_000 / one;
        assert!(validate("wide", tools_with(fitting, schema.clone()), &budgets).is_ok());
        let error = validate("wide", tools_with(fitting + 1, schema), &budgets).map(|_| ()).unwrap_err().to_string();
        assert!(error.contains("module `wide`") && error.contains("MAX_MANIFEST_SCHEMA_BYTES"), "{error}");
        // At the default, 1,000 tools of a few properties each are well inside.
        let ordinary = json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for, in a few words.".repeat(4)},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How many at most."},
            "filters": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Field filters."}
        }, "required": ["query"]});
        assert!(validate("wide", tools_with(1_000, ordinary), &Budgets::default()).is_ok());
    }
}
