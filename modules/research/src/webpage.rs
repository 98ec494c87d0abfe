//! The `fetch_webpage` tool: a page's title, readable text and links.

use std::time::{Duration, Instant};

use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounded_tree::TreeBudget;
use crate::charset;
use crate::fetcher::{BodyKind, FetchError, Fetched, Fetcher};
use crate::readable::{Link, MAX_URL_CHARS, readable};
use crate::text::cut_chars;
use crate::turns::Turns;
use guarded_http::GuardedError;

/// Time kept back from the call's deadline to turn the page into text and
/// answer, so a slow server gets this tool's own timeout message.
const ANSWER_MARGIN: Duration = Duration::from_secs(2);
/// Time kept back from the call's deadline to answer once the page's tree
/// is given up on.
const PARSE_MARGIN: Duration = Duration::from_millis(500);
/// Most characters of the declared media type; a longer one is cut.
const MAX_CONTENT_TYPE_CHARS: usize = 256;

/// How large a page's document tree may grow (the module's `HTML_MAX_NODES`).
#[derive(Debug, Clone, Copy)]
pub struct TreeLimit {
    /// Most elements and comments; past them the page is read as text only.
    pub max_nodes: usize,
}

/// How many pages are turned into text at once: one per CPU. Laying a page
/// out is CPU work and costs up to about 80 MiB (see `HTML_MAX_NODES`), so
/// more at once would only multiply the memory; further calls wait.
#[derive(Debug, Clone)]
pub struct LayoutSlots(Turns);

impl LayoutSlots {
    /// One slot per CPU the process may use.
    pub fn per_cpu() -> Self {
        Self(Turns::new(std::thread::available_parallelism().map_or(1, std::num::NonZero::get)))
    }
}

/// How many pages are fetched and held at once (the module's
/// `FETCH_MAX_CONCURRENT_PAGES`): a call holds its turn from before its
/// request until its page has been turned into text, so the bodies in
/// memory, read or waiting for a layout slot, stay within this many times
/// `FETCH_MAX_BYTES`; further calls wait.
#[derive(Debug, Clone)]
pub struct FetchSlots(pub Turns);

/// Arguments of `fetch_webpage`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchWebpage {
    /// The page's full http or https address, e.g. `https://example.org/article`.
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,
    /// Most characters of page text to return (200-100000, default 20000);
    /// longer text is cut and `truncated` is set. The links (their URLs and
    /// texts together) get the same budget; the title is at most 300.
    #[serde(default = "default_max_chars")]
    #[schemars(range(min = 200, max = 100_000))]
    pub max_chars: u32,
}

fn default_max_chars() -> u32 {
    20_000
}

/// A fetched page in readable form.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WebPage {
    /// The address the page was read from, after redirects (at most 2048
    /// characters; a longer one is cut and `truncated` is set).
    pub url: String,
    /// The HTTP status of the final answer.
    pub status: u16,
    /// The media type the server declared, e.g. `text/html`, if any (at
    /// most 256 characters; a longer one is cut and `truncated` is set).
    pub content_type: Option<String>,
    /// The character encoding the text was decoded from.
    pub encoding: String,
    /// The page's title, when it has one (at most 300 characters).
    pub title: Option<String>,
    /// The page's main text, as plain text.
    pub text: String,
    /// Links on the page (absolute http(s) URLs of at most 2048 characters, at
    /// most 100, their URLs and texts together at most `max_chars`), empty
    /// for plain text.
    pub links: Vec<Link>,
    /// True when anything was cut: the page was longer than `max_chars` or
    /// the module's byte limit, the title, address or media type was cut,
    /// or links were left out.
    pub truncated: bool,
}

/// Fetch a web page over HTTP(S) and return its title, main text and links.
/// Internal and private network addresses are refused.
#[tool(read_only, idempotent, open_world, timeout_seconds = 60)]
pub async fn fetch_webpage(ctx: Context, args: FetchWebpage) -> Result<WebPage, ToolError> {
    let fetcher = ctx.state::<Fetcher>()?;
    let tree_limit = *ctx.state::<TreeLimit>()?;
    let slots = ctx.state::<LayoutSlots>()?;
    let fetch_slots = ctx.state::<FetchSlots>()?;
    // A call waits for its turn only while a whole fetch still fits before
    // its deadline, so a fetch's timeout always means FETCH_TIMEOUT_SECONDS.
    let last_start =
        ctx.deadline().into_std().checked_sub(ANSWER_MARGIN + fetcher.total()).unwrap_or_else(Instant::now);
    let fetch_turn = fetch_slots.0.wait_until(last_start).await.ok_or_else(|| no_fetch_turn(fetch_slots.0.count()))?;
    let budget = ctx.remaining().saturating_sub(ANSWER_MARGIN);
    let fetched = fetcher.fetch(&args.url, budget).await.map_err(tool_error)?;
    let max_chars = usize::try_from(args.max_chars).unwrap_or(usize::MAX);
    let tree_budget = TreeBudget {
        max_nodes: tree_limit.max_nodes,
        deadline: ctx.deadline().into_std().checked_sub(PARSE_MARGIN).unwrap_or_else(Instant::now),
    };
    // Parsing a large page is CPU work; keep it off the async workers, one
    // page per CPU at a time (the slot goes with the work, which a call
    // that ends early does not stop). The tree's budget ends it by the
    // call's deadline.
    let slot = slots.0.wait_until(tree_budget.deadline).await.ok_or_else(busy)?;
    tokio::task::spawn_blocking(move || {
        let page = to_web_page(fetched, max_chars, tree_budget);
        drop((slot, fetch_turn));
        page
    })
    .await
    .map_err(|e| ToolError::execution_failed(format!("turning the page into text failed: {e}")))
}

