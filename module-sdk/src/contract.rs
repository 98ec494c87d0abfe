//! The wire types of the module contract, version 1 (`shared/CONTRACT.md`).
//!
//! Base fields carry exactly the names and JSON types of the existing format,
//! so a manifest or result serialized here validates under the pydantic
//! models other orchestrators use. Extensions are optional when read, so a
//! module that sends none still parses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

pub use crate::manifest_check::{
    DEFAULT_MAX_MANIFEST_SCHEMA_BYTES, DEFAULT_MAX_SCHEMA_BYTES, DEFAULT_MAX_SCHEMA_DEPTH, DEFAULT_MAX_SCHEMA_NODES,
    DEFAULT_MAX_SCHEMA_PATTERNS, MAX_PROVIDER_NAME_CHARS, ManifestError, ManifestPatterns, SchemaBudget,
    SchemaBudgetError, check_manifest, check_manifest_within,
};

/// The contract version this crate speaks, sent as `contract_version`.
pub const CONTRACT_VERSION: &str = "1";

/// Whether `name` is a valid module or tool name: `^[a-z][a-z0-9_]{0,39}$`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 40
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What a module says about itself at `GET /manifest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ModuleManifest {
    /// `^[a-z][a-z0-9_]{0,39}$`; the prefix of every tool name.
    pub module_name: String,
    /// One or two sentences for a person and a model.
    pub description: String,
    /// The tools this module serves; at least one, names unique.
    pub tools: Vec<ToolDefinition>,
    /// Extension: the module's semver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Extension: the contract version, `"1"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
}

/// One tool of a module, as listed in its manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolDefinition {
    /// `"<module_name>.<tool>"`.
    pub name: String,
    /// What the tool does, for a person and a model.
    pub description: String,
    /// The top-level properties of `input_schema`, flattened (a lossy view).
    #[serde(default)]
    pub parameters: Vec<ToolParameter>,
    /// The least privileged caller allowed; unknown strings read as `owner`.
    #[serde(default, deserialize_with = "Permission::deserialize_for_tool")]
    pub required_permission: Permission,
    /// Extension: the full JSON Schema (draft 2020-12) of `arguments`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input_schema: Option<Value>,
    /// Extension: the JSON Schema of `result` on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Extension: behaviour hints, meaning as MCP's tool annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Extension: the orchestrator must get the user's approval first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_approval: Option<bool>,
    /// Extension: the longest the module lets this tool run, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// Extension: how much harm a wrong call can do; an orchestrator may
    /// require approval at or above a configured level.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "RiskLevel::deserialize_for_tool")]
    pub risk_level: Option<RiskLevel>,
}

impl ToolDefinition {
    /// A tool with no parameters and none of the extensions; set the other
    /// fields with struct update syntax.
    pub fn new(name: impl Into<String>, description: impl Into<String>, required_permission: Permission) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: Vec::new(),
            required_permission,
            input_schema: None,
            output_schema: None,
            annotations: None,
            requires_approval: None,
            timeout_seconds: None,
            risk_level: None,
        }
    }
}

/// How much harm a wrong call of a tool can do (the `risk_level` extension),
/// ordered `low < medium < high`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// A wrong call costs little (a read, a search).
    Low,
    /// A wrong call changes something that can be undone.
    Medium,
    /// A wrong call can do lasting harm (deleting, spending, running code).
    High,
}

impl RiskLevel {
    /// The contract's name of this level.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// Reads a manifest's `risk_level` leniently: an unknown string reads as
    /// `high`, so a newer module's level errs on the side of asking.
    fn deserialize_for_tool<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Self>, D::Error> {
        let name = Option::<String>::deserialize(de)?;
        Ok(name.map(|n| n.parse().unwrap_or(Self::High)))
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a string that is not a risk level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown risk level `{0}`: expected one of low, medium, high")]
pub struct UnknownRiskLevel(pub String);

impl FromStr for RiskLevel {
    type Err = UnknownRiskLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Low, Self::Medium, Self::High]
            .into_iter()
            .find(|level| level.as_str() == s)
            .ok_or_else(|| UnknownRiskLevel(s.to_owned()))
    }
}

/// Behaviour hints of a tool (MCP's tool annotation hints).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolAnnotations {
    /// The tool changes nothing.
    #[serde(default)]
    pub read_only: bool,
    /// The tool may destroy or overwrite data.
    #[serde(default)]
    pub destructive: bool,
    /// Calling it twice with the same arguments has the effect of calling it once.
    #[serde(default)]
    pub idempotent: bool,
    /// The tool reaches outside systems (the web, other services).
    #[serde(default)]
    pub open_world: bool,
}

