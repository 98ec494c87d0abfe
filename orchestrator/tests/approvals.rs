//! Whole-process tests of approvals: a `requires_approval` call becomes a
//! pending approval, runs exactly once when approved, never when denied or
//! expired, and pending approvals live in Redis across restarts and replicas.

mod common;

use std::time::Duration;

use common::identities::{TestKey, keys_file};
use common::modules::{Calls, approval_module};
use common::{ModuleServer, OrchestratorProcess, free_port, module_services};
use redis::AsyncCommands;
use serde_json::{Value, json};
use test_support::RedisServer;

const SERVICE_TOKEN: &str = "service-token-for-tests-0123456789";

/// A module with `transfer`, keys for ada, bob and an admin (and narrower
/// keys: an admin's and ada's limited to the module `other`), and the
/// orchestrator (with `extra` settings) using them; for the tests run on
/// each store, a redis-server as well.
struct Setup {
    _module: ModuleServer,
    _keys: tempfile::NamedTempFile,
    calls: Calls,
    services: String,
    keys_path: String,
    /// Redis and its URL, when the test runs on each store and it is installed.
    redis: Option<(RedisServer, String)>,
}

impl Setup {
    /// The set-up of the tests that run on each store ([`Setup::each_store`]):
    /// Redis too, unless it is not installed (which [`RedisServer::start`] says).
    fn on_each_store() -> Self {
        let redis = RedisServer::start().map(|redis| {
            let url = redis.url();
            (redis, url)
        });
        Self { redis, ..Self::new() }
    }

    fn new() -> Self {
        let (module, calls) = approval_module("bank");
        let module = ModuleServer::sdk(module);
        let services = module_services(&[("bank", module.url())]);
        let keys = keys_file(&[
            TestKey::new("ada", "ada", "user"),
            TestKey::new("bob", "bob", "user"),
            // Ada's own key, apart from the one her agent asks with.
            TestKey::new("ada-console", "ada", "user"),
            TestKey::new("root", "root", "admin"),
            TestKey { modules: Some(&["other"]), ..TestKey::new("root-other", "root", "admin") },
            TestKey { modules: Some(&["other"]), ..TestKey::new("ada-other", "ada", "user") },
            TestKey::new("ada-guest", "ada", "guest"),
        ]);
        let keys_path = keys.path().to_str().unwrap().to_owned();
        Self { _module: module, _keys: keys, calls, services, keys_path, redis: None }
    }

    /// `settings` alone (approvals in memory) and, given a Redis, with it too.
    fn each_store<'a>(&'a self, settings: &[(&'a str, &'a str)]) -> Vec<Vec<(&'a str, &'a str)>> {
        let mut stores = vec![settings.to_vec()];
        if let Some((_, url)) = &self.redis {
            stores.push([settings, &[("REDIS_URL", url.as_str())]].concat());
        }
        stores
    }

    async fn start(&self, extra: &[(&str, &str)]) -> OrchestratorProcess {
        let mut env = vec![
            ("MODULE_SERVICES", self.services.as_str()),
            ("API_KEYS_FILE", self.keys_path.as_str()),
            ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
        ];
        env.extend_from_slice(extra);
        let orchestrator = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
        orchestrator.wait_for_module("bank", "up", Duration::from_secs(10)).await;
        orchestrator
    }
}

fn key(id: &'static str) -> String {
    TestKey::new(id, "", "").key
}

/// A Chat Completions message calling `bank.transfer` with `arguments`.
fn transfer_message(call_id: &str, arguments: &Value) -> Value {
    json!({"message": {"role": "assistant", "content": null, "tool_calls": [{
        "id": call_id, "type": "function",
        "function": {"name": "bank__transfer", "arguments": arguments.to_string()}
    }]}})
}

/// Ada's model asks for a transfer: the answer's single result message and the pending approval.
async fn request_transfer(orchestrator: &OrchestratorProcess, call_id: &str) -> (Value, Value) {
    request_transfer_of(orchestrator, call_id, &json!({"to": "carol", "cents": 500})).await
}

/// Ada's model asks for a transfer with `arguments`: the answer's single
/// result message and the pending approval.
async fn request_transfer_of(orchestrator: &OrchestratorProcess, call_id: &str, arguments: &Value) -> (Value, Value) {
    let path = "/v1/tool-calls?format=openai&envelope=true";
    let message = transfer_message(call_id, arguments);
    let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &message).await;
    assert_eq!(status, 200, "{answer}");
    let pending = answer["pending_approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{answer}");
    (answer["messages"][0].clone(), pending[0].clone())
}

async fn decide(orchestrator: &OrchestratorProcess, who: &str, id: &Value, decision: &str) -> (u16, Value) {
    let body = json!({"decision": decision, "reason": "not this month"});
    orchestrator.post_with(&format!("/approvals/{}", id.as_str().unwrap()), Some(who), &body).await
}

