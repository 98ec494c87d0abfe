//! The scheduler binary as a process, delivering to a webhook receiver in
//! the test: signed one-time delivery, recurring runs, cancel, isolation
//! between users, a receiver that is down for a while, SIGKILL with runs
//! due during the downtime, the address guard of `api_call` tasks, a hanging
//! `api_call` that holds back no other run, a delivery that outlasts its
//! lease sent once and not taken over by a second process (nor by one
//! started with a shorter lease), a run in flight
//! at a SIGTERM sent at once by the restarted process, rows that no longer
//! parse shown failed while the other tasks fire, a hand-written schedule
//! that never runs failed after its run, naming the limit, a restart after the
//! clock went back firing what a clock a year ahead put off, and the
//! warning that nothing fires without a delivery URL, the error naming
//! a database that cannot be created, and a scheduling or cancel call
//! answered timeout while another process held the database's lock that
//! is not written later, and `list_tasks` answered at once while the firing
//! loop waits for that lock, and `list_tasks` paging by every cursor it gives
//! through ids an older database holds that are far longer than a cursor.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use test_support::{ModuleClient, Process, error_kind};

const SECRET: &str = "test-signing-key";

/// One request the receiver accepted.
#[derive(Debug, Clone)]
struct Delivery {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Delivery {
    fn event(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// A webhook receiver on a port of its own; it answers 503 while `down`.
/// Its `/slow` never answers (an `api_call` target or a webhook that
/// hangs); `slow_hits` counts the requests that reached it.
#[derive(Clone, Default)]
struct Receiver {
    accepted: Arc<Mutex<Vec<Delivery>>>,
    refused: Arc<Mutex<u32>>,
    down: Arc<AtomicBool>,
    slow_hits: Arc<AtomicU32>,
}

impl Receiver {
    async fn start() -> (Self, SocketAddr) {
        let receiver = Self::default();
        let app = Router::new()
            .route("/events", post(accept))
            .route("/api", get(|| async { "api says hi" }))
            .route("/slow", get(hang).post(hang))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, address)
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.accepted.lock().unwrap().clone()
    }

    /// Waits until `count` deliveries arrived (panics after `within`).
    async fn wait_for(&self, count: usize, within: Duration) -> Vec<Delivery> {
        let deadline = Instant::now() + within;
        loop {
            let deliveries = self.deliveries();
            if deliveries.len() >= count {
                return deliveries;
            }
            assert!(Instant::now() < deadline, "{} of {count} deliveries after {within:?}", deliveries.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn accept(State(receiver): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if receiver.down.load(Ordering::SeqCst) {
        *receiver.refused.lock().unwrap() += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    receiver.accepted.lock().unwrap().push(Delivery {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8(body.to_vec()).unwrap(),
    });
    StatusCode::NO_CONTENT
}

async fn hang(State(receiver): State<Receiver>) -> &'static str {
    receiver.slow_hits.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    "too late"
}

/// Starts the module on `db`, delivering to `receiver` (when given), with short timings.
fn start(db: &Path, receiver: Option<SocketAddr>, env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scheduler"));
    command
        .env_clear()
        .env("SCHEDULER_DB", db)
        .env("RUST_LOG", "error")
        .env("DELIVERY_SECRET", SECRET)
        .env("DELIVERY_RETRY_BASE_MS", "100")
        .env("DELIVERY_RETRY_MAX_MS", "400")
        .env("DELIVERY_MAX_ATTEMPTS", "50")
        .env("DELIVERY_TIMEOUT_SECONDS", "5")
        .env("SCHEDULER_MIN_INTERVAL_SECONDS", "1")
        .env("SCHEDULER_POLL_MS", "200")
        .envs(env.iter().copied());
    if let Some(address) = receiver {
        command.env("DELIVERY_URL", format!("http://{address}/events"));
    }
    Process::start(command)
}

async fn call(client: &ModuleClient, user: &str, tool: &str, arguments: Value) -> Value {
    client.call(&format!("scheduler.{tool}"), arguments, Some(user)).await
}

/// The result of a call that must succeed.
async fn ok(client: &ModuleClient, user: &str, tool: &str, arguments: Value) -> Value {
    client.call_ok(&format!("scheduler.{tool}"), arguments, Some(user)).await
}

/// The expected `webhook-signature` of a delivery, computed here independently.
fn expected_signature(delivery: &Delivery) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{}.{}.{}", delivery.id, delivery.timestamp, delivery.body).as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

#[tokio::test]
async fn a_two_second_reminder_is_delivered_once_with_a_valid_signature() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    let module = start(&dir.path().join("s.db"), Some(address), &[]);
    let client = module.client();
    let added = ok(&client, "alice", "add_reminder", json!({"when": {"delay": "2s"}, "message": "call mom"})).await;
    let task_id = added["task_id"].as_str().unwrap().to_owned();
    assert!(added["next_run"].as_str().unwrap().ends_with("+00:00"), "{added}");
    let started = Instant::now();
    let deliveries = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert!(started.elapsed() >= Duration::from_millis(1500), "not before it was due: {:?}", started.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deliveries = if receiver.deliveries().len() == 1 { deliveries } else { receiver.deliveries() };
    assert_eq!(deliveries.len(), 1, "delivered exactly once: {deliveries:?}");
    let delivery = &deliveries[0];
    assert_eq!(delivery.signature, expected_signature(delivery));
    assert!(delivery.id.starts_with(&format!("{task_id}:")), "{}", delivery.id);
    let event = delivery.event();
    assert_eq!(event["task_id"], task_id.as_str());
    assert_eq!(event["user_id"], "alice");
    assert_eq!(event["task_type"], "reminder");
    assert_eq!(event["execution_data"], json!({"task_type": "reminder", "message": "call mom"}));
    assert_eq!(event["attempt"], 1);
    assert!(event["scheduled_at"].is_string() && event["fired_at"].is_string(), "{event}");
    let listed = ok(&client, "alice", "list_tasks", json!({})).await;
    let task = &listed["tasks"][0];
    assert_eq!((task["status"].as_str(), task["runs"].as_u64()), (Some("done"), Some(1)), "{task}");
    assert_eq!(task["last_outcome"], "delivered");
}

#[tokio::test]
async fn calls_answered_timeout_while_another_process_held_the_lock_change_nothing_later() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    // Statements wait for a lock longer than the tools' 30 s timeout.
    let module = start(&db, None, &[("SCHEDULER_BUSY_TIMEOUT_MS", "60000")]);
    let client = module.client();
    let kept = ok(&client, "u", "add_reminder", json!({"when": {"delay": "1h"}, "message": "before the lock"})).await;
    let kept_id = kept["task_id"].as_str().unwrap();
    // Another process holds the write lock until both calls are answered.
    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (added, cancelled) = tokio::join!(
        call(&client, "u", "add_reminder", json!({"when": {"delay": "1h"}, "message": "answered timeout"})),
        call(&client, "u", "cancel_task", json!({"task_id": kept_id})),
    );
    for late in [&added, &cancelled] {
        assert_eq!(error_kind(late), "timeout", "{late}");
    }
    other.execute_batch("ROLLBACK").unwrap();
    // Writes run one at a time: this one starts after the given-up ones ended.
    ok(&client, "u", "add_reminder", json!({"when": {"delay": "1h"}, "message": "after the lock"})).await;
    let listed = ok(&client, "u", "list_tasks", json!({})).await;
    let tasks: Vec<(&str, &str)> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|task| (task["description"].as_str().unwrap(), task["status"].as_str().unwrap()))
        .collect();
    assert_eq!(tasks, [("before the lock", "active"), ("after the lock", "active")], "{listed}");
}

#[tokio::test]
async fn list_tasks_answers_while_the_firing_loop_waits_for_another_processs_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (_receiver, address) = Receiver::start().await;
    // The loop's writes wait for a lock longer than the tools' 30 s timeout.
    let module = start(&db, Some(address), &[("SCHEDULER_BUSY_TIMEOUT_MS", "60000")]);
    let client = module.client();
    ok(&client, "u", "add_reminder", json!({"when": {"delay": "1h"}, "message": "later"})).await;
    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The loop looks every 200 ms: its claim now waits for the lock.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let listed = call(&client, "u", "list_tasks", json!({})).await;
    let waited = started.elapsed();
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(1), "{listed}");
    assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
}

#[tokio::test]
async fn list_tasks_pages_with_every_cursor_it_gives_whatever_ids_an_old_database_holds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let module = start(&db, None, &[]);
    let client = module.client();
    let added = ok(&client, "u", "add_reminder", json!({"when": {"delay": "1h"}, "message": "new"})).await;
    // Rows an older version or a hand edit left: ids far over a cursor's
    // length, created in one millisecond, two sharing their first 300 characters.
    let hand = rusqlite::Connection::open(&db).unwrap();
    hand.busy_timeout(Duration::from_secs(5)).unwrap();
    let long = "x".repeat(300);
    let old_ids = [format!("{long}b"), format!("{long}a"), "y".repeat(500)];
    for id in &old_ids {
        hand.execute(
            "INSERT INTO tasks (id, user_id, task_type, description, execution_data, timezone, status, runs,
                                created_at, finished_at)
             VALUES (?1, 'u', 'reminder', 'old', '{\"task_type\": \"reminder\", \"message\": \"old\"}', 'UTC',
                     'done', 1, 5, 5)",
            [id],
        )
        .unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let mut arguments = json!({"limit": 1});
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = ok(&client, "u", "list_tasks", arguments).await;
        seen.extend(page["tasks"].as_array().unwrap().iter().map(|task| task["task_id"].as_str().unwrap().to_owned()));
        let Some(next) = page["next_cursor"].as_str() else { break };
        cursor = Some(next.to_owned());
    }
    let mut expected = vec![added["task_id"].as_str().unwrap().to_owned()];
    expected.extend(["y".repeat(500), format!("{long}b"), format!("{long}a")]);
    let mut sorted_seen = seen.clone();
    sorted_seen.sort();
    expected.sort();
    assert_eq!(sorted_seen, expected, "each task once, none left out");
}

