//! Turn ordinary async Rust functions into tools that language models can
//! call, and serve them as an HTTP module that speaks the module contract
//! (`GET /manifest`, `POST /execute`, `GET /health`, `GET /openapi.json`).
//!
//! A tool is one async fn plus one argument type; its JSON Schema comes
//! from the types (schemars) and its description from the doc comment:
//!
//! ```no_run
//! use module_sdk::{Context, Module, ToolError, tool};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Greeting {
//!     /// The greeting.
//!     text: String,
//! }
//!
//! /// Say hello to someone.
//! #[tool(read_only, idempotent)]
//! async fn greet(_ctx: Context, args: Greet) -> Result<Greeting, ToolError> {
//!     Ok(Greeting { text: format!("Hello, {}!", args.name) })
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), module_sdk::ServeError> {
//!     Module::new("demo", "Demonstration tools.")
//!         .version(env!("CARGO_PKG_VERSION"))
//!         .tool(greet)
//!         .serve() // HOST, PORT, SERVICE_AUTH_TOKEN from the environment
//!         .await
//! }
//! ```

// Lets the `#[tool]` expansion name `::module_sdk` inside this crate too.
extern crate self as module_sdk;

mod arguments;
mod auth;
mod blocking_limit;
mod body;
mod config;
mod connection_watch;
mod context;
pub mod contract;
mod deadline;
mod error;
mod healthcheck;
mod json_depth;
mod listener;
mod logging;
mod manifest_check;
pub mod mcp;
mod metrics;
mod module;
mod openapi;
pub mod otlp;
mod path_setting;
pub mod schema;
mod server;
pub mod service;
mod serving_threads;
mod settings_parse;
mod testing;
mod tool;
mod trace_context;
mod validate;

// What a tool author uses; the wire types are in `contract`, the plumbing
// that the orchestrator reuses in `service`.
pub use blocking_limit::DEFAULT_MAX_BLOCKING_CALLS;
pub use config::{LogFormat, ServeConfig};
pub use context::Context;
pub use contract::{ErrorKind, Permission, RiskLevel};
pub use error::{ModuleError, ServeError, ToolError, ToolErrorKind, error_chain};
pub use healthcheck::{run_healthcheck_if_requested, run_main};
pub use listener::ServerLimits;
pub use mcp::SdkFlags;
pub use module::{Module, ModuleService};
pub use module_sdk_macros::tool;
pub use path_setting::{PathSetting, PathSettingError, PathUse};
pub use settings_parse::{parse_settings, try_parse_settings_from};
pub use testing::TestClient;
pub use tool::{DEFAULT_TIMEOUT, IntoTool, MAX_TIMEOUT, Tool, ToolHandler};

/// `#[tool]` refuses a function that is not a tool, where it is written.
///
/// Two arguments, the context and the argument type:
///
/// ```compile_fail
/// # use module_sdk::{ToolError, tool};
/// /// Say hello.
/// #[tool]
/// async fn greet(name: String) -> Result<String, ToolError> {
///     Ok(name)
/// }
/// ```
///
/// A `Result`:
///
/// ```compile_fail
/// # use module_sdk::{Context, tool};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Args { x: u8 }
/// /// Give the number back.
/// #[tool]
/// async fn number(_ctx: Context, args: Args) -> u8 {
///     args.x
/// }
/// ```
///
/// A timeout longer than [`MAX_TIMEOUT`] (one day):
///
/// ```compile_fail
/// # use module_sdk::{Context, ToolError, tool};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Args { x: u8 }
/// /// Give the number back.
/// #[tool(timeout_seconds = 1e19)]
/// async fn number(_ctx: Context, args: Args) -> Result<u8, ToolError> {
///     Ok(args.x)
/// }
/// ```
///
/// A handler that is not `async fn(Context, Args) -> Result<Output,
/// ToolError>` is refused by `Tool::new` with the shape to write:
///
/// ```compile_fail,E0277
/// # use module_sdk::{Context, Tool};
/// fn not_async(_ctx: Context, _args: u8) -> u8 {
///     0
/// }
/// let _ = Tool::new("n", "Not a tool.", not_async);
/// ```
#[cfg(doctest)]
pub struct ToolSignatureDoctests;

/// The README's Rust examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
