//! Fetching a page over HTTP(S) safely, through the shared guarded client
//! (only http(s), only permitted addresses, checked on every redirect hop),
//! and only text: HTML or another text type, at most `max_bytes` of it.
//!
//! Bodies are asked for and accepted unencoded only (`Accept-Encoding:
//! identity`): the client decodes no `Content-Encoding`, and refusing one
//! is simpler and safer than decompressing within the byte budget (no
//! compression bomb to count, no decoder to trust); servers send
//! identity when asked, and one that compresses anyway gets a clear error
//! instead of compressed bytes read as text.

use std::time::Duration;

use guarded_http::header::{
    ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue, TRANSFER_ENCODING,
};
use guarded_http::{
    AddressPolicy, ClientLimits, GuardedClient, GuardedError, GuardedRequest, StatusCode, Url, read_capped, shown_url,
};

use crate::text::cut_chars;

/// What the fetcher asks servers for.
const ACCEPT_TEXT: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1";

/// Most characters of a refused `Content-Encoding` quoted in the error.
const MAX_ENCODING_CHARS: usize = 40;

/// How far a fetch may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Longest a whole fetch may take, redirects and body included.
    pub total: Duration,
    /// Longest one connection attempt may take.
    pub connect: Duration,
    /// Most body bytes read; the rest is cut off.
    pub max_bytes: usize,
    /// Most redirects followed.
    pub max_redirects: u8,
}

/// How a body is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// HTML or XHTML (also assumed when the server names no type).
    Html,
    /// Any other text: plain, markdown, CSV, JSON, XML.
    Text,
}

/// A successfully fetched body, not yet decoded.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL the body came from, after redirects.
    pub url: Url,
    /// The final HTTP status (always a success).
    pub status: StatusCode,
    /// The `Content-Type` header, when the server sent one.
    pub content_type: Option<mime::Mime>,
    /// Whether to read the body as HTML or as plain text.
    pub kind: BodyKind,
    /// The body, at most `max_bytes` of it.
    pub body: Vec<u8>,
    /// True when the body was longer than `max_bytes` and was cut.
    pub truncated: bool,
}

/// Why a fetch failed; every message is meant for the model.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request itself failed: a bad or refused URL, an unreachable
    /// server, a bad redirect, a broken transfer.
    #[error(transparent)]
    Request(GuardedError),
    /// The fetch took longer than its budget.
    #[error("the page did not load within {0} seconds (FETCH_TIMEOUT_SECONDS)")]
    TimedOut(u64),
    /// No connection to the page's server could be made in time.
    #[error("could not connect to {} within {} seconds (FETCH_CONNECT_TIMEOUT_SECONDS)", shown_url(.0), .1)]
    ConnectTimedOut(Url, u64),
    /// The redirect chain is longer than allowed.
    #[error("gave up after {0} redirects, the most FETCH_MAX_REDIRECTS allows; fetch the final address directly")]
    TooManyRedirects(u8),
    /// The server answered with an error status.
    #[error("{} answered HTTP {status}", shown_url(.url))]
    Status {
        /// The URL being fetched.
        url: Url,
        /// The status it answered.
        status: StatusCode,
    },
    /// The body is sent compressed or otherwise encoded: the header that
    /// says so and the coding.
    #[error(
        "the page was sent with {0} `{1}` although an unencoded page was asked for; this module reads only unencoded pages"
    )]
    Encoded(&'static str, String),
    /// The body is not text.
    #[error("the page is `{0}`, which is not text or HTML")]
    UnsupportedContentType(String),
}

/// The HTTP client of `fetch_webpage`.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: GuardedClient,
    max_bytes: usize,
}

impl Fetcher {
    /// A fetcher that connects only where `policy` permits, within `limits`.
    pub fn new(policy: AddressPolicy, limits: FetchLimits) -> Result<Self, reqwest::Error> {
        let client_limits =
            ClientLimits { total: limits.total, connect: limits.connect, max_redirects: limits.max_redirects };
        let client = GuardedClient::new(policy, client_limits, concat!("research-module/", env!("CARGO_PKG_VERSION")))?;
        Ok(Self { client, max_bytes: limits.max_bytes })
    }

    /// The longest a whole fetch may take (`FETCH_TIMEOUT_SECONDS`).
    pub fn total(&self) -> Duration {
        self.client.limits().total
    }