#[tokio::test]
async fn a_task_whose_stored_row_no_longer_parses_fails_visibly_and_every_other_task_fires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let module = start(&db, Some(address), &[]);
    let client = module.client();
    // Rows as a hand edit or an older version may leave them, due at once:
    // a count that is text (this stopped every claim), a time zone that is gone.
    let hand = rusqlite::Connection::open(&db).unwrap();
    hand.busy_timeout(Duration::from_secs(5)).unwrap();
    for (user, edit) in [("bob", "runs = 'many'"), ("carol", "timezone = 'Mars/Olympus_Mons'")] {
        let added = ok(&client, user, "add_reminder", json!({"when": {"delay": "1h"}, "message": "later"})).await;
        let id = added["task_id"].as_str().unwrap();
        hand.execute(&format!("UPDATE tasks SET {edit}, next_run = 0 WHERE id = ?1"), [id]).unwrap();
    }
    ok(&client, "alice", "add_reminder", json!({"when": {"delay": "1s"}, "message": "call mom"})).await;
    let deliveries = receiver.wait_for(1, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.deliveries().len(), 1, "{deliveries:?}");
    assert_eq!(deliveries[0].event()["user_id"], "alice");
    for (user, named) in [("bob", "runs is the text \"many\""), ("carol", "timezone:")] {
        let listed = ok(&client, user, "list_tasks", json!({})).await;
        let task = &listed["tasks"][0];
        assert_eq!(task["status"], "failed", "{task}");
        let outcome = task["last_outcome"].as_str().unwrap_or_default();
        assert!(
            outcome.starts_with("failed: the stored task cannot be read (") && outcome.contains(named),
            "{outcome}"
        );
    }
    let rows: i64 = hand.query_row("SELECT COUNT(*) FROM tasks", [], |row| row.get(0)).unwrap();
    assert_eq!(rows, 3, "the unreadable rows are kept");
}

