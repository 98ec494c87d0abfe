//! Who is asking: the permission level and the modules a caller may use,
//! applied the same way to listing and to execution (fail closed).

use module_sdk::{Permission, ToolDefinition};

/// A caller as the orchestrator's client describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The caller's level; an unknown permission string reads as `guest`.
    pub permission: Permission,
    /// The modules the caller's persona allows; `None` allows every module.
    pub modules: Option<Vec<String>>,
}

impl Caller {
    /// A caller from the strings of a request: an unknown permission is
    /// `guest`, an absent one too.
    pub fn new(permission: Option<&str>, modules: Option<Vec<String>>) -> Self {
        Self { permission: permission.map_or(Permission::Guest, Permission::for_caller), modules }
    }

    /// Reads a comma-separated module list (`a,b`); an empty string allows none.
    pub fn parse_modules(list: &str) -> Vec<String> {
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }

    /// Whether the caller's persona allows `module`.
    pub fn allows_module(&self, module: &str) -> bool {
        self.modules.as_ref().is_none_or(|allowed| allowed.iter().any(|m| m == module))
    }

    /// Whether the caller may see and use `tool` of `module`.
    pub fn may_use(&self, module: &str, tool: &ToolDefinition) -> bool {
        self.allows_module(module) && self.permission.allows(tool.required_permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(permission: Permission) -> ToolDefinition {
        ToolDefinition {
            name: "m.t".into(),
            description: "d".into(),
            parameters: Vec::new(),
            required_permission: permission,
            input_schema: None,
            output_schema: None,
            annotations: None,
            requires_approval: None,
            timeout_seconds: None,
        }
    }

    #[test]
    fn unknown_permissions_and_module_lists_fail_closed() {
        let root = Caller::new(Some("root"), None);
        assert_eq!(root.permission, Permission::Guest);
        assert!(!root.may_use("m", &tool(Permission::User)));
        assert!(root.may_use("m", &tool(Permission::Guest)));
        let admin = Caller::new(Some("admin"), Some(Caller::parse_modules(" a , m,")));
        assert!(admin.may_use("m", &tool(Permission::Admin)));
        assert!(!admin.may_use("b", &tool(Permission::Guest)));
        let nothing = Caller::new(Some("owner"), Some(Caller::parse_modules("")));
        assert!(!nothing.allows_module("m"));
    }
}
