//! The HTTP client of the MCP servers reached over streamable HTTP: rmcp's
//! own reqwest client underneath, built like the orchestrator's other
//! clients of modules (never through a proxy: `HTTP_PROXY` and the like are
//! ignored; `mcp+https://` servers verified against the roots of
//! [`crate::tls`], Mozilla's and `TLS_EXTRA_ROOTS`), following only same-origin `307`/`308` redirects as rmcp's
//! default client does, and opening a session's event stream (`GET`) at
//! most once per [`MIN_EVENT_STREAM_INTERVAL`], whatever `retry` the server
//! sends or however soon it closes the stream again. (rmcp waits what the
//! server's `retry` says before it reconnects, over its own retry policy,
//! so the pace is kept here; the policy, [`reconnect_policy`], only spaces
//! attempts that fail.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest_mcp::StatusCode;
use reqwest_mcp::redirect::{Attempt, Policy};
use rmcp::ServiceError;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::service::ClientInitializeError;
use rmcp::transport::common::client_side_sse::{BoxedSseResponse, ExponentialBackoff, SseRetryPolicy};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use rustls::ClientConfig;
use tokio::time::Instant;

/// The shortest time between two `GET`s of one session's event stream
/// (a server answering `retry: 0` and closing made rmcp reconnect hundreds
/// of times a second).
pub const MIN_EVENT_STREAM_INTERVAL: Duration = Duration::from_secs(1);

/// How long rmcp waits before it opens a broken event stream again: the
/// interval, doubling to [`super::MAX_RECONNECT_DELAY`] while it keeps
/// failing (rmcp's default doubles without end).
pub fn reconnect_policy() -> Arc<dyn SseRetryPolicy> {
    let mut backoff = ExponentialBackoff::default();
    backoff.base_duration = MIN_EVENT_STREAM_INTERVAL;
    backoff.max_delay = Some(super::MAX_RECONNECT_DELAY);
    Arc::new(backoff)
}

/// The most same-origin redirects one request follows.
const MAX_REDIRECTS: usize = 10;

/// Why the shared client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the HTTP client of MCP servers cannot be built")]
pub struct ClientBuildError(#[from] reqwest_mcp::Error);

/// The pooled client of every MCP server over HTTP (no proxy, no idle
/// connections kept, as rmcp's default client keeps none), with `tls`
/// ([`crate::tls::client_config`]) for `mcp+https://` servers.
pub fn shared_client(tls: ClientConfig) -> Result<reqwest_mcp::Client, ClientBuildError> {
    Ok(reqwest_mcp::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .pool_max_idle_per_host(0)
        .tcp_nodelay(true)
        .redirect(Policy::custom(same_origin_redirect))
        .build()?)
}

/// A failed handshake as text, with what failed underneath a request that
/// could not be sent: rmcp's errors stop at reqwest's "error sending
/// request", not saying why (a refused connection, a certificate not
/// trusted...).
pub fn handshake_error(error: &ClientInitializeError) -> String {
    let mut text = module_sdk::error_chain(error);
    if let ClientInitializeError::TransportError { error, .. } = error
        && let Some(StreamableHttpError::Client(failed)) = error.error.downcast_ref::<Failure>()
    {
        let mut cause = std::error::Error::source(failed);
        while let Some(reason) = cause {
            text.push_str(": ");
            text.push_str(&reason.to_string());
            cause = reason.source();
        }
    }
    text
}

/// Whether `error` is a message the session refused to read for its size
/// (rmcp's `ResponseBodyTooLarge`): the session itself is still usable.
pub fn is_too_large(error: &ServiceError) -> bool {
    std::iter::successors(Some(error as &(dyn std::error::Error + 'static)), |error| error.source())
        .any(|error| matches!(error.downcast_ref::<Failure>(), Some(StreamableHttpError::ResponseBodyTooLarge { .. })))
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

/// One session's client: the shared one, its event stream paced.
#[derive(Clone)]
pub struct SessionClient {
    client: reqwest_mcp::Client,
    /// When the next `GET` of the event stream may start.
    next_stream: Arc<Mutex<Instant>>,
}

impl SessionClient {
    /// A session's client on `client` ([`shared_client`]).
    pub fn new(client: reqwest_mcp::Client) -> Self {
        Self { client, next_stream: Arc::new(Mutex::new(Instant::now())) }
    }

    /// Waits until this session may open its event stream again.
    async fn pace(&self) {
        tokio::time::sleep_until(self.reserve(Instant::now())).await;
    }

    /// When a stream asked for at `now` may open: at once, or an interval
    /// after the last one (kept as the last from then on).
    fn reserve(&self, now: Instant) -> Instant {
        let mut next = self.next_stream.lock().unwrap_or_else(PoisonError::into_inner);
        let at = (*next).max(now);
        *next = at + MIN_EVENT_STREAM_INTERVAL;
        at
    }
}

type Headers = HashMap<HeaderName, HeaderValue>;
type Failure = StreamableHttpError<reqwest_mcp::Error>;

impl StreamableHttpClient for SessionClient {
    type Error = reqwest_mcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        self.client.post_message(uri, message, session_id, auth_header, custom_headers).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let client = &self.client;
        client
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let client = &self.client;
        client.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), Failure> {
        self.client.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<BoxedSseResponse, Failure> {
        self.pace().await;
        self.client.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, Failure> {
        self.pace().await;
        let client = &self.client;
        client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_stream_opens_at_once_then_once_per_interval() {
        let client = SessionClient::new(shared_client(crate::tls::client_config(&[]).unwrap()).unwrap());
        let start = Instant::now() + Duration::from_millis(10);
        assert_eq!(client.reserve(start), start, "the first stream is not delayed");
        assert_eq!(client.clone().reserve(start), start + MIN_EVENT_STREAM_INTERVAL, "clones share the pace");
        assert_eq!(client.reserve(start), start + 2 * MIN_EVENT_STREAM_INTERVAL);
        let later = start + 10 * MIN_EVENT_STREAM_INTERVAL;
        assert_eq!(client.reserve(later), later, "after a quiet while, at once again");
    }
}
