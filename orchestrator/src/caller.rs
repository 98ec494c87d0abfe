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

/// The most names a request's `modules` list may hold (fixed): a caller's
/// modules are kept with each approval it asks for.
pub const MAX_CALLER_MODULES: usize = 1024;

/// The longest name a request's `modules` list may hold (fixed): the
/// contract's longest module name (`^[a-z][a-z0-9_]{0,39}$`).
pub const MAX_MODULE_NAME_BYTES: usize = 40;

/// Why a request's `modules` list is refused (over a fixed budget).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModulesError {
    /// More names than [`MAX_CALLER_MODULES`].
    #[error("`modules` lists {count} names, more than MAX_CALLER_MODULES ({max})")]
    TooMany {
        /// The names listed.
        count: usize,
        /// The budget.
        max: usize,
    },
    /// A name longer than [`MAX_MODULE_NAME_BYTES`].
    #[error("`modules` lists a name of {bytes} bytes, longer than any module's may be (MAX_MODULE_NAME_BYTES, {max})")]
    NameTooLong {
        /// The name's size, trimmed.
        bytes: usize,
        /// The budget.
        max: usize,
    },
}

impl CallerFields {
    /// The caller these fields describe; module names are trimmed, as in
    /// the `modules=` list of `GET /tools`, and refused past
    /// [`MAX_CALLER_MODULES`] and [`MAX_MODULE_NAME_BYTES`].
    pub fn into_caller(self) -> Result<Caller, ModulesError> {
        self.into_caller_with_default(Permission::Guest)
    }

    /// [`Self::into_caller`], with `default` when no permission is named.
    pub fn into_caller_with_default(self, default: Permission) -> Result<Caller, ModulesError> {
        let modules = match self.modules {
            Some(names) if names.len() > MAX_CALLER_MODULES => {
                return Err(ModulesError::TooMany { count: names.len(), max: MAX_CALLER_MODULES });
            }
            Some(names) => {
                let names: Vec<String> =
                    names.iter().map(|name| name.trim()).filter(|name| !name.is_empty()).map(str::to_owned).collect();
                if let Some(long) = names.iter().find(|name| name.len() > MAX_MODULE_NAME_BYTES) {
                    return Err(ModulesError::NameTooLong { bytes: long.len(), max: MAX_MODULE_NAME_BYTES });
                }
                Some(names)
            }
            None => None,
        };
        let permission = self.user_permission.as_deref().map_or(default, Permission::for_caller);
        Ok(Caller { user_id: self.user_id, permission, modules })
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
        let caller = fields.into_caller().unwrap();
        assert_eq!(caller.user_id.as_deref(), Some("ada"));
        assert_eq!(caller.permission, Permission::User);
        assert_eq!(caller.modules, Some(vec!["m".to_owned()]));
        assert_eq!(CallerFields::default().into_caller(), Ok(Caller::new(None, None)));
    }

    #[test]
    fn module_lists_past_their_budgets_are_refused_naming_them() {
        let modules = |names: Vec<String>| CallerFields { modules: Some(names), ..CallerFields::default() };
        let longest = format!(" {} ", "m".repeat(MAX_MODULE_NAME_BYTES));
        assert!(modules(vec![longest; MAX_CALLER_MODULES]).into_caller().is_ok(), "trimmed, at the budgets");
        let error = modules(vec!["m".into(); MAX_CALLER_MODULES + 1]).into_caller().unwrap_err();
        assert_eq!(error, ModulesError::TooMany { count: MAX_CALLER_MODULES + 1, max: MAX_CALLER_MODULES });
        assert!(error.to_string().contains("MAX_CALLER_MODULES"), "{error}");
        let error = modules(vec!["m".repeat(MAX_MODULE_NAME_BYTES + 1)]).into_caller().unwrap_err();
        assert!(
            error.to_string().contains("41 bytes") && error.to_string().contains("MAX_MODULE_NAME_BYTES, 40"),
            "{error}"
        );
    }
}