    /// Fetches `url`, giving up after `budget` or the configured total
    /// timeout, whichever is shorter.
    pub async fn fetch(&self, url: &str, budget: Duration) -> Result<Fetched, FetchError> {
        let budget = budget.min(self.client.limits().total);
        tokio::time::timeout(budget, self.get(url)).await.unwrap_or(Err(FetchError::TimedOut(budget.as_secs().max(1))))
    }

    /// Requests `url` (redirects followed and checked by the client), then
    /// checks status and type and reads at most `max_bytes` of the body.
    async fn get(&self, url: &str) -> Result<Fetched, FetchError> {
        let headers = HeaderMap::from_iter([
            (ACCEPT, HeaderValue::from_static(ACCEPT_TEXT)),
            (ACCEPT_ENCODING, HeaderValue::from_static("identity")),
        ]);
        let (url, response) = self.client.send(GuardedRequest::get(url, headers)).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Status { url, status });
        }
        let content_type =
            response.headers().get(CONTENT_TYPE).and_then(|v| media_type(v.as_bytes()).transpose()).transpose()?;
        if let Some((header, coding)) = body_coding(response.headers()) {
            return Err(FetchError::Encoded(header, coding));
        }
        let kind = body_kind(content_type.as_ref())?;
        let (body, truncated) = match read_capped(&url, response, self.max_bytes).await {
            Err(GuardedError::TimedOut(_)) => Err(FetchError::TimedOut(self.client.limits().total.as_secs())),
            read => read.map_err(FetchError::from),
        }?;
        Ok(Fetched { url, status, content_type, kind, body, truncated })
    }
}

impl From<GuardedError> for FetchError {
    /// The client's errors, those of this module's budgets named for them.
    fn from(error: GuardedError) -> Self {
        match error {
            GuardedError::TimedOut(seconds) => Self::TimedOut(seconds),
            GuardedError::ConnectTimedOut(url, seconds) => Self::ConnectTimedOut(url, seconds),
            GuardedError::TooManyRedirects(redirects) => Self::TooManyRedirects(redirects),
            other => Self::Request(other),
        }
    }
}

/// The first coding of the body that leaves its bytes other than the page's
/// (a `Content-Encoding` but `identity`, a `Transfer-Encoding` but `chunked`
/// framing, which the client removes), with the header that names it.
fn body_coding(headers: &HeaderMap) -> Option<(&'static str, String)> {
    let codings = [
        (CONTENT_ENCODING, "Content-Encoding", &["identity"][..]),
        (TRANSFER_ENCODING, "Transfer-Encoding", &["identity", "chunked"][..]),
    ];
    codings.into_iter().find_map(|(name, shown, unchanged)| {
        let values =
            headers.get_all(name).into_iter().map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let codings: Vec<String> = values
            .flat_map(|value| value.split(',').map(|c| c.trim().to_ascii_lowercase()).collect::<Vec<_>>())
            .collect();
        let coding = codings.into_iter().find(|c| !c.is_empty() && !unchanged.contains(&c.as_str()))?;
        Some((shown, cut_chars(coding, MAX_ENCODING_CHARS).0))
    })
}

/// The media type a `Content-Type` value names. A value that does not
/// parse whole (a parameter without `=`, bytes past ASCII) is read by its
/// type and subtype alone, and refused when even those do not parse: a
/// server that names no readable type is not taken to mean HTML. An empty
/// value names none, as if the header were missing.
fn media_type(value: &[u8]) -> Result<Option<mime::Mime>, FetchError> {
    let text = String::from_utf8_lossy(value);
    let essence = text.split(';').next().unwrap_or_default().trim();
    if essence.is_empty() {
        return Ok(None);
    }
    let parsed = text.parse().or_else(|_| essence.parse());
    parsed.map(Some).map_err(|_| unsupported(essence))
}

/// Most characters of a refused media type quoted in an error.
const MAX_SHOWN_MEDIA_TYPE_CHARS: usize = 100;

/// The error refusing `media_type`, quoted at most
/// [`MAX_SHOWN_MEDIA_TYPE_CHARS`] long (a server's header can be far longer).
fn unsupported(media_type: &str) -> FetchError {
    FetchError::UnsupportedContentType(cut_chars(media_type.to_owned(), MAX_SHOWN_MEDIA_TYPE_CHARS).0)
}

