//! How many due runs one process fires and delivers per second, with
//! 100,000 tasks in the database, and the memory it uses.
//!
//! `cargo bench -p scheduler --bench firing`; sizes from the environment:
//! `BENCH_TASKS` (tasks in the database, default 100000), `BENCH_DUE` (how
//! many of them are due, default 5000), `BENCH_BATCH` (runs claimed at once,
//! default 256). Deliveries go to a local receiver that answers 204.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use guarded_http::{AddressPolicy, ClientLimits, GuardedClient};
use scheduler::delivery::{RetryPolicy, Webhook};
use scheduler::firing::Firing;
use scheduler::store::{Limits, NewTask, Store, TaskSpec};
use serde_json::json;
use tokio::sync::Notify;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The process's resident memory, from /proc.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

#[tokio::main]
async fn main() {
    let (tasks, due, batch) =
        (setting("BENCH_TASKS", 100_000), setting("BENCH_DUE", 5_000), setting("BENCH_BATCH", 256));
    let due = due.min(tasks);
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_tasks: u64::MAX,
        user_max_tasks: u64::MAX,
        user_max_finished: u64::MAX,
        max_finished: u64::MAX,
        list_max_bytes: u64::MAX,
        min_interval: Duration::from_secs(1),
        max_data_bytes: 16 * 1024,
        max_ahead: Duration::from_secs(86_400 * 3660),
    };
    let store = Arc::new(Store::open(&dir.path().join("bench.db"), limits, Duration::from_secs(5)).unwrap());
    let now = jiff::Timestamp::now().as_millisecond();
    let rows = (0..tasks).map(|n| NewTask {
        spec: TaskSpec {
            user_id: format!("user-{}", n % 1000),
            task_type: "reminder".into(),
            description: format!("reminder {n}"),
            execution_data: json!({"task_type": "reminder", "message": format!("reminder number {n}")}),
            schedule: (n % 2 == 0).then(|| "0 9 * * *".to_owned()),
            timezone: "Europe/Berlin".into(),
            max_runs: None,
            until: None,
        },
        // The due ones a second ago, the rest spread over the next days.
        next_run: if n < due { now - 1_000 } else { now + 86_400_000 + (n as i64) * 1_000 },
    });
    let started = Instant::now();
    store.import(rows, now).unwrap();
    println!("set-up: {tasks} tasks stored in {:.1} s", started.elapsed().as_secs_f64());

    let received = Arc::new(AtomicUsize::new(0));
    let counter = received.clone();
    let app = Router::new().route(
        "/events",
        post(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { axum::http::StatusCode::NO_CONTENT }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let retry = RetryPolicy { max_attempts: 3, base: Duration::from_millis(100), max: Duration::from_secs(1) };
    let timeout = Duration::from_secs(10);
    let webhook = Webhook::new(format!("http://{address}/events"), "bench-secret", retry, timeout).unwrap();
    let limits = ClientLimits { total: timeout, connect: timeout, max_redirects: 0 };
    let client = GuardedClient::new(AddressPolicy::new(Vec::new()), limits, "bench").unwrap();
    let firing = Arc::new(Firing {
        store,
        webhook,
        client,
        api_call_max_bytes: 1024,
        worker: "bench".into(),
        lease: Duration::from_secs(600),
        batch: u32::try_from(batch).unwrap_or(u32::MAX),
        poll: Duration::from_secs(1),
        wake: Arc::new(Notify::new()),
    });
    let rss_before = rss_mib();
    let started = Instant::now();
    let mut fired = 0;
    while fired < due {
        let count = firing.fire_due().await.unwrap();
        assert!(count > 0, "only {fired} of {due} runs were due");
        fired += count;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "fired and delivered {fired} due runs (of {tasks} tasks) in {seconds:.2} s: {:.0} runs/s; receiver got {}",
        fired as f64 / seconds,
        received.load(Ordering::Relaxed)
    );
    println!("resident memory: {rss_before:.1} MiB before firing, {:.1} MiB after", rss_mib());
}
