//! The HTTP client of routed calls: HTTP/1.1 keep-alive connections to
//! modules made with hyper's connection API (`client::conn::http1`), each
//! driven by the call that holds it (see `connection.rs`), the call's body
//! sent as the bytes already made. reqwest's own work per request (parsing
//! the URL, default headers, redirect handling, a timer and boxed futures
//! and bodies per request), and then hyper-util's pooled client with its
//! task per connection, were a large share of what a small routed call
//! cost; discovery, MCP servers and JWKS keep using reqwest.
//!
//! `https://` modules are reached over rustls with Mozilla's roots and
//! `TLS_EXTRA_ROOTS` (the configuration of [`crate::tls`]).
//!
//! Tuned for many small calls to few hosts: HTTP/1.1 keep-alive (what a
//! plain `http://` module speaks; HTTP/2 would need prior knowledge, which a
//! module server need not accept), idle connections kept per serving thread
//! and shared between threads before a new one is made (so a module has no
//! more connections than calls in flight), idle ones dropped before any
//! module drops them, and each request sent at once (`TCP_NODELAY`).

mod answer_body;
mod connection;

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, HOST};
use axum::http::uri::{Parts, Scheme};
use axum::http::{HeaderValue, Method, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::TrySendError;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use module_sdk::service::TRACEPARENT;
use rustls::ClientConfig;
use tokio::time::Instant;
use tower::ServiceExt;

pub use answer_body::AnswerBody;
use connection::{ConnectionPool, ModuleConnection, Target};

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
    /// The module's `/execute` URL is not a URL a call can be sent to.
    #[error("its URL `{url}` is not valid: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The deadline passed before the answer's head arrived.
    #[error("no answer before the call's deadline")]
    Timeout,
    /// No connection could be made: nothing was sent.
    #[error("cannot connect")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The connection broke, or the module answered something that is not
    /// HTTP, before the answer's head.
    #[error("the exchange failed")]
    Exchange(#[source] hyper::Error),
    /// The connection broke while the answer's body came.
    #[error("the answer broke off: {0}")]
    Body(#[source] hyper::Error),
}

impl SendError {
    /// Whether nothing was sent: no connection could be made (so a retry is safe).
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_))
    }

    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }
}

/// Posts routed calls to modules over pooled keep-alive connections
/// (`http://`, or `https://` verified as the TLS configuration given says).
#[derive(Clone)]
pub struct ModuleClient {
    connector: HttpsConnector<HttpConnector>,
    pool: Arc<ConnectionPool>,
    /// `Bearer SERVICE_AUTH_TOKEN`, sent with every call when set.
    authorization: Option<HeaderValue>,
}

impl ModuleClient {
    /// A client keeping up to `max_idle_per_module` idle connections to each
    /// module for each of `serving_threads` threads and for the other
    /// threads together (see `connection.rs`), sending `service_token` as a
    /// bearer token when set, `https://` modules reached with `tls`
    /// ([`crate::tls::client_config`]); an error when the token cannot be
    /// sent in a header.
    pub fn new(
        max_idle_per_module: usize,
        service_token: Option<&str>,
        serving_threads: usize,
        tls: ClientConfig,
    ) -> Result<Self, InvalidToken> {
        Self::with_idle_timeout(max_idle_per_module, service_token, serving_threads, tls, MODULE_IDLE_TIMEOUT)
    }

