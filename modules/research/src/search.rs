//! `web_search` and `news_search`, answered by a SearxNG instance's JSON API
//! (`GET {SEARXNG_URL}/search?q=...&format=json&categories=general|news`).
//!
//! SearxNG is operator-configured and usually runs on the internal
//! network, so its client does not go through the fetch address policy.
//! For the same reason an unreachable SearxNG is reported to the caller (a
//! model) without its address or the connection error, which names it; the
//! module's log has both, at `warn`, for operators.

use std::time::Duration;

use guarded_http::{GuardedError, read_capped};
use module_sdk::{Context, ToolError, tool};
use reqwest::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use url::Url;

use module_sdk::error_chain;

use crate::readable::{MAX_TITLE_CHARS, MAX_URL_CHARS};
use crate::text::collapse_whitespace;

/// Most characters of a result's snippet.
const MAX_SNIPPET_CHARS: usize = 500;
/// Most characters of a result's publication date (a date and time with its
/// zone takes about 32).
const MAX_DATE_CHARS: usize = 64;

/// Arguments of `web_search` and `news_search`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Search {
    /// What to search for, as you would type it into a search engine.
    #[schemars(length(min = 1, max = 500))]
    pub query: String,
    /// How many results to return (1-20, default 5).
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 20))]
    pub max_results: u8,
}

fn default_max_results() -> u8 {
    5
}

/// The results of a search.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The query that was searched for.
    pub query: String,
    /// The results, best first.
    pub results: Vec<SearchHit>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SearchHit {
    /// The result's title.
    pub title: String,
    /// The result's address; pass it to `fetch_webpage` to read the page.
    pub url: String,
    /// A short excerpt of the page, as the search engine shows it.
    pub snippet: String,
    /// When the article was published, as the engine reports it (mostly for news results).
    pub published_date: Option<String>,
}

/// Which SearxNG category to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// The general web.
    General,
    /// News articles.
    News,
}

impl Category {
    fn as_str(self) -> &'static str {
        match self {
            Self::General => "general",
            Self::News => "news",
        }
    }
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// `SEARXNG_URL` is not set.
    #[error(
        "web search is not configured: set SEARXNG_URL to the address of a SearxNG instance with the JSON format enabled"
    )]
    NotConfigured,
    /// SearxNG did not answer in time.
    #[error("the search engine did not answer within {0} seconds (SEARCH_TIMEOUT_SECONDS); try again later")]
    TimedOut(u64),
    /// SearxNG could not be reached; the message leaves its address out
    /// (the address and the connection error go to the log).
    #[error("the search service is not reachable; try again later")]
    Unreachable,
    /// SearxNG's answer broke off while it was read; the message leaves
    /// its address out (the cause, which names it, goes to the log).
    #[error("the search service's answer broke off; try again later")]
    BrokenOff,
    /// SearxNG refused the JSON format (it is off in its default settings).
    #[error(
        "the search engine refused JSON answers (HTTP 403); enable the json format in SearxNG's settings.yml (search.formats)"
    )]
    JsonDisabled,
    /// SearxNG answered with an error status.
    #[error("the search engine answered HTTP {0}")]
    Status(StatusCode),
    /// SearxNG's answer is longer than `SEARCH_MAX_BYTES`.
    #[error("the search engine's answer is longer than {0} bytes (SEARCH_MAX_BYTES)")]
    TooLarge(usize),
    /// SearxNG's answer is not its JSON format.
    #[error("the search engine's answer could not be read: {0}")]
    BadAnswer(String),
}

/// SearxNG's JSON answer, the parts used here.
#[derive(Deserialize)]
struct SearxAnswer {
    #[serde(default)]
    results: Vec<SearxResult>,
}

/// One result of SearxNG's JSON answer.
#[derive(Deserialize)]
struct SearxResult {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "publishedDate")]
    published_date: Option<String>,
}

/// A client of one SearxNG instance, or of none when not configured.
#[derive(Debug, Clone)]
pub struct Searx {
    endpoint: Option<Url>,
    client: reqwest::Client,
    timeout: Duration,
    max_bytes: usize,
}