#[tokio::test]
async fn with_a_separate_decider_the_identity_that_asked_decides_nothing() {
    let setup = Setup::new();
    // By default the key that asked decides (one person, agent and console on one key).
    let shared = setup.start(&[]).await;
    let (_, pending) = request_transfer(&shared, "call_1").await;
    let (status, decided) = decide(&shared, &key("ada"), &pending["id"], "approve").await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(setup.calls.count(), 1);
    drop(shared);

    let separate = setup.start(&[("APPROVAL_SEPARATE_DECIDER", "true")]).await;
    let (_, pending) = request_transfer(&separate, "call_2").await;
    for decision in ["approve", "deny"] {
        let (status, refused) = decide(&separate, &key("ada"), &pending["id"], decision).await;
        assert_eq!(status, 403, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(error.contains("APPROVAL_SEPARATE_DECIDER") && error.contains("key:ada"), "{error}");
    }
    assert_eq!(setup.calls.count(), 1, "nothing ran");
    // Another identity decides: ada's other key, or an admin.
    let (status, decided) = decide(&separate, &key("ada-console"), &pending["id"], "approve").await;
    assert_eq!((status, &decided["approval"]["decided_by"]), (200, &json!("key:ada-console")), "{decided}");
    assert_eq!(setup.calls.count(), 2);
    let (_, pending) = request_transfer(&separate, "call_3").await;
    let (status, decided) = decide(&separate, &key("root"), &pending["id"], "deny").await;
    assert_eq!((status, &decided["approval"]["status"]), (200, &json!("denied")), "{decided}");
}

#[tokio::test]
async fn an_approved_call_runs_exactly_once_with_the_stored_arguments() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[]).await;
    let (message, pending) = request_transfer(&orchestrator, "call_1").await;
    assert_eq!(setup.calls.count(), 0, "a pending call does not run");
    assert_eq!(message["tool_call_id"], "call_1");
    assert!(message["content"].as_str().unwrap().contains("waits for the user's approval"), "{message}");
    assert_eq!(pending["tool_name"], "bank.transfer");
    assert_eq!(pending["arguments"], json!({"to": "carol", "cents": 500}));
    assert_eq!((&pending["user_id"], &pending["requested_by"]), (&json!("ada"), &json!("key:ada")));
    assert_eq!(pending["status"], "pending");
    assert!(pending["created_at"].is_string() && pending["expires_at"].is_string());
    let id = &pending["id"];

    // Ada sees it; Bob neither sees nor decides it; the admin sees it.
    let (_, mine) = orchestrator.get_with("/approvals", Some(&key("ada"))).await;
    assert_eq!(mine["approvals"][0]["id"], *id);
    let (_, bobs) = orchestrator.get_with("/approvals", Some(&key("bob"))).await;
    assert_eq!(bobs["approvals"], json!([]));
    let (status, _) = decide(&orchestrator, &key("bob"), id, "approve").await;
    assert_eq!(status, 403);
    let (_, all) = orchestrator.get_with("/approvals", Some(&key("root"))).await;
    assert_eq!(all["approvals"].as_array().unwrap().len(), 1);

    let (status, decided) = decide(&orchestrator, &key("ada"), id, "approve").await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["result"]["success"], true, "{decided}");
    assert_eq!(decided["result"]["result"], json!({"to": "carol", "cents": 500, "user_id": "ada"}));
    assert_eq!(decided["message"][0]["tool_call_id"], "call_1", "the provider's message for the same call");
    assert_eq!(
        (&decided["approval"]["status"], &decided["approval"]["decided_by"]),
        (&json!("approved"), &json!("key:ada"))
    );
    assert_eq!(setup.calls.count(), 1);

    let (status, again) = decide(&orchestrator, &key("ada"), id, "approve").await;
    assert_eq!(status, 409, "{again}");
    let (status, _) = decide(&orchestrator, &key("root"), id, "deny").await;
    assert_eq!(status, 409);
    assert_eq!(setup.calls.count(), 1, "a second approval runs nothing");
    let (_, shown) = orchestrator.get_with(&format!("/approvals/{}", id.as_str().unwrap()), Some(&key("ada"))).await;
    assert_eq!(shown["status"], "approved");
    assert!(orchestrator.logged(|l| l.contains("approval decided") && l.contains("key:ada")));
}

/// Ada approves approval `id`, but her client gives up after 300 ms.
async fn approve_and_hang_up(orchestrator: &OrchestratorProcess, id: &str) {
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(300)).build().unwrap();
    let sent = impatient
        .post(format!("{}/approvals/{id}", orchestrator.url))
        .bearer_auth(key("ada"))
        .json(&json!({"decision": "approve"}))
        .send()
        .await;
    assert!(sent.as_ref().is_err_and(reqwest::Error::is_timeout), "{sent:?}");
}

