//! Hostile use of the real file_manager binary: calls from a great many
//! distinct user ids must not leave memory behind (each user's lock is
//! dropped once no call holds it).
//!
//! Run with `--nocapture` to see the figures.

mod support;

use futures::StreamExt;
use serde_json::json;
use support::process::ModuleProcess;
use test_support::error_kind;

/// Calls at once.
const CONCURRENCY: usize = 16;
/// How much the peak resident memory may grow while 40,000 more distinct
/// users call (their locks, kept, would take about 7 MB).
const GROWTH_BUDGET_BYTES: u64 = 3 * 1024 * 1024;

/// `delete_file` of a file that does not exist, as `count` distinct users
/// starting at `first`: each takes (and must let go of) its user's lock.
async fn delete_as_distinct_users(module: &ModuleProcess, first: usize, count: usize) {
    let client = module.client();
    futures::stream::iter(first..first + count)
        .for_each_concurrent(CONCURRENCY, |user| {
            let client = client.clone();
            async move {
                let arguments = json!({"file_id": "00000000-0000-4000-8000-000000000000"});
                let result = client.call(&format!("hostile-user-{user}"), "delete_file", arguments).await;
                assert_eq!(error_kind(&result), "not_found", "{result}");
            }
        })
        .await;
}

#[tokio::test]
async fn many_distinct_users_leave_no_memory_behind() {
    let root = tempfile::tempdir().unwrap();
    let mut module = ModuleProcess::start(root.path(), &[]);
    delete_as_distinct_users(&module, 0, 5_000).await;
    let warmed = module.peak_rss_bytes();
    delete_as_distinct_users(&module, 5_000, 40_000).await;
    let after = module.peak_rss_bytes();
    println!("peak RSS after 5,000 users: {warmed} bytes; after 40,000 more: {after} bytes");
    assert!(module.is_running());
    assert!(
        after.saturating_sub(warmed) < GROWTH_BUDGET_BYTES,
        "40,000 more users grew the peak RSS from {warmed} to {after} bytes"
    );
}
