//! The HTTP client the checks use: raw answers (status and JSON, or the
//! text when it is not JSON), and a log of every 5xx, dropped connection
//! and hang for `http.no_server_errors`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use guarded_http::read_capped;
use module_sdk::error_chain;
use reqwest::header::{AUTHORIZATION, LOCATION};
use serde_json::Value;

use crate::budget::Budgets;

/// How long a request other than a tool call may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Which `Authorization` header a request carries.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    /// The token given with `--token`, if any.
    Configured,
    /// No header at all.
    Without,
    /// `Bearer <this>`.
    Bearer(&'a str),
}

/// A module's answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The body read as JSON, or its text when it is not JSON.
    pub body: Result<Value, String>,
}

impl Reply {
    /// The body as JSON, or a sentence saying it was not JSON.
    pub fn json(&self) -> Result<&Value, String> {
        self.body.as_ref().map_err(|text| format!("the body is not JSON: {}", shorten(text)))
    }

    /// Why the body is not the contract's error body `{"error": string}`, if it is not.
    pub fn error_body_problem(&self) -> Option<String> {
        match &self.body {
            Ok(value) if value.get("error").is_some_and(Value::is_string) => None,
            Ok(value) => Some(format!("the body is not {{\"error\": string}}: {}", shorten(&value.to_string()))),
            Err(text) => Some(format!("the body is not JSON: {}", shorten(text))),
        }
    }
}

/// Why a request got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Nothing listens there (connection refused, no such host).
    #[error("cannot connect: {0}")]
    Unreachable(String),
    /// The module did not answer in time.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The connection was closed or broken before a full answer.
    #[error("the connection dropped: {0}")]
    Dropped(String),
    /// The module closed or reset the connection before any answer could be
    /// read, while the request was still being sent (broken pipe, connection
    /// reset): how a server that refuses a body without reading it may end
    /// the exchange, its answer lost with the connection.
    #[error("the connection was closed while the request was sent, before any answer: {0}")]
    ClosedWhileSending(String),
    /// The body was longer than `--max-response-bytes`; the rest was not read.
    #[error("the answer is larger than {0} bytes (--max-response-bytes); the rest was not read")]
    TooLarge(usize),
    /// The run's time (`--max-run-seconds`) ran out before the answer came.
    #[error("the run's time ran out (--max-run-seconds); no request is made after it")]
    OutOfTime,
    /// The module answered with a redirect, which is not followed: where it
    /// points may be any host (a cloud metadata service), and the contract's
    /// routes answer themselves.
    #[error("redirected ({status}) to {location}; redirects are not followed")]
    Redirected {
        /// The 3xx status.
        status: u16,
        /// The `Location` header, shortened, or a sentence saying there was none.
        location: String,
    },
}

/// A client of one module at one base URL.
pub struct ModuleClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    budgets: Budgets,
    deadline: Instant,
    incidents: Mutex<Vec<String>>,
}