    /// [`Self::new`] with idle connections kept for `idle_timeout`.
    fn with_idle_timeout(
        max_idle_per_module: usize,
        service_token: Option<&str>,
        serving_threads: usize,
        tls: ClientConfig,
        idle_timeout: Duration,
    ) -> Result<Self, InvalidToken> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        // The TLS layer below takes https:// URLs; the TCP connector must let them through.
        connector.enforce_http(false);
        // As `HttpsConnectorBuilder`'s `https_or_http().enable_http1()`, but
        // keeping the configuration's ALPN (`http/1.1`): the builder wants
        // none and then offers none for HTTP/1.1 only.
        let connector = HttpsConnector::from((connector, tls));
        let authorization = service_token.map(|token| HeaderValue::try_from(format!("Bearer {token}"))).transpose()?;
        let pool = Arc::new(ConnectionPool::new(max_idle_per_module, idle_timeout, serving_threads));
        Ok(Self { connector, pool, authorization })
    }

    /// Posts the JSON `body` to `url` with `traceparent`; the answer's head,
    /// or why there is none by `deadline`. Its body is read by the caller;
    /// read whole, it frees the connection for another call.
    pub async fn post(
        &self,
        url: &Arc<str>,
        traceparent: HeaderValue,
        body: Bytes,
        deadline: Instant,
    ) -> Result<Response<AnswerBody>, SendError> {
        match tokio::time::timeout_at(deadline, self.exchange(url, traceparent, body)).await {
            Ok(answer) => answer,
            Err(_) => Err(SendError::Timeout),
        }
    }

    async fn exchange(
        &self,
        url: &Arc<str>,
        traceparent: HeaderValue,
        body: Bytes,
    ) -> Result<Response<AnswerBody>, SendError> {
        let (target, mut idle) = self.pool.take(url);
        let target = match target {
            Some(target) => target,
            None => self.pool.remember(url, target_of(url)?),
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = target.path.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, target.host.clone());
        headers.insert(CONTENT_TYPE, const { HeaderValue::from_static("application/json") });
        headers.insert(TRACEPARENT, traceparent);
        if let Some(authorization) = &self.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        loop {
            let reused = idle.is_some();
            let mut connection = match idle.take() {
                Some(connection) => connection,
                None => self.connect(url, &target).await?,
            };
            match send(&mut connection, request).await {
                Ok(response) => {
                    return Ok(response.map(|body| AnswerBody::new(body, connection, Arc::clone(&self.pool))));
                }
                Err(mut error) => match error.take_message() {
                    // A pooled connection the module closed meanwhile, before
                    // anything was sent: once more, on a new connection.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(SendError::Exchange(error.into_error())),
                },
            }
        }
    }

    /// A new connection to `target`, the module at `url`.
    async fn connect(&self, url: &Arc<str>, target: &Arc<Target>) -> Result<ModuleConnection, SendError> {
        let stream = self.connector.clone().oneshot(target.uri.clone()).await.map_err(SendError::Connect)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(stream).await.map_err(|error| SendError::Connect(error.into()))?;
        Ok(ModuleConnection::new(Arc::clone(url), Arc::clone(target), sender, connection))
    }
}