/// Polls approval `id` (as Ada) until its status is `status`, and returns it.
async fn wait_for_status(orchestrator: &OrchestratorProcess, id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (code, shown) = orchestrator.get_with(&format!("/approvals/{id}"), Some(&key("ada"))).await;
        assert_eq!(code, 200, "{shown}");
        if shown["status"] == status {
            return shown;
        }
        assert!(tokio::time::Instant::now() < deadline, "the approval never became {status}: {shown}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_approved_call_runs_to_its_end_and_is_recorded_when_the_decider_hangs_up() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[]).await;
    let arguments = json!({"to": "carol", "cents": 500, "wait_ms": 1500});
    let (_, pending) = request_transfer_of(&orchestrator, "call_slow", &arguments).await;
    let id = pending["id"].as_str().unwrap();

    // The person approves, but their client gives up long before the transfer ends:
    // the transfer still ends, exactly once, and its result is recorded.
    approve_and_hang_up(&orchestrator, id).await;
    let shown = wait_for_status(&orchestrator, id, "approved").await;
    assert_eq!(shown["result"]["result"], json!({"to": "carol", "cents": 500, "user_id": "ada"}), "{shown}");
    assert_eq!(setup.calls.count(), 1);
    let metrics = orchestrator.metrics().await;
    assert!(metrics.contains(r#"orchestrator_approvals_decided_total{outcome="approved"} 1"#), "{metrics}");
}

#[tokio::test]
async fn an_approved_call_running_past_its_approvals_drop_time_is_kept_and_its_result_recorded() {
    let setup = Setup::on_each_store();
    for settings in setup.each_store(&[("APPROVAL_EXPIRY_SECONDS", "2")]) {
        let orchestrator = setup.start(&settings).await;
        let before = setup.calls.count();
        // Approved while pending, the transfer takes longer than the approval
        // would be kept (2 s to expire, 2 s more), within its tool's timeout (30 s).
        let arguments = json!({"to": "carol", "cents": 500, "wait_ms": 5000});
        let (_, pending) = request_transfer_of(&orchestrator, "call_long", &arguments).await;
        let id = pending["id"].as_str().unwrap();
        approve_and_hang_up(&orchestrator, id).await;
        // Shown (never `404`) while it runs, and with its result once it ran.
        let shown = wait_for_status(&orchestrator, id, "approved").await;
        assert_eq!(shown["result"]["result"], json!({"to": "carol", "cents": 500, "user_id": "ada"}), "{settings:?}");
        assert_eq!(setup.calls.count(), before + 1);
    }
}

#[tokio::test]
async fn an_approved_call_cut_short_by_a_crash_stays_running_and_never_runs_again() {
    let Some(redis) = RedisServer::start() else { return };
    let setup = Setup::new();
    let redis_url = redis.url();
    let first = setup.start(&[("REDIS_URL", &redis_url)]).await;
    let arguments = json!({"to": "carol", "cents": 500, "wait_ms": 60_000});
    let (_, pending) = request_transfer_of(&first, "call_crash", &arguments).await;
    let id = pending["id"].as_str().unwrap();
    approve_and_hang_up(&first, id).await;
    let running = wait_for_status(&first, id, "running").await;
    assert_eq!((&running["decided_by"], &running["result"]), (&json!("key:ada"), &Value::Null), "{running}");
    drop(first); // SIGKILL while the transfer runs.

    // After the restart it says what is known: approved, no result came back.
    let restarted = setup.start(&[("REDIS_URL", &redis_url)]).await;
    let (status, shown) = restarted.get_with(&format!("/approvals/{id}"), Some(&key("ada"))).await;
    assert_eq!((status, &shown["status"], &shown["result"]), (200, &json!("running"), &Value::Null), "{shown}");
    let (status, refused) = decide(&restarted, &key("ada"), &pending["id"], "approve").await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("is running"), "{refused}");
    assert_eq!(setup.calls.count(), 0, "the cut-short transfer never finished and is not run again");
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_hears_why() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[]).await;
    let (_, pending) = request_transfer(&orchestrator, "call_9").await;
    let (status, decided) = decide(&orchestrator, &key("root"), &pending["id"], "deny").await;
    assert_eq!(status, 200, "{decided}");
    let content = decided["message"][0]["content"].as_str().unwrap();
    assert!(content.contains("the user declined: not this month"), "{content}");
    assert_eq!(decided["approval"]["decided_by"], "key:root");
    let (status, _) = decide(&orchestrator, &key("ada"), &pending["id"], "approve").await;
    assert_eq!(status, 409);
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn an_expired_approval_cannot_be_approved() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[("APPROVAL_EXPIRY_SECONDS", "1")]).await;
    let (_, pending) = request_transfer(&orchestrator, "call_2").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, answer) = decide(&orchestrator, &key("ada"), &pending["id"], "approve").await;
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("expired"), "{answer}");
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn only_a_service_identity_may_send_approved_and_policies_add_approvals() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[("APPROVAL_FOR_DESTRUCTIVE", "true")]).await;
    let transfer = json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": 1}, "approved": true});
    let (status, result) = orchestrator.post_with("/execute", Some(&key("ada")), &transfer).await;
    assert_eq!(status, 200);
    assert!(result["error"].as_str().unwrap().contains("approval"), "a user's `approved` is ignored: {result}");
    assert_eq!(setup.calls.count(), 0);
    let (_, result) = orchestrator.post_with("/execute", Some(SERVICE_TOKEN), &transfer).await;
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(setup.calls.count(), 1);

    // `wipe` is destructive: with APPROVAL_FOR_DESTRUCTIVE it waits too.
    let wipe = json!({"tool_name": "bank.wipe", "user_permission": "admin"});
    let (_, result) = orchestrator.post_with("/execute", Some(&key("root")), &wipe).await;
    assert!(result["error"].as_str().unwrap().contains("approval"), "{result}");
    assert_eq!(setup.calls.count(), 1);
    let (_, listed) = orchestrator.get_with("/approvals", Some(&key("root"))).await;
    let wipes: Vec<&Value> =
        listed["approvals"].as_array().unwrap().iter().filter(|a| a["tool_name"] == "bank.wipe").collect();
    assert_eq!(wipes.len(), 1, "{listed}");
    let (status, decided) = decide(&orchestrator, &key("root"), &wipes[0]["id"], "approve").await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    assert_eq!(decided["message"], Value::Null, "a call from /execute has no provider message");
    assert_eq!(setup.calls.count(), 2);
}

