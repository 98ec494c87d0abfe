//! Helpers of the whole-process tests: the module binary on a free port,
//! and a local HTTP server with fixture pages and SearxNG answers.

pub mod fixture;
pub mod process;