#[tokio::test]
async fn a_hand_written_schedule_that_never_runs_fires_its_run_then_fails_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let module = start(&db, Some(address), &[]);
    let client = module.client();
    // A row written by hand, due at once, whose schedule (the weekday
    // nearest a 31 February) the tools refuse: croner would search for its
    // next run up to the year 5000.
    let id = "00000000-0000-4000-8000-000000000031";
    let hand = rusqlite::Connection::open(&db).unwrap();
    hand.busy_timeout(Duration::from_secs(5)).unwrap();
    hand.execute(
        "INSERT INTO tasks (id, user_id, task_type, description, execution_data, schedule, timezone, status,
                            next_run, runs, created_at)
         VALUES (?1, 'u', 'reminder', 'never', '{\"task_type\": \"reminder\", \"message\": \"never\"}',
                 '0 0 31W 2 *', 'UTC', 'active', 0, 0, 0)",
        [id],
    )
    .unwrap();
    let deliveries = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(deliveries[0].event()["task_id"], id, "its run is sent");
    let deadline = Instant::now() + Duration::from_secs(10);
    let task = loop {
        let listed = ok(&client, "u", "list_tasks", json!({})).await;
        let task = listed["tasks"][0].clone();
        if task["status"] != "active" {
            break task;
        }
        assert!(Instant::now() < deadline, "still active: {task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((task["status"].as_str(), task["runs"].as_u64()), (Some("failed"), Some(1)), "{task}");
    let outcome = task["last_outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.starts_with(
            "failed: the schedule \"0 0 31W 2 *\" has no run in the 3660 days after this one, the limit \
             (SCHEDULER_MAX_AHEAD_DAYS)"
        ) && outcome.ends_with("; this run: delivered"),
        "{outcome}"
    );
    assert_eq!(task["next_run"], Value::Null, "{task}");
}

