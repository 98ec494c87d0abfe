//! The orchestrator: discovery, manifest cache, permission-filtered
//! listing, provider formats and routed execution.
//!
//! Configuration comes from a TOML file and the environment ([`Config`]);
//! [`Orchestrator`] assembles the parts; [`serve`] runs the HTTP API.

pub mod app;
pub mod approvals;
pub mod auth;
pub mod bounded_body;
pub mod cache;
pub mod call_answer;
pub mod call_slots;
pub mod caller;
pub mod config;
pub mod console;
pub mod discovery;
pub mod execute;
pub mod gateway_validation;
pub mod http;
pub mod identity;
pub mod init;
pub mod json_body;
pub mod limits;
pub mod listing_cache;
pub mod manifest;
pub mod mcp;
pub mod mcp_modules;
pub mod metrics;
pub mod module_client;
pub mod openapi;
pub mod redis_cache;
pub mod registry;
pub mod request_checks;
pub mod same_origin;
pub mod server;
pub mod snapshot;
pub mod tls;
pub mod tool_calls;
pub mod tool_search;
pub mod trace;

/// The provider formats, from their own crate (`orchestrator/provider-formats`).
pub use provider_formats as providers;

pub use app::Orchestrator;
pub use caller::{Caller, CallerFields};
pub use config::{Config, ConfigError};
pub use server::serve;

/// A map keyed by module or tool names, looked up on every routed call:
/// hashed with foldhash rather than SipHash, as the names are the
/// configuration's and the manifests', not a caller's.
pub type NameMap<V> = std::collections::HashMap<String, V, foldhash::fast::RandomState>;
