//! Helpers of the whole-process tests.

// Each test binary uses a part of these helpers.
#![allow(dead_code)]

pub mod process;
