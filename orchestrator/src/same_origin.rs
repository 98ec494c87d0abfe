//! Cross-site requests refused: a web page of another site can make a
//! browser send a `POST` without a body (a `no-cors` fetch, a form with
//! nothing in it) to any address, which the JSON media type check never
//! sees. Every request that may change something (any method but `GET`,
//! `HEAD` and `OPTIONS`) whose browser says it comes from another origin is
//! refused with `403`, in every mode: the console is served from the
//! orchestrator's own origin, and clients that are not browsers (the CLI,
//! agents, other servers) send no `Origin`. `/mcp` keeps its own rule
//! (`MCP_ALLOWED_ORIGINS`).
//!
//! The same decision as Go's `net/http.CrossOriginProtection`: a
//! `Sec-Fetch-Site` header (every current browser sends it) must be
//! `same-origin` or `none` (typed by the person); without it, an `Origin`
//! header, when there is one, must name the request's own `Host`.

use std::future::{Ready, ready};
use std::task::Poll;

use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::Response;
use futures::future::Either;
use module_sdk::service::error_response;
use tower::{Layer, Service};

/// The header a browser tells the relation of the page to the target with.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// Refuses state-changing requests from other sites with `403` and a JSON
/// error (see the module's documentation); the request otherwise goes on to
/// the inner service's own future, with nothing boxed or cloned.
#[derive(Debug, Clone, Copy)]
pub struct SameOriginLayer;

impl<S> Layer<S> for SameOriginLayer {
    type Service = SameOrigin<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SameOrigin(inner)
    }
}

/// The service of [`SameOriginLayer`].
#[derive(Debug, Clone)]
pub struct SameOrigin<S>(S);

impl<S, B> Service<Request<B>> for SameOrigin<S>
where
    S: Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match cross_site_refusal(request.method(), request.uri().path(), request.headers()) {
            Some(refusal) => Either::Right(ready(Ok(refusal))),
            None => Either::Left(self.0.call(request)),
        }
    }
}

/// The `403` for a request that may change something and comes from a page
/// of another origin; `None` when it may go on.
fn cross_site_refusal(method: &Method, path: &str, headers: &HeaderMap) -> Option<Response> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) || path == "/mcp" {
        return None;
    }
    let from = match headers.get(SEC_FETCH_SITE) {
        Some(site) if site == "same-origin" || site == "none" => return None,
        Some(site) => format!("`Sec-Fetch-Site: {}`", site.to_str().unwrap_or("(not text)")),
        None => {
            let origin = headers.get(ORIGIN)?;
            let host = headers.get(HOST).map(|host| host.as_bytes());
            if host.is_some_and(|host| names_host(origin.as_bytes(), host)) {
                return None;
            }
            format!("`Origin: {}`", origin.to_str().unwrap_or("(not text)"))
        }
    };
    let message = format!(
        "cross-site request refused ({from}): a web page of another origin may not make this orchestrator change \
         anything; use the console at / on this orchestrator's own address, or a client that sends no `Origin`"
    );
    Some(error_response(StatusCode::FORBIDDEN, message))
}

/// Whether `origin` (`scheme://host[:port]`) names `host` (`host[:port]`, the
/// `Host` header), host names in any case.
fn names_host(origin: &[u8], host: &[u8]) -> bool {
    let authority = origin.strip_prefix(b"https://").or_else(|| origin.strip_prefix(b"http://"));
    authority.is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap())).collect()
    }

    fn refused(method: Method, path: &str, pairs: &[(&'static str, &'static str)]) -> bool {
        cross_site_refusal(&method, path, &headers(pairs)).is_some()
    }

    #[test]
    fn only_state_changing_requests_from_other_origins_are_refused() {
        let own = ("host", "127.0.0.1:8080");
        // Clients without `Origin` (the CLI, agents) and the console's own page.
        assert!(!refused(Method::POST, "/api-keys/k/revoke", &[own]));
        assert!(!refused(Method::POST, "/execute", &[own, ("origin", "http://127.0.0.1:8080")]));
        assert!(!refused(Method::POST, "/execute", &[("host", "Orch.Example"), ("origin", "https://orch.example")]));
        assert!(!refused(Method::POST, "/execute", &[own, ("sec-fetch-site", "same-origin")]));
        assert!(!refused(Method::POST, "/execute", &[own, ("sec-fetch-site", "none")]));
        // Another site, by either header.
        assert!(refused(Method::POST, "/api-keys/k/revoke", &[own, ("origin", "https://evil.example")]));
        assert!(refused(Method::POST, "/refresh-tools", &[own, ("origin", "null")]));
        assert!(refused(Method::POST, "/execute", &[own, ("origin", "http://127.0.0.1:8081")]));
        assert!(refused(Method::POST, "/execute", &[("origin", "http://127.0.0.1:8080")]), "no Host to match");
        assert!(refused(Method::DELETE, "/approvals/x", &[own, ("sec-fetch-site", "cross-site")]));
        assert!(refused(Method::POST, "/execute", &[own, ("sec-fetch-site", "same-site")]), "a sibling host");
        // `Sec-Fetch-Site` is the browser's word over `Origin`.
        let origin = ("origin", "http://127.0.0.1:8080");
        assert!(refused(Method::POST, "/execute", &[own, origin, ("sec-fetch-site", "cross-site")]));
        // Reads, and `/mcp` with its own origin rule.
        assert!(!refused(Method::GET, "/modules", &[own, ("origin", "https://evil.example")]));
        assert!(!refused(Method::POST, "/mcp", &[own, ("origin", "https://evil.example")]));
    }
}
