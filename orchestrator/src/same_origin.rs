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
//!
//! That does not stop DNS rebinding: a page whose own name was made to
//! resolve to the orchestrator's address is the same origin to the browser,
//! and its reads (`GET /approvals`) carry neither header. So, given a list
//! of allowed hosts ([`AllowedHosts`]: `MCP_ALLOWED_HOSTS`, or in
//! development mode the loopback names and the listening address), requests
//! must name one of them in its `Host` ([`HostCheck`]): in development mode,
//! where everyone is the owner, every request whatever its method and
//! headers, but `/health` (probes name any address) and the console's files
//! (no data in them); with identities, where a rebinding page has no
//! credentials to read with and servers (Prometheus by pod address, other
//! services by their own name) call with keys, only browsers' requests that
//! may change something.

use std::future::{Ready, ready};
use std::net::IpAddr;
use std::sync::Arc;
use std::task::Poll;

use axum::http::header::{HOST, ORIGIN};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use axum::response::Response;
use futures::future::Either;
use module_sdk::service::error_response;
use tower::{Layer, Service};

/// The header a browser tells the relation of the page to the target with.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// The host names (with a port, or any port) a request must name in its
/// `Host`; empty allows any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts(Arc<[(String, Option<u16>)]>);

impl AllowedHosts {
    /// `hosts` as listed (`MCP_ALLOWED_HOSTS`: `name`, `name:port`,
    /// `[::1]:port`); empty allows any host.
    pub fn new<'a>(hosts: impl IntoIterator<Item = &'a str>) -> Self {
        Self(hosts.into_iter().filter_map(authority).collect())
    }

    /// The hosts of development mode: the loopback names, and `listening`
    /// (the `HOST` address) unless it is every address (`0.0.0.0`, `::`).
    pub fn development(listening: IpAddr) -> Self {
        let own = match listening {
            IpAddr::V6(v6) if !listening.is_unspecified() => Some(format!("[{v6}]")),
            IpAddr::V4(v4) if !listening.is_unspecified() => Some(v4.to_string()),
            _ => None,
        };
        let loopback = ["localhost", "127.0.0.1", "[::1]"].map(str::to_owned);
        Self::new(loopback.iter().chain(own.as_ref()).map(String::as_str))
    }

    /// Whether `host` (a `Host` header) is allowed: any when the list is
    /// empty, else one whose name (in any case) and port, if it names one, match.
    fn allow(&self, host: Option<&HeaderValue>) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let Some((name, port)) = host.and_then(|host| host.to_str().ok()).and_then(authority) else { return false };
        self.0.iter().any(|(allowed, allowed_port)| {
            *allowed == name && allowed_port.is_none_or(|allowed_port| port == Some(allowed_port))
        })
    }
}

/// The lower-case host name (IPv6 without brackets) and the port of
/// `text` (`name[:port]`; the whole text when it is no authority, `::1`),
/// as rmcp reads `MCP_ALLOWED_HOSTS` for `/mcp`.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (host, port) = match Authority::try_from(text) {
        Ok(parsed) => (parsed.host().to_owned(), parsed.port_u16()),
        Err(_) => (text.to_owned(), None),
    };
    Some((host.trim_matches(['[', ']']).to_ascii_lowercase(), port))
}

/// Which requests must name one of the [`AllowedHosts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HostCheck {
    /// Every request but to `/health` and the console's files: development mode.
    #[default]
    EveryRequest,
    /// Only browsers' requests that may change something (`/mcp` keeps its
    /// own check): with identities.
    BrowsersChanges,
}

/// Refuses requests naming a host not in its [`AllowedHosts`], and
/// state-changing requests from other sites, with `403` and a JSON error
/// (see the module's documentation); the request otherwise goes on to the
/// inner service's own future, with nothing boxed or cloned.
#[derive(Debug, Clone, Default)]
pub struct SameOriginLayer(pub AllowedHosts, pub HostCheck);

impl<S> Layer<S> for SameOriginLayer {
    type Service = SameOrigin<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SameOrigin(inner, self.0.clone(), self.1)
    }
}

/// The service of [`SameOriginLayer`].
#[derive(Debug, Clone)]
pub struct SameOrigin<S>(S, AllowedHosts, HostCheck);

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
        match cross_site_refusal(request.method(), request.uri().path(), request.headers(), &self.1, self.2) {
            Some(refusal) => Either::Right(ready(Ok(refusal))),
            None => Either::Left(self.0.call(request)),
        }
    }
}

/// The paths served whatever `Host` a request names: liveness (a probe
/// names the pod's address) and the console's files, which hold no data.
const ANY_HOST_PATHS: [&str; 4] = ["/health", "/", "/console.css", "/console.js"];