#[tokio::test]
async fn pending_approvals_survive_a_restart_and_are_shared_through_redis() {
    let Some(redis) = RedisServer::start() else { return };
    let setup = Setup::new();
    let redis_url = redis.url();
    let first = setup.start(&[("REDIS_URL", &redis_url)]).await;
    let (_, pending) = request_transfer(&first, "call_3").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    drop(first);

    let restarted = setup.start(&[("REDIS_URL", &redis_url)]).await;
    let second = setup.start(&[("REDIS_URL", &redis_url)]).await;
    for orchestrator in [&restarted, &second] {
        let (status, shown) = orchestrator.get_with(&format!("/approvals/{id}"), Some(&key("ada"))).await;
        assert_eq!((status, &shown["status"]), (200, &json!("pending")), "{shown}");
    }
    let (status, decided) = decide(&second, &key("ada"), &pending["id"], "approve").await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    let (status, _) = decide(&restarted, &key("ada"), &pending["id"], "approve").await;
    assert_eq!(status, 409, "the other replica sees the decision");
    assert_eq!(setup.calls.count(), 1);
}

/// An approved call of a module not reached since a restart (the approvals
/// kept in Redis, its manifest no longer cached) tells its user only that
/// the module is unavailable, in the decision's answer and in the approval
/// kept: the discovery error names the module's internal address, which
/// only operators are told, as at `/execute`. (Approvals in memory do not
/// outlive the process, and a module once discovered stays routable, so
/// only Redis gets here.)
#[tokio::test]
async fn an_approved_call_of_a_module_never_reached_tells_its_user_no_address() {
    let Some(redis) = RedisServer::start() else { return };
    let setup = Setup::new();
    let redis_url = redis.url();
    let first = setup.start(&[("REDIS_URL", &redis_url)]).await;
    let (_, adas) = request_transfer(&first, "call_4").await;
    let (_, roots) = request_transfer(&first, "call_5").await;
    drop(first);
    let removed: usize = redis.connection().await.del("module_manifest:bank").await.unwrap();
    assert_eq!(removed, 1, "the manifest was cached");

    let nowhere = module_services(&[("bank", format!("http://127.0.0.1:{}", free_port()))]);
    let env = [
        ("MODULE_SERVICES", nowhere.as_str()),
        ("API_KEYS_FILE", setup.keys_path.as_str()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
        ("REDIS_URL", redis_url.as_str()),
    ];
    let restarted = OrchestratorProcess::start(&env).with_token(SERVICE_TOKEN);
    restarted.wait_for_module("bank", "down", Duration::from_secs(10)).await;
    let unavailable = json!("module `bank` is unavailable; try again later");

    let (status, decided) = decide(&restarted, &key("ada"), &adas["id"], "approve").await;
    assert_eq!((status, &decided["result"]["error_kind"]), (200, &json!("unavailable")), "{decided}");
    assert_eq!(decided["result"]["error"], unavailable, "{decided}");
    assert!(!decided.to_string().contains("127.0.0.1"), "no address in the answer or its message: {decided}");

    // An admin deciding is told why; the approval kept tells no one.
    let (status, decided) = decide(&restarted, &key("root"), &roots["id"], "approve").await;
    let error = decided["result"]["error"].as_str().unwrap_or_default();
    assert!(status == 200 && error.contains("has not been reached yet") && error.contains("127.0.0.1"), "{decided}");
    for id in [&adas["id"], &roots["id"]] {
        let path = format!("/approvals/{}", id.as_str().unwrap());
        let (status, shown) = restarted.get_with(&path, Some(&key("ada"))).await;
        assert_eq!((status, &shown["result"]["error"]), (200, &unavailable), "{shown}");
    }
    let (_, listed) = restarted.get_with("/approvals", Some(&key("ada"))).await;
    assert_eq!(listed["approvals"].as_array().map(Vec::len), Some(2), "{listed}");
    assert!(!listed.to_string().contains("127.0.0.1"), "{listed}");
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn pending_approvals_have_a_budget_per_user() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[("MAX_PENDING_APPROVALS", "1")]).await;
    request_transfer(&orchestrator, "call_1").await;
    let path = "/v1/tool-calls?format=openai&envelope=true";
    let (status, answer) = orchestrator
        .post_with(path, Some(&key("ada")), &transfer_message("call_2", &json!({"to": "carol", "cents": 500})))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["pending_approvals"], json!([]));
    assert!(answer["messages"][0]["content"].as_str().unwrap().contains("MAX_PENDING_APPROVALS"), "{answer}");
    // Bob's budget is his own.
    let (_, answer) = orchestrator
        .post_with(path, Some(&key("bob")), &transfer_message("call_3", &json!({"to": "carol", "cents": 500})))
        .await;
    assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn one_user_deciding_their_own_approvals_cannot_fill_everyones_budget() {
    let setup = Setup::on_each_store();
    let budgets = [("MAX_PENDING_APPROVALS", "1"), ("MAX_APPROVALS_PER_USER", "3"), ("MAX_APPROVALS", "5")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        // Ada asks and denies at once, again and again: each denial is kept (for late decisions' `409`).
        for n in 0..3 {
            let (_, pending) = request_transfer(&orchestrator, &format!("call_{n}")).await;
            assert_eq!(decide(&orchestrator, &key("ada"), &pending["id"], "deny").await.0, 200);
        }
        let path = "/v1/tool-calls?format=openai&envelope=true";
        let transfer = transfer_message("call_3", &json!({"to": "carol", "cents": 500}));
        let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &transfer).await;
        assert_eq!((status, &answer["pending_approvals"]), (200, &json!([])), "{answer}");
        let refusal = answer["messages"][0]["content"].as_str().unwrap();
        assert!(refusal.contains("MAX_APPROVALS_PER_USER"), "{settings:?}: {refusal}");
        // The rest of MAX_APPROVALS is left for everyone else.
        let (_, answer) = orchestrator.post_with(path, Some(&key("bob")), &transfer).await;
        assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 1, "{settings:?}: {answer}");
    }
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn one_user_deciding_their_own_large_calls_cannot_fill_everyones_bytes() {
    let setup = Setup::on_each_store();
    // A large transfer counts 2175 bytes (as JSON: 2019 of arguments, 156
    // of the rest kept: ids, caller, provider call) and 512 kept for its
    // decision; denied, its reason and result instead (about 160): two fit
    // in 6000, a third no longer does.
    let budgets = [("MAX_APPROVAL_BYTES_PER_USER", "6000"), ("MAX_APPROVAL_BYTES", "10000")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        // Ada asks and denies at once: each denial is kept (for late decisions' `409`), with its bytes.
        for n in 0..2 {
            let (_, pending) = request_transfer_of(&orchestrator, &format!("call_{n}"), &large_transfer()).await;
            assert_eq!(decide(&orchestrator, &key("ada"), &pending["id"], "deny").await.0, 200);
        }
        let path = "/v1/tool-calls?format=openai&envelope=true";
        let transfer = transfer_message("call_2", &large_transfer());
        let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &transfer).await;
        assert_eq!((status, &answer["pending_approvals"]), (200, &json!([])), "{answer}");
        let refusal = answer["messages"][0]["content"].as_str().unwrap();
        assert!(refusal.contains("(6000, MAX_APPROVAL_BYTES_PER_USER)"), "{settings:?}: {refusal}");
        // The rest of MAX_APPROVAL_BYTES is left for everyone else.
        let (_, answer) = orchestrator.post_with(path, Some(&key("bob")), &transfer).await;
        assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 1, "{settings:?}: {answer}");
    }
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn approvals_of_tools_an_identity_may_not_use_are_not_found() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[("APPROVAL_FOR_DESTRUCTIVE", "true")]).await;
    let (_, transfer) = request_transfer(&orchestrator, "call_1").await;
    // The service asks, for ada as an admin, for the admin-only `wipe`.
    let wipe = json!({"tool_name": "bank.wipe", "user_id": "ada", "user_permission": "admin"});
    let (_, result) = orchestrator.post_with("/execute", Some(SERVICE_TOKEN), &wipe).await;
    assert!(result["error"].as_str().unwrap().contains("approval"), "{result}");
    let (_, listed) = orchestrator.get_with("/approvals", Some(&key("root"))).await;
    let all = listed["approvals"].as_array().unwrap();
    assert_eq!(all.len(), 2, "an admin with every module sees both: {listed}");
    let wipe = all.iter().find(|a| a["tool_name"] == "bank.wipe").unwrap();
    assert_eq!(wipe["user_id"], "ada");

    // Keys limited to the module `other` (an admin's, and ada's own) see
    // neither; ada's `user` key does not see the admin-only call. Showing
    // or deciding them is `404`, as for an approval that does not exist.
    for (who, hidden) in
        [("root-other", vec![&transfer, wipe]), ("ada-other", vec![&transfer, wipe]), ("ada", vec![wipe])]
    {
        let (status, listed) = orchestrator.get_with("/approvals", Some(&key(who))).await;
        assert_eq!(status, 200, "{listed}");
        for approval in &hidden {
            let id = &approval["id"];
            let shown = listed["approvals"].as_array().unwrap().iter().any(|a| a["id"] == *id);
            assert!(!shown, "{who} lists {approval}");
            let (status, answer) =
                orchestrator.get_with(&format!("/approvals/{}", id.as_str().unwrap()), Some(&key(who))).await;
            assert_eq!(status, 404, "{who} sees {answer}");
            let (status, answer) = decide(&orchestrator, &key(who), id, "approve").await;
            assert_eq!(status, 404, "{who} decides {answer}");
        }
    }
    assert_eq!(setup.calls.count(), 0, "no hidden approval ran");
    let (_, listed) = orchestrator.get_with("/approvals", Some(&key("ada"))).await;
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1, "ada's key still sees her transfer: {listed}");
    let (status, decided) = decide(&orchestrator, &key("root"), &wipe["id"], "approve").await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    assert_eq!(setup.calls.count(), 1);
}

