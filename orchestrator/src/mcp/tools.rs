//! One caller's tools as MCP lists them: the tools the caller may use, in
//! the registry's order (module name, then manifest order), each named in
//! the provider-safe form `module__tool` ([`NameMap`]), so the module is the
//! prefix, as the MCP specification advises aggregators.

use module_sdk::contract::ToolDefinition;
use module_sdk::mcp::McpTool;

use crate::providers::names::NameMap;

/// The MCP view of one caller's tools.
pub struct CallerTools {
    tools: Vec<McpTool>,
    names: NameMap,
}

impl CallerTools {
    /// The MCP view of `definitions` (a caller's tools, in listing order).
    pub fn new(definitions: &[ToolDefinition]) -> Self {
        let names = NameMap::new(definitions);
        let tools = definitions
            .iter()
            .map(|definition| McpTool::named(names.provider_name(&definition.name).into_owned(), definition))
            .collect();
        Self { tools, names }
    }

    /// Every tool, in the order `tools/list` pages through.
    pub fn all(&self) -> &[McpTool] {
        &self.tools
    }

    /// The tool MCP calls `name` (`module__tool`), if the caller has it.
    pub fn get(&self, name: &str) -> Option<&McpTool> {
        let full_name = self.names.tool_for(name)?;
        self.tools.iter().find(|tool| tool.full_name == full_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use module_sdk::Permission;

    fn definition(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: "Do it.".to_owned(),
            parameters: Vec::new(),
            required_permission: Permission::Guest,
            input_schema: None,
            output_schema: None,
            annotations: None,
            requires_approval: None,
            timeout_seconds: None,
            risk_level: None,
        }
    }

    #[test]
    fn tools_are_named_module_then_tool_and_found_by_that_name_only() {
        let tools = CallerTools::new(&[definition("alpha.echo"), definition("beta.plan_trip")]);
        let names: Vec<&str> = tools.all().iter().map(|tool| tool.listing.name.as_ref()).collect();
        assert_eq!(names, ["alpha__echo", "beta__plan_trip"]);
        assert_eq!(tools.all()[1].listing.title.as_deref(), Some("Plan trip"));
        assert_eq!(tools.get("beta__plan_trip").map(|tool| tool.full_name.as_str()), Some("beta.plan_trip"));
        assert!(tools.get("gamma__echo").is_none());
    }
}
