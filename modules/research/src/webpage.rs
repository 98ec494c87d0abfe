//! The `fetch_webpage` tool: a page's title, readable text and links.

use std::sync::Arc;
use std::time::{Duration, Instant};

use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::bounded_tree::TreeBudget;
use crate::charset;
use crate::fetcher::{BodyKind, FetchError, Fetched, Fetcher};
use crate::readable::{Link, MAX_URL_CHARS, readable};
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
pub struct LayoutSlots(Arc<Semaphore>);

impl LayoutSlots {
    /// One slot per CPU the process may use.
    pub fn per_cpu() -> Self {
        Self(Arc::new(Semaphore::new(std::thread::available_parallelism().map_or(1, std::num::NonZero::get))))
    }
}

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
    let slot = tokio::time::timeout_at(tree_budget.deadline.into(), slots.0.clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(busy)?;
    tokio::task::spawn_blocking(move || {
        let page = to_web_page(fetched, max_chars, tree_budget);
        drop(slot);
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

/// `text` cut to `max_chars` characters; true when it was cut.
fn cut_chars(mut text: String, max_chars: usize) -> (String, bool) {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => {
            text.truncate(end);
            (text, true)
        }
        None => (text, false),
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
        FetchError::Request(GuardedError::Unreachable { .. }) => ToolError::unavailable(message),
        FetchError::Status { status, .. } if status.as_u16() == 404 || status.as_u16() == 410 => {
            ToolError::not_found(message)
        }
        FetchError::Status { status, .. } if status.is_server_error() => ToolError::unavailable(message),
        FetchError::Status { .. }
        | FetchError::Request(
            GuardedError::TooManyRedirects(_) | GuardedError::BadRedirect(_) | GuardedError::Transfer { .. },
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
}