// Multi-threaded: the receiver takes deliveries while this thread blocks in `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_started_after_the_clock_went_back_fires_what_a_clock_a_year_ahead_put_off() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let lease = [("SCHEDULER_LEASE_SECONDS", "2")];
    let mut first = start(&db, None, &lease);
    let client = first.client();
    let recurring = ok(
        &client,
        "u",
        "add_recurring_task",
        json!({"schedule": "every 1s", "description": "tick", "execution_data": {"task_type": "reminder", "message": "tick"}}),
    )
    .await;
    let held = ok(&client, "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "held"})).await;
    first.kill();
    // As a clock a year ahead leaves them: the next run it computed, and
    // the claim of a process that died then.
    let year_ahead = jiff::Timestamp::now().as_millisecond() + 365 * 86_400_000;
    let hand = rusqlite::Connection::open(&db).unwrap();
    let ids = [recurring["task_id"].as_str().unwrap(), held["task_id"].as_str().unwrap()];
    hand.execute("UPDATE tasks SET next_run = ?1 WHERE id = ?2", (year_ahead, ids[0])).unwrap();
    hand.execute("UPDATE tasks SET claimed_by = 'gone', lease_until = ?1 WHERE id = ?2", (year_ahead, ids[1])).unwrap();
    let _second = start(&db, Some(address), &lease);
    let deadline = Instant::now() + Duration::from_secs(10);
    while ids.iter().any(|id| receiver.deliveries().iter().all(|d| d.event()["task_id"] != *id)) {
        assert!(Instant::now() < deadline, "not both delivered: {:?}", receiver.deliveries());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_recurring_task_fires_repeatedly_until_cancelled_and_only_its_owner_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    let module = start(&dir.path().join("s.db"), Some(address), &[]);
    let client = module.client();
    let added = ok(
        &client,
        "alice",
        "add_recurring_task",
        json!({
            "schedule": "every 1s",
            "timezone": "Europe/Berlin",
            "description": "stretch",
            "execution_data": {"task_type": "agent_task", "prompt": "remind me to stretch"}
        }),
    )
    .await;
    assert_eq!(added["schedule"], "*/1 * * * * *");
    assert_eq!(added["next_runs"].as_array().unwrap().len(), 3);
    let task_id = added["task_id"].as_str().unwrap().to_owned();
    let deliveries = receiver.wait_for(3, Duration::from_secs(10)).await;
    let mut ids: Vec<&str> = deliveries.iter().map(|d| d.id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), deliveries.len(), "every run has its own idempotency key");
    assert!(deliveries.iter().all(|d| d.event()["execution_data"]["prompt"] == "remind me to stretch"));

    let bob_list = ok(&client, "bob", "list_tasks", json!({})).await;
    assert_eq!(bob_list["tasks"], json!([]));
    let bob_cancel = call(&client, "bob", "cancel_task", json!({"task_id": task_id})).await;
    assert_eq!(error_kind(&bob_cancel), "not_found");
    let without_user = client.call("scheduler.list_tasks", json!({}), None).await;
    assert_eq!(error_kind(&without_user), "permission_denied");

    let cancelled = ok(&client, "alice", "cancel_task", json!({"task_id": task_id})).await;
    assert_eq!(cancelled["status"], "cancelled");
    // A run already in flight when the cancel came may still land; nothing after it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let settled = receiver.deliveries().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(receiver.deliveries().len(), settled, "cancel stopped it");
    let active = ok(&client, "alice", "list_tasks", json!({"status": "active"})).await;
    assert_eq!(active["tasks"], json!([]));
}

#[tokio::test]
async fn a_receiver_that_is_down_for_a_while_gets_the_event_when_it_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    receiver.down.store(true, Ordering::SeqCst);
    let module = start(&dir.path().join("s.db"), Some(address), &[]);
    let client = module.client();
    ok(&client, "alice", "add_reminder", json!({"when": {"delay": "1s"}, "message": "water the plants"})).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(*receiver.refused.lock().unwrap() >= 2, "retried while down");
    assert!(receiver.deliveries().is_empty());
    receiver.down.store(false, Ordering::SeqCst);
    let deliveries = receiver.wait_for(1, Duration::from_secs(5)).await;
    let event = deliveries[0].event();
    assert!(event["attempt"].as_u64().unwrap() > 1, "{event}");
    assert_eq!(deliveries[0].signature, expected_signature(&deliveries[0]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.deliveries().len(), 1);
}