#[tokio::test]
async fn a_lower_key_of_the_same_user_cannot_decide_what_a_higher_one_asked() {
    let setup = Setup::new();
    let orchestrator = setup.start(&[]).await;
    // `transfer` needs only `guest`; the service asks it for ada as `owner`,
    // the permission it would run with once approved.
    let owner = json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": 500},
                       "user_id": "ada", "user_permission": "owner"});
    let (_, result) = orchestrator.post_with("/execute", Some(SERVICE_TOKEN), &owner).await;
    assert!(result["error"].as_str().unwrap().contains("approval"), "{result}");
    let (_, listed) = orchestrator.get_with("/approvals", Some(SERVICE_TOKEN)).await;
    let id = listed["approvals"][0]["id"].clone();
    assert_eq!(listed["approvals"][0]["permission"], "owner", "{listed}");
    for who in ["ada-guest", "ada"] {
        let (status, answer) = decide(&orchestrator, &key(who), &id, "approve").await;
        assert_eq!(status, 404, "{who} decides {answer}");
        let (_, listed) = orchestrator.get_with("/approvals", Some(&key(who))).await;
        assert_eq!(listed["approvals"], json!([]), "{who} lists {listed}");
    }
    assert_eq!(setup.calls.count(), 0, "nothing ran as owner");
    let (status, decided) = decide(&orchestrator, SERVICE_TOKEN, &id, "approve").await;
    assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
    assert_eq!(setup.calls.count(), 1);
}

