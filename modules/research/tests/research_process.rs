//! The research binary as a process, over HTTP, against a local fixture
//! server standing in for web pages and SearxNG.

mod support;

use std::sync::atomic::Ordering;

use serde_json::json;
use support::fixture::{Fixture, LONG_PATH_CHARS, refusing_address};
use support::process::ModuleProcess;
use test_support::error_kind;

const BINARY: &str = env!("CARGO_BIN_EXE_research");

/// The module configured to search the fixture and to fetch from 127.0.0.1 only.
fn start(fixture: &Fixture) -> ModuleProcess {
    ModuleProcess::start(
        BINARY,
        &[
            ("SEARXNG_URL", &fixture.url("/")),
            ("FETCH_ALLOW_NETWORKS", "127.0.0.1"),
            ("FETCH_TIMEOUT_SECONDS", "2"),
            ("FETCH_MAX_BYTES", "65536"),
            ("FETCH_MAX_REDIRECTS", "3"),
        ],
    )
}

#[tokio::test]
async fn the_manifest_lists_the_four_tools() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let manifest = module.get("/manifest").await;
    assert_eq!(manifest["module_name"], "research");
    let names: Vec<&str> = manifest["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["research.web_search", "research.news_search", "research.fetch_webpage", "research.summarize_text"]
    );
}

#[tokio::test]
async fn web_and_news_search_read_searxng_json() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let web = module.call("web_search", json!({"query": "danube", "max_results": 3})).await;
    assert_eq!(web["success"], true, "{web}");
    let results = web["result"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "the hostile javascript: result is dropped and the count respected");
    assert_eq!(
        results[0],
        json!({
            "title": "danube result 1",
            "url": "https://example.org/general/1",
            "snippet": "Snippet 1 about danube.",
            "published_date": null
        })
    );
    let news = module.call("news_search", json!({"query": "danube"})).await;
    let results = news["result"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 5, "five by default");
    assert_eq!(results[0]["url"], "https://example.org/news/1");
    assert_eq!(results[0]["published_date"], "2024-05-01T08:00:00");
}

#[tokio::test]
async fn search_failures_are_reported_as_unavailable() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let failed = module.call("web_search", json!({"query": "engine failure"})).await;
    assert_eq!(error_kind(&failed), "unavailable");
    assert!(failed["error"].as_str().unwrap().contains("HTTP 500"), "{failed}");

    let unconfigured = ModuleProcess::start(BINARY, &[]);
    let result = unconfigured.call("news_search", json!({"query": "x"})).await;
    assert_eq!(error_kind(&result), "unavailable");
    assert!(result["error"].as_str().unwrap().contains("SEARXNG_URL"), "{result}");
}

#[tokio::test]
async fn an_unreachable_search_service_is_not_named_to_the_caller() {
    let (_held, closed) = refusing_address();
    let base = format!("http://{closed}/internal-searx/");
    let mut module = ModuleProcess::start(BINARY, &[("SEARXNG_URL", &base)]);
    let result = module.call("web_search", json!({"query": "anything"})).await;
    assert_eq!(error_kind(&result), "unavailable", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("the search service is not reachable"), "{result}");
    assert!(
        !error.contains("internal-searx") && !error.contains(&closed.to_string()),
        "no address for the caller: {error}"
    );
    let logged = module.process().wait_for_log("internal-searx", std::time::Duration::from_secs(5));
    assert!(logged, "the operator's log names the address: {:?}", module.process().logs());
}

#[tokio::test]
async fn a_search_answer_that_breaks_off_does_not_name_the_service() {
    let fixture = Fixture::start().await;
    let base = fixture.url("/broken-searx/");
    let mut module = ModuleProcess::start(BINARY, &[("SEARXNG_URL", &base)]);
    let result = module.call("web_search", json!({"query": "anything"})).await;
    assert_eq!(error_kind(&result), "unavailable", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("answer broke off"), "{result}");
    assert!(!error.contains("broken-searx") && !error.contains(&fixture.address.to_string()), "no address: {error}");
    let logged = module.process().wait_for_log("broken-searx", std::time::Duration::from_secs(5));
    assert!(logged, "the operator's log names the address: {:?}", module.process().logs());
}