// Multi-threaded: the webhook receiver keeps taking deliveries on a worker
// while this thread blocks in `start`, which the restarted scheduler
// delivers before it says it listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_every_run_due_during_the_downtime_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let lease = [("SCHEDULER_LEASE_SECONDS", "2")];
    let mut first = start(&db, Some(address), &lease);
    let client = first.client();
    // One run is claimed and in retries (the receiver is down) when the process dies.
    receiver.down.store(true, Ordering::SeqCst);
    let mut reminders = Vec::new();
    let claimed = ok(&client, "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "in flight"})).await;
    reminders.push(claimed["task_id"].as_str().unwrap().to_owned());
    let deadline = Instant::now() + Duration::from_secs(5);
    while *receiver.refused.lock().unwrap() == 0 {
        assert!(Instant::now() < deadline, "the first run was never attempted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for n in 0..5 {
        let added = ok(
            &client,
            "u",
            "add_reminder",
            json!({"when": {"delay": format!("{}s", 2 + n % 2)}, "message": format!("reminder {n}")}),
        )
        .await;
        reminders.push(added["task_id"].as_str().unwrap().to_owned());
    }
    let recurring = ok(
        &client,
        "u",
        "add_recurring_task",
        json!({"schedule": "every 1s", "description": "tick", "execution_data": {"task_type": "reminder", "message": "tick"}}),
    )
    .await;
    let recurring_id = recurring["task_id"].as_str().unwrap().to_owned();
    first.kill();
    receiver.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restarted_at = jiff::Timestamp::now();

    let _second = start(&db, Some(address), &lease);
    let deliveries = receiver.wait_for(reminders.len() + 1, Duration::from_secs(15)).await;
    for id in &reminders {
        let count = deliveries.iter().filter(|d| d.event()["task_id"] == id.as_str()).count();
        assert_eq!(count, 1, "reminder {id} delivered once: {deliveries:?}");
    }
    // The recurring task missed about five runs while the module was down: they fire as one.
    let missed = deliveries
        .iter()
        .map(Delivery::event)
        .filter(|e| e["task_id"] == recurring_id.as_str())
        .filter(|e| e["scheduled_at"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap() < restarted_at)
        .count();
    assert_eq!(missed, 1, "missed runs collapse into one");
}

#[tokio::test]
async fn without_a_delivery_url_it_warns_that_nothing_fires_over_http_and_on_stderr_under_stdio() {
    const WARNING: &str = "DELIVERY_URL is not set";
    let dir = tempfile::tempdir().unwrap();
    let http = start(&dir.path().join("http.db"), None, &[("RUST_LOG", "warn")]);
    assert!(http.wait_for_log(WARNING, Duration::from_secs(5)), "{:?}", http.logs());

    // Under `--stdio` with stdin closed, it starts, fails to read an
    // `initialize`, and exits; stdout is the protocol's, logs go to stderr.
    let stdio = tokio::process::Command::new(env!("CARGO_BIN_EXE_scheduler"))
        .arg("--stdio")
        .env_clear()
        .env("SCHEDULER_DB", dir.path().join("stdio.db"))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), stdio).await.expect("it exits").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(WARNING), "{stderr}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains(WARNING));
}

#[test]
fn a_database_that_cannot_be_created_is_named_by_its_absolute_path_and_setting() {
    // The default `./data/scheduler.db`, from a working directory where
    // `data` is a file (as root, a read-only directory would not stop it).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), "").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_scheduler"));
    command.current_dir(dir.path()).env_clear();
    let stderr = Process::start_failing(command, 1);
    let absolute = dir.path().join("data/scheduler.db");
    assert!(stderr.contains(&format!("cannot use the database {}", absolute.display())), "{stderr}");
    assert!(stderr.contains("set SCHEDULER_DB (or --scheduler-db) to an absolute path"), "{stderr}");
}