/// A Chat Completions message of `count` transfers.
fn many_transfers(count: usize) -> Value {
    let calls: Vec<Value> = (0..count)
        .map(|n| {
            json!({"id": format!("call_{n}"), "type": "function",
                   "function": {"name": "bank__transfer", "arguments": json!({"to": "carol", "cents": n}).to_string()}})
        })
        .collect();
    json!({"message": {"role": "assistant", "content": null, "tool_calls": calls}})
}

#[tokio::test]
async fn a_message_of_many_gated_calls_keeps_to_the_approval_budgets() {
    let setup = Setup::on_each_store();
    let budgets = [("MAX_PENDING_APPROVALS", "5"), ("MAX_APPROVALS", "8")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        // The calls of one message are asked for at once: five become pending, the rest are refused.
        let path = "/v1/tool-calls?format=openai&envelope=true";
        let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &many_transfers(64)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 5, "{settings:?}");
        let refused = answer["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["content"].as_str().unwrap().contains("MAX_PENDING_APPROVALS"))
            .count();
        assert_eq!(refused, 59, "{answer}");
        // Bob's own budget: but only three more fit in all.
        let (_, answer) = orchestrator.post_with(path, Some(&key("bob")), &many_transfers(64)).await;
        assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 3, "{settings:?}");
        let full = answer["messages"].as_array().unwrap().iter();
        assert_eq!(full.filter(|m| m["content"].as_str().unwrap().contains("MAX_APPROVALS")).count(), 61, "{answer}");
        let (_, listed) = orchestrator.get_with("/approvals", Some(&key("root"))).await;
        assert_eq!(listed["approvals"].as_array().unwrap().len(), 8, "{listed}");
    }
    assert_eq!(setup.calls.count(), 0);
}