#[tokio::test]
async fn an_endless_search_answer_stops_at_its_byte_budget() {
    let fixture = Fixture::start().await;
    let base = fixture.url("/endless/");
    let module = ModuleProcess::start(BINARY, &[("SEARXNG_URL", &base), ("SEARCH_MAX_BYTES", "65536")]);
    let result = module.call("web_search", json!({"query": "anything"})).await;
    assert_eq!(error_kind(&result), "execution_failed", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("longer than 65536 bytes (SEARCH_MAX_BYTES)"), "{result}");
}

#[tokio::test]
async fn pages_are_fetched_as_readable_text_with_links() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let result = module.call("fetch_webpage", json!({"url": fixture.url("/redirect")})).await;
    assert_eq!(result["success"], true, "{result}");
    let page = &result["result"];
    assert_eq!(page["url"], fixture.url("/page.html"), "the redirect was followed");
    assert_eq!(page["title"], "Fixture page");
    let text = page["text"].as_str().unwrap();
    assert!(text.contains("Rivers of Europe") && text.contains("The Danube flows through ten countries."), "{text}");
    assert!(!text.contains("script text") && !text.contains("Home"), "{text}");
    assert_eq!(
        page["links"],
        json!([
            {"url": fixture.url("/"), "text": "Home"},
            {"url": fixture.url("/notes.txt"), "text": "the notes"},
            {"url": "https://example.org/x", "text": "elsewhere"}
        ])
    );
    assert_eq!(page["truncated"], false);

    let latin1 = module.call("fetch_webpage", json!({"url": fixture.url("/latin1.html")})).await;
    assert_eq!(latin1["result"]["title"], "Café", "{latin1}");
    assert!(latin1["result"]["text"].as_str().unwrap().contains("Crème brûlée"), "{latin1}");

    let text = module.call("fetch_webpage", json!({"url": fixture.url("/notes.txt")})).await;
    assert_eq!(text["result"]["text"], "Plain notes.\nSecond line.", "{text}");
    assert_eq!(text["result"]["content_type"], "text/plain");
}

#[tokio::test]
async fn max_chars_bounds_the_title_and_links_too() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let max_chars = 5000;
    let result = module
        .call("fetch_webpage", json!({"url": fixture.url("/long-title-and-links"), "max_chars": max_chars}))
        .await;
    assert_eq!(result["success"], true, "{result}");
    let page = &result["result"];
    assert_eq!(page["text"], "Short text.");
    assert_eq!(page["title"], "T".repeat(300), "the title is cut");
    let links = page["links"].as_array().unwrap();
    let link_chars: usize = links
        .iter()
        .map(|l| l["url"].as_str().unwrap().chars().count() + l["text"].as_str().unwrap().chars().count())
        .sum();
    assert!(!links.is_empty() && link_chars <= max_chars, "{link_chars} characters of links");
    assert!(links.iter().all(|l| l["url"].as_str().unwrap().len() <= 2048), "the 3,000-character URL is left out");
    assert_eq!(page["truncated"], true, "{page}");
    assert!(result.to_string().len() < 2 * max_chars + 1000, "the whole answer is bounded: {result}");
}

#[tokio::test]
async fn redirects_to_internal_addresses_are_refused_before_connecting() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    for (path, refused) in [
        ("/to-private", "127.0.0.2 is in the loopback range"),
        ("/to-unspecified", "0.0.0.0 is in the unspecified"),
        ("/to-ipv6-loopback", "::1 is in the loopback range"),
    ] {
        let result = module.call("fetch_webpage", json!({"url": fixture.url(path)})).await;
        assert_eq!(error_kind(&result), "permission_denied", "{path}: {result}");
        assert!(result["error"].as_str().unwrap().contains(refused), "{path}: {result}");
    }
    let to_smtp = module.call("fetch_webpage", json!({"url": fixture.url("/to-smtp")})).await;
    assert_eq!(error_kind(&to_smtp), "permission_denied", "an allowed address, but a bad port: {to_smtp}");
    assert!(to_smtp["error"].as_str().unwrap().contains("port 25 (smtp) is one of the Fetch standard's bad ports"));
    let to_file = module.call("fetch_webpage", json!({"url": fixture.url("/to-file")})).await;
    assert_eq!(error_kind(&to_file), "invalid_arguments", "{to_file}");
    assert_eq!(fixture.secret_hits.load(Ordering::SeqCst), 0, "no refused target was ever requested");
}