impl Searx {
    /// A client of the SearxNG instance at `base` (none: search unavailable)
    /// that reads at most `max_bytes` of an answer.
    pub fn new(base: Option<Url>, timeout: Duration, max_bytes: usize) -> Result<Self, reqwest::Error> {
        let endpoint = base.map(|mut url| {
            url.path_segments_mut().expect("an http(s) URL has a path").pop_if_empty().push("search");
            url
        });
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("research-module/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { endpoint, client, timeout, max_bytes })
    }

    /// Searches `category` for `query`, returning at most `max_results`.
    pub async fn search(
        &self,
        query: &str,
        category: Category,
        max_results: usize,
    ) -> Result<Vec<SearchHit>, SearchError> {
        let endpoint = self.endpoint.as_ref().ok_or(SearchError::NotConfigured)?;
        let response = self
            .client
            .get(endpoint.clone())
            .query(&[("q", query), ("format", "json"), ("categories", category.as_str()), ("pageno", "1")])
            .send()
            .await
            .map_err(|e| self.request_error(endpoint, &e))?;
        match response.status() {
            status if status.is_success() => {}
            StatusCode::FORBIDDEN => return Err(SearchError::JsonDisabled),
            status => return Err(SearchError::Status(status)),
        }
        let body = match read_capped(endpoint, response, self.max_bytes).await {
            Ok((_, true)) => return Err(SearchError::TooLarge(self.max_bytes)),
            Ok((body, false)) => body,
            Err(GuardedError::TimedOut(_)) => return Err(SearchError::TimedOut(self.timeout.as_secs())),
            Err(error) => {
                tracing::warn!(cause = %error, "the search service's answer broke off");
                return Err(SearchError::BrokenOff);
            }
        };
        let answer: SearxAnswer = serde_json::from_slice(&body).map_err(|e| SearchError::BadAnswer(e.to_string()))?;
        Ok(answer.results.into_iter().filter_map(hit).take(max_results).collect())
    }

    fn request_error(&self, url: &Url, error: &reqwest::Error) -> SearchError {
        if error.is_timeout() {
            return SearchError::TimedOut(self.timeout.as_secs());
        }
        let detail = error_chain(error);
        tracing::warn!(%url, cause = %detail, "the search service is not reachable");
        SearchError::Unreachable
    }
}

/// A result worth returning: it has an http(s) URL of at most
/// [`MAX_URL_CHARS`] (a cut one would point elsewhere); text is tidied and
/// cut, so no answer of an engine can flood the model.
fn hit(result: SearxResult) -> Option<SearchHit> {
    let url = Url::parse(result.url?.trim())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.as_str().len() <= MAX_URL_CHARS)?;
    let title = result
        .title
        .map(|t| collapse_whitespace(&t))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| url.to_string())
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    let snippet =
        collapse_whitespace(result.content.as_deref().unwrap_or_default()).chars().take(MAX_SNIPPET_CHARS).collect();
    let published_date = result
        .published_date
        .map(|d| d.trim().chars().take(MAX_DATE_CHARS).collect::<String>())
        .filter(|d| !d.is_empty());
    Some(SearchHit { title, url: url.into(), snippet, published_date })
}

/// Runs one search for a tool and maps failures to the contract's kinds.
async fn run(ctx: Context, args: Search, category: Category) -> Result<SearchResults, ToolError> {
    let query = args.query.trim();
    if query.is_empty() {
        return Err(ToolError::invalid_arguments("arguments.query is blank; say what to search for"));
    }
    let searx = ctx.state::<Searx>()?;
    let results = searx.search(query, category, usize::from(args.max_results)).await.map_err(|error| {
        let message = error.to_string();
        match error {
            SearchError::NotConfigured
            | SearchError::Unreachable
            | SearchError::BrokenOff
            | SearchError::JsonDisabled => ToolError::unavailable(message),
            SearchError::Status(status) if status.is_server_error() => ToolError::unavailable(message),
            SearchError::TimedOut(_) => ToolError::timeout(message),
            SearchError::Status(_) | SearchError::TooLarge(_) | SearchError::BadAnswer(_) => {
                ToolError::execution_failed(message)
            }
        }
    })?;
    Ok(SearchResults { query: query.to_owned(), results })
}

/// Search the web and return titles, URLs and snippets of the best results.
#[tool(read_only, idempotent, open_world, timeout_seconds = 30)]
pub async fn web_search(ctx: Context, args: Search) -> Result<SearchResults, ToolError> {
    run(ctx, args, Category::General).await
}

/// Search recent news and return titles, URLs, snippets and publication dates.
#[tool(read_only, idempotent, open_world, timeout_seconds = 30)]
pub async fn news_search(ctx: Context, args: Search) -> Result<SearchResults, ToolError> {
    run(ctx, args, Category::News).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_keeps_the_base_path() {
        let searx = |base: &str| {
            Searx::new(Some(Url::parse(base).unwrap()), Duration::from_secs(1), 1024).unwrap().endpoint.unwrap()
        };
        assert_eq!(searx("http://s:8080").as_str(), "http://s:8080/search");
        assert_eq!(searx("http://s:8080/searx/").as_str(), "http://s:8080/searx/search");
    }

    #[test]
    fn results_without_a_usable_url_are_dropped_and_text_tidied() {
        let result = |url: &str, title: &str| SearxResult {
            url: Some(url.into()),
            title: Some(title.into()),
            content: Some(format!("  lots\n of   {}", "x".repeat(1000))),
            published_date: Some(" ".into()),
        };
        assert!(hit(result("javascript:alert(1)", "t")).is_none());
        assert!(hit(SearxResult { url: None, title: None, content: None, published_date: None }).is_none());
        let tidy = hit(result("https://example.org/a", "  A\n title ")).unwrap();
        assert_eq!(tidy.title, "A title");
        assert!(tidy.snippet.starts_with("lots of x"));
        assert_eq!(tidy.snippet.chars().count(), MAX_SNIPPET_CHARS);
        assert_eq!(tidy.published_date, None);
        assert_eq!(hit(result("https://example.org/b", "")).unwrap().title, "https://example.org/b");
        let long_title = hit(result("https://example.org/c", &"t".repeat(5000))).unwrap();
        assert_eq!(long_title.title.chars().count(), MAX_TITLE_CHARS);
        assert!(hit(result(&format!("https://example.org/{}", "u".repeat(3000)), "t")).is_none(), "too long a URL");
        let long_date =
            SearxResult { published_date: Some("9".repeat(100_000)), ..result("https://example.org/d", "t") };
        assert_eq!(hit(long_date).unwrap().published_date.unwrap().chars().count(), MAX_DATE_CHARS);
    }
}
