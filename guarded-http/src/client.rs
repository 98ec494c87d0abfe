//! Requests over HTTP(S) to addresses a model chose: only http(s), only
//! permitted addresses (checked on every redirect hop, connections pinned
//! to the checked addresses), bounded in time, redirects and bytes.

use std::borrow::Cow;
use std::error::Error as _;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use module_sdk::error_chain;
use reqwest::dns::{Name, Resolve};
use reqwest::header::{AUTHORIZATION, COOKIE, HeaderMap, LOCATION, PROXY_AUTHORIZATION};
use reqwest::redirect::Policy;
use reqwest::{Method, Response, StatusCode};
use url::{Host, Url};

use crate::address_policy::AddressPolicy;
use crate::bad_ports::bad_port;
use crate::guarded_resolver::{BlockedHost, GuardedResolver, UnresolvedHost};

/// Most characters of a URL quoted in an error: a redirect's `Location`
/// can be as long as the server's headers, and an error goes to a model.
const MAX_SHOWN_URL_CHARS: usize = 2048;

/// Most characters of a connection or transfer error quoted in an error:
/// a certificate that does not match the host lists every name it is for.
const MAX_SHOWN_DETAIL_CHARS: usize = 1024;

/// Most bytes of a URL the HTTP library can request (`http::Uri` holds at
/// most `u16::MAX - 1`); a redirect to a longer one cannot be followed.
const MAX_REQUEST_URL_BYTES: usize = u16::MAX as usize - 1;

/// How far the client may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// Longest a whole request may take, redirects and body included.
    pub total: Duration,
    /// Longest one connection attempt may take.
    pub connect: Duration,
    /// Most redirects followed.
    pub max_redirects: u8,
}

/// One request to make.
#[derive(Debug, Clone)]
pub struct GuardedRequest {
    /// The HTTP method.
    pub method: Method,
    /// The URL, as the model wrote it.
    pub url: String,
    /// Headers to send.
    pub headers: HeaderMap,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
}

impl GuardedRequest {
    /// A GET of `url` with `headers`.
    pub fn get(url: &str, headers: HeaderMap) -> Self {
        Self { method: Method::GET, url: url.to_owned(), headers, body: None }
    }
}

/// Why a request failed; every message is meant for the model.
#[derive(Debug, thiserror::Error)]
pub enum GuardedError {
    /// The text is not an absolute URL.
    #[error("`{0}` is not an absolute URL ({1}); pass a full address such as https://example.org/page")]
    InvalidUrl(String, url::ParseError),
    /// The URL's scheme is not http or https.
    #[error("only http and https URLs can be fetched, not `{0}:` URLs")]
    UnsupportedScheme(String),
    /// The address is internal and not allowed.
    #[error("refused to fetch {}: {reason}", shown_url(.url))]
    Refused {
        /// The URL that was refused (the start or a redirect target).
        url: Url,
        /// Why: the address and its range.
        reason: String,
    },
    /// The request took longer than its budget.
    #[error("the page did not load within {0} seconds")]
    TimedOut(u64),
    /// A connection could not be made within its budget.
    #[error("could not connect to {} within {} seconds", shown_url(.0), .1)]
    ConnectTimedOut(Url, u64),
    /// The URL's host name has no address.
    #[error("could not find the address of {}: {detail}; check the host name", shown_url(.url))]
    Unresolved {
        /// The URL being fetched.
        url: Url,
        /// The resolver's error.
        detail: String,
    },
    /// The URL's host name could not be looked up for now: the name
    /// service failed or did not answer.
    #[error("could not look up the address of {}: {detail}; the name service failed for now, try again later", shown_url(.url))]
    LookupFailed {
        /// The URL being fetched.
        url: Url,
        /// The resolver's error.
        detail: String,
    },
    /// The server could not be reached.
    #[error("could not connect to {}: {detail}", shown_url(.url))]
    Unreachable {
        /// The URL being fetched.
        url: Url,
        /// The connection error.
        detail: String,
    },
    /// The server's TLS certificate was refused (signed by no trusted
    /// authority, for another name, expired): trying again will not help.
    #[error(
        "refused the TLS certificate of {}: {detail}; the site must fix its certificate, trying again will not help",
        shown_url(.url)
    )]
    Certificate {
        /// The URL being fetched.
        url: Url,
        /// The TLS library's reason.
        detail: String,
    },
    /// The redirect chain is longer than allowed.
    #[error("gave up after {0} redirects; fetch the final address directly")]
    TooManyRedirects(u8),
    /// A redirect had no usable `Location`.
    #[error("{} redirected without a valid Location header", shown_url(.0))]
    BadRedirect(Url),
    /// A redirect's target is longer than any request can carry.
    #[error(
        "{} redirected to an address of {length} bytes, longer than the {MAX_REQUEST_URL_BYTES} an HTTP request can carry; the redirect cannot be followed",
        shown_url(.url)
    )]
    RedirectTooLong {
        /// The URL that redirected.
        url: Url,
        /// The target's length in bytes.
        length: usize,
    },
    /// The connection broke while the body was read.
    #[error("reading {} failed: {detail}", shown_url(.url))]
    Transfer {
        /// The URL being fetched.
        url: Url,
        /// The transfer error.
        detail: String,
    },
}

