//! When a call needs a person's approval, and for how long it may wait.

use std::time::Duration;

use module_sdk::RiskLevel;
use module_sdk::contract::ToolDefinition;

use crate::config::{AtLeast, ConfigError, invalid, positive_count, seconds_setting};

/// The default of `APPROVAL_EXPIRY_SECONDS`: one hour.
pub const DEFAULT_APPROVAL_EXPIRY_SECONDS: f64 = 3600.0;
/// The default of `MAX_PENDING_APPROVALS` (per user).
pub const DEFAULT_MAX_PENDING_APPROVALS: usize = 20;
/// The default of `MAX_APPROVALS` (kept at once, every user and state).
pub const DEFAULT_MAX_APPROVALS: usize = 10_000;
/// The default of `MAX_APPROVALS_PER_USER` (kept at once, one user's, every state).
pub const DEFAULT_MAX_APPROVALS_PER_USER: usize = 500;
/// The default of `MAX_APPROVAL_ARGUMENT_BYTES`: 1 MiB (a `code_runner` call of
/// `CODE_MAX_BYTES` of code and some `stdin` still waits for approval).
pub const DEFAULT_MAX_APPROVAL_ARGUMENT_BYTES: usize = 1024 * 1024;
/// The default of `MAX_APPROVAL_BYTES`: 64 MiB.
pub const DEFAULT_MAX_APPROVAL_BYTES: usize = 64 * 1024 * 1024;
/// The default of `MAX_APPROVAL_BYTES_PER_USER`: 8 MiB (or `MAX_APPROVAL_BYTES`
/// when that is less), an eighth of the default `MAX_APPROVAL_BYTES`.
pub const DEFAULT_MAX_APPROVAL_BYTES_PER_USER: usize = 8 * 1024 * 1024;
/// The default of `MAX_APPROVAL_REASON_BYTES`: 4 KiB (a paragraph).
pub const DEFAULT_MAX_APPROVAL_REASON_BYTES: usize = 4 * 1024;

/// The checked approval settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalSettings {
    /// `APPROVAL_EXPIRY_SECONDS`: how long a pending approval may wait; a
    /// decided or expired one is kept as long again, so late decisions get `409`.
    pub expiry: Duration,
    /// `APPROVAL_RISK_LEVEL`: tools at or above this `risk_level` need approval.
    pub risk_level: Option<RiskLevel>,
    /// `APPROVAL_FOR_DESTRUCTIVE`: tools annotated `destructive` need approval.
    pub destructive: bool,
    /// `APPROVAL_SEPARATE_DECIDER`: the identity that asked for a call (its
    /// `requested_by`) may not decide its approval, so an agent that can
    /// read its own key cannot approve its own calls.
    pub separate_decider: bool,
    /// `MAX_PENDING_APPROVALS`: pending approvals one user may have at once.
    pub max_pending: usize,
    /// `MAX_APPROVALS`: approvals kept at once (pending, decided and expired, every user).
    pub max_total: usize,
    /// `MAX_APPROVALS_PER_USER`: approvals kept at once for one user
    /// (pending, decided and expired), so no user can fill `MAX_APPROVALS`
    /// alone by deciding their own calls as fast as they ask them.
    pub max_per_user: usize,
    /// `MAX_APPROVAL_ARGUMENT_BYTES`: the largest arguments (as JSON) one approval may hold.
    pub max_argument_bytes: usize,
    /// `MAX_APPROVAL_BYTES`: the counted bytes of all the approvals kept at
    /// once (see [`super::Approval::counted_bytes`]).
    pub max_total_bytes: usize,
    /// `MAX_APPROVAL_BYTES_PER_USER`: the counted bytes of one user's
    /// approvals kept at once (any state), so no user can fill
    /// `MAX_APPROVAL_BYTES` alone; at most `MAX_APPROVAL_BYTES`.
    pub max_bytes_per_user: usize,
    /// `MAX_APPROVAL_REASON_BYTES`: the longest reason a decision may give.
    pub max_reason_bytes: usize,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs_f64(DEFAULT_APPROVAL_EXPIRY_SECONDS),
            risk_level: None,
            destructive: false,
            separate_decider: false,
            max_pending: DEFAULT_MAX_PENDING_APPROVALS,
            max_total: DEFAULT_MAX_APPROVALS,
            max_per_user: DEFAULT_MAX_APPROVALS_PER_USER,
            max_argument_bytes: DEFAULT_MAX_APPROVAL_ARGUMENT_BYTES,
            max_total_bytes: DEFAULT_MAX_APPROVAL_BYTES,
            max_bytes_per_user: DEFAULT_MAX_APPROVAL_BYTES_PER_USER,
            max_reason_bytes: DEFAULT_MAX_APPROVAL_REASON_BYTES,
        }
    }
}

