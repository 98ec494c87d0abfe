//! The checker's own budgets: how much a module under test can make a run
//! read, so that a hostile or broken module cannot exhaust the machine the
//! checks run on.

/// The default of [`Budgets::max_response_bytes`] (`--max-response-bytes`): 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// What one run may spend on a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// The largest answer body read from the module (`--max-response-bytes`);
    /// a longer one is cut off there and fails the check that asked for it.
    pub max_response_bytes: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Self { max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES }
    }
}
