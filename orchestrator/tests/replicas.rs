//! Whole-process tests of the orchestrator beyond one process: three
//! replicas on one `redis-server` behave as one (listings agree, a refresh
//! on one reaches all, the discovery claims keep the modules' manifest load
//! flat, a killed replica loses no call a client retries elsewhere, an
//! approval requested on one is decided on another, once, an API key
//! revoked with `orchestrator revoke-key` or by an admin's
//! `POST /api-keys/{id}/revoke` is refused by all), and a module
//! restarted under load (SIGTERM, a new process on the same port) fails no
//! idempotent call routed by the orchestrator.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use common::identities::{TestKey, keys_file};
use common::modules::sdk_module;
use common::{ModuleServer, OrchestratorProcess, module_services, research_binary};
use serde_json::{Value, json};
use test_support::{Process, RedisServer};

/// The token the modules require and the orchestrators send.
const TOKEN: &str = "replicas-test-token";
/// How long a liveness wait may take before the test gives up (not a
/// timing assertion: the wait ends as soon as the state is reached).
const PATIENCE: Duration = Duration::from_secs(30);

/// Starts `research` with the service token on `port` (0: a free one).
fn start_research(binary: &Path, port: u16) -> Process {
    let mut command = Command::new(binary);
    command.env("SERVICE_AUTH_TOKEN", TOKEN).env("PORT", port.to_string()).env("RUST_LOG", "warn");
    Process::start(command)
}

/// An idempotent, read-only call of the sample module, as `/execute` takes it.
fn summarize_call(n: usize) -> Value {
    json!({
        "tool_name": "research.summarize_text",
        "arguments": {"text": format!("Call {n} arrives. Replicas share Redis. Nothing is lost."), "max_sentences": 1}
    })
}

/// A module whose manifest can change while it runs, counting the requests
/// for it (the discovery load).
struct ChangingModule {
    manifest: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
    server: ModuleServer,
}