/// The error of a call that found no layout slot before its deadline.
fn busy() -> ToolError {
    ToolError::timeout(
        "the page was fetched, but the module was turning other pages into text (one per CPU at a time) until this call's deadline; try again",
    )
}

/// The error of a call that found no fetch turn while a whole fetch still
/// fitted before its deadline.
fn no_fetch_turn(count: usize) -> ToolError {
    ToolError::timeout(format!(
        "the module was busy fetching {count} other pages, the most it fetches at once (FETCH_MAX_CONCURRENT_PAGES), for as long as this call could wait and still give the page its whole FETCH_TIMEOUT_SECONDS; try again"
    ))
}

/// Decodes the body and extracts its readable parts.
fn to_web_page(fetched: Fetched, max_chars: usize, tree_budget: TreeBudget) -> WebPage {
    let header_charset = fetched.content_type.as_ref().and_then(|t| t.get_param(mime::CHARSET));
    let is_html = fetched.kind == BodyKind::Html;
    let (decoded, encoding) = charset::decode(&fetched.body, header_charset.as_ref().map(|c| c.as_str()), is_html);
    let (title, text, links, page_cut) = match fetched.kind {
        BodyKind::Html => {
            let page = readable(&decoded, &fetched.url, tree_budget);
            if let Some(reason) = page.text_only {
                tracing::warn!(url = %fetched.url, %reason, "page read as text only");
            }
            (page.title, page.text, page.links, page.cut)
        }
        BodyKind::Text => (None, decoded.trim().to_owned(), Vec::new(), false),
    };
    let (text, text_cut) = cut_chars(text, max_chars);
    let (links, links_cut) = links_within(links, max_chars);
    // The address after redirects and the media type come from the server's
    // headers, which only the HTTP library's header limit bounds.
    let (url, url_cut) = cut_chars(fetched.url.into(), MAX_URL_CHARS);
    let (content_type, type_cut) =
        match fetched.content_type.map(|t| cut_chars(t.essence_str().to_owned(), MAX_CONTENT_TYPE_CHARS)) {
            Some((content_type, cut)) => (Some(content_type), cut),
            None => (None, false),
        };
    WebPage {
        url,
        status: fetched.status.as_u16(),
        content_type,
        encoding: encoding.to_owned(),
        title,
        text,
        links,
        truncated: text_cut || links_cut || url_cut || type_cut || page_cut || fetched.truncated,
    }
}

/// The first `links` whose URLs and texts together fit in `max_chars`;
/// true when some were left out.
fn links_within(mut links: Vec<Link>, max_chars: usize) -> (Vec<Link>, bool) {
    let mut used = 0_usize;
    let fitting = links
        .iter()
        .take_while(|link| {
            used += link.url.chars().count() + link.text.chars().count();
            used <= max_chars
        })
        .count();
    let cut = fitting < links.len();
    links.truncate(fitting);
    (links, cut)
}

