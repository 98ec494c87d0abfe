//! Fetching a page over HTTP(S) safely: only http(s), only permitted
//! addresses (checked on every redirect hop, connections pinned to the
//! checked addresses), bounded in time, redirects and bytes.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;
use reqwest::{Response, StatusCode};
use url::{Host, Url};

use crate::address_policy::AddressPolicy;
use crate::guarded_resolver::{BlockedHost, GuardedResolver};
use module_sdk::error_chain;

/// What the fetcher asks servers for.
const ACCEPT_TEXT: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1";

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
    /// The text is not an absolute URL.
    #[error("`{0}` is not an absolute URL ({1}); pass a full address such as https://example.org/page")]
    InvalidUrl(String, url::ParseError),
    /// The URL's scheme is not http or https.
    #[error("only http and https URLs can be fetched, not `{0}:` URLs")]
    UnsupportedScheme(String),
    /// The address is internal and not allowed.
    #[error("refused to fetch {url}: {reason}")]
    Refused {
        /// The URL that was refused (the start or a redirect target).
        url: Url,
        /// Why: the address and its range.
        reason: String,
    },
    /// The fetch took longer than its budget.
    #[error("the page did not load within {0} seconds")]
    TimedOut(u64),
    /// The server could not be reached.
    #[error("could not connect to {url}: {detail}")]
    Unreachable {
        /// The URL being fetched.
        url: Url,
        /// The connection error.
        detail: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The URL being fetched.
        url: Url,
        /// The status it answered.
        status: StatusCode,
    },
    /// The redirect chain is longer than allowed.
    #[error("gave up after {0} redirects; fetch the final address directly")]
    TooManyRedirects(u8),
    /// A redirect had no usable `Location`.
    #[error("{0} redirected without a valid Location header")]
    BadRedirect(Url),
    /// The body is not text.
    #[error("the page is `{0}`, which is not text or HTML")]
    UnsupportedContentType(String),
    /// The connection broke while the body was read.
    #[error("reading {url} failed: {detail}")]
    Transfer {
        /// The URL being fetched.
        url: Url,
        /// The transfer error.
        detail: String,
    },
}

/// The HTTP client of `fetch_webpage`.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    limits: FetchLimits,
}

impl Fetcher {
    /// A fetcher that connects only where `policy` permits, within `limits`.
    pub fn new(policy: AddressPolicy, limits: FetchLimits) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            // Every hop is checked here, so the client must not follow any.
            .redirect(Policy::none())
            // A proxy would resolve the name itself, bypassing the check.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .connect_timeout(limits.connect)
            .timeout(limits.total)
            .user_agent(concat!("research-module/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { client, policy, limits })
    }

    /// Fetches `url`, giving up after `budget` or the configured total
    /// timeout, whichever is shorter.
    pub async fn fetch(&self, url: &str, budget: Duration) -> Result<Fetched, FetchError> {
        let start = Url::parse(url.trim()).map_err(|e| FetchError::InvalidUrl(url.to_owned(), e))?;
        let budget = budget.min(self.limits.total);
        tokio::time::timeout(budget, self.follow(start))
            .await
            .unwrap_or(Err(FetchError::TimedOut(budget.as_secs().max(1))))
    }

    /// Requests `url`, following up to `max_redirects` redirects, each
    /// checked before it is requested.
    async fn follow(&self, mut url: Url) -> Result<Fetched, FetchError> {
        for _ in 0..=self.limits.max_redirects {
            self.check(&url)?;
            let response = self
                .client
                .get(url.clone())
                .header(ACCEPT, ACCEPT_TEXT)
                .send()
                .await
                .map_err(|e| self.request_error(&url, e))?;
            if !response.status().is_redirection() {
                return self.read(url, response).await;
            }
            let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok());
            url = location.and_then(|l| url.join(l).ok()).ok_or_else(|| FetchError::BadRedirect(url.clone()))?;
        }
        Err(FetchError::TooManyRedirects(self.limits.max_redirects))
    }

    /// Refuses other schemes and IP-literal hosts outside the policy
    /// (host names are checked by the resolver when connecting).
    fn check(&self, url: &Url) -> Result<(), FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::UnsupportedScheme(url.scheme().to_owned()));
        }
        let literal = match url.host() {
            Some(Host::Ipv4(ip)) => Some(ip.into()),
            Some(Host::Ipv6(ip)) => Some(ip.into()),
            Some(Host::Domain(_)) => None,
            None => return Err(FetchError::Refused { url: url.clone(), reason: "the URL has no host".into() }),
        };
        match literal.map(|ip| self.policy.check(ip)) {
            Some(Err(blocked)) => Err(FetchError::Refused { url: url.clone(), reason: blocked.to_string() }),
            _ => Ok(()),
        }
    }

    /// Classifies a failed request: a refused host, a timeout, or an
    /// unreachable server.
    fn request_error(&self, url: &Url, error: reqwest::Error) -> FetchError {
        let mut source = error.source();
        while let Some(cause) = source {
            if let Some(blocked) = cause.downcast_ref::<BlockedHost>() {
                return FetchError::Refused { url: url.clone(), reason: blocked.to_string() };
            }
            source = cause.source();
        }
        if error.is_timeout() {
            return FetchError::TimedOut(self.limits.total.as_secs());
        }
        FetchError::Unreachable { url: url.clone(), detail: error_chain(&error) }
    }

    /// Checks status and type, then reads at most `max_bytes` of the body.
    async fn read(&self, url: Url, mut response: Response) -> Result<Fetched, FetchError> {
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Status { url, status });
        }
        let content_type: Option<mime::Mime> =
            response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        let kind = body_kind(content_type.as_ref())?;
        let max = self.limits.max_bytes;
        let expected = response.content_length().map_or(0, |n| usize::try_from(n).unwrap_or(max));
        let mut body = Vec::with_capacity(expected.min(max));
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transfer_error(&url, e))? {
            let room = max - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched { url, status, content_type, kind, body, truncated })
    }

    fn transfer_error(&self, url: &Url, error: reqwest::Error) -> FetchError {
        if error.is_timeout() {
            FetchError::TimedOut(self.limits.total.as_secs())
        } else {
            FetchError::Transfer { url: url.clone(), detail: error_chain(&error) }
        }
    }
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
        Err(FetchError::UnsupportedContentType(media_type.essence_str().to_owned()))
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
    async fn bad_urls_and_schemes_are_refused_before_any_request() {
        let fetcher = fetcher(&[]);
        let budget = Duration::from_secs(5);
        for (url, expected) in [
            ("not a url", "is not an absolute URL"),
            ("file:///etc/passwd", "only http and https"),
            ("gopher://example.org/", "only http and https"),
            ("http://127.0.0.1:9/", "127.0.0.1 is in the loopback range"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1 is in the loopback range"),
            ("http://2130706433/", "127.0.0.1 is in the loopback range"),
            ("http://0x7f.1/", "127.0.0.1 is in the loopback range"),
            ("http://0/", "0.0.0.0 is in the unspecified"),
            ("http://localhost:9/", "localhost resolves only to refused addresses"),
        ] {
            let error = fetcher.fetch(url, budget).await.unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
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
}