impl ChangingModule {
    /// `beacon` with the tools `names` (base fields only).
    fn start(names: &[&str]) -> Self {
        let manifest = Arc::new(Mutex::new(beacon_manifest(names)));
        let fetches = Arc::new(AtomicUsize::new(0));
        let router = Router::new()
            .route(
                "/manifest",
                get(|State((manifest, fetches)): State<(Arc<Mutex<Value>>, Arc<AtomicUsize>)>| async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    axum::Json(manifest.lock().unwrap().clone())
                }),
            )
            .with_state((Arc::clone(&manifest), Arc::clone(&fetches)));
        Self { manifest, fetches, server: ModuleServer::start(router) }
    }

    fn set_tools(&self, names: &[&str]) {
        *self.manifest.lock().unwrap() = beacon_manifest(names);
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn beacon_manifest(names: &[&str]) -> Value {
    json!({
        "module_name": "beacon",
        "description": "A module whose tools change.",
        "tools": names.iter().map(|name| json!({
            "name": format!("beacon.{name}"),
            "description": "A tool.",
            "parameters": [],
            "required_permission": "guest"
        })).collect::<Vec<_>>()
    })
}

/// How many times the replicas took `beacon`'s manifest from another one.
fn adoptions(replicas: &[Option<OrchestratorProcess>]) -> usize {
    replicas
        .iter()
        .flatten()
        .flat_map(|replica| replica.logs())
        .filter(|line| line.contains("manifest taken from another replica") && line.contains("beacon"))
        .count()
}

/// Waits until `replica` lists `tool`.
async fn wait_for_tool(replica: &OrchestratorProcess, tool: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !replica.tool_names("permission=owner").await.iter().any(|name| name == tool) {
        assert!(Instant::now() < deadline, "{} never listed {tool}", replica.url);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `call` to the replicas in turn from `first`, moving on to the next
/// one when a replica cannot be reached or answers no ToolResult, as a
/// client of a Service with several endpoints would; the ToolResult and how
/// many replicas it tried.
async fn call_with_failover(client: &reqwest::Client, urls: &[String], first: usize, call: &Value) -> (Value, usize) {
    let mut last_error = String::new();
    for attempt in 0..urls.len() {
        let url = &urls[(first + attempt) % urls.len()];
        match client.post(format!("{url}/execute")).json(call).send().await {
            Ok(response) if response.status() == 200 => match response.json::<Value>().await {
                Ok(result) => return (result, attempt + 1),
                Err(error) => last_error = error.to_string(),
            },
            Ok(response) => last_error = format!("HTTP {}", response.status()),
            Err(error) => last_error = error.to_string(),
        }
    }
    panic!("no replica answered {call}: {last_error}");
}

#[tokio::test]
async fn three_replicas_on_one_redis_behave_as_one() {
    let Some(research) = research_binary() else { return };
    let Some(redis_server) = RedisServer::start() else { return };
    let research = start_research(&research, 0);
    let mut beacon = ChangingModule::start(&["ping"]);
    let services = module_services(&[("research", research.url()), ("beacon", beacon.server.url())]);
    let redis_url = redis_server.url();
    let env = [
        ("MODULE_SERVICES", services.as_str()),
        ("REDIS_URL", redis_url.as_str()),
        ("SERVICE_AUTH_TOKEN", TOKEN),
        // Short, so the test sees many refresh rounds.
        ("REFRESH_INTERVAL", "0.3"),
        ("RUST_LOG", "info,orchestrator::registry=debug"),
    ];
    let mut replicas: Vec<Option<OrchestratorProcess>> =
        (0..3).map(|_| Some(OrchestratorProcess::start(&env))).collect();
    for replica in replicas.iter().flatten() {
        replica.wait_for_module("research", "up", PATIENCE).await;
        replica.wait_for_module("beacon", "up", PATIENCE).await;
    }

    // Listings agree.
    let mut listings = Vec::new();
    for replica in replicas.iter().flatten() {
        listings.push(replica.get("/tools?permission=owner").await);
    }
    assert!(listings.iter().all(|listing| *listing == listings[0]), "the replicas list different tools: {listings:?}");
    assert!(listings[0].as_array().unwrap().iter().any(|tool| tool["name"] == "research.summarize_text"));

    // Discovery load: in steady state one replica fetches a module's
    // manifest per refresh interval and the others take it from Redis.
    let (fetches_before, adoptions_before) = (beacon.fetches(), adoptions(&replicas));
    let deadline = Instant::now() + PATIENCE;
    while adoptions(&replicas) - adoptions_before < 12 {
        assert!(Instant::now() < deadline, "the replicas never took a manifest from one another");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fetched = beacon.fetches() - fetches_before;
    let adopted = adoptions(&replicas) - adoptions_before;
    println!("refresh rounds of beacon over three replicas: {fetched} fetched from the module, {adopted} from Redis");
    assert!(fetched <= adopted, "three replicas fetched {fetched} times for {adopted} rounds served from Redis");

    // A module's new manifest, refreshed on one replica, reaches them all.
    beacon.set_tools(&["ping", "pong"]);
    let (status, _) = replicas[0].as_ref().unwrap().post("/refresh-tools", &Value::Null).await;
    assert_eq!(status, 200);
    assert!(replicas[0].as_ref().unwrap().tool_names("permission=owner").await.contains(&"beacon.pong".to_owned()));
    for replica in replicas.iter().flatten() {
        wait_for_tool(replica, "beacon.pong").await;
    }

    // Kill one replica mid-load: every call a client retries on another succeeds.
    let urls: Vec<String> = replicas.iter().flatten().map(|replica| replica.url.clone()).collect();
    let client = reqwest::Client::new();
    let done = Arc::new(AtomicUsize::new(0));
    let failovers = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (client, urls, done, failovers) =
                (client.clone(), urls.clone(), Arc::clone(&done), Arc::clone(&failovers));
            tokio::spawn(async move {
                for n in 0..60 {
                    let call = summarize_call(worker * 1000 + n);
                    let (result, tried) = call_with_failover(&client, &urls, worker + n, &call).await;
                    assert_eq!(result["success"], true, "{result}");
                    failovers.fetch_add(tried - 1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    while done.load(Ordering::SeqCst) < 60 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(replicas[2].take()); // SIGKILL, as a crash or a lost node would.
    for worker in workers {
        worker.await.expect("no call was lost");
    }
    println!(
        "240 calls over three replicas, one killed mid-load: all succeeded, {} retried on another replica",
        failovers.load(Ordering::SeqCst)
    );
    assert_eq!(done.load(Ordering::SeqCst), 240);

    // A module going away is seen by every replica left, not hidden behind
    // another replica's cached manifest: a failed fetch releases the claim.
    beacon.server.kill();
    for replica in replicas.iter().flatten() {
        let state = replica.wait_for_module("beacon", "cached", PATIENCE).await;
        assert!(state["last_error"].as_str().unwrap().contains("cannot reach"), "{state}");
    }
}

#[tokio::test]
async fn a_module_restarted_under_load_fails_no_idempotent_call() {
    let Some(binary) = research_binary() else { return };
    let mut research = start_research(&binary, 0);
    let port = research.address().port();
    let services = module_services(&[("research", research.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("SERVICE_AUTH_TOKEN", TOKEN)]);
    orchestrator.wait_for_module("research", "up", PATIENCE).await;

    let stop = Arc::new(AtomicBool::new(false));
    // While set, the workers send no new call; the calls already sent go on.
    let paused = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let client = reqwest::Client::new();
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let (client, url) = (client.clone(), orchestrator.url.clone());
            let (stop, paused, done) = (Arc::clone(&stop), Arc::clone(&paused), Arc::clone(&done));
            tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    if paused.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                    let request = client.post(format!("{url}/execute")).json(&summarize_call(worker * 100_000 + n));
                    // A broken exchange with the orchestrator is a failure too, kept with its cause.
                    let result = match request.send().await {
                        Ok(response) => response.json::<Value>().await.map_err(|error| format!("{error:?}")),
                        Err(error) => Err(format!("{error:?}")),
                    };
                    match result {
                        Ok(result) if result["success"] == true => {}
                        Ok(result) => failures.push(result),
                        Err(error) => failures.push(json!({"exchange_failed": error})),
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
                failures
            })
        })
        .collect();
    let wait_for_calls = |count: usize| {
        let done = Arc::clone(&done);
        async move {
            let target = done.load(Ordering::SeqCst) + count;
            while done.load(Ordering::SeqCst) < target {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };

    wait_for_calls(50).await;
    // The module's rolling restart: SIGTERM (it finishes the calls in
    // flight), then the new version on the same address. The calls sent
    // before it go on through it; no new one is sent until the new version
    // listens (the orchestrator retries a refused connection briefly, not
    // for a module's whole start). The client's runtime keeps running, so
    // its connections to the orchestrator are served meanwhile.
    paused.store(true, Ordering::SeqCst);
    let (research, restarted) = tokio::task::spawn_blocking(move || {
        let status = research.terminate();
        assert!(status.success(), "research did not exit cleanly on SIGTERM: {status}");
        let restarted = start_research(&binary, port);
        (research, restarted)
    })
    .await
    .unwrap();
    let before_restart = done.load(Ordering::SeqCst);
    paused.store(false, Ordering::SeqCst);
    wait_for_calls(50).await;
    stop.store(true, Ordering::SeqCst);

    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(worker.await.unwrap());
    }
    let total = done.load(Ordering::SeqCst);
    println!("{total} calls through a module restart ({before_restart} before it): {} failed", failures.len());
    let warnings = orchestrator
        .logs()
        .into_iter()
        .filter(|line| ["WARN", "ERROR", "panicked"].iter().any(|word| line.contains(word)));
    assert!(
        failures.is_empty(),
        "calls failed across the restart: {failures:?}\nthe orchestrator's warnings:\n{}\nresearch's log, stopped:\n{}\nrestarted:\n{}",
        warnings.collect::<Vec<_>>().join("\n"),
        research.logs().join("\n"),
        restarted.logs().join("\n")
    );
}

#[tokio::test]
async fn an_approval_requested_on_one_replica_is_decided_on_another() {
    let Some(redis_server) = RedisServer::start() else { return };
    let (module, calls) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(module);
    let services = module_services(&[("alpha", alpha.url())]);
    let redis_url = redis_server.url();
    let env = [
        ("MODULE_SERVICES", services.as_str()),
        ("REDIS_URL", redis_url.as_str()),
        // `alpha.wipe` is destructive: it waits for a person's approval.
        ("APPROVAL_FOR_DESTRUCTIVE", "true"),
    ];
    let replicas: Vec<OrchestratorProcess> = (0..3).map(|_| OrchestratorProcess::start(&env)).collect();
    for replica in &replicas {
        replica.wait_for_module("alpha", "up", PATIENCE).await;
    }

    let call = json!({"tool_name": "alpha.wipe", "arguments": {}, "user_id": "ada", "user_permission": "admin"});
    let pending = replicas[0].execute(call).await;
    assert_eq!(pending["error_kind"], "permission_denied", "{pending}");
    assert!(pending["error"].as_str().unwrap().contains("waits for the user's approval"), "{pending}");
    assert_eq!(calls.count(), 0, "a call waiting for approval has not run");

    // Listed on another replica...
    let listed = replicas[1].get("/approvals").await;
    let approvals = listed["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{listed}");
    assert_eq!(
        (approvals[0]["tool_name"].clone(), approvals[0]["status"].clone()),
        (json!("alpha.wipe"), json!("pending"))
    );
    let id = approvals[0]["id"].as_str().unwrap().to_owned();

    // ...decided on a third, once.
    let (status, decided) = replicas[2].post(&format!("/approvals/{id}"), &json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["result"]["success"], true, "{decided}");
    let (again, _) = replicas[1].post(&format!("/approvals/{id}"), &json!({"decision": "deny"})).await;
    assert_eq!(again, 409, "an approval is decided once, whichever replica is asked");
    assert_eq!(calls.count(), 1, "the approved call ran exactly once");
    assert_eq!(replicas[0].get(&format!("/approvals/{id}")).await["status"], "approved");
}

/// `orchestrator <command> <key_id>` run as the operator would, on `redis_url`: its output.
fn key_command(command: &str, key_id: &str, redis_url: &str, keys_path: &str) -> String {
    let output = Command::new(common::BINARY)
        .args([command, key_id])
        .env_clear()
        .env("REDIS_URL", redis_url)
        .env("API_KEYS_FILE", keys_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{command} failed: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// Waits until every replica answers `GET /tools` with `key` by `status`.
async fn wait_for_status(replicas: &[OrchestratorProcess], key: &str, status: u16) {
    let deadline = Instant::now() + PATIENCE;
    for replica in replicas {
        loop {
            let (answered, body) = replica.get_with("/tools", Some(key)).await;
            if answered == status {
                break;
            }
            assert!(Instant::now() < deadline, "{} still answers {answered} ({body}), not {status}", replica.url);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn a_key_revoked_with_the_command_is_refused_by_every_replica() {
    let Some(redis_server) = RedisServer::start() else { return };
    let (module, _) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(module);
    let services = module_services(&[("alpha", alpha.url())]);
    let keys = [
        TestKey::new("ada-laptop", "ada", "user"),
        TestKey::new("bob-laptop", "bob", "user"),
        TestKey::new("root", "root", "admin"),
    ];
    let (ada, bob, admin) = (&keys[0], &keys[1], &keys[2]);
    let file = keys_file(&keys);
    let redis_url = redis_server.url();
    let keys_path = file.path().to_str().unwrap();
    let env = [
        ("MODULE_SERVICES", services.as_str()),
        ("REDIS_URL", redis_url.as_str()),
        ("API_KEYS_FILE", keys_path),
        ("REVOCATION_REFRESH_SECONDS", "1"),
    ];
    let replicas: Vec<OrchestratorProcess> = (0..3).map(|_| OrchestratorProcess::start(&env)).collect();
    for replica in &replicas {
        assert_eq!(replica.get_with("/tools", Some(&ada.key)).await.0, 200, "{}", replica.url);
    }
    let (_, unknown) = replicas[0].get_with("/tools", Some("ok_not_a_key_of_this_orchestrator_at_all")).await;

    let said = key_command("revoke-key", ada.id, &redis_url, keys_path);
    assert!(said.contains("revoked API key `ada-laptop`"), "{said}");
    wait_for_status(&replicas, &ada.key, 401).await;
    for replica in &replicas {
        let (status, refused) = replica.get_with("/tools", Some(&ada.key)).await;
        assert_eq!((status, &refused), (401, &unknown), "a revoked key is refused as an unknown one");
        assert_eq!(replica.get_with("/tools", Some(&bob.key)).await.0, 200, "other keys still work");
    }

    let said = key_command("restore-key", ada.id, &redis_url, keys_path);
    assert!(said.contains("restored API key `ada-laptop`"), "{said}");
    wait_for_status(&replicas, &ada.key, 200).await;

    // The same through the API, for admin and owner identities only.
    let revoke = format!("/api-keys/{}/revoke", ada.id);
    let (status, refused) = replicas[0].post_with(&revoke, Some(&bob.key), &Value::Null).await;
    assert_eq!(status, 403, "{refused}");
    let (status, answer) = replicas[1].post_with(&revoke, Some(&admin.key), &Value::Null).await;
    assert_eq!((status, &answer), (200, &json!({"key_id": "ada-laptop", "revoked": true, "changed": true})));
    assert_eq!(replicas[1].get_with("/tools", Some(&ada.key)).await.0, 401, "the replica asked applies it at once");
    wait_for_status(&replicas, &ada.key, 401).await;
    let restore = format!("/api-keys/{}/restore", ada.id);
    let (status, answer) = replicas[2].post_with(&restore, Some(&admin.key), &Value::Null).await;
    assert_eq!((status, answer["changed"].clone()), (200, json!(true)), "{answer}");
    wait_for_status(&replicas, &ada.key, 200).await;
}

#[test]
fn revoke_key_without_redis_says_how_to_revoke() {
    let file = keys_file(&[TestKey::new("ada-laptop", "ada", "user")]);
    let output = Command::new(common::BINARY)
        .args(["revoke-key", "ada-laptop"])
        .env_clear()
        .env("API_KEYS_FILE", file.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("REDIS_URL is not set") && said.contains("API_KEYS_FILE"), "{said}");
}