/// The contract's error kind for each way a fetch fails.
fn tool_error(error: FetchError) -> ToolError {
    let message = error.to_string();
    match error {
        FetchError::Request(GuardedError::InvalidUrl(..) | GuardedError::UnsupportedScheme(_)) => {
            ToolError::invalid_arguments(message)
        }
        FetchError::Request(GuardedError::Refused { .. }) => ToolError::permission_denied(message),
        FetchError::TimedOut(_)
        | FetchError::ConnectTimedOut(..)
        | FetchError::Request(GuardedError::TimedOut(_) | GuardedError::ConnectTimedOut(..)) => {
            ToolError::timeout(message)
        }
        FetchError::Request(GuardedError::Unreachable { .. } | GuardedError::LookupFailed { .. }) => {
            ToolError::unavailable(message)
        }
        FetchError::Status { status, .. } if status.as_u16() == 404 || status.as_u16() == 410 => {
            ToolError::not_found(message)
        }
        // A server error or "too many requests" may pass; trying again later can succeed.
        FetchError::Status { status, .. } if status.is_server_error() || status.as_u16() == 429 => {
            ToolError::unavailable(message)
        }
        FetchError::Status { .. }
        | FetchError::Request(
            GuardedError::TooManyRedirects(_)
            | GuardedError::BadRedirect(_)
            | GuardedError::RedirectTooLong { .. }
            | GuardedError::Unresolved { .. }
            | GuardedError::Certificate { .. }
            | GuardedError::Transfer { .. },
        )
        | FetchError::TooManyRedirects(_)
        | FetchError::Encoded(..)
        | FetchError::UnsupportedContentType(_) => ToolError::execution_failed(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    fn budget() -> TreeBudget {
        TreeBudget { max_nodes: 10_000, deadline: Instant::now() + Duration::from_secs(60) }
    }
    use url::Url;

    fn fetched(content_type: &str, body: &[u8], truncated: bool) -> Fetched {
        Fetched {
            url: Url::parse("https://example.org/a/").unwrap(),
            status: StatusCode::OK,
            content_type: Some(content_type.parse().unwrap()),
            kind: if content_type.starts_with("text/html") { BodyKind::Html } else { BodyKind::Text },
            body: body.to_vec(),
            truncated,
        }
    }

    #[test]
    fn html_is_decoded_and_made_readable() {
        let page = to_web_page(
            fetched(
                "text/html; charset=iso-8859-1",
                b"<title>Caf\xe9</title><p>Cr\xe8me <a href=b>br\xfbl\xe9e</a></p>",
                false,
            ),
            1000,
            budget(),
        );
        assert_eq!(page.title.as_deref(), Some("Café"));
        assert!(page.text.contains("Crème"), "{}", page.text);
        assert_eq!(page.links, [Link { url: "https://example.org/a/b".into(), text: "brûlée".into() }]);
        assert_eq!((page.encoding.as_str(), page.content_type.as_deref()), ("windows-1252", Some("text/html")));
        assert!(!page.truncated);
    }

    #[test]
    fn text_is_cut_at_max_chars_on_a_character_boundary() {
        let page = to_web_page(fetched("text/plain", "ééééé".as_bytes(), false), 3, budget());
        assert_eq!((page.text.as_str(), page.truncated), ("ééé", true));
        assert!(page.links.is_empty() && page.title.is_none());
        assert!(to_web_page(fetched("text/plain", b"abc", true), 10, budget()).truncated, "a byte cut is reported too");
    }

    #[test]
    fn a_long_address_or_media_type_from_the_headers_is_cut() {
        let mut page = fetched(&format!("text/{}", "x".repeat(1000)), b"short", false);
        page.url = Url::parse(&format!("https://example.org/{}", "a".repeat(5000))).unwrap();
        let page = to_web_page(page, 1000, budget());
        assert_eq!(page.url.chars().count(), MAX_URL_CHARS);
        assert!(page.url.starts_with("https://example.org/aaa"), "{}", page.url);
        assert_eq!(page.content_type.as_deref().map(|t| t.chars().count()), Some(MAX_CONTENT_TYPE_CHARS));
        assert!(page.truncated);
        let type_only = to_web_page(fetched(&format!("text/{}", "x".repeat(1000)), b"short", false), 1000, budget());
        assert!(type_only.truncated, "a cut media type alone sets truncated");
    }

    /// A server on a free loopback port answering a short page; its URL.
    async fn page_server() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { axum::response::Html("<p>A short page.</p>") }))
            .route("/busy", axum::routing::get(|| async { StatusCode::TOO_MANY_REQUESTS }));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    /// A client of `fetch_webpage` with a 4 s timeout (a 1 s fetch fits
    /// before its deadline only in its first second), fetching from
    /// 127.0.0.1 with these turns.
    fn client(layout: &LayoutSlots, fetch: &FetchSlots) -> module_sdk::TestClient {
        let policy = guarded_http::AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
        let limits = crate::fetcher::FetchLimits {
            total: Duration::from_secs(1),
            connect: Duration::from_secs(1),
            max_bytes: 4096,
            max_redirects: 0,
        };
        module_sdk::Module::new("research", "Fetching pages, for tests.")
            .state(Fetcher::new(policy, limits).unwrap())
            .state(TreeLimit { max_nodes: 1000 })
            .state(layout.clone())
            .state(fetch.clone())
            .tool(fetch_webpage().timeout(Duration::from_secs(4)))
            .test_client()
            .unwrap()
    }

    #[tokio::test]
    async fn a_call_without_a_fetch_turn_while_a_fetch_fits_times_out_naming_the_setting() {
        let url = page_server().await;
        let (layout, fetch) = (LayoutSlots(Turns::new(1)), FetchSlots(Turns::new(1)));
        let client = client(&layout, &fetch);
        let held = fetch.0.wait_until(Instant::now()).await.unwrap();
        let started = Instant::now();
        let result = client.call("fetch_webpage", serde_json::json!({"url": url})).await;
        assert_eq!(result.error_kind, Some(module_sdk::ErrorKind::Timeout), "{result:?}");
        let error = result.error.unwrap();
        assert!(error.contains("fetching 1 other pages") && error.contains("(FETCH_MAX_CONCURRENT_PAGES)"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3), "given up once a whole fetch no longer fitted");
        drop(held);
        let result = client.call("fetch_webpage", serde_json::json!({"url": url})).await;
        assert!(result.success, "with the turn given back the page is fetched: {result:?}");
    }

    #[tokio::test]
    async fn a_call_without_a_layout_turn_before_its_deadline_times_out_and_gives_its_fetch_turn_back() {
        let url = page_server().await;
        let (layout, fetch) = (LayoutSlots(Turns::new(1)), FetchSlots(Turns::new(1)));
        let client = client(&layout, &fetch);
        let held = layout.0.wait_until(Instant::now()).await.unwrap();
        let result = client.call("fetch_webpage", serde_json::json!({"url": url})).await;
        assert_eq!(result.error_kind, Some(module_sdk::ErrorKind::Timeout), "{result:?}");
        assert!(result.error.as_deref().unwrap().contains("turning other pages into text"), "{result:?}");
        assert!(fetch.0.wait_until(Instant::now()).await.is_some(), "the failed call gave its fetch turn back");
        drop(held);
        let result = client.call("fetch_webpage", serde_json::json!({"url": url})).await;
        assert_eq!(result.result["text"], "A short page.", "{result:?}");
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_fails_and_too_many_requests_is_for_later() {
        let url = page_server().await;
        let (layout, fetch) = (LayoutSlots(Turns::new(1)), FetchSlots(Turns::new(1)));
        let client = client(&layout, &fetch);
        let result = client.call("fetch_webpage", serde_json::json!({"url": "http://no-such-host.invalid/"})).await;
        assert_eq!(result.error_kind, Some(module_sdk::ErrorKind::ExecutionFailed), "{result:?}");
        assert!(result.error.as_deref().unwrap().contains("check the host name"), "{result:?}");
        let result = client.call("fetch_webpage", serde_json::json!({"url": format!("{url}busy")})).await;
        assert_eq!(result.error_kind, Some(module_sdk::ErrorKind::Unavailable), "{result:?}");
    }

    #[test]
    fn failures_get_the_contract_error_kinds() {
        use module_sdk::ErrorKind;
        let url = Url::parse("https://example.org/").unwrap();
        let status = |code: u16| FetchError::Status { url: url.clone(), status: StatusCode::from_u16(code).unwrap() };
        assert_eq!(tool_error(status(404)).kind(), ErrorKind::NotFound);
        assert_eq!(tool_error(status(503)).kind(), ErrorKind::Unavailable);
        assert_eq!(tool_error(status(403)).kind(), ErrorKind::ExecutionFailed);
        assert_eq!(tool_error(FetchError::TimedOut(3)).kind(), ErrorKind::Timeout);
        let refused = FetchError::Request(GuardedError::Refused { url, reason: "x".into() });
        assert_eq!(tool_error(refused).kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            tool_error(GuardedError::UnsupportedScheme("ftp".into()).into()).kind(),
            ErrorKind::InvalidArguments
        );
    }

    #[test]
    fn a_failing_name_service_is_for_later_and_a_name_without_address_fails() {
        use module_sdk::ErrorKind;
        let url = Url::parse("https://example.org/").unwrap();
        let lookup = |temporary: bool| {
            let detail = "failed to lookup address information".to_owned();
            let error = if temporary {
                GuardedError::LookupFailed { url: url.clone(), detail }
            } else {
                GuardedError::Unresolved { url: url.clone(), detail }
            };
            tool_error(error.into()).kind()
        };
        assert_eq!(lookup(true), ErrorKind::Unavailable);
        assert_eq!(lookup(false), ErrorKind::ExecutionFailed);
    }

    #[test]
    fn a_refused_certificate_fails_rather_than_asking_to_try_again() {
        let url = Url::parse("https://example.org/").unwrap();
        let detail = "invalid peer certificate: UnknownIssuer".to_owned();
        let error = tool_error(GuardedError::Certificate { url, detail }.into());
        assert_eq!(error.kind(), module_sdk::ErrorKind::ExecutionFailed);
        assert!(error.to_string().contains("invalid peer certificate: UnknownIssuer"), "{error}");
    }
}