#[tokio::test]
async fn an_api_call_to_a_loopback_address_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    let arguments = json!({
        "schedule": "every 1s",
        "description": "ping",
        "max_runs": 1,
        "execution_data": {"task_type": "api_call", "url": format!("http://{address}/api"), "method": "GET"}
    });
    let guarded = start(&dir.path().join("a.db"), Some(address), &[]);
    let refused = call(&guarded.client(), "u", "add_recurring_task", arguments.clone()).await;
    assert_eq!(error_kind(&refused), "permission_denied");
    assert!(refused["error"].as_str().unwrap().contains("loopback"), "{refused}");
    let localhost = call(
        &guarded.client(),
        "u",
        "add_recurring_task",
        json!({"schedule": "every 1s", "description": "ping",
               "execution_data": {"task_type": "api_call", "url": format!("http://localhost:{}/api", address.port())}}),
    )
    .await;
    assert_eq!(error_kind(&localhost), "permission_denied", "names are resolved and checked too");

    let allowed = start(&dir.path().join("b.db"), Some(address), &[("FETCH_ALLOW_NETWORKS", "127.0.0.1")]);
    ok(&allowed.client(), "u", "add_recurring_task", arguments).await;
    let deliveries = receiver.wait_for(1, Duration::from_secs(10)).await;
    let result = &deliveries[0].event()["api_call_result"];
    assert_eq!(result["status"], 200, "{result}");
    assert_eq!(result["body"], "api says hi");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.deliveries().len(), 1, "max_runs 1");
}

#[tokio::test]
async fn a_hanging_api_call_does_not_hold_back_another_users_reminder() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    // The api_call hangs for 60 s: the reminder, due a second after it
    // started hanging, has a minute to overtake it, and fails the wait
    // below if it is queued behind it.
    let env = [("FETCH_ALLOW_NETWORKS", "127.0.0.1"), ("DELIVERY_TIMEOUT_SECONDS", "60")];
    let module = start(&dir.path().join("s.db"), Some(address), &env);
    let client = module.client();
    let slow = json!({
        "schedule": "every 1s",
        "description": "tarpit",
        "max_runs": 1,
        "execution_data": {"task_type": "api_call", "url": format!("http://{address}/slow")}
    });
    ok(&client, "hostile", "add_recurring_task", slow).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.slow_hits.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the api_call never reached /slow");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ok(&client, "victim", "add_reminder", json!({"when": {"delay": "1s"}, "message": "on time"})).await;
    let deliveries = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(deliveries[0].event()["user_id"], "victim", "the reminder is not queued behind the api_call");
}