/// A reqwest client that connects only where an [`AddressPolicy`] permits.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    policy: Arc<AddressPolicy>,
    limits: ClientLimits,
}

impl GuardedClient {
    /// A client that connects only where `policy` permits, within `limits`,
    /// introducing itself as `user_agent`.
    pub fn new(policy: AddressPolicy, limits: ClientLimits, user_agent: &str) -> Result<Self, reqwest::Error> {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            // Every hop is checked here, so the client must not follow any.
            .redirect(Policy::none())
            // A proxy would resolve the name itself, bypassing the check.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .connect_timeout(limits.connect)
            .timeout(limits.total)
            .user_agent(user_agent)
            .build()?;
        Ok(Self { client, policy, limits })
    }

    /// The limits this client was built with.
    pub fn limits(&self) -> ClientLimits {
        self.limits
    }

    /// Sends `request`, following up to `max_redirects` redirects, each
    /// checked before it is requested; answers the final URL and response
    /// (whatever its status), its body not yet read. The caller bounds the
    /// whole exchange in time (the client's total timeout bounds each hop).
    ///
    /// Redirects 301, 302 and 303 continue as a GET without body (as
    /// browsers do); 307 and 308 repeat the method and body. Credentials
    /// (`Authorization`, `Cookie`) are dropped when a redirect changes host.
    pub async fn send(&self, request: GuardedRequest) -> Result<(Url, Response), GuardedError> {
        let GuardedRequest { mut method, url, mut headers, mut body } = request;
        let mut url = Url::parse(url.trim()).map_err(|e| GuardedError::InvalidUrl(url.clone(), e))?;
        for _ in 0..=self.limits.max_redirects {
            self.check(&url)?;
            let mut builder = self.client.request(method.clone(), url.clone()).headers(headers.clone());
            if let Some(bytes) = &body {
                builder = builder.body(bytes.clone());
            }
            let response = builder.send().await.map_err(|e| self.request_error(&url, e))?;
            if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED {
                return Ok((url, response));
            }
            // Raw UTF-8 (`/café`), which browsers follow, is percent-encoded
            // by the join; other bytes past ASCII become U+FFFD the same way.
            let location = response.headers().get(LOCATION).map(|v| String::from_utf8_lossy(v.as_bytes()));
            let next =
                location.and_then(|l| url.join(&l).ok()).ok_or_else(|| GuardedError::BadRedirect(url.clone()))?;
            if next.as_str().len() > MAX_REQUEST_URL_BYTES {
                return Err(GuardedError::RedirectTooLong { url, length: next.as_str().len() });
            }
            if !matches!(response.status(), StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT)
                && method != Method::HEAD
            {
                method = Method::GET;
                body = None;
            }
            if next.host() != url.host() || next.port_or_known_default() != url.port_or_known_default() {
                for name in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION] {
                    headers.remove(name);
                }
            }
            url = next;
        }
        Err(GuardedError::TooManyRedirects(self.limits.max_redirects))
    }

    /// Checks `url` the way [`GuardedClient::send`] does before connecting,
    /// without sending anything: an absolute http(s) URL whose host (an IP
    /// literal, or every address a name resolves to now) the policy permits.
    /// A name that does not resolve passes; it is checked again on sending.
    pub async fn preflight(&self, url: &str) -> Result<Url, GuardedError> {
        let parsed = Url::parse(url.trim()).map_err(|e| GuardedError::InvalidUrl(url.to_owned(), e))?;
        self.check(&parsed)?;
        if let Some(Host::Domain(host)) = parsed.host()
            && let Ok(name) = Name::from_str(host)
            && let Err(error) = GuardedResolver::new(self.policy.clone()).resolve(name).await
            && let Some(blocked) = error.downcast_ref::<BlockedHost>()
        {
            return Err(GuardedError::Refused { url: parsed.clone(), reason: blocked.to_string() });
        }
        Ok(parsed)
    }

    /// Refuses other schemes, IP-literal hosts outside the policy (host
    /// names are checked by the resolver when connecting) and bad ports.
    fn check(&self, url: &Url) -> Result<(), GuardedError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(GuardedError::UnsupportedScheme(url.scheme().to_owned()));
        }
        let literal = match url.host() {
            Some(Host::Ipv4(ip)) => Some(ip.into()),
            Some(Host::Ipv6(ip)) => Some(ip.into()),
            Some(Host::Domain(_)) => None,
            None => return Err(GuardedError::Refused { url: url.clone(), reason: "the URL has no host".into() }),
        };
        if let Some(Err(blocked)) = literal.map(|ip| self.policy.check(ip)) {
            return Err(GuardedError::Refused { url: url.clone(), reason: blocked.to_string() });
        }
        match bad_port(url) {
            Some(reason) => Err(GuardedError::Refused { url: url.clone(), reason }),
            None => Ok(()),
        }
    }

    /// Classifies a failed request: a refused host, a host name without an
    /// address, a refused certificate, a timeout, or an unreachable server.
    fn request_error(&self, url: &Url, error: reqwest::Error) -> GuardedError {
        let mut source = error.source();
        while let Some(cause) = source {
            if let Some(blocked) = cause.downcast_ref::<BlockedHost>() {
                return GuardedError::Refused { url: url.clone(), reason: blocked.to_string() };
            }
            if let Some(unresolved) = cause.downcast_ref::<UnresolvedHost>() {
                return unresolved_error(url, unresolved);
            }
            if let Some(refusal) = certificate_refusal(cause) {
                return GuardedError::Certificate { url: url.clone(), detail: shown_detail(refusal) };
            }
            source = cause.source();
        }
        if error.is_timeout() && error.is_connect() {
            return GuardedError::ConnectTimedOut(url.clone(), self.limits.connect.as_secs());
        }
        if error.is_timeout() {
            return GuardedError::TimedOut(self.limits.total.as_secs());
        }
        // The error's own text repeats the URL, which the message names once.
        GuardedError::Unreachable { url: url.clone(), detail: shown_detail(&error.without_url()) }
    }
}

