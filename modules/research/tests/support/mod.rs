//! Helpers of the whole-process tests: the module binary on a free port,
//! and a local HTTP server with fixture pages and SearxNG answers.

// Each test binary uses a part of these helpers.
#![allow(dead_code)]

pub mod fixture;
pub mod process;