#[tokio::test]
async fn a_delivery_that_outlasts_the_lease_is_not_sent_again_by_the_same_process() {
    let dir = tempfile::tempdir().unwrap();
    let (receiver, address) = Receiver::start().await;
    let mut module = start(
        &dir.path().join("s.db"),
        None,
        &[
            ("DELIVERY_URL", &format!("http://{address}/slow")),
            ("SCHEDULER_LEASE_SECONDS", "1"),
            ("DELIVERY_TIMEOUT_SECONDS", "4"),
            ("DELIVERY_MAX_ATTEMPTS", "1"),
        ],
    );
    ok(&module.client(), "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "once"})).await;
    // The webhook hangs for four leases; the process keeps its claim, and
    // sends the run once.
    tokio::time::sleep(Duration::from_secs(5)).await;
    module.kill();
    assert_eq!(receiver.slow_hits.load(Ordering::SeqCst), 1);
}

// Multi-threaded: the receiver keeps answering while this thread blocks
// in `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_delivery_outlasts_the_lease_is_not_taken_over_while_its_process_lives() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let slow = format!("http://{address}/slow");
    let env = [
        ("DELIVERY_URL", slow.as_str()),
        // Renewed every 2 s at most: a stall of the first process under 4 s
        // (a loaded host) cannot let the lease lapse.
        ("SCHEDULER_LEASE_SECONDS", "6"),
        ("DELIVERY_TIMEOUT_SECONDS", "60"),
        ("DELIVERY_MAX_ATTEMPTS", "1"),
        ("SCHEDULER_BATCH", "1"),
    ];
    // One slot, held by the hanging delivery, and a poll interval far
    // longer than the lease: the lease is renewed all the same.
    let mut first = start(&db, None, &[env.as_slice(), &[("SCHEDULER_POLL_MS", "30000")]].concat());
    ok(&first.client(), "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "once"})).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.slow_hits.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the run was never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _second = start(&db, None, &env);
    // Two and a half leases: without renewal the lease would have lapsed.
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(receiver.slow_hits.load(Ordering::SeqCst), 1, "the second process took over a run in flight");
    // Once the first process is gone, its lease lapses and the second one
    // takes the run over: it was looking all along.
    first.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.slow_hits.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the second process never took the run over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_with_a_shorter_lease_does_not_take_over_a_run_another_is_delivering() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    let slow = format!("http://{address}/slow");
    let env = [("DELIVERY_URL", slow.as_str()), ("DELIVERY_TIMEOUT_SECONDS", "60"), ("DELIVERY_MAX_ATTEMPTS", "1")];
    // The default lease of ten minutes, renewed every 30 s (its poll
    // interval): far longer than the second process's whole lease.
    let first = start(&db, None, &[env.as_slice(), &[("SCHEDULER_POLL_MS", "30000")]].concat());
    ok(&first.client(), "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "once"})).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.slow_hits.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the run was never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its look at start for claims a clock ahead left must not cut the
    // first process's lease to its own second.
    let _second = start(&db, None, &[env.as_slice(), &[("SCHEDULER_LEASE_SECONDS", "1")]].concat());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(receiver.slow_hits.load(Ordering::SeqCst), 1, "the second process took over a run in flight");
}

// Multi-threaded: the receiver keeps answering while this thread blocks
// in `terminate` and `start`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_when_the_process_is_stopped_is_sent_at_once_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let (receiver, address) = Receiver::start().await;
    // The default lease of ten minutes: only a claim given back at the stop
    // lets the restarted process send the run within the test.
    let slow = format!("http://{address}/slow");
    let mut first = start(&db, None, &[("DELIVERY_URL", slow.as_str()), ("DELIVERY_TIMEOUT_SECONDS", "60")]);
    let added =
        ok(&first.client(), "u", "add_reminder", json!({"when": {"delay": "0s"}, "message": "in flight"})).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.slow_hits.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the run was never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = first.terminate();
    assert!(status.success(), "SIGTERM: {status}");
    let _second = start(&db, Some(address), &[]);
    let deliveries = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(deliveries[0].event()["task_id"], added["task_id"], "{deliveries:?}");
}

#[tokio::test]
async fn hostile_and_odd_arguments_get_clear_errors_and_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("SCHEDULER_USER_MAX_TASKS", "2"),
        ("SCHEDULER_MAX_DATA_BYTES", "100"),
        ("SCHEDULER_MIN_INTERVAL_SECONDS", "120"),
    ];
    let module = start(&dir.path().join("s.db"), None, &env);
    let client = module.client();
    let past =
        ok(&client, "u", "add_reminder", json!({"when": {"at": "2020-01-01T00:00:00Z"}, "message": "late"})).await;
    assert!(past["next_run"].as_str().unwrap() > "2026", "a past time fires at once: {past}");
    for (schedule, expected) in [
        ("0 0 31 2 *", "never runs: no month in \"2\" has a day \"31\""),
        ("61 * * * *", "cannot read the schedule"),
        ("'; DROP TABLE tasks; --", ""),
    ] {
        let answer = call(
            &client,
            "u",
            "add_recurring_task",
            json!({"schedule": schedule, "description": "x", "execution_data": {"task_type": "reminder", "message": "x"}}),
        )
        .await;
        assert_eq!(error_kind(&answer), "invalid_arguments", "{schedule}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains(expected), "{answer}");
    }
    let zone = call(&client, "u", "get_current_time", json!({"timezone": "Mars/Olympus_Mons"})).await;
    assert!(zone["error"].as_str().unwrap().contains("not an IANA time zone name"), "{zone}");
    let now = ok(&client, "u", "get_current_time", json!({"timezone": "Asia/Tokyo"})).await;
    assert!(now["local"].as_str().unwrap().ends_with("+09:00"), "{now}");
    let huge = call(&client, "u", "add_reminder", json!({"when": {"delay": "1m"}, "message": "x".repeat(5000)})).await;
    assert_eq!(error_kind(&huge), "invalid_arguments");
    ok(&client, "u", "add_reminder", json!({"when": {"delay": "1m"}, "message": "second"})).await;
    let third = call(&client, "u", "add_reminder", json!({"when": {"delay": "1m"}, "message": "third"})).await;
    // Every budget's error names its setting.
    assert!(
        third["error"].as_str().unwrap().contains("2 active tasks, the limit per user (SCHEDULER_USER_MAX_TASKS)"),
        "{third}"
    );
    let far = call(&client, "v", "add_reminder", json!({"when": {"delay": "999999d"}, "message": "x"})).await;
    assert!(far["error"].as_str().unwrap().contains("days ahead, the limit (SCHEDULER_MAX_AHEAD_DAYS)"), "{far}");
    let long = call(&client, "v", "add_reminder", json!({"when": {"delay": "1m"}, "message": "x".repeat(101)})).await;
    let expected =
        "arguments.message is 101 bytes, more than the limit of 100 bytes per task (SCHEDULER_MAX_DATA_BYTES)";
    assert!(long["error"].as_str().unwrap().contains(expected), "{long}");
    let prompt = json!({"task_type": "agent_task", "prompt": "p".repeat(100)});
    let big = call(
        &client,
        "v",
        "add_recurring_task",
        json!({"schedule": "daily 9am", "description": "x", "execution_data": prompt}),
    )
    .await;
    assert!(big["error"].as_str().unwrap().contains("bytes per task (SCHEDULER_MAX_DATA_BYTES)"), "{big}");
    let minutely = json!({"schedule": "every 1m", "description": "x", "execution_data": {"task_type": "reminder", "message": "x"}});
    let often = call(&client, "v", "add_recurring_task", minutely).await;
    let expected = "the shortest interval allowed is 120 seconds (SCHEDULER_MIN_INTERVAL_SECONDS)";
    assert!(often["error"].as_str().unwrap().contains(expected), "{often}");
    let not_an_id = call(&client, "u", "cancel_task", json!({"task_id": "../../etc/passwd"})).await;
    assert_eq!(error_kind(&not_an_id), "invalid_arguments");
    assert!(not_an_id["error"].as_str().unwrap().contains("arguments.task_id \"../../etc/passwd\" is not a task id"));
    let cursor = call(&client, "u", "list_tasks", json!({"cursor": "not a cursor"})).await;
    assert_eq!(error_kind(&cursor), "invalid_arguments");
}

