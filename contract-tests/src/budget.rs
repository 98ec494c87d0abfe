//! The checker's own budgets: how much a module under test can make a run
//! read, so that a hostile or broken module cannot exhaust the machine the
//! checks run on, nor hold a CI job for days.

use std::time::Duration;

/// The default of [`Budgets::max_response_bytes`] (`--max-response-bytes`): 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The default of [`Budgets::max_tools`] (`--max-tools`).
pub const DEFAULT_MAX_TOOLS: usize = 100;

/// The default of [`Budgets::max_run`] (`--max-run-seconds`): 30 minutes.
pub const DEFAULT_MAX_RUN: Duration = Duration::from_secs(30 * 60);

/// The default of [`Budgets::module_max_body_bytes`] (`--module-max-body-bytes`):
/// the contract's default request body limit, 2 MiB.
pub const DEFAULT_MODULE_MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What one run may spend on a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// The largest answer body read from the module (`--max-response-bytes`);
    /// a longer one is cut off there and fails the check that asked for it.
    pub max_response_bytes: usize,
    /// The most tools whose calls are made (`--max-tools`), in manifest
    /// order; the others are not called, which fails `execute.valid_arguments`.
    pub max_tools: usize,
    /// How long checking the module may take (`--max-run-seconds`): a
    /// request in flight then is cut off, and none is made after it.
    pub max_run: Duration,
    /// The module's own request body limit (`--module-max-body-bytes`, its
    /// `MAX_BODY_BYTES`): `execute.body_too_large` sends a body one byte
    /// longer, the largest request of a run.
    pub module_max_body_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_tools: DEFAULT_MAX_TOOLS,
            max_run: DEFAULT_MAX_RUN,
            module_max_body_bytes: DEFAULT_MODULE_MAX_BODY_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_body_limit_is_the_sdks_default() {
        assert_eq!(DEFAULT_MODULE_MAX_BODY_BYTES, module_sdk::ServerLimits::default().max_body_bytes);
    }
}
