//! Helpers of the whole-process tests.

pub mod process;
