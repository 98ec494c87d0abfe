//! Checking a module's manifest before any of its tools is listed: the
//! contract's rules (`module_sdk::contract::check_manifest`, the SDK's own
//! check) and the orchestrator's one rule of its own, that a module is
//! called what `MODULE_SERVICES` calls it.

use module_sdk::contract::ModuleManifest;
use module_sdk::contract::check_manifest;

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
/// and returns it with every tool's `input_schema` present (built from
/// `parameters` when the module sent only the base fields).
pub fn validate(configured: &str, mut manifest: ModuleManifest) -> Result<ModuleManifest, ManifestError> {
    check_manifest(&mut manifest)?;
    if manifest.module_name != configured {
        return Err(ManifestError::NameMismatch { configured: configured.to_owned(), found: manifest.module_name });
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
        assert!(validate("notes", manifest.clone()).unwrap().tools[0].input_schema.is_some());
        let mismatch = validate("other", manifest.clone()).unwrap_err().to_string();
        assert!(mismatch.contains("configures it as `other`"), "{mismatch}");
        let mut unnamed = manifest;
        unnamed.module_name = "Notes".into();
        let error = validate("Notes", unnamed).unwrap_err();
        assert!(matches!(error, ManifestError::Contract(_)), "{error}");
    }
}