#[tokio::test]
async fn approvals_have_a_byte_budget_each_and_in_all() {
    let setup = Setup::on_each_store();
    // Each transfer of `many_transfers(8)` counts 180 bytes as JSON (24 of
    // arguments, 6 of its call id, 150 of the rest kept: its own id, the
    // caller, the provider call) and 512 kept for its decision: four fit in 2768.
    let budgets = [("MAX_APPROVAL_ARGUMENT_BYTES", "200"), ("MAX_APPROVAL_BYTES", "2768")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        let path = "/v1/tool-calls?format=openai&envelope=true";
        let large = transfer_message("call_large", &json!({"to": "c".repeat(40), "cents": 1}));
        let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &large).await;
        assert_eq!((status, &answer["pending_approvals"]), (200, &json!([])), "{answer}");
        let refusal = answer["messages"][0]["content"].as_str().unwrap();
        // 59 bytes of arguments, a 10-character call id and the 150 of the rest (as JSON).
        assert!(refusal.contains("MAX_APPROVAL_ARGUMENT_BYTES") && refusal.contains("219 bytes"), "{refusal}");
        // A small call with a made-up id as long as a message may be.
        let long_id = transfer_message(&"c".repeat(60), &json!({"to": "carol", "cents": 1}));
        let (_, answer) = orchestrator.post_with(path, Some(&key("ada")), &long_id).await;
        assert_eq!(answer["pending_approvals"], json!([]), "{answer}");
        let refusal = answer["messages"][0]["content"].as_str().unwrap();
        assert!(refusal.contains("MAX_APPROVAL_ARGUMENT_BYTES") && refusal.contains("234 bytes"), "{refusal}");

        let (_, answer) = orchestrator.post_with(path, Some(&key("ada")), &many_transfers(8)).await;
        assert_eq!(answer["pending_approvals"].as_array().unwrap().len(), 4, "{settings:?}: {answer}");
        let messages = answer["messages"].as_array().unwrap().iter();
        let refused = messages.filter(|m| m["content"].as_str().unwrap().contains("MAX_APPROVAL_BYTES")).count();
        assert_eq!(refused, 4, "{answer}");
    }
    assert_eq!(setup.calls.count(), 0);
}

/// Ada's model asks for a small transfer (184 bytes as JSON: 24 of
/// arguments, a 10-character call id, 150 of the rest): the pending approval, or `None` when it is refused for
/// `MAX_APPROVAL_BYTES`.
async fn small_transfer(orchestrator: &OrchestratorProcess) -> Option<Value> {
    let path = "/v1/tool-calls?format=openai&envelope=true";
    let message = transfer_message("call_small", &json!({"to": "carol", "cents": 1}));
    let (status, answer) = orchestrator.post_with(path, Some(&key("ada")), &message).await;
    assert_eq!(status, 200, "{answer}");
    let pending = answer["pending_approvals"][0].clone();
    if pending.is_null() {
        assert!(answer["messages"][0]["content"].as_str().unwrap().contains("MAX_APPROVAL_BYTES"), "{answer}");
        return None;
    }
    Some(pending)
}

/// The arguments of a transfer to a 2000-byte name: 2019 bytes as JSON.
fn large_transfer() -> Value {
    json!({"to": "c".repeat(2000), "cents": 1})
}

