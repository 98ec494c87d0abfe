//! Checking a module's manifest before any of its tools is listed: the
//! contract's rules (`module_sdk::contract::check_manifest`, the SDK's own
//! check, with the schema budget of this orchestrator's settings), the
//! orchestrator's one rule of its own, that a module is called what
//! `MODULE_SERVICES` calls it, and declared timeouts lowered to `MAX_TOOL_TIMEOUT`.

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
}
