//! The research module: web and news search through SearxNG, safe web
//! page fetching, and extractive summaries.
//!
//! Its own settings come from the command line or the environment (see
//! `research --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

mod bounded_tree;
mod charset;
mod fetcher;
mod readable;
mod search;
mod settings;
mod skim;
mod summarize;
mod text;
mod turns;
mod webpage;

use std::process::ExitCode;

use guarded_http::AddressPolicy;
use module_sdk::Module;

use crate::fetcher::{FetchLimits, Fetcher};
use crate::search::Searx;
use crate::settings::Settings;
use crate::turns::Turns;
use crate::webpage::{FetchSlots, LayoutSlots, TreeLimit};

/// The research module with its clients built from `settings`.
fn module(settings: &Settings) -> Result<Module, reqwest::Error> {
    let searx = Searx::new(
        settings.searxng_url.0.clone(),
        settings.search_timeout(),
        usize::try_from(settings.search_max_bytes).unwrap_or(usize::MAX),
    )?;
    let limits = FetchLimits {
        total: settings.fetch_timeout(),
        connect: settings.fetch_connect_timeout(),
        max_bytes: usize::try_from(settings.fetch_max_bytes).unwrap_or(usize::MAX),
        max_redirects: settings.fetch_max_redirects,
    };
    let fetcher = Fetcher::new(AddressPolicy::new(settings.fetch_allow_networks.0.clone()), limits)?;
    Ok(Module::new(
        "research",
        "Research tools: search the web and the news, read web pages as text, and summarize long texts.",
    )
    .version(env!("CARGO_PKG_VERSION"))
    .sdk_flags(settings.sdk)
    .state(searx)
    .state(fetcher)
    .state(TreeLimit { max_nodes: usize::try_from(settings.html_max_nodes).unwrap_or(usize::MAX) })
    .state(LayoutSlots::per_cpu())
    .state(FetchSlots(Turns::new(usize::try_from(settings.fetch_max_concurrent_pages).unwrap_or(usize::MAX))))
    .tool(search::web_search)
    .tool(search::news_search)
    .tool(webpage::fetch_webpage)
    .tool(summarize::summarize_text))
}

#[tokio::main]
async fn main() -> ExitCode {
    module_sdk::run_main("research", async {
        let settings = module_sdk::parse_settings::<Settings>();
        let module = module(&settings).map_err(|error| format!("could not set up the HTTP clients: {error}"))?;
        module.serve().await.map_err(|e| e.to_string())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use module_sdk::{ErrorKind, Permission, TestClient};
    use serde_json::json;

    fn client(args: &[&str]) -> TestClient {
        let settings = Settings::try_parse_from(std::iter::once("research").chain(args.iter().copied())).unwrap();
        module(&settings).unwrap().test_client().unwrap()
    }

    #[test]
    fn the_manifest_describes_every_tool_for_guests() {
        let client = client(&[]);
        let manifest = client.manifest();
        let names: Vec<&str> = manifest.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["research.web_search", "research.news_search", "research.fetch_webpage", "research.summarize_text"]
        );
        for tool in &manifest.tools {
            assert_eq!(tool.required_permission, Permission::Guest, "{}", tool.name);
            assert!(tool.annotations.as_ref().unwrap().read_only, "{}", tool.name);
            assert!(
                tool.parameters.iter().all(|p| !p.description.starts_with("The `")),
                "{}: every argument documented",
                tool.name
            );
            let output = tool.output_schema.as_ref().unwrap();
            assert!(output["properties"].as_object().is_some_and(|p| !p.is_empty()), "{}: {output}", tool.name);
        }
    }

    #[tokio::test]
    async fn search_without_searxng_is_unavailable_and_says_what_to_set() {
        let client = client(&[]);
        for tool in ["web_search", "news_search"] {
            let result = client.call(tool, json!({"query": "rust"})).await;
            assert_eq!(result.error_kind, Some(ErrorKind::Unavailable), "{result:?}");
            assert!(result.error.as_deref().unwrap().contains("SEARXNG_URL"), "{result:?}");
        }
    }

    #[tokio::test]
    async fn arguments_out_of_range_are_refused_before_the_handler() {
        let client = client(&["--searxng-url", "http://127.0.0.1:9"]);
        let result = client.call("web_search", json!({"query": "x", "max_results": 50})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::InvalidArguments), "{result:?}");
        let result = client.call("web_search", json!({"query": "   "})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::InvalidArguments), "{result:?}");
        let result = client.call("fetch_webpage", json!({"url": "http://x", "max_chars": 5})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::InvalidArguments), "{result:?}");
    }

    #[tokio::test]
    async fn fetching_internal_addresses_is_denied() {
        let client = client(&[]);
        for url in
            ["http://127.0.0.1/", "http://localhost/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/"]
        {
            let result = client.call("fetch_webpage", json!({"url": url})).await;
            assert_eq!(result.error_kind, Some(ErrorKind::PermissionDenied), "{url}: {result:?}");
        }
    }

    #[tokio::test]
    async fn summaries_come_back_and_empty_text_is_refused() {
        let client = client(&[]);
        let text = "Rust is a language. Rust programs are fast and Rust programs are safe. Cats sleep.";
        let result = client.call("summarize_text", json!({"text": text, "max_sentences": 1})).await;
        assert!(result.success, "{result:?}");
        let sentences = result.result["sentences"].as_array().unwrap();
        assert_eq!(sentences.len(), 1);
        assert!(sentences[0].as_str().unwrap().starts_with("Rust"), "the aside is left out: {sentences:?}");
        let result = client.call("summarize_text", json!({"text": " \n "})).await;
        assert_eq!(result.error_kind, Some(ErrorKind::InvalidArguments), "{result:?}");
    }
}