#[tokio::test]
async fn errors_quote_a_long_redirect_target_cut() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    for (path, kind, reason) in [
        ("/to-long-private", "permission_denied", "127.0.0.2 is in the loopback range"),
        ("/to-long-missing", "not_found", "answered HTTP 404"),
        ("/to-long-closed", "unavailable", "Connection refused"),
    ] {
        let result = module.call("fetch_webpage", json!({"url": fixture.url(path)})).await;
        assert_eq!(error_kind(&result), kind, "{path}: {result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains(reason), "{path}: the reason is kept: {error}");
        assert!(error.contains("aaaa…"), "{path}: the URL is shown cut: {error}");
        assert!(error.len() < 3000, "{path}: the error does not carry the {LONG_PATH_CHARS}-character URL: {error}");
    }
}

#[tokio::test]
async fn a_redirect_to_an_address_over_64_kb_is_refused_saying_so() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let result = module.call("fetch_webpage", json!({"url": fixture.url("/to-over-64k")})).await;
    assert_eq!(error_kind(&result), "execution_failed", "{result}");
    let error = result["error"].as_str().unwrap();
    let length = fixture.url("/page.html?").len() + 70_000;
    assert!(error.contains(&format!("redirected to an address of {length} bytes, longer than the 65534")), "{error}");
    assert!(error.len() < 3000, "the error does not carry the long address: {error}");
}

#[tokio::test]
async fn without_an_allow_list_the_local_server_is_out_of_reach() {
    let fixture = Fixture::start().await;
    let mut module = ModuleProcess::start(BINARY, &[("RUST_LOG", "warn,guarded_http=info")]);
    let by_address = module.call("fetch_webpage", json!({"url": fixture.url("/secret")})).await;
    assert_eq!(error_kind(&by_address), "permission_denied", "{by_address}");
    let by_name = format!("http://localhost:{}/secret", fixture.address.port());
    let by_name = module.call("fetch_webpage", json!({"url": by_name})).await;
    assert_eq!(error_kind(&by_name), "permission_denied", "{by_name}");
    let error = by_name["error"].as_str().unwrap();
    assert!(error.contains("localhost resolves only to internal or reserved addresses"), "{by_name}");
    assert!(!error.contains("127.0.0.1") && !error.contains("::1"), "the caller is not told the addresses: {error}");
    let logged = module.process().wait_for_log("is in the loopback range", std::time::Duration::from_secs(5));
    assert!(logged, "the operator's log names the address: {:?}", module.process().logs());
    assert_eq!(fixture.secret_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn huge_slow_and_odd_pages_are_bounded() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let huge = module.call("fetch_webpage", json!({"url": fixture.url("/huge"), "max_chars": 100000})).await;
    assert_eq!(huge["success"], true, "{huge}");
    assert_eq!(huge["result"]["truncated"], true);
    let text_len = huge["result"]["text"].as_str().unwrap().len();
    assert!(text_len > 10_000 && text_len <= 65536, "at most FETCH_MAX_BYTES were read: {text_len}");

    for path in ["/slow", "/stall"] {
        let started = std::time::Instant::now();
        let result = module.call("fetch_webpage", json!({"url": fixture.url(path)})).await;
        assert_eq!(error_kind(&result), "timeout", "{path}: {result}");
        assert!(result["error"].as_str().unwrap().contains("within 2 seconds (FETCH_TIMEOUT_SECONDS)"), "{result}");
        assert!(started.elapsed().as_secs() < 10, "{path} gave up after FETCH_TIMEOUT_SECONDS, not the fixture's 30 s");
    }

    let looping = module.call("fetch_webpage", json!({"url": fixture.url("/loop")})).await;
    assert_eq!(error_kind(&looping), "execution_failed");
    assert!(
        looping["error"].as_str().unwrap().contains("after 3 redirects, the most FETCH_MAX_REDIRECTS"),
        "{looping}"
    );
    let image = module.call("fetch_webpage", json!({"url": fixture.url("/image.png")})).await;
    assert!(image["error"].as_str().unwrap().contains("image/png"), "{image}");
    let gzip = module.call("fetch_webpage", json!({"url": fixture.url("/gzip")})).await;
    assert_eq!(error_kind(&gzip), "execution_failed", "compressed bytes are not returned as text: {gzip}");
    assert!(gzip["error"].as_str().unwrap().contains("Content-Encoding `gzip`"), "{gzip}");
    let missing = module.call("fetch_webpage", json!({"url": fixture.url("/missing")})).await;
    assert_eq!(error_kind(&missing), "not_found", "{missing}");
}

#[tokio::test]
async fn pages_beyond_fetch_max_concurrent_pages_wait_their_turn_instead_of_failing() {
    let fixture = Fixture::start().await;
    let module =
        ModuleProcess::start(BINARY, &[("FETCH_ALLOW_NETWORKS", "127.0.0.1"), ("FETCH_MAX_CONCURRENT_PAGES", "2")]);
    let url = fixture.url("/counted");
    let results = futures::future::join_all((0..8).map(|_| module.call("fetch_webpage", json!({"url": url})))).await;
    for result in &results {
        assert_eq!(result["result"]["text"], "Counted.", "{result}");
    }
    let most = fixture.most_counted_at_once.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} pages were fetched at once, more than FETCH_MAX_CONCURRENT_PAGES");
}