/// Sends `request` on `connection`, driving it until the answer's head
/// arrives; the request comes back in the error if it was not sent.
async fn send(
    connection: &mut ModuleConnection,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, TrySendError<Request<Full<Bytes>>>> {
    let mut answer = pin!(connection.sender.try_send_request(request));
    poll_fn(|cx| {
        connection.drive(cx);
        answer.as_mut().poll(cx)
    })
    .await
}

/// What requests to `url` need: the URL, its path, and its `Host` header
/// (the port left out when it is the scheme's default, as browsers and
/// hyper's own client send it).
fn target_of(url: &str) -> Result<Target, SendError> {
    let bad_url = |reason: String| SendError::BadUrl { url: url.to_owned(), reason };
    let uri = Uri::try_from(url).map_err(|error| bad_url(error.to_string()))?;
    let Some(host) = uri.host() else { return Err(bad_url("it names no host".to_owned())) };
    let default_port = match uri.scheme() {
        Some(scheme) if *scheme == Scheme::HTTPS => 443,
        _ => 80,
    };
    let host = match uri.port_u16() {
        Some(port) if port != default_port => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    let host = HeaderValue::try_from(host).map_err(|error| bad_url(error.to_string()))?;
    let path = match uri.path_and_query() {
        Some(path) => {
            let mut parts = Parts::default();
            parts.path_and_query = Some(path.clone());
            Uri::from_parts(parts).map_err(|error| bad_url(error.to_string()))?
        }
        None => Uri::from_static("/"),
    };
    Ok(Target { uri, path, host })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use module_sdk::service::ServingThreads;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    /// The TLS configuration without extra roots.
    fn tls() -> ClientConfig {
        crate::tls::client_config(&[]).unwrap()
    }

    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    /// A module whose `/execute` answers with the port the call came from
    /// (so a reused connection shows), closing the connection after its
    /// answer when the body asks; its `/execute` URL.
    async fn port_echo_module() -> Arc<str> {
        use axum::extract::ConnectInfo;
        use axum::http::header::CONNECTION;
        use axum::response::IntoResponse;
        let echo = |ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>, body: Bytes| async move {
            let port = peer.port().to_string();
            if body.as_ref() == b"close" {
                ([(CONNECTION, "close")], port).into_response()
            } else {
                port.into_response()
            }
        };
        let app = axum::Router::new().route("/execute", axum::routing::post(echo));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let service = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        tokio::spawn(async move { axum::serve(listener, service).await });
        Arc::from(format!("http://{address}/execute"))
    }

    /// Posts `body` to `url` and reads the answer whole: the port the module saw.
    async fn call(client: &ModuleClient, url: &Arc<str>, body: &'static str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        let traceparent = HeaderValue::from_static(TRACEPARENT);
        let answer = client.post(url, traceparent, Bytes::from_static(body.as_bytes()), deadline).await.unwrap();
        let body = module_sdk::service::read_body(answer.into_body(), 1024, "MAX").await.unwrap();
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_connection_is_reused_once_its_answer_is_read() {
        let url = port_echo_module().await;
        let client = ModuleClient::new(4, None, 1, tls()).unwrap();
        let first = call(&client, &url, "{}").await;
        assert_eq!(call(&client, &url, "{}").await, first);
        assert_eq!(call(&client, &url, "{}").await, first);
    }

    /// `work` run on one of `threads` (they take turns), its output and
    /// the serving thread it ran on.
    async fn on_serving_thread<F>(threads: &ServingThreads, work: F) -> (String, Option<usize>)
    where
        F: Future<Output = String> + Send + 'static,
    {
        // A serving thread runs what it is handed with a connection: a loopback one.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let (done, output) = tokio::sync::oneshot::channel();
        threads.serve(stream, move |_stream| async move {
            let _ = done.send((work.await, module_sdk::service::serving_thread()));
        });
        output.await.unwrap()
    }

    #[tokio::test]
    async fn a_serving_thread_without_idle_connections_reuses_another_threads() {
        let url = port_echo_module().await;
        let threads = ServingThreads::start(2).unwrap();
        let client = Arc::new(ModuleClient::new(4, None, 2, tls()).unwrap());
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (client, url) = (Arc::clone(&client), Arc::clone(&url));
            seen.push(on_serving_thread(&threads, async move { call(&client, &url, "{}").await }).await);
        }
        let on: std::collections::BTreeSet<_> = seen.iter().map(|(_, thread)| *thread).collect();
        assert_eq!(on, [Some(0), Some(1)].into(), "both threads called: {seen:?}");
        assert!(seen.iter().all(|(port, _)| *port == seen[0].0), "one connection served every call: {seen:?}");
    }

    #[tokio::test]
    async fn an_answer_left_unread_closes_its_connection() {
        let url = port_echo_module().await;
        let client = ModuleClient::new(4, None, 1, tls()).unwrap();
        let first = call(&client, &url, "{}").await;
        let deadline = Instant::now() + Duration::from_secs(10);
        // Takes the pooled connection, and drops it with the answer unread.
        drop(client.post(&url, HeaderValue::from_static(TRACEPARENT), Bytes::new(), deadline).await.unwrap());
        let next = call(&client, &url, "{}").await;
        assert_ne!(next, first, "a new connection");
        assert_eq!(call(&client, &url, "{}").await, next, "which is pooled in turn");
    }

    #[tokio::test]
    async fn a_connection_the_module_closed_is_not_reused() {
        let url = port_echo_module().await;
        let client = ModuleClient::new(4, None, 1, tls()).unwrap();
        let closed = call(&client, &url, "close").await;
        let next = call(&client, &url, "{}").await;
        assert_ne!(next, closed, "a new connection");
        assert_eq!(call(&client, &url, "{}").await, next);
    }

    #[tokio::test]
    async fn a_pooled_connection_the_module_closed_meanwhile_is_replaced() {
        use tokio::io::AsyncWriteExt;
        // A module that answers each connection's first request, keep-alive
        // by its headers, and then closes it (as a module's idle close or a
        // restart does); it counts the connections.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: Arc<str> = Arc::from(format!("http://{}/execute", listener.local_addr().unwrap()));
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut request = [0_u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
            }
        });
        let client = ModuleClient::new(4, None, 1, tls()).unwrap();
        assert_eq!(call(&client, &url, "{}").await, "ok");
        // Let the close arrive while the connection lies in the pool.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(call(&client, &url, "{}").await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn idle_connections_of_a_url_no_longer_called_are_closed_while_others_are_used() {
        use tokio::io::AsyncWriteExt;
        // A module that answers every request on a connection and says
        // when a connection was closed by the client.
        async fn module() -> (Arc<str>, tokio::sync::mpsc::UnboundedReceiver<()>) {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url: Arc<str> = Arc::from(format!("http://{}/execute", listener.local_addr().unwrap()));
            let (closed, closes) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                loop {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    let closed = closed.clone();
                    tokio::spawn(async move {
                        let mut request = [0_u8; 4096];
                        while socket.read(&mut request).await.is_ok_and(|read| read > 0) {
                            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                        }
                        let _ = closed.send(());
                    });
                }
            });
            (url, closes)
        }
        let (called, _) = module().await;
        let (forgotten, mut forgotten_closes) = module().await;
        let client = ModuleClient::with_idle_timeout(4, None, 1, tls(), Duration::from_millis(50)).unwrap();
        call(&client, &called, "{}").await;
        call(&client, &forgotten, "{}").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Only `called` is called again; its answer's return sweeps every URL.
        call(&client, &called, "{}").await;
        let closed = tokio::time::timeout(Duration::from_secs(10), forgotten_closes.recv()).await;
        assert!(closed.is_ok(), "the idle connection to the URL no longer called was closed");
    }

    #[tokio::test]
    async fn calls_at_once_get_connections_of_their_own_and_at_most_the_limit_stay() {
        let url = port_echo_module().await;
        let client = ModuleClient::new(2, None, 1, tls()).unwrap();
        let at_once = futures::future::join_all((0..4).map(|_| call(&client, &url, "{}"))).await;
        let ports: std::collections::BTreeSet<_> = at_once.into_iter().collect();
        assert_eq!(ports.len(), 4, "four calls in flight, four connections");
        let later: std::collections::BTreeSet<_> =
            futures::future::join_all((0..4).map(|_| call(&client, &url, "{}"))).await.into_iter().collect();
        assert_eq!(later.intersection(&ports).count(), 2, "two of them were kept");
    }

    #[tokio::test]
    async fn a_url_without_a_host_is_refused() {
        let client = ModuleClient::new(1, None, 1, tls()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let url: Arc<str> = Arc::from("/execute");
        let error = client.post(&url, HeaderValue::from_static(TRACEPARENT), Bytes::new(), deadline).await.unwrap_err();
        assert_eq!(error.to_string(), "its URL `/execute` is not valid: it names no host");
    }

    #[test]
    fn requests_carry_the_urls_path_and_host_as_http_1_1_writes_them() {
        for (url, host, path) in [
            ("http://127.0.0.1:8001/execute", "127.0.0.1:8001", "/execute"),
            ("http://[::1]:8001/tools/v2/execute", "[::1]:8001", "/tools/v2/execute"),
            ("http://notes.internal:80/execute", "notes.internal", "/execute"),
            ("https://notes.example/base/execute?tenant=a", "notes.example", "/base/execute?tenant=a"),
            ("https://notes.example:8443/execute", "notes.example:8443", "/execute"),
        ] {
            let target = target_of(url).unwrap();
            assert_eq!((target.host.to_str().unwrap(), target.path.to_string().as_str()), (host, path), "{url}");
            assert_eq!(target.uri.to_string(), url);
        }
        assert!(matches!(target_of("http://exa mple/execute"), Err(SendError::BadUrl { .. })));
    }

    #[tokio::test]
    async fn an_https_module_is_called_over_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = ModuleClient::new(1, None, 1, tls()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let traceparent = HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let url: Arc<str> = Arc::from(format!("https://127.0.0.1:{port}/execute"));
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