/// A failed lookup of `url`'s host name: one that may pass (the name
/// service failed), or one that found the name has no address.
fn unresolved_error(url: &Url, unresolved: &UnresolvedHost) -> GuardedError {
    let (url, detail) = (url.clone(), shown_detail(unresolved));
    if unresolved.is_temporary() {
        GuardedError::LookupFailed { url, detail }
    } else {
        GuardedError::Unresolved { url, detail }
    }
}

/// The TLS library's refusal of the server's certificate, when `error` is
/// one. rustls's error comes inside the handshake's I/O error, which the
/// connector wraps in another; an I/O error's `source` skips what it
/// wraps, so I/O errors are opened here.
fn certificate_refusal<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        return certificate_refusal(io.get_ref()?);
    }
    error
        .downcast_ref::<rustls::Error>()
        .filter(|tls| matches!(tls, rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented))
}

/// Reads at most `max_bytes` of `response`'s body from `url`; true when the
/// body was longer and was cut.
pub async fn read_capped(url: &Url, mut response: Response, max_bytes: usize) -> Result<(Vec<u8>, bool), GuardedError> {
    let expected = response.content_length().map_or(0, |n| usize::try_from(n).unwrap_or(max_bytes));
    let mut body = Vec::with_capacity(expected.min(max_bytes));
    while let Some(chunk) = response.chunk().await.map_err(|e| transfer_error(url, e))? {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

fn transfer_error(url: &Url, error: reqwest::Error) -> GuardedError {
    if error.is_timeout() {
        GuardedError::TimedOut(0)
    } else {
        GuardedError::Transfer { url: url.clone(), detail: shown_detail(&error.without_url()) }
    }
}

/// `error` with all its causes, as an error's `detail` quotes it: cut at
/// [`MAX_SHOWN_DETAIL_CHARS`], with `…` when cut.
fn shown_detail(error: &dyn std::error::Error) -> String {
    shown(&error_chain(error), MAX_SHOWN_DETAIL_CHARS).into_owned()
}

/// `url` as an error quotes it: cut at 2048 characters, with `…` when cut.
pub fn shown_url(url: &Url) -> Cow<'_, str> {
    shown(url.as_str(), MAX_SHOWN_URL_CHARS)
}

/// `text` as an error quotes it: cut at `max_chars` characters, with `…`
/// when cut.
fn shown(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_detail_is_cut() {
        let names: String = (0..2000).map(|i| format!("DnsName(\"host{i}.example.org\"), ")).collect();
        let long = std::io::Error::other(format!("invalid peer certificate: NotValidForName: {names}"));
        let cut = shown_detail(&long);
        assert_eq!(cut.chars().count(), MAX_SHOWN_DETAIL_CHARS + 1);
        assert!(cut.starts_with("invalid peer certificate") && cut.ends_with('…'), "{cut}");
        assert_eq!(shown_detail(&std::io::Error::other("connection refused")), "connection refused");
    }

    #[test]
    fn text_is_cut_on_character_boundaries_with_an_ellipsis() {
        assert_eq!(shown("ééé", 2), "éé…");
        assert_eq!(shown("éé", 2), "éé");
        assert!(matches!(shown("ab", 5), Cow::Borrowed("ab")), "uncut text is not copied");
    }

    #[test]
    fn a_lookup_that_may_pass_is_told_apart_from_a_name_without_address() {
        let url = Url::parse("https://example.org/").unwrap();
        let failure = |words: &str| {
            let error = std::io::Error::other(format!("failed to lookup address information: {words}"));
            unresolved_error(&url, &UnresolvedHost(error))
        };
        let down = failure("Temporary failure in name resolution");
        assert!(matches!(down, GuardedError::LookupFailed { .. }), "{down:?}");
        assert_eq!(
            down.to_string(),
            "could not look up the address of https://example.org/: failed to lookup address information: Temporary failure in name resolution; the name service failed for now, try again later"
        );
        let missing = failure("Name or service not known");
        assert!(matches!(missing, GuardedError::Unresolved { .. }), "{missing:?}");
        assert!(missing.to_string().ends_with("; check the host name"), "{missing}");
    }

    fn client(allowed: &[&str]) -> GuardedClient {
        let policy = AddressPolicy::new(allowed.iter().map(|n| n.parse().unwrap()).collect());
        let limits = ClientLimits { total: Duration::from_secs(5), connect: Duration::from_secs(2), max_redirects: 2 };
        GuardedClient::new(policy, limits, "guarded-http-test").unwrap()
    }

    #[tokio::test]
    async fn bad_urls_schemes_and_internal_hosts_are_refused_before_any_request() {
        let client = client(&[]);
        for (url, expected) in [
            ("not a url", "is not an absolute URL"),
            ("file:///etc/passwd", "only http and https"),
            ("gopher://example.org/", "only http and https"),
            ("http://127.0.0.1:9/", "127.0.0.1 is in the loopback range"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1 is in the loopback range"),
            ("http://2130706433/", "127.0.0.1 is in the loopback range"),
            ("http://0x7f.1/", "127.0.0.1 is in the loopback range"),
            ("http://0/", "0.0.0.0 is in the unspecified"),
            ("http://localhost:8/", "localhost resolves only to internal or reserved addresses"),
            ("http://example.org:25/", "port 25 (smtp) is one of the Fetch standard's bad ports"),
        ] {
            let error = client.send(GuardedRequest::get(url, HeaderMap::new())).await.unwrap_err().to_string();
            assert!(error.contains(expected), "{url}: {error}");
        }
    }

    #[tokio::test]
    async fn preflight_refuses_what_send_would_refuse() {
        let client = client(&[]);
        for url in ["http://127.0.0.1:9/", "http://localhost/x", "ftp://example.org/", "http://example.org:6667/"] {
            assert!(client.preflight(url).await.is_err(), "{url}");
        }
        assert!(client.preflight("https://example.org/a").await.is_ok());
        let allowing_loopback = super::tests::client(&["127.0.0.0/8", "::1/128"]);
        assert!(allowing_loopback.preflight("http://localhost:8/").await.is_ok());
        assert!(allowing_loopback.preflight("http://127.0.0.1:25/").await.is_err(), "a bad port even where allowed");
    }

    #[test]
    fn errors_quote_long_urls_cut() {
        let long = Url::parse(&format!("https://example.org/{}", "é".repeat(5000))).unwrap();
        let error = GuardedError::Refused { url: long, reason: "10.0.0.1 is in the private range".into() }.to_string();
        assert!(error.starts_with("refused to fetch https://example.org/%C3%A9"), "{error}");
        assert!(error.ends_with("…: 10.0.0.1 is in the private range"), "{error}");
        assert_eq!(
            error.chars().count(),
            "refused to fetch ".len() + MAX_SHOWN_URL_CHARS + "…: 10.0.0.1 is in the private range".chars().count()
        );
        let short = Url::parse("https://example.org/a").unwrap();
        assert_eq!(shown_url(&short), "https://example.org/a");
    }

    #[tokio::test]
    async fn a_redirect_to_a_location_in_raw_utf8_is_followed_percent_encoded() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let answers: [&[u8]; 2] = [
                b"HTTP/1.1 302 Found\r\nLocation: /caf\xc3\xa9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
            ];
            for answer in answers {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = [0; 4096];
                let _ = stream.read(&mut request).await.unwrap();
                stream.write_all(answer).await.unwrap();
            }
        });
        let (url, response) = client(&["127.0.0.1/32"])
            .send(GuardedRequest::get(&format!("http://127.0.0.1:{port}/"), HeaderMap::new()))
            .await
            .unwrap();
        assert_eq!(url.path(), "/caf%C3%A9");
        assert_eq!(response.status(), StatusCode::OK);
    }

    #[test]
    fn only_a_refused_certificate_is_a_certificate_error() {
        let handshake = |error: rustls::Error| std::io::Error::new(std::io::ErrorKind::InvalidData, error);
        let unknown_issuer = handshake(rustls::CertificateError::UnknownIssuer.into());
        let refusal = certificate_refusal(&unknown_issuer).map(ToString::to_string);
        assert_eq!(refusal.as_deref(), Some("invalid peer certificate: UnknownIssuer"));
        assert!(certificate_refusal(&handshake(rustls::Error::NoCertificatesPresented)).is_some());
        let rewrapped = std::io::Error::other(handshake(rustls::Error::NoCertificatesPresented));
        assert!(certificate_refusal(&rewrapped).is_some(), "found inside an I/O error's I/O error");
        assert!(certificate_refusal(&handshake(rustls::Error::DecryptError)).is_none(), "not the certificate");
        assert!(certificate_refusal(&std::io::Error::from(std::io::ErrorKind::ConnectionReset)).is_none());
    }

    #[tokio::test]
    async fn a_self_signed_certificate_is_refused_for_good() {
        use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        let certified = rcgen::generate_simple_self_signed(["127.0.0.1".to_owned()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            // The client gives the handshake up; this side's error is moot.
            let _ = acceptor.accept(stream).await;
        });
        let error = client(&["127.0.0.1/32"])
            .send(GuardedRequest::get(&format!("https://127.0.0.1:{port}/"), HeaderMap::new()))
            .await
            .unwrap_err();
        assert!(matches!(error, GuardedError::Certificate { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "refused the TLS certificate of https://127.0.0.1:{port}/: invalid peer certificate: UnknownIssuer; the site must fix its certificate, trying again will not help"
            )
        );
    }

    #[tokio::test]
    async fn an_allowed_network_is_connected_to() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let error = client(&["127.0.0.1/32"])
            .send(GuardedRequest::get(&format!("http://127.0.0.1:{port}/"), HeaderMap::new()))
            .await
            .unwrap_err();
        assert!(!matches!(error, GuardedError::Refused { .. }), "not refused, only closed: {error}");
    }
}
