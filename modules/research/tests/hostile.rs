//! Hostile pages against the real research binary: each costs a bounded
//! amount of memory and time, the process stays up, and the page is read
//! as text without layout (the budget is named in the module's log).
//!
//! Run with `--nocapture` to see each page's peak RSS and time.

mod support;

use std::time::Instant;

use serde_json::json;
use support::fixture::Fixture;
use support::process::ModuleProcess;

const BINARY: &str = env!("CARGO_BIN_EXE_research");
/// Peak resident memory a hostile page may cost the whole process.
const RSS_BUDGET_BYTES: u64 = 128 * 1024 * 1024;

/// Fetches `path` from the fixture in a fresh module and checks the budget;
/// the page is read as text only, for `reason`, unless that is `None`.
async fn fetch_hostile(fixture: &Fixture, path: &str, reason: Option<&str>) {
    let mut module = ModuleProcess::start(BINARY, &[("FETCH_ALLOW_NETWORKS", "127.0.0.1")]);
    let started = Instant::now();
    let result = module.call("fetch_webpage", json!({"url": fixture.url(path)})).await;
    let elapsed = started.elapsed();
    let process = module.process();
    let peak = process.peak_rss_bytes();
    println!("{path}: answered in {elapsed:?}, peak RSS {} MiB", peak / (1024 * 1024));
    assert_eq!(result["success"], true, "{path}: {result}");
    assert!(!result["result"]["text"].as_str().unwrap().is_empty(), "{path}: the text is still read: {result}");
    assert!(process.is_running(), "{path}: the module is still up");
    assert!(peak < RSS_BUDGET_BYTES, "{path}: peak RSS {peak} bytes is over the {RSS_BUDGET_BYTES} budget");
    match reason {
        Some(reason) => assert!(
            process.wait_for_log(reason, std::time::Duration::from_secs(5)),
            "{path}: the log names why the page was read as text: {:?}",
            process.logs()
        ),
        None => assert!(!process.logs().iter().any(|line| line.contains("text only")), "{path}: {:?}", process.logs()),
    }
}

#[tokio::test]
async fn rebuilt_formatting_elements_stop_at_the_node_budget() {
    let fixture = Fixture::start().await;
    for repetitions in [1_000, 4_000] {
        fetch_hostile(&fixture, &format!("/formatting/{repetitions}"), Some("HTML_MAX_NODES (25000)")).await;
    }
}

#[tokio::test]
async fn deeply_nested_divs_are_read_without_a_tree() {
    let fixture = Fixture::start().await;
    fetch_hostile(&fixture, "/nested-divs/200000", Some("nest deeper than 512")).await;
}

#[tokio::test]
async fn unclosed_tables_are_read_without_a_tree() {
    let fixture = Fixture::start().await;
    fetch_hostile(&fixture, "/unclosed-tables/20000", Some("nest deeper than 512")).await;
}

#[tokio::test]
async fn deeply_nested_tables_around_much_text_are_read_without_layout() {
    let fixture = Fixture::start().await;
    // 126 deep passes the source and tree depth checks and the node budget;
    // html2text took 12 s to lay it out, holding a layout slot.
    fetch_hostile(&fixture, "/tables-around-text/126", Some("tables nest deeper than 8")).await;
}

#[tokio::test]
async fn a_large_page_within_the_node_budget_is_laid_out_within_the_memory_budget() {
    let fixture = Fixture::start().await;
    // 24,000 elements: about the largest ordinary page the default budget lays out.
    fetch_hostile(&fixture, "/paragraphs/24000", None).await;
}

#[tokio::test]
async fn pages_are_laid_out_one_per_cpu_so_concurrent_calls_do_not_multiply_the_memory() {
    let fixture = Fixture::start().await;
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut module = ModuleProcess::start(BINARY, &[("FETCH_ALLOW_NETWORKS", "127.0.0.1")]);
    let url = fixture.url("/paragraphs/24000");
    // Each of these pages alone costs most of RSS_BUDGET_BYTES (about 460
    // MiB for eight at once on two CPUs when they were all laid out together).
    let calls = (0..6 * cpus).map(|_| module.call("fetch_webpage", json!({"url": url, "max_chars": 200})));
    let results = futures::future::join_all(calls).await;
    for result in &results {
        assert_eq!(result["success"], true, "{result}");
    }
    let peak = module.process().peak_rss_bytes();
    // One page per CPU, plus room for the allocator's per-thread arenas.
    let budget = RSS_BUDGET_BYTES * u64::try_from(cpus).unwrap() + 64 * 1024 * 1024;
    println!("{} calls on {cpus} CPUs: peak RSS {} MiB", results.len(), peak / (1024 * 1024));
    assert!(peak < budget, "peak RSS {peak} bytes is over {budget}: pages were laid out more than one per CPU at once");
}