/// One top-level argument of a tool, flattened from `input_schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolParameter {
    /// The property name in `input_schema`.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean`, `array` or `object`.
    #[serde(rename = "type")]
    pub kind: ParameterType,
    /// From the field's doc comment; never empty.
    pub description: String,
    /// True when the property is in the schema's `required` list.
    pub required: bool,
    /// The allowed values, when the property is an enumeration.
    #[serde(rename = "enum")]
    pub allowed: Option<Vec<String>>,
}

/// The JSON type of a [`ToolParameter`] (a nullable type is its non-null type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParameterType {
    /// A JSON string.
    String,
    /// A JSON number without a fractional part.
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON array.
    Array,
    /// A JSON object.
    Object,
}

impl ParameterType {
    /// The contract's name of this type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    /// Reads a JSON Schema `type` name; `null` and unknown names give `None`.
    pub fn from_schema_type(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }
}

/// The body of `POST /execute`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolCall {
    /// Full tool name, `module.tool`.
    pub tool_name: String,
    /// The tool's arguments, a JSON object (absent reads as `{}`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: Map<String, Value>,
    /// Set by the orchestrator from the authenticated caller, never by a model.
    #[serde(default)]
    pub user_id: Option<String>,
}

/// The answer of `POST /execute`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolResult {
    /// Echoes the call's `tool_name`.
    pub tool_name: String,
    /// Whether the tool did its work.
    pub success: bool,
    /// The handler's output on success (any JSON value); `null` on failure.
    #[serde(default)]
    pub result: Value,
    /// On failure, a message a model can act on; `null` on success.
    #[serde(default)]
    pub error: Option<String>,
    /// Extension: on failure, what kind of failure it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
}

impl ToolResult {
    /// A successful result carrying `result`.
    pub fn success(tool_name: impl Into<String>, result: Value) -> Self {
        Self { tool_name: tool_name.into(), success: true, result, error: None, error_kind: None }
    }

    /// A failed result with a message a model can act on.
    pub fn failure(tool_name: impl Into<String>, kind: ErrorKind, error: impl Into<String>) -> Self {
        Self {
            tool_name: tool_name.into(),
            success: false,
            result: Value::Null,
            error: Some(error.into()),
            error_kind: Some(kind),
        }
    }
}

/// Why a tool call failed (the contract's `error_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No tool of that name in this module.
    UnknownTool,
    /// The arguments do not fit the tool's `input_schema`.
    InvalidArguments,
    /// The caller may not use this tool.
    PermissionDenied,
    /// The thing the arguments name does not exist.
    NotFound,
    /// The tool ran out of time.
    Timeout,
    /// The module, or a service it needs, cannot be reached or is not configured.
    Unavailable,
    /// The tool failed while running (also any kind this crate does not know).
    #[serde(other)]
    ExecutionFailed,
}

impl ErrorKind {
    /// Every kind the contract defines.
    pub const ALL: [ErrorKind; 7] = [
        Self::UnknownTool,
        Self::InvalidArguments,
        Self::PermissionDenied,
        Self::NotFound,
        Self::Timeout,
        Self::Unavailable,
        Self::ExecutionFailed,
    ];

    /// The kind named `name`, if the contract defines it (unlike serde,
    /// which reads unknown names as `execution_failed`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The contract's name of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownTool => "unknown_tool",
            Self::InvalidArguments => "invalid_arguments",
            Self::PermissionDenied => "permission_denied",
            Self::NotFound => "not_found",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::ExecutionFailed => "execution_failed",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A privilege level, ordered `guest < user < admin < owner`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Anyone, the default for a tool.
    #[default]
    Guest,
    /// A signed-in user.
    User,
    /// An administrator.
    Admin,
    /// The owner of the deployment.
    Owner,
}

/// Every permission, lowest first.
pub const PERMISSIONS: [Permission; 4] = [Permission::Guest, Permission::User, Permission::Admin, Permission::Owner];

impl Permission {
    /// The contract's name of this level.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guest => "guest",
            Self::User => "user",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }

    /// A caller's level, failing closed: an unknown string is `guest`.
    pub fn for_caller(name: &str) -> Self {
        name.parse().unwrap_or(Self::Guest)
    }

    /// A tool's required level, failing closed: an unknown string is `owner`.
    pub fn for_tool(name: &str) -> Self {
        name.parse().unwrap_or(Self::Owner)
    }

    /// Whether a caller at this level may use a tool that requires `required`.
    pub fn allows(self, required: Permission) -> bool {
        self >= required
    }

    /// Serde reader for a tool's `required_permission` (unknown reads as `owner`).
    fn deserialize_for_tool<'de, D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let name = Option::<String>::deserialize(de)?;
        Ok(name.map_or(Self::Guest, |n| Self::for_tool(&n)))
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a string that is not a permission level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission `{0}`: expected one of guest, user, admin, owner")]
pub struct UnknownPermission(pub String);

