//! An MCP server's `tools/list` as a module manifest: each tool named
//! `module.tool` (or its configured name), its `inputSchema` and
//! `outputSchema` as they are, its annotations as the contract's hints, and
//! the permission, approval, risk and timeout of the module's configuration
//! (per tool where an override says so). The result is checked like any
//! module's manifest afterwards (`crate::manifest::validate`).

use module_sdk::contract::{ModuleManifest, ToolAnnotations, ToolDefinition};
use module_sdk::schema::parameters_of;
use rmcp::model::{ServerPeerInfo, Tool};
use serde_json::Value;

use super::settings::McpServerSettings;

/// The manifest of module `module`, configured as `settings`, whose server
/// introduced itself as `server` and listed `tools`.
pub fn manifest_of(
    module: &str,
    settings: &McpServerSettings,
    server: Option<&ServerPeerInfo>,
    tools: Vec<Tool>,
) -> ModuleManifest {
    let implementation = server.and_then(|info| info.server_info.as_ref());
    let description = settings
        .description
        .clone()
        .or_else(|| server.and_then(|info| info.instructions.clone()))
        .filter(|text| !text.trim().is_empty())
        .unwrap_or_else(|| match implementation {
            Some(server) => {
                format!("The tools of the MCP server `{}`.", server.title.as_deref().unwrap_or(&server.name))
            }
            None => format!("The tools of the MCP server configured as `{module}`."),
        });
    ModuleManifest {
        module_name: module.to_owned(),
        description,
        tools: tools.into_iter().map(|tool| definition_of(module, settings, tool)).collect(),
        version: implementation.map(|server| server.version.clone()),
        contract_version: None,
    }
}

/// One MCP tool as a tool definition of `module`.
fn definition_of(module: &str, settings: &McpServerSettings, tool: Tool) -> ToolDefinition {
    let overrides = settings.tools.get(tool.name.as_ref()).cloned().unwrap_or_default();
    let schema = Value::Object((*tool.input_schema).clone());
    let description = tool
        .description
        .map(|text| text.into_owned())
        .or(tool.title.clone())
        .filter(|text| !text.trim().is_empty())
        .unwrap_or_else(|| format!("The MCP tool `{}`.", tool.name));
    ToolDefinition {
        name: format!("{module}.{}", settings.exposed_name(&tool.name)),
        description,
        parameters: parameters_of(&schema),
        required_permission: overrides.permission.unwrap_or(settings.permission),
        input_schema: Some(schema),
        output_schema: tool.output_schema.map(|schema| Value::Object((*schema).clone())),
        annotations: Some(hints_of(tool.annotations.unwrap_or_default())),
        requires_approval: overrides.requires_approval.or(settings.requires_approval),
        timeout_seconds: overrides.timeout_seconds.or(settings.timeout_seconds),
        risk_level: overrides.risk_level.or(settings.risk_level),
    }
}

/// The contract's hints for an MCP tool's annotations, with MCP's defaults
/// for absent hints (the same when the server sends no annotations at all,
/// so an unannotated tool counts as destructive for `APPROVAL_FOR_DESTRUCTIVE`):
/// not read-only, destructive (meaningful only for a tool that is not
/// read-only), not idempotent, open world.
fn hints_of(hints: rmcp::model::ToolAnnotations) -> ToolAnnotations {
    let read_only = hints.read_only_hint.unwrap_or(false);
    ToolAnnotations {
        read_only,
        destructive: !read_only && hints.destructive_hint.unwrap_or(true),
        idempotent: hints.idempotent_hint.unwrap_or(false),
        open_world: hints.open_world_hint.unwrap_or(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Budgets;
    use crate::mcp_modules::settings::read_modules;
    use module_sdk::Permission;
    use serde_json::json;

    fn settings(entry: Value) -> McpServerSettings {
        let (_, mut servers) = read_modules(serde_json::from_value(json!({"gh": entry})).unwrap()).unwrap();
        servers.remove("gh").unwrap()
    }

    fn tool(value: Value) -> Tool {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn tools_get_the_module_prefix_the_configured_permission_and_overrides() {
        let settings = settings(json!({
            "url": "mcp+http://127.0.0.1:1/mcp",
            "permission": "user",
            "requires_approval": false,
            "tools": {"delete-repo": {"name": "delete_repo", "permission": "admin", "requires_approval": true}}
        }));
        let tools = vec![
            tool(json!({
                "name": "get_issue", "description": "Get an issue.",
                "inputSchema": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
                "annotations": {"readOnlyHint": true}
            })),
            tool(json!({"name": "delete-repo", "title": "Delete a repository", "inputSchema": {"type": "object"}})),
        ];
        let manifest = manifest_of("gh", &settings, None, tools);
        let checked = crate::manifest::validate("gh", manifest, &Budgets::default()).expect("a valid manifest");
        let [get, delete] = &checked.tools[..] else { panic!("two tools") };
        assert_eq!((get.name.as_str(), get.required_permission), ("gh.get_issue", Permission::User));
        assert_eq!(get.parameters[0].name, "number");
        assert_eq!(get.input_schema.as_ref().unwrap()["required"], json!(["number"]));
        let hints = get.annotations.unwrap();
        assert!(hints.read_only && !hints.destructive && !hints.idempotent && hints.open_world);
        assert_eq!(get.requires_approval, Some(false));
        assert_eq!((delete.name.as_str(), delete.required_permission), ("gh.delete_repo", Permission::Admin));
        assert_eq!(delete.description, "Delete a repository");
        let unannotated = delete.annotations.expect("MCP's defaults when the server sends no annotations");
        assert!(!unannotated.read_only && unannotated.destructive && unannotated.open_world, "{unannotated:?}");
        assert_eq!(delete.requires_approval, Some(true));
        assert!(checked.description.contains("`gh`"), "{}", checked.description);
    }

    #[test]
    fn a_tool_name_outside_the_contract_is_refused_by_name() {
        let settings = settings(json!({"url": "mcp+http://127.0.0.1:1/mcp"}));
        let manifest = manifest_of("gh", &settings, None, vec![tool(json!({"name": "Get-Issue", "inputSchema": {}}))]);
        let error = crate::manifest::validate("gh", manifest, &Budgets::default()).unwrap_err().to_string();
        assert!(error.contains("Get-Issue"), "{error}");
    }
}
