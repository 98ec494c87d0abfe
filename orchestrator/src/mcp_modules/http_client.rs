//! The HTTP client of the MCP servers reached over streamable HTTP: rmcp's
//! own reqwest client, built like the orchestrator's other clients of
//! modules (never through a proxy: `HTTP_PROXY` and the like are ignored),
//! following only same-origin `307`/`308` redirects as rmcp's default
//! client does.

use reqwest_mcp::StatusCode;
use reqwest_mcp::redirect::{Attempt, Policy};

/// The most same-origin redirects one request follows.
const MAX_REDIRECTS: usize = 10;

/// Why the shared client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the HTTP client of MCP servers cannot be built")]
pub struct ClientBuildError(#[from] reqwest_mcp::Error);

/// The pooled client of every MCP server over HTTP (no proxy, no idle
/// connections kept, as rmcp's default client keeps none).
pub fn shared_client() -> Result<reqwest_mcp::Client, ClientBuildError> {
    Ok(reqwest_mcp::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .tcp_nodelay(true)
        .redirect(Policy::custom(same_origin_redirect))
        .build()?)
}

/// Follows a `307` or `308` to the same origin (the method and body kept),
/// stops at any other redirect: the message would be lost, or the session
/// and headers sent to another host.
fn same_origin_redirect(attempt: Attempt<'_>) -> reqwest_mcp::redirect::Action {
    let keeps_body = matches!(attempt.status(), StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT);
    let same_origin = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
    if !keeps_body || !same_origin {
        attempt.stop()
    } else if attempt.previous().len() > MAX_REDIRECTS {
        attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
    } else {
        attempt.follow()
    }
}