/// The `403` for a request `check` holds to `hosts` naming a host they do
/// not allow, or one that may change something and comes from a page of
/// another origin; `None` when it may go on.
fn cross_site_refusal(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    hosts: &AllowedHosts,
    check: HostCheck,
) -> Option<Response> {
    let changes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) && path != "/mcp";
    let checked = match check {
        HostCheck::EveryRequest => !ANY_HOST_PATHS.contains(&path),
        HostCheck::BrowsersChanges => changes && (headers.contains_key(SEC_FETCH_SITE) || headers.contains_key(ORIGIN)),
    };
    if checked && !hosts.allow(headers.get(HOST)) {
        let host = headers.get(HOST).map_or("(none)", |host| host.to_str().unwrap_or("(not text)"));
        let message = format!(
            "request refused: `Host: {host}` is not a host this orchestrator answers (MCP_ALLOWED_HOSTS; in \
             development mode, by default, localhost, 127.0.0.1, [::1] and its HOST address), so a page of another \
             site that made its own name resolve to this address (DNS rebinding) can neither read nor change \
             anything; reach it at one of those, or list the host in MCP_ALLOWED_HOSTS"
        );
        return Some(error_response(StatusCode::FORBIDDEN, message));
    }
    if !changes {
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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap())).collect()
    }

    fn refused(method: Method, path: &str, pairs: &[(&'static str, &'static str)]) -> bool {
        cross_site_refusal(&method, path, &headers(pairs), &AllowedHosts::default(), HostCheck::EveryRequest).is_some()
    }

    fn refused_by(hosts: &AllowedHosts, method: Method, pairs: &[(&str, &str)]) -> bool {
        refused_at(hosts, method, "/approvals/x", pairs)
    }

    fn refused_at(hosts: &AllowedHosts, method: Method, path: &str, pairs: &[(&str, &str)]) -> bool {
        cross_site_refusal(&method, path, &headers(pairs), hosts, HostCheck::EveryRequest).is_some()
    }

    #[test]
    fn a_rebinding_page_is_refused_by_the_hosts_of_development_mode() {
        let hosts = AllowedHosts::development("192.168.1.5".parse().unwrap());
        let rebound = [("host", "evil.example:8080"), ("origin", "http://evil.example:8080")];
        // The browser sees its own origin: same-origin by both headers.
        assert!(refused_by(&hosts, Method::POST, &rebound));
        assert!(refused_by(&hosts, Method::POST, &[("host", "evil.example"), ("sec-fetch-site", "same-origin")]));
        assert!(refused_by(&hosts, Method::POST, &[("sec-fetch-site", "same-origin")]), "no Host");
        // Its reads carry neither header; every method and route is held to the list, `/mcp` too.
        for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::POST, Method::DELETE] {
            for path in ["/approvals", "/modules", "/metrics", "/tools", "/openapi.json", "/mcp", "/nowhere"] {
                assert!(refused_at(&hosts, method.clone(), path, &[("host", "evil.example:8080")]), "{method} {path}");
            }
        }
        assert!(refused_by(&hosts, Method::GET, &[]), "no Host");
        // But liveness and the console's files, which hold no data.
        for path in ["/health", "/", "/console.css", "/console.js"] {
            assert!(!refused_at(&hosts, Method::GET, path, &[("host", "orchestrator:8080")]), "{path}");
        }
        for own in ["localhost:8080", "LOCALHOST", "127.0.0.1:1", "[::1]:8080", "192.168.1.5:8080"] {
            let origin = format!("http://{own}");
            assert!(!refused_by(&hosts, Method::POST, &[("host", own), ("origin", &origin)]), "{own}");
            assert!(!refused_by(&hosts, Method::DELETE, &[("host", own), ("sec-fetch-site", "same-origin")]));
            assert!(!refused_by(&hosts, Method::GET, &[("host", own)]), "{own}");
            assert!(!refused_at(&hosts, Method::POST, "/mcp", &[("host", own)]), "{own}");
        }
        // Listening on every address adds none; a list with ports holds to them.
        let every = AllowedHosts::development("0.0.0.0".parse().unwrap());
        assert!(refused_by(&every, Method::POST, &[("host", "0.0.0.0:8080"), ("sec-fetch-site", "same-origin")]));
        let listed = AllowedHosts::new(["orch.example:8443", " app.example ", "::1", ""]);
        assert!(!refused_by(&listed, Method::POST, &[("host", "[::1]:9"), ("sec-fetch-site", "none")]));
        assert!(!refused_by(&listed, Method::POST, &[("host", "orch.example:8443"), ("sec-fetch-site", "none")]));
        assert!(refused_by(&listed, Method::POST, &[("host", "orch.example:8080"), ("sec-fetch-site", "none")]));
        assert!(refused_by(&listed, Method::GET, &[("host", "orch.example:8080")]));
        assert!(!refused_by(&listed, Method::POST, &[("host", "App.Example:1"), ("sec-fetch-site", "none")]));
        // With no list, any host (identities configured, no MCP_ALLOWED_HOSTS).
        assert!(!refused_by(&AllowedHosts::default(), Method::GET, &[("host", "evil.example")]));
        assert!(AllowedHosts::new([]).allow(None), "an empty list allows any host");
    }

    #[test]
    fn with_identities_only_browsers_changes_are_held_to_the_listed_hosts() {
        let hosts = AllowedHosts::new(["orch.example"]);
        let refused = |method: Method, path: &str, pairs: &[(&str, &str)]| {
            cross_site_refusal(&method, path, &headers(pairs), &hosts, HostCheck::BrowsersChanges).is_some()
        };
        // Prometheus by pod address, a back-end by service name, with keys.
        assert!(!refused(Method::GET, "/metrics", &[("host", "10.1.2.3:8080")]));
        assert!(!refused(Method::POST, "/execute", &[("host", "orchestrator:8080")]));
        assert!(!refused(Method::GET, "/approvals", &[("host", "evil.example")]), "no credentials to read with");
        // A browser's change must name a listed host; `/mcp` checks its own.
        assert!(refused(Method::POST, "/execute", &[("host", "evil.example"), ("sec-fetch-site", "same-origin")]));
        assert!(!refused(Method::POST, "/execute", &[("host", "orch.example"), ("sec-fetch-site", "same-origin")]));
        assert!(!refused(Method::POST, "/mcp", &[("host", "evil.example"), ("origin", "http://evil.example")]));
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
