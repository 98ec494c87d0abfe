//! The HTTP client of routed calls: hyper's pooled HTTP/1.1 client
//! (hyper-util's `legacy::Client`, the pool reqwest itself is built on)
//! used directly, the call's body sent as the bytes already made. reqwest's
//! own work per request (parsing the URL, default headers, redirect
//! handling, a timer and boxed futures and bodies per request) was a large
//! share of what a small routed call cost; discovery, MCP servers and JWKS
//! keep using reqwest.
//!
//! `https://` modules are reached over rustls with Mozilla's roots.
//!
//! Tuned for many small calls to few hosts: HTTP/1.1 keep-alive (what a
//! plain `http://` module speaks; HTTP/2 would need prior knowledge, which a
//! module server need not accept), as many idle connections per module as
//! it may have calls in flight, idle ones dropped before any module drops
//! them, and each request sent at once (`TCP_NODELAY`).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, Method, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use module_sdk::service::TRACEPARENT_HEADER;
use tokio::time::Instant;

/// How long an idle pooled connection to a module is kept: under the
/// modules' default idle close (`HEADER_READ_TIMEOUT_SECONDS`, 10 s), so a
/// connection is never reused just as the module closes it (which would
/// fail a call that may not be retried).
pub const MODULE_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// `SERVICE_AUTH_TOKEN` holds characters a header value cannot.
#[derive(Debug, thiserror::Error)]
#[error("SERVICE_AUTH_TOKEN cannot be sent in an HTTP header (control characters or non-ASCII text)")]
pub struct InvalidToken(#[from] axum::http::header::InvalidHeaderValue);

/// Why a call's request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The module's `/execute` URL is not a valid URI.
    #[error("its URL `{url}` is not valid: {source}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        source: axum::http::uri::InvalidUri,
    },
    /// The deadline passed before the answer's head arrived.
    #[error("no answer before the call's deadline")]
    Timeout,
    /// The connection could not be made, or broke before the answer's head.
    #[error(transparent)]
    Http(#[from] hyper_util::client::legacy::Error),
    /// The connection broke while the answer's body came.
    #[error("the answer broke off: {0}")]
    Body(#[source] hyper::Error),
}

impl SendError {
    /// Whether nothing was sent: no connection could be made (so a retry is safe).
    pub fn is_connect(&self) -> bool {
        match self {
            Self::Http(error) => error.is_connect(),
            Self::BadUrl { .. } | Self::Timeout | Self::Body(_) => false,
        }
    }

    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }
}

/// Posts routed calls to modules over pooled keep-alive connections
/// (`http://`, or `https://` verified against Mozilla's roots, as reqwest does).
#[derive(Clone)]
pub struct ModuleClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `Bearer SERVICE_AUTH_TOKEN`, sent with every call when set.
    authorization: Option<HeaderValue>,
}

impl ModuleClient {
    /// A client keeping up to `max_idle_per_module` idle connections to each
    /// module, sending `service_token` as a bearer token when set; an error
    /// when the token cannot be sent in a header.
    pub fn new(max_idle_per_module: usize, service_token: Option<&str>) -> Result<Self, InvalidToken> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        // The TLS layer below takes https:// URLs; the TCP connector must let them through.
        connector.enforce_http(false);
        let connector =
            HttpsConnectorBuilder::new().with_webpki_roots().https_or_http().enable_http1().wrap_connector(connector);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(MODULE_IDLE_TIMEOUT)
            .pool_max_idle_per_host(max_idle_per_module)
            .build(connector);
        let authorization = service_token.map(|token| HeaderValue::try_from(format!("Bearer {token}"))).transpose()?;
        Ok(Self { client, authorization })
    }

    /// Posts the JSON `body` to `url` with `traceparent`; the answer's head,
    /// or why there is none by `deadline`. Its body is read by the caller.
    pub async fn post(
        &self,
        url: &str,
        traceparent: HeaderValue,
        body: Bytes,
        deadline: Instant,
    ) -> Result<Response<Incoming>, SendError> {
        let uri = Uri::try_from(url).map_err(|source| SendError::BadUrl { url: url.to_owned(), source })?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, const { HeaderValue::from_static("application/json") });
        headers.insert(const { HeaderName::from_static(TRACEPARENT_HEADER) }, traceparent);
        if let Some(authorization) = &self.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        match tokio::time::timeout_at(deadline, self.client.request(request)).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(SendError::Timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn an_https_module_is_called_over_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = ModuleClient::new(1, None).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let traceparent = HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let url = format!("https://127.0.0.1:{port}/execute");
        let call =
            tokio::spawn(async move { client.post(&url, traceparent, Bytes::from_static(b"{}"), deadline).await });
        // The first bytes on the wire are a TLS handshake record (a ClientHello), not an HTTP request.
        let accepted = tokio::time::timeout(Duration::from_secs(10), listener.accept()).await;
        let (mut socket, _) = accepted.expect("the client connects to an https:// module").unwrap();
        let mut first = [0_u8; 1];
        socket.read_exact(&mut first).await.unwrap();
        assert_eq!(first[0], 0x16, "a TLS handshake record");
        drop(socket);
        assert!(call.await.unwrap().is_err(), "this listener speaks no TLS");
    }
}