impl FromStr for Permission {
    type Err = UnknownPermission;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PERMISSIONS.into_iter().find(|p| p.as_str() == s).ok_or_else(|| UnknownPermission(s.to_owned()))
    }
}

/// The body of `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `"ok"` when the module answers.
    pub status: String,
}

/// The JSON body of every non-200 answer: `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong, and what to do about it.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn risk_levels_are_ordered_and_an_unknown_one_reads_as_high() {
        assert!(RiskLevel::Low < RiskLevel::Medium && RiskLevel::Medium < RiskLevel::High);
        let read = |level: Value| -> Option<RiskLevel> {
            let tool: ToolDefinition =
                serde_json::from_value(json!({"name": "m.t", "description": "d", "risk_level": level})).unwrap();
            tool.risk_level
        };
        assert_eq!(read(json!("medium")), Some(RiskLevel::Medium));
        assert_eq!(read(json!("catastrophic")), Some(RiskLevel::High));
        assert_eq!(read(Value::Null), None);
        let absent: ToolDefinition = serde_json::from_value(json!({"name": "m.t", "description": "d"})).unwrap();
        assert_eq!(absent.risk_level, None);
        assert!(!serde_json::to_string(&absent).unwrap().contains("risk_level"));
    }

    #[test]
    fn names_follow_the_contract_pattern() {
        assert!(is_valid_name("research"));
        assert!(is_valid_name("a1_b"));
        assert!(is_valid_name(&"a".repeat(40)));
        for bad in ["", "1a", "A", "a.b", "a-b", "_a", "é", &"a".repeat(41)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn permissions_are_ordered_and_fail_closed() {
        assert!(Permission::Guest < Permission::User);
        assert!(Permission::Admin < Permission::Owner);
        assert_eq!(Permission::for_caller("root"), Permission::Guest);
        assert_eq!(Permission::for_tool("root"), Permission::Owner);
        assert!(Permission::Admin.allows(Permission::User));
        assert!(!Permission::Guest.allows(Permission::Admin));
    }

    #[test]
    fn tool_definition_reads_base_fields_only_and_unknown_permission_as_owner() {
        let def: ToolDefinition = serde_json::from_value(json!({
            "name": "m.t", "description": "d", "required_permission": "superuser",
            "parameters": [{"name": "q", "type": "string", "description": "x", "required": true, "enum": null}]
        }))
        .unwrap();
        assert_eq!(def.required_permission, Permission::Owner);
        assert_eq!(def.parameters[0].kind, ParameterType::String);
        assert!(def.input_schema.is_none());
        let bare: ToolDefinition = serde_json::from_value(json!({"name": "m.t", "description": "d"})).unwrap();
        assert_eq!(bare.required_permission, Permission::Guest);
    }

    #[test]
    fn results_always_carry_result_and_error_keys() {
        let ok = serde_json::to_value(ToolResult::success("m.t", json!(1))).unwrap();
        assert_eq!(ok, json!({"tool_name": "m.t", "success": true, "result": 1, "error": null}));
        let failed = ToolResult::failure("m.t", ErrorKind::Timeout, "too slow");
        let failed = serde_json::to_value(failed).unwrap();
        assert_eq!(failed["result"], Value::Null);
        assert_eq!(failed["error_kind"], "timeout");
    }

    #[test]
    fn unknown_error_kinds_read_as_execution_failed() {
        let r: ToolResult = serde_json::from_value(json!({
            "tool_name": "m.t", "success": false, "result": null, "error": "x", "error_kind": "quota"
        }))
        .unwrap();
        assert_eq!(r.error_kind, Some(ErrorKind::ExecutionFailed));
        assert_eq!(ErrorKind::from_name("quota"), None);
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_name(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn tool_call_arguments_default_to_empty_and_reject_non_objects() {
        let call: ToolCall = serde_json::from_value(json!({"tool_name": "m.t"})).unwrap();
        assert!(call.arguments.is_empty());
        assert!(serde_json::from_value::<ToolCall>(json!({"tool_name": "m.t", "arguments": [1]})).is_err());
    }
}
