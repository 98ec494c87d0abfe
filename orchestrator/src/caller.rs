//! Who is asking: the user, the permission level and the modules a caller
//! may use, applied the same way to listing and to execution (fail closed).

use module_sdk::Permission;
use module_sdk::contract::ToolDefinition;
use serde::Deserialize;

/// The caller fields of a request body, flattened into both `POST /execute`
/// and `POST /v1/tool-calls`, so both read a caller the same way.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct CallerFields {
    /// The authenticated user, passed to modules as each call's `user_id`.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The caller's level (`guest`, `user`, `admin`, `owner`); unknown or absent is `guest`.
    #[serde(default)]
    pub user_permission: Option<String>,
    /// The modules the caller's persona allows; absent allows all.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
}

impl CallerFields {
    /// The caller these fields describe; module names are trimmed, as in
    /// the `modules=` list of `GET /tools`.
    pub fn into_caller(self) -> Caller {
        self.into_caller_with_default(Permission::Guest)
    }

    /// [`Self::into_caller`], with `default` when no permission is named.
    pub fn into_caller_with_default(self, default: Permission) -> Caller {
        let modules = self.modules.map(|names| {
            names.iter().map(|name| name.trim()).filter(|name| !name.is_empty()).map(str::to_owned).collect()
        });
        let permission = self.user_permission.as_deref().map_or(default, Permission::for_caller);
        Caller { user_id: self.user_id, permission, modules }
    }
}

/// A caller as the orchestrator's client describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user calls are made for: the only source of a call's `user_id`.
    pub user_id: Option<String>,
    /// The caller's level; an unknown permission string reads as `guest`.
    pub permission: Permission,
    /// The modules the caller's persona allows; `None` allows every module.
    pub modules: Option<Vec<String>>,
}

impl Caller {
    /// A caller without a user, from the strings of a request: an unknown
    /// permission is `guest`, an absent one too.
    pub fn new(permission: Option<&str>, modules: Option<Vec<String>>) -> Self {
        Self { user_id: None, permission: permission.map_or(Permission::Guest, Permission::for_caller), modules }
    }

    /// The same caller, acting for `user_id`.
    pub fn with_user(mut self, user_id: Option<String>) -> Self {
        self.user_id = user_id;
        self
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
        ToolDefinition::new("m.t", "d", permission)
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

    #[test]
    fn request_fields_trim_module_names_and_carry_the_user() {
        let fields: CallerFields = serde_json::from_value(
            serde_json::json!({"user_id": "ada", "user_permission": "user", "modules": [" m ", ""]}),
        )
        .unwrap();
        let caller = fields.into_caller();
        assert_eq!(caller.user_id.as_deref(), Some("ada"));
        assert_eq!(caller.permission, Permission::User);
        assert_eq!(caller.modules, Some(vec!["m".to_owned()]));
        assert_eq!(CallerFields::default().into_caller(), Caller::new(None, None));
    }
}