#[tokio::test]
async fn a_server_that_never_accepts_is_given_up_on_naming_the_connect_timeout() {
    // A listener with a backlog of one, filled: further connections hang.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let address = listener.local_addr().unwrap();
    let _queued = std::net::TcpStream::connect(address).unwrap();
    let module = ModuleProcess::start(
        BINARY,
        &[
            ("FETCH_ALLOW_NETWORKS", "127.0.0.1"),
            ("FETCH_CONNECT_TIMEOUT_SECONDS", "1"),
            ("FETCH_TIMEOUT_SECONDS", "30"),
        ],
    );
    let started = std::time::Instant::now();
    let result = module.call("fetch_webpage", json!({"url": format!("http://{address}/")})).await;
    assert_eq!(error_kind(&result), "timeout", "{result}");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("within 1 seconds (FETCH_CONNECT_TIMEOUT_SECONDS)"), "{result}");
    assert!(started.elapsed().as_secs() < 20, "given up after the connect timeout, not the fetch timeout");
}

#[tokio::test]
async fn a_slow_search_engine_is_given_up_on_naming_the_search_timeout() {
    let fixture = Fixture::start().await;
    let base = fixture.url("/slow-searx/");
    let module = ModuleProcess::start(BINARY, &[("SEARXNG_URL", &base), ("SEARCH_TIMEOUT_SECONDS", "1")]);
    let result = module.call("web_search", json!({"query": "anything"})).await;
    assert_eq!(error_kind(&result), "timeout", "{result}");
    assert!(result["error"].as_str().unwrap().contains("within 1 seconds (SEARCH_TIMEOUT_SECONDS)"), "{result}");
}

#[tokio::test]
async fn a_body_compressed_as_a_transfer_coding_is_refused_not_read_as_text() {
    // hyper removes the chunked framing and hands on the gzip bytes inside.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut request = [0_u8; 4096];
        let _ = stream.read(&mut request).await.unwrap();
        // gzip of `<p>hello</p>`, in one chunk.
        let gzip: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xb3\x29\xb0\xcb\x48\xcd\xc9\xc9\xb7\xd1\x2f\xb0\x03\x00\x44\xfb\xae\xd2\x0c\x00\x00\x00";
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ntransfer-encoding: gzip, chunked\r\n\r\n";
        let chunk = [format!("{:x}\r\n", gzip.len()).as_bytes(), gzip, b"\r\n0\r\n\r\n"].concat();
        stream.write_all(&[head.as_bytes(), &chunk].concat()).await.unwrap();
    });
    let module = ModuleProcess::start(BINARY, &[("FETCH_ALLOW_NETWORKS", "127.0.0.1")]);
    let result = module.call("fetch_webpage", json!({"url": format!("http://{address}/")})).await;
    assert_eq!(error_kind(&result), "execution_failed", "compressed bytes are not returned as text: {result}");
    assert!(result["error"].as_str().unwrap().contains("Transfer-Encoding `gzip`"), "{result}");
}

#[tokio::test]
async fn summaries_over_http() {
    let fixture = Fixture::start().await;
    let module = start(&fixture);
    let text = "Solar panels turn sunlight into electricity. The price of solar panels fell sharply. \
        My neighbour owns a cat. Cheap solar panels now power millions of homes.";
    let result = module.call("summarize_text", json!({"text": text, "max_sentences": 2})).await;
    assert_eq!(result["success"], true, "{result}");
    let sentences = result["result"]["sentences"].as_array().unwrap();
    assert_eq!(sentences.len(), 2);
    assert!(sentences.iter().all(|s| s.as_str().unwrap().contains("solar")), "{sentences:?}");
    assert_eq!(result["result"]["total_sentences"], 4);
    let empty = module.call("summarize_text", json!({"text": ""})).await;
    assert_eq!(error_kind(&empty), "invalid_arguments");
}
