//! The whole fleet as one MCP server at `/mcp`, on `rmcp` (the official Rust
//! SDK of the Model Context Protocol).
//!
//! - Its tools are the caller's tools: the identity proven by the request's
//!   bearer token (API key, JWT, service token; development mode without
//!   any), acting as the `permission`, `modules` and `user_id` of the URL's
//!   query, exactly as `GET /tools` and `POST /execute` read them.
//! - Tools are named `module__tool` (the provider-safe names of
//!   [`NameMap`](crate::providers::names::NameMap)), so the module is the
//!   prefix, as the specification advises aggregators; title, description,
//!   schemas and annotations come from the manifests.
//! - `tools/call` goes through [`Orchestrator::call`](crate::Orchestrator::call),
//!   the path of `POST /execute`, and is counted in `/metrics` alike.
//! - A call that needs approval asks the user within the call when the
//!   client can (`input_required`), and otherwise says it waits ([`approval`]).
//! - `notifications/tools/list_changed` follows the registry's generations:
//!   on `subscriptions/listen` streams (2026-07-28) and on the `GET /mcp`
//!   stream of 2025-11-25 sessions ([`http`]).
//! - Sessions (every `initialize` opens one) are counted where rmcp makes
//!   and ends them, at most `MCP_MAX_SESSIONS` and `MCP_MAX_SESSIONS_PER_IDENTITY`
//!   of one identity's, and are bound to their opener's grant: to any
//!   other identity, or the same user's JWT with other claims, a session
//!   does not exist ([`sessions`]).
//! - Event streams (`GET /mcp`, `subscriptions/listen`) each hold a
//!   connection while open, so they are counted, in all and per identity ([`streams`]).
//! - Calls that run long send `notifications/progress` to a client that
//!   gave a `progressToken` ([`progress`]).
//! - A client that declares the tasks extension gets a call that runs long
//!   as a task: owner-checked, bounded, kept by the process that runs it and
//!   shared with the other replicas through `REDIS_URL` ([`tasks`]).

pub mod approval;
pub mod call_ids;
pub mod call_results;
pub mod cancel_on_drop;
pub mod handler;
pub mod http;
pub mod keep_alive;
pub mod progress;
pub mod sessions;
pub mod settings;
pub mod streams;
pub mod tasks;
pub mod tools;

pub use handler::{FleetMcp, McpCaller};
pub use http::routes;
pub use settings::McpEndpointSettings;
