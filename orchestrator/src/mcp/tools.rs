//! One caller's tools as MCP lists them: the tools the caller may use, in
//! the registry's order (module name, then manifest order), each named in
//! the provider-safe form `module__tool` ([`NameMap`]), so the module is the
//! prefix, as the MCP specification advises aggregators.

use std::ops::Range;

use module_sdk::contract::ToolDefinition;
use module_sdk::mcp::McpTool;
use rmcp::model::Tool;

use crate::providers::names::NameMap;

/// The MCP view of one caller's tools; each tool is turned into its MCP
/// form only when listed or called.
pub struct CallerTools {
    definitions: Vec<ToolDefinition>,
    names: NameMap,
}

impl CallerTools {
    /// The MCP view of `definitions` (a caller's tools, in listing order).
    pub fn new(definitions: Vec<ToolDefinition>) -> Self {
        let names = NameMap::new(&definitions);
        Self { definitions, names }
    }

    /// How many tools the caller has.
    pub fn len(&self) -> usize {
        self.definitions.len()
    }

    /// Whether the caller has no tool.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    /// The tools in `range` of the order `tools/list` pages through.
    pub fn page(&self, range: Range<usize>) -> Vec<Tool> {
        self.definitions
            .get(range)
            .unwrap_or_default()
            .iter()
            .map(|definition| self.mcp_tool(definition).listing)
            .collect()
    }

    /// The tool MCP calls `name` (`module__tool`), if the caller has it.
    pub fn get(&self, name: &str) -> Option<McpTool> {
        let full_name = self.names.tool_for(name)?;
        self.definitions
            .iter()
            .find(|definition| definition.name == full_name)
            .map(|definition| self.mcp_tool(definition))
    }

    fn mcp_tool(&self, definition: &ToolDefinition) -> McpTool {
        McpTool::named(self.names.provider_name(&definition.name).into_owned(), definition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use module_sdk::Permission;

    fn definition(name: &str) -> ToolDefinition {
        ToolDefinition::new(name, "Do it.", Permission::Guest)
    }

    #[test]
    fn tools_are_named_module_then_tool_and_found_by_that_name_only() {
        let tools = CallerTools::new(vec![definition("alpha.echo"), definition("beta.plan_trip")]);
        let page = tools.page(0..tools.len());
        let names: Vec<&str> = page.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["alpha__echo", "beta__plan_trip"]);
        assert_eq!(page[1].title.as_deref(), Some("Plan trip"));
        assert!(tools.page(5..9).is_empty());
        assert_eq!(tools.get("beta__plan_trip").map(|tool| tool.full_name), Some("beta.plan_trip".to_owned()));
        assert!(tools.get("gamma__echo").is_none());
    }
}