/// The approval keys of the TOML configuration, as written.
#[derive(Debug, Default)]
pub struct ApprovalFile {
    /// `approval_expiry_seconds`.
    pub approval_expiry_seconds: Option<f64>,
    /// `approval_risk_level`.
    pub approval_risk_level: Option<String>,
    /// `approval_for_destructive`.
    pub approval_for_destructive: Option<bool>,
    /// `approval_separate_decider`.
    pub approval_separate_decider: Option<bool>,
    /// `max_pending_approvals`.
    pub max_pending_approvals: Option<usize>,
    /// `max_approvals`.
    pub max_approvals: Option<usize>,
    /// `max_approvals_per_user`.
    pub max_approvals_per_user: Option<usize>,
    /// `max_approval_argument_bytes`.
    pub max_approval_argument_bytes: Option<usize>,
    /// `max_approval_bytes`.
    pub max_approval_bytes: Option<usize>,
    /// `max_approval_bytes_per_user`.
    pub max_approval_bytes_per_user: Option<usize>,
    /// `max_approval_reason_bytes`.
    pub max_approval_reason_bytes: Option<usize>,
}

impl ApprovalSettings {
    /// The file's values overlaid by `env`, checked.
    pub fn read(file: ApprovalFile, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let expiry = match env("APPROVAL_EXPIRY_SECONDS") {
            Some(text) => (text.parse::<f64>().ok(), text),
            None => {
                (file.approval_expiry_seconds, file.approval_expiry_seconds.map(|v| v.to_string()).unwrap_or_default())
            }
        };
        let expiry = match expiry.0 {
            None if expiry.1.is_empty() => defaults.expiry,
            value => seconds_setting("APPROVAL_EXPIRY_SECONDS", &expiry.1, value, AtLeast::Seconds(1.0))?,
        };
        let risk_level = match env("APPROVAL_RISK_LEVEL").or(file.approval_risk_level) {
            None => None,
            Some(text) => {
                Some(text.parse::<RiskLevel>().map_err(|e| invalid("APPROVAL_RISK_LEVEL", &text, e.to_string()))?)
            }
        };
        let flag = |name, from_file: Option<bool>, default| match env(name) {
            Some(text) => text.parse::<bool>().map_err(|_| invalid(name, &text, "expected true or false".into())),
            None => Ok(from_file.unwrap_or(default)),
        };
        let destructive = flag("APPROVAL_FOR_DESTRUCTIVE", file.approval_for_destructive, defaults.destructive)?;
        let separate_decider =
            flag("APPROVAL_SEPARATE_DECIDER", file.approval_separate_decider, defaults.separate_decider)?;
        let count = |name, from_file, default| positive_count(env, name, from_file, default, "a positive number");
        let max_pending = count("MAX_PENDING_APPROVALS", file.max_pending_approvals, defaults.max_pending)?;
        let max_total = count("MAX_APPROVALS", file.max_approvals, defaults.max_total)?;
        let max_per_user = count("MAX_APPROVALS_PER_USER", file.max_approvals_per_user, defaults.max_per_user)?;
        let max_argument_bytes =
            count("MAX_APPROVAL_ARGUMENT_BYTES", file.max_approval_argument_bytes, defaults.max_argument_bytes)?;
        let max_total_bytes = count("MAX_APPROVAL_BYTES", file.max_approval_bytes, defaults.max_total_bytes)?;
        // By default no more than the store's, which a value set must not pass either.
        let max_bytes_per_user = count(
            "MAX_APPROVAL_BYTES_PER_USER",
            file.max_approval_bytes_per_user,
            defaults.max_bytes_per_user.min(max_total_bytes),
        )?;
        if max_bytes_per_user > max_total_bytes {
            let reason = format!("expected at most MAX_APPROVAL_BYTES ({max_total_bytes})");
            return Err(invalid("MAX_APPROVAL_BYTES_PER_USER", &max_bytes_per_user.to_string(), reason));
        }
        let max_reason_bytes =
            count("MAX_APPROVAL_REASON_BYTES", file.max_approval_reason_bytes, defaults.max_reason_bytes)?;
        Ok(Self {
            expiry,
            risk_level,
            destructive,
            separate_decider,
            max_pending,
            max_total,
            max_per_user,
            max_argument_bytes,
            max_total_bytes,
            max_bytes_per_user,
            max_reason_bytes,
        })
    }

