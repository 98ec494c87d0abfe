//! The orchestrator: discovery, manifest cache, permission-filtered
//! listing, provider formats and routed execution.

pub mod providers;