#[tokio::test]
async fn an_approved_calls_result_counts_against_the_byte_budget_until_it_is_dropped() {
    let setup = Setup::on_each_store();
    // The large transfer counts 2177 bytes (as JSON: 2019 of arguments, 158
    // of the rest kept: ids, caller, provider call), 12 more of its reason
    // and, approved, 2098 more of its result (which echoes the name): 4287.
    // A small transfer (184, and 512 kept for its decision) still fits, a
    // second one no longer does. The expiry leaves
    // seconds to spare on a loaded machine: the large one is dropped about
    // 20 s after it was asked (Redis rounds the time down to the second),
    // the first small one about 25 s after.
    let budgets = [("MAX_APPROVAL_BYTES", "5300"), ("APPROVAL_EXPIRY_SECONDS", "10")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        let (_, pending) = request_transfer_of(&orchestrator, "call_big", &large_transfer()).await;
        let (status, decided) = decide(&orchestrator, &key("ada"), &pending["id"], "approve").await;
        assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
        let path = format!("/approvals/{}", pending["id"].as_str().unwrap());
        let (_, shown) = orchestrator.get_with(&path, Some(&key("ada"))).await;
        assert_eq!(shown["result"], decided["result"], "{settings:?}: the result is kept");

        // Asked 5 s later, this one is still kept when the large one is
        // dropped (as long after it expired as it waited): the large one's
        // bytes must leave the count while other approvals stay counted.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let kept = small_transfer(&orchestrator).await.expect("a small transfer fits beside the result");
        assert_eq!(small_transfer(&orchestrator).await, None, "{settings:?}: the result is counted");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while small_transfer(&orchestrator).await.is_none() {
            assert!(tokio::time::Instant::now() < deadline, "{settings:?}: a dropped approval's bytes stay counted");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let path = format!("/approvals/{}", kept["id"].as_str().unwrap());
        let (status, shown) = orchestrator.get_with(&path, Some(&key("ada"))).await;
        assert_eq!(status, 200, "{settings:?}: room was made by the large transfer alone: {shown}");
    }
    assert_eq!(setup.calls.count(), setup.each_store(&budgets).len(), "the large transfer ran once on each store");
}

#[tokio::test]
async fn a_result_over_the_byte_budget_is_answered_but_kept_as_an_error_naming_it() {
    let setup = Setup::on_each_store();
    // The large transfer fits pending (2177 bytes and 512 kept for its
    // decision), but not with its result (4287 in all).
    let budgets = [("MAX_APPROVAL_BYTES", "3000")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        let calls = setup.calls.count();
        let (_, pending) = request_transfer_of(&orchestrator, "call_big", &large_transfer()).await;
        let (status, decided) = decide(&orchestrator, &key("ada"), &pending["id"], "approve").await;
        assert_eq!(status, 200, "{decided}");
        assert_eq!(decided["result"]["result"]["to"], large_transfer()["to"], "the decider gets the result");
        assert_eq!(setup.calls.count(), calls + 1);

        let path = format!("/approvals/{}", pending["id"].as_str().unwrap());
        let (_, shown) = orchestrator.get_with(&path, Some(&key("ada"))).await;
        assert_eq!((&shown["status"], &shown["result"]["success"]), (&json!("approved"), &json!(false)), "{shown}");
        assert_eq!(shown["result"]["error_kind"], "execution_failed", "{shown}");
        let error = shown["result"]["error"].as_str().unwrap();
        let size = serde_json::to_string(&decided["result"]).unwrap().len();
        assert!(
            error.contains("MAX_APPROVAL_BYTES (3000)") && error.contains(&format!("({size} bytes as JSON)")),
            "{error}"
        );
        assert!(orchestrator.logged(|l| l.contains("keeps an error in its place")));
    }
}

#[tokio::test]
async fn a_reason_longer_than_its_budget_or_than_room_left_is_refused_and_nothing_runs() {
    let setup = Setup::on_each_store();
    // Two transfers fill the budget: 182 bytes as JSON (26 of arguments, 6
    // of the call id, 150 of the rest kept: ids, caller, provider call) and
    // 512 kept for the decision each.
    let budgets = [("MAX_APPROVAL_REASON_BYTES", "100"), ("MAX_APPROVAL_BYTES", "1388")];
    for settings in setup.each_store(&budgets) {
        let orchestrator = setup.start(&settings).await;
        let calls = setup.calls.count();
        let (_, pending) = request_transfer(&orchestrator, "call_1").await;
        request_transfer(&orchestrator, "call_2").await;
        let path = format!("/approvals/{}", pending["id"].as_str().unwrap());
        let approve = |reason: Option<String>| json!({"decision": "approve", "reason": reason});

        let (status, refused) = orchestrator.post_with(&path, Some(&key("ada")), &approve(Some("r".repeat(101)))).await;
        assert_eq!(status, 422, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(error.contains("MAX_APPROVAL_REASON_BYTES") && error.contains("101 bytes"), "{error}");

        // A reason within its budget, with no room left for it.
        let (status, refused) = orchestrator.post_with(&path, Some(&key("ada")), &approve(Some("r".repeat(100)))).await;
        assert_eq!(status, 429, "{refused}");
        assert!(refused["error"].as_str().unwrap().contains("MAX_APPROVAL_BYTES"), "{refused}");
        assert_eq!(setup.calls.count(), calls, "a refused decision runs nothing");
        let (_, shown) = orchestrator.get_with(&path, Some(&key("ada"))).await;
        assert_eq!(shown["status"], "pending", "{shown}");

        // Without a reason a decision always fits.
        let (status, decided) = orchestrator.post_with(&path, Some(&key("ada")), &approve(None)).await;
        assert_eq!((status, &decided["result"]["success"]), (200, &json!(true)), "{decided}");
        assert_eq!(setup.calls.count(), calls + 1);
    }
}

#[tokio::test]
async fn an_approved_call_that_ran_answers_its_result_even_when_the_store_fails_after() {
    let Some(mut redis) = RedisServer::start() else { return };
    let setup = Setup::new();
    let orchestrator = setup.start(&[("REDIS_URL", &redis.url())]).await;
    let arguments = json!({"to": "carol", "cents": 500, "wait_ms": 4000});
    let (_, pending) = request_transfer_of(&orchestrator, "call_lost", &arguments).await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let deciding = {
        let (url, id) = (orchestrator.url.clone(), id.clone());
        tokio::spawn(async move {
            let answer = reqwest::Client::new()
                .post(format!("{url}/approvals/{id}"))
                .bearer_auth(key("ada"))
                .json(&json!({"decision": "approve"}))
                .send()
                .await
                .unwrap();
            (answer.status().as_u16(), answer.json::<Value>().await.unwrap())
        })
    };
    wait_for_status(&orchestrator, &id, "running").await;
    redis.kill(); // The transfer is running; its result can no longer be stored.
    let (status, decided) = deciding.await.unwrap();
    assert_eq!(status, 200, "the transfer ran: its result is answered, {decided}");
    assert_eq!(decided["result"]["result"], json!({"to": "carol", "cents": 500, "user_id": "ada"}), "{decided}");
    assert_eq!(setup.calls.count(), 1);
    assert!(orchestrator.logged(|l| l.contains("its result could not be stored")));
}