#[tokio::test]
async fn add_and_cancel_without_end_keeps_the_store_and_the_list_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("SCHEDULER_USER_MAX_FINISHED", "20"), ("SCHEDULER_LIST_MAX_BYTES", "65536")];
    let module = start(&dir.path().join("s.db"), None, &env);
    let client = module.client();
    let prompt = "p".repeat(8000);
    let mut ids = Vec::new();
    for n in 0..30 {
        let added = ok(
            &client,
            "alice",
            "add_recurring_task",
            json!({"schedule": "daily 9am", "description": format!("task {n}"),
                   "execution_data": {"task_type": "agent_task", "prompt": prompt}}),
        )
        .await;
        let id = added["task_id"].as_str().unwrap().to_owned();
        ok(&client, "alice", "cancel_task", json!({"task_id": id})).await;
        ids.push(id);
    }
    // 30 cancelled, 20 kept: the oldest ten are gone.
    let listed = ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "limit": 500})).await;
    assert_eq!(listed["total"], 20, "{}", listed["total"]);
    let gone = call(&client, "alice", "cancel_task", json!({"task_id": ids[9]})).await;
    assert_eq!(error_kind(&gone), "not_found");
    // About 8 KB a task: the 64 KiB answer budget shows the newest seven, oldest first.
    let shown: Vec<&str> = listed["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
    assert_eq!(shown, ids[23..].iter().map(String::as_str).collect::<Vec<_>>());
    assert!(listed.to_string().len() < 70_000);
    let two = ok(&client, "alice", "list_tasks", json!({"limit": 2})).await;
    let shown: Vec<&str> = two["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
    assert_eq!((shown, two["total"].as_u64()), (vec![ids[28].as_str(), ids[29].as_str()], Some(20)));
    // The older ones are reached with `skip`.
    let older = ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "limit": 500, "skip": 7})).await;
    let shown: Vec<&str> = older["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap()).collect();
    assert_eq!(shown, ids[16..23].iter().map(String::as_str).collect::<Vec<_>>());
    // A cursor goes on after the last task shown: a task added meanwhile
    // (which pushes the oldest out) neither shifts the page nor repeats one.
    let shown = |listed: &Value| -> Vec<String> {
        listed["tasks"].as_array().unwrap().iter().map(|t| t["task_id"].as_str().unwrap().to_owned()).collect()
    };
    let first = ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "limit": 3})).await;
    assert_eq!(shown(&first), ids[27..]);
    let added = ok(&client, "alice", "add_reminder", json!({"when": {"delay": "1h"}, "message": "newer"})).await;
    ok(&client, "alice", "cancel_task", json!({"task_id": added["task_id"]})).await;
    let cursor = first["next_cursor"].clone();
    let second = ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "limit": 3, "cursor": cursor})).await;
    assert_eq!(shown(&second), ids[24..27]);
    // The answer's budget ends a page too: seven tasks of about 8 KB.
    let third =
        ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "cursor": second["next_cursor"]})).await;
    assert_eq!(shown(&third), ids[17..24]);
    let last = ok(&client, "alice", "list_tasks", json!({"status": "cancelled", "cursor": third["next_cursor"]})).await;
    assert_eq!(shown(&last), ids[11..17], "the oldest, ids[10], was pushed out by the newer one");
    assert!(last.get("next_cursor").is_none(), "{last}");
    let too_many = call(&client, "alice", "list_tasks", json!({"limit": 501})).await;
    assert_eq!(error_kind(&too_many), "invalid_arguments");
}