impl ModuleClient {
    /// A client of the module at `base` (e.g. `http://127.0.0.1:8000`)
    /// that reads no more than `budgets` allow.
    pub fn new(base: &str, token: Option<String>, budgets: Budgets) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none()).build()?;
        let base = base.trim_end_matches('/').to_owned();
        // A run too long to add to the clock has no deadline worth keeping.
        let deadline = Instant::now().checked_add(budgets.max_run).unwrap_or_else(far_future);
        Ok(Self { http, base, token, budgets, deadline, incidents: Mutex::default() })
    }

    /// Whether the run's time (`Budgets::max_run`) has run out.
    pub fn out_of_time(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// The module's base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Whether a token was given.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// `GET {base}{path}`.
    pub async fn get(&self, path: &str, auth: Auth<'_>) -> Result<Reply, Failure> {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(format!("GET {path}"), request, auth, REQUEST_TIMEOUT, Body::Ordinary).await
    }

    /// `POST {base}{path}` with `body` sent as `application/json`, whatever it holds.
    pub async fn post(&self, path: &str, body: Vec<u8>, auth: Auth<'_>, timeout: Duration) -> Result<Reply, Failure> {
        self.post_as(Body::Ordinary, path, body, auth, timeout).await
    }

    /// `POST` like [`Self::post`], of a body over the module's limit that it
    /// may refuse without reading: the connection closed while it is sent
    /// ([`Failure::ClosedWhileSending`]) is the refusal, not a server error.
    pub async fn post_over_limit(
        &self,
        path: &str,
        body: Vec<u8>,
        auth: Auth<'_>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        self.post_as(Body::OverLimit, path, body, auth, timeout).await
    }

    async fn post_as(
        &self,
        kind: Body,
        path: &str,
        body: Vec<u8>,
        auth: Auth<'_>,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        self.send(format!("POST {path}"), request, auth, timeout, kind).await
    }

    /// Every 5xx, dropped connection and hang seen so far.
    pub fn incidents(&self) -> Vec<String> {
        self.incidents.lock().map(|list| list.clone()).unwrap_or_default()
    }

    async fn send(
        &self,
        label: String,
        request: reqwest::RequestBuilder,
        auth: Auth<'_>,
        timeout: Duration,
        body: Body,
    ) -> Result<Reply, Failure> {
        let request = match (auth, self.token.as_deref()) {
            (Auth::Configured, Some(token)) | (Auth::Bearer(token), _) => {
                request.header(AUTHORIZATION, format!("Bearer {token}"))
            }
            (Auth::Configured, None) | (Auth::Without, _) => request,
        };
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::OutOfTime);
        }
        let max_bytes = self.budgets.max_response_bytes;
        let outcome = async {
            let response = request.send().await.map_err(|error| {
                if error.is_connect() {
                    Failure::Unreachable(error_chain(&error))
                } else if body == Body::OverLimit && broke_off(&error) {
                    Failure::ClosedWhileSending(error_chain(&error))
                } else {
                    Failure::Dropped(error_chain(&error))
                }
            })?;
            let status = response.status().as_u16();
            if response.status().is_redirection() {
                let location = response.headers().get(LOCATION).map_or_else(
                    || "nowhere (no Location header)".to_owned(),
                    |value| shorten(&String::from_utf8_lossy(value.as_bytes())),
                );
                return Err(Failure::Redirected { status, location });
            }
            let url = response.url().clone();
            match read_capped(&url, response, max_bytes).await {
                Ok((_, true)) => Err(Failure::TooLarge(max_bytes)),
                Ok((bytes, false)) => Ok((status, bytes)),
                Err(error) => Err(Failure::Dropped(error.to_string())),
            }
        };
        let result = match tokio::time::timeout(timeout.min(left), outcome).await {
            Err(_) if left < timeout => Err(Failure::OutOfTime),
            Err(_) => Err(Failure::TimedOut(timeout)),
            Ok(Err(failure)) => Err(failure),
            Ok(Ok((status, bytes))) => Ok(Reply {
                status,
                body: serde_json::from_slice(&bytes).map_err(|_| String::from_utf8_lossy(&bytes).into_owned()),
            }),
        };
        let incident = match &result {
            Ok(reply) if reply.status >= 500 => Some(format!("{label}: HTTP {}", reply.status)),
            // Not the module failing to answer (a body over its limit may be refused unread):
            // the check that made the request reports these.
            Ok(_)
            | Err(
                Failure::Unreachable(_)
                | Failure::ClosedWhileSending(_)
                | Failure::TooLarge(_)
                | Failure::OutOfTime
                | Failure::Redirected { .. },
            ) => None,
            Err(failure) => Some(format!("{label}: {failure}")),
        };
        if let (Some(incident), Ok(mut list)) = (incident, self.incidents.lock()) {
            list.push(incident);
        }
        result
    }
}

/// What a request's body is to the module, which decides whether a
/// connection broken off under it is [`Failure::ClosedWhileSending`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Within its limit (or none): a connection broken off is [`Failure::Dropped`].
    Ordinary,
    /// Over its limit: the module may refuse it unread.
    OverLimit,
}

/// Whether `error`, met before any answer, is the connection broken off
/// under the request (broken pipe, reset, aborted) rather than a closed
/// connection or another fault.
fn broke_off(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::BrokenPipe
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
            )
        {
            return true;
        }
        source = current.source();
    }
    false
}

/// A year from now: the deadline of a run with no usable limit.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(365 * 24 * 3600)
}

/// At most 200 characters of `text`, for messages.
pub fn shorten(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}
