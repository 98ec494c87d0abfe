//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by
//! `Module::serve`).

use std::time::Duration;

use clap::Parser;
use ipnet::IpNet;
use url::Url;

/// Settings of the research module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the research module: web and news search, safe page fetching, summaries.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// Base URL of a SearxNG instance whose JSON format is enabled
    /// (`search.formats: [html, json]` in its settings.yml). Unset or empty,
    /// the search tools answer `unavailable`.
    #[arg(long, env = "SEARXNG_URL", default_value = "", hide_default_value = true, value_parser = parse_optional_url)]
    pub searxng_url: OptionalUrl,

    /// Seconds a search may take, SearxNG's own fan-out included.
    #[arg(long, env = "SEARCH_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    pub search_timeout_seconds: u64,

    /// Most bytes of a SearxNG answer that are read; a longer answer is an
    /// error naming this setting.
    #[arg(long, env = "SEARCH_MAX_BYTES", default_value_t = 2 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(16 * 1024..=64 * 1024 * 1024))]
    pub search_max_bytes: u64,

    /// Seconds a page fetch may take in total, redirects and body included.
    #[arg(long, env = "FETCH_TIMEOUT_SECONDS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=55))]
    pub fetch_timeout_seconds: u64,

    /// Seconds a TCP (and TLS) connection to a page's server may take.
    #[arg(long, env = "FETCH_CONNECT_TIMEOUT_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=55))]
    pub fetch_connect_timeout_seconds: u64,

    /// Most bytes of a page body that are read; the rest is cut off and the
    /// result marked `truncated`.
    #[arg(long, env = "FETCH_MAX_BYTES", default_value_t = 2 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024))]
    pub fetch_max_bytes: u64,

    /// Most pages fetched at once: a call holds its turn from before its
    /// request until its page is turned into text, so page bodies in memory
    /// stay within this many times `FETCH_MAX_BYTES`. Further calls wait; one
    /// that gets no turn while a whole fetch still fits in its deadline
    /// fails with `timeout` naming this setting.
    #[arg(long, env = "FETCH_MAX_CONCURRENT_PAGES", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub fetch_max_concurrent_pages: u64,

    /// Most redirects followed for one fetch.
    #[arg(long, env = "FETCH_MAX_REDIRECTS", default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..=20))]
    pub fetch_max_redirects: u8,

    /// Most elements and comments a page's document tree may have; a page
    /// that makes more (HTML rebuilds unclosed formatting elements in every
    /// later paragraph, so a small page can make millions) is read as text
    /// without layout instead.
    #[arg(long, env = "HTML_MAX_NODES", default_value_t = 25_000, value_parser = clap::value_parser!(u64).range(1000..=10_000_000))]
    pub html_max_nodes: u64,

    /// Networks that may be fetched although they are loopback, private,
    /// link-local or otherwise internal: comma-separated CIDRs or single
    /// addresses, e.g. `127.0.0.1` or `10.20.0.0/16`. Empty (the default)
    /// allows public addresses only.
    #[arg(long, env = "FETCH_ALLOW_NETWORKS", default_value = "", hide_default_value = true, value_parser = parse_networks)]
    pub fetch_allow_networks: Networks,
}

/// A URL that may be left empty (unset and empty mean the same).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptionalUrl(pub Option<Url>);

/// A list of networks, written comma-separated (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(pub Vec<IpNet>);

impl Settings {
    /// The total time budget of one fetch.
    pub fn fetch_timeout(&self) -> Duration {
        Duration::from_secs(self.fetch_timeout_seconds)
    }

    /// The time budget of one connection attempt.
    pub fn fetch_connect_timeout(&self) -> Duration {
        Duration::from_secs(self.fetch_connect_timeout_seconds)
    }

    /// The time budget of one search.
    pub fn search_timeout(&self) -> Duration {
        Duration::from_secs(self.search_timeout_seconds)
    }
}

/// An absolute `http` or `https` URL, or nothing.
fn parse_optional_url(text: &str) -> Result<OptionalUrl, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(OptionalUrl(None));
    }
    let url = Url::parse(text).map_err(|e| format!("not a URL ({e}); expected e.g. http://searxng:8080"))?;
    match url.scheme() {
        "http" | "https" => Ok(OptionalUrl(Some(url))),
        other => Err(format!("scheme `{other}` is not supported; use http or https")),
    }
}

/// Comma-separated CIDR networks or single addresses (a network of one).
fn parse_networks(text: &str) -> Result<Networks, String> {
    guarded_http::parse_networks(text).map(Networks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_allow_public_addresses_only() {
        let settings = Settings::try_parse_from(["research"]).unwrap();
        assert_eq!(settings.searxng_url, OptionalUrl(None));
        assert_eq!(settings.fetch_allow_networks, Networks(Vec::new()));
        let empty = Settings::try_parse_from(["research", "--searxng-url", " ", "--fetch-allow-networks", ""]).unwrap();
        assert_eq!((empty.searxng_url, empty.fetch_allow_networks), (OptionalUrl(None), Networks(Vec::new())));
        assert_eq!(settings.fetch_max_redirects, 5);
    }

    #[test]
    fn networks_and_urls_are_parsed_and_bad_ones_refused() {
        let settings = Settings::try_parse_from([
            "research",
            "--fetch-allow-networks",
            "127.0.0.1, 10.0.0.0/8,::1",
            "--searxng-url",
            "http://search.internal:8080/searx/",
        ])
        .unwrap();
        let networks: Vec<String> = settings.fetch_allow_networks.0.iter().map(ToString::to_string).collect();
        assert_eq!(networks, ["127.0.0.1/32", "10.0.0.0/8", "::1/128"]);
        assert_eq!(settings.searxng_url.0.unwrap().path(), "/searx/");
        assert!(Settings::try_parse_from(["research", "--fetch-allow-networks", "example.com"]).is_err());
        assert!(Settings::try_parse_from(["research", "--searxng-url", "ftp://x"]).is_err());
        assert!(Settings::try_parse_from(["research", "--fetch-max-bytes", "10"]).is_err());
    }
}