/// HTML unless the server says it is some other text; other types refused.
fn body_kind(content_type: Option<&mime::Mime>) -> Result<BodyKind, FetchError> {
    let Some(media_type) = content_type else { return Ok(BodyKind::Html) };
    let (top, sub) = (media_type.type_(), media_type.subtype());
    if (top == mime::TEXT && sub == mime::HTML)
        || sub.as_str() == "xhtml"
        || media_type.suffix().is_some_and(|s| s.as_str() == "xhtml")
    {
        Ok(BodyKind::Html)
    } else if top == mime::TEXT
        || sub == mime::JSON
        || sub == mime::XML
        || media_type.suffix().is_some_and(|s| s == mime::JSON || s == mime::XML)
    {
        Ok(BodyKind::Text)
    } else {
        Err(unsupported(media_type.essence_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(allowed: &[&str]) -> Fetcher {
        let policy = AddressPolicy::new(allowed.iter().map(|n| n.parse().unwrap()).collect());
        let limits = FetchLimits {
            total: Duration::from_secs(5),
            connect: Duration::from_secs(2),
            max_bytes: 1024,
            max_redirects: 2,
        };
        Fetcher::new(policy, limits).unwrap()
    }

    #[tokio::test]
    async fn internal_addresses_are_refused_before_any_request() {
        let fetcher = fetcher(&[]);
        for (url, expected) in [
            ("file:///etc/passwd", "only http and https"),
            ("http://127.0.0.1:9/", "127.0.0.1 is in the loopback range"),
            ("http://localhost:8/", "localhost resolves only to internal or reserved addresses"),
        ] {
            let error = fetcher.fetch(url, Duration::from_secs(5)).await.unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }

    #[test]
    fn codings_that_change_the_bytes_are_found() {
        let headers = |pairs: &[(&str, &str)]| {
            HeaderMap::from_iter(pairs.iter().map(|(n, v)| (n.parse().unwrap(), HeaderValue::from_str(v).unwrap())))
        };
        assert_eq!(body_coding(&headers(&[])), None);
        assert_eq!(body_coding(&headers(&[("content-encoding", "Identity"), ("transfer-encoding", "chunked")])), None);
        assert_eq!(body_coding(&headers(&[("content-encoding", "GZIP")])), Some(("Content-Encoding", "gzip".into())));
        assert_eq!(
            body_coding(&headers(&[("transfer-encoding", "gzip, chunked")])),
            Some(("Transfer-Encoding", "gzip".into()))
        );
        let two = headers(&[("content-encoding", "identity"), ("content-encoding", "br")]);
        assert_eq!(body_coding(&two), Some(("Content-Encoding", "br".into())), "every header line counts");
    }

    #[test]
    fn body_kinds_follow_the_content_type() {
        let kind = |t: &str| body_kind(Some(&t.parse().unwrap())).ok();
        assert_eq!(body_kind(None).ok(), Some(BodyKind::Html));
        assert_eq!(kind("text/html; charset=utf-8"), Some(BodyKind::Html));
        assert_eq!(kind("application/xhtml+xml"), Some(BodyKind::Html));
        assert_eq!(kind("text/plain"), Some(BodyKind::Text));
        assert_eq!(kind("application/json"), Some(BodyKind::Text));
        assert_eq!(kind("application/ld+json"), Some(BodyKind::Text));
        assert_eq!(kind("image/png"), None);
        assert_eq!(kind("application/octet-stream"), None);
    }

    #[test]
    fn a_content_type_that_does_not_parse_is_read_by_its_essence_or_refused() {
        let kind = |value: &[u8]| media_type(value).and_then(|m| body_kind(m.as_ref())).map_err(|e| e.to_string());
        assert!(kind(b"image/png; charset").unwrap_err().contains("image/png"), "not decoded as a page");
        assert_eq!(kind(b"text/html; charset").unwrap(), BodyKind::Html);
        assert_eq!(kind(b"text/plain; name=\"caf\xc3\xa9\"").unwrap(), BodyKind::Text);
        let error = kind(&[b'x'; 5000]).unwrap_err();
        assert!(error.len() < 300, "{error}");
        assert_eq!(kind(b" ; x").unwrap(), BodyKind::Html, "an empty type names none, as if missing");
    }

    #[test]
    fn a_long_refused_media_type_that_parses_is_cut_in_the_error() {
        let value = format!("application/{}", "x".repeat(300_000));
        let error = media_type(value.as_bytes()).and_then(|m| body_kind(m.as_ref())).unwrap_err();
        assert!(
            matches!(&error, FetchError::UnsupportedContentType(t) if t.chars().count() == MAX_SHOWN_MEDIA_TYPE_CHARS)
        );
        assert!(error.to_string().starts_with("the page is `application/xxx"), "{error}");
    }
}