    /// Whether a call of `tool` must wait for a person: the module asked
    /// (`requires_approval`), or the tool's `risk_level` is at or above
    /// `APPROVAL_RISK_LEVEL`, or it is `destructive` and `APPROVAL_FOR_DESTRUCTIVE` is set.
    pub fn needs_approval(&self, tool: &ToolDefinition) -> bool {
        tool.requires_approval == Some(true)
            || self.risk_level.is_some_and(|threshold| tool.risk_level.is_some_and(|level| level >= threshold))
            || (self.destructive && tool.annotations.is_some_and(|a| a.destructive))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use module_sdk::Permission;
    use module_sdk::contract::ToolAnnotations;
    use std::collections::HashMap;

    fn tool(risk: Option<RiskLevel>, destructive: bool) -> ToolDefinition {
        ToolDefinition {
            annotations: Some(ToolAnnotations { destructive, ..ToolAnnotations::default() }),
            risk_level: risk,
            ..ToolDefinition::new("m.t", "d", Permission::Guest)
        }
    }

    fn read(pairs: &[(&str, &str)]) -> Result<ApprovalSettings, ConfigError> {
        let env: HashMap<&str, &str> = pairs.iter().copied().collect();
        ApprovalSettings::read(ApprovalFile::default(), &|name| env.get(name).map(|v| (*v).to_owned()))
    }

    #[test]
    fn risk_and_destructive_policies_add_approval() {
        let settings = read(&[("APPROVAL_RISK_LEVEL", "medium"), ("APPROVAL_FOR_DESTRUCTIVE", "true")]).unwrap();
        assert!(settings.needs_approval(&tool(Some(RiskLevel::High), false)));
        assert!(settings.needs_approval(&tool(Some(RiskLevel::Medium), false)));
        assert!(!settings.needs_approval(&tool(Some(RiskLevel::Low), false)));
        assert!(settings.needs_approval(&tool(None, true)));
        let default = read(&[]).unwrap();
        assert_eq!(default, ApprovalSettings::default());
        assert!(!default.needs_approval(&tool(Some(RiskLevel::High), true)));
    }

    #[test]
    fn bad_values_name_their_setting() {
        for (name, value) in [
            ("APPROVAL_EXPIRY_SECONDS", "0"),
            ("APPROVAL_RISK_LEVEL", "severe"),
            ("APPROVAL_FOR_DESTRUCTIVE", "yes"),
            ("APPROVAL_SEPARATE_DECIDER", "on"),
            ("MAX_PENDING_APPROVALS", "0"),
            ("MAX_APPROVALS", "many"),
            ("MAX_APPROVALS_PER_USER", "0"),
            ("MAX_APPROVAL_ARGUMENT_BYTES", "0"),
            ("MAX_APPROVAL_BYTES", "-1"),
            ("MAX_APPROVAL_BYTES_PER_USER", "0"),
            ("MAX_APPROVAL_REASON_BYTES", "0"),
        ] {
            let error = read(&[(name, value)]).unwrap_err().to_string();
            assert!(error.contains(name), "{error}");
        }
    }

    #[test]
    fn one_users_bytes_stay_within_the_stores() {
        let small = read(&[("MAX_APPROVAL_BYTES", "1000")]).unwrap();
        assert_eq!((small.max_total_bytes, small.max_bytes_per_user), (1000, 1000), "the default is lowered to it");
        let set = read(&[("MAX_APPROVAL_BYTES", "1000"), ("MAX_APPROVAL_BYTES_PER_USER", "1000")]).unwrap();
        assert_eq!(set.max_bytes_per_user, 1000);
        let error = read(&[("MAX_APPROVAL_BYTES", "1000"), ("MAX_APPROVAL_BYTES_PER_USER", "1001")]).unwrap_err();
        let error = error.to_string();
        assert!(
            error.contains("MAX_APPROVAL_BYTES_PER_USER") && error.contains("at most MAX_APPROVAL_BYTES (1000)"),
            "{error}"
        );
    }
}
