//! Whole-process tests of the shared manifest cache with a real
//! `redis-server`: a restart that lists tools while every module is down,
//! Redis going away and coming back mid-run, and a cached manifest over
//! this process's `MAX_MANIFEST_BYTES`.

mod common;

use std::time::Duration;

use common::modules::sdk_module;
use common::{ModuleServer, OrchestratorProcess, free_port, module_services};
use redis::AsyncCommands;
use serde_json::{Value, json};
use test_support::RedisServer;

#[tokio::test]
async fn a_restart_lists_cached_tools_while_every_module_is_down() {
    let Some(redis_server) = RedisServer::start() else { return };
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let beta = ModuleServer::sdk(sdk_module("beta").0);
    let services = module_services(&[("alpha", alpha.url()), ("beta", beta.url())]);
    let env = [("MODULE_SERVICES", services.as_str()), ("REDIS_URL", &redis_server.url())];

    let first = OrchestratorProcess::start(&env);
    first.wait_for_module("alpha", "up", Duration::from_secs(10)).await;
    first.wait_for_module("beta", "up", Duration::from_secs(10)).await;
    let listed = first.get("/tools?permission=admin").await;
    drop(first);

    let mut redis = redis_server.connection().await;
    let ttl: i64 = redis.ttl("module_manifest:alpha").await.unwrap();
    assert!((3590..=3600).contains(&ttl), "TTL is one hour, got {ttl}");
    let stored: String = redis.get("module_manifest:beta").await.unwrap();
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["module_name"], "beta");

    drop((alpha, beta));
    let second = OrchestratorProcess::start(&env);
    // Loaded before the listener opened: no waiting for discovery.
    assert_eq!(second.get("/tools?permission=admin").await, listed);
    let alpha_state = second.wait_for_module("alpha", "cached", Duration::from_secs(10)).await;
    assert!(alpha_state["last_error"].as_str().unwrap().contains("cannot reach"), "{alpha_state}");
    assert!(alpha_state["last_success"].is_null(), "this process never reached it");
    assert_eq!(second.get("/health").await["cache"], "redis");

    let result = second.execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "x"}})).await;
    assert_eq!(result["error_kind"], "unavailable", "a cached tool whose module is down: {result}");
}

#[tokio::test]
async fn redis_going_away_mid_run_changes_nothing_for_callers_and_is_reconnected() {
    let Some(mut redis_server) = RedisServer::start() else { return };
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("alpha", alpha.url())]);
    let orchestrator =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("REDIS_URL", &redis_server.url())]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    redis_server.kill();
    let (status, refreshed) = orchestrator.post("/refresh-tools", &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(refreshed["modules"][0]["state"], "up", "discovery does not depend on the cache");
    assert_eq!(orchestrator.tool_names("permission=admin").await, ["alpha.echo", "alpha.wipe"]);
    let result = orchestrator.execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(result["success"], true, "{result}");
    assert!(orchestrator.logged(|line| line.contains("manifest not cached")));

    // Redis comes back empty on the same port; the next discovery writes again.
    redis_server.restart();
    let mut redis = redis_server.connection().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        orchestrator.post("/refresh-tools", &Value::Null).await;
        let exists: bool = redis.exists("module_manifest:alpha").await.unwrap();
        if exists {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the orchestrator never reconnected to Redis");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn redis_down_at_start_up_is_not_fatal() {
    let alpha = ModuleServer::sdk(sdk_module("alpha").0);
    let services = module_services(&[("alpha", alpha.url())]);
    let nowhere = format!("redis://127.0.0.1:{}", free_port());
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("REDIS_URL", &nowhere)]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;
    assert_eq!(orchestrator.tool_names("").await, ["alpha.echo"]);
}

#[tokio::test]
async fn a_cached_manifest_over_max_manifest_bytes_is_not_adopted() {
    let Some(redis_server) = RedisServer::start() else { return };
    // Cached by a replica with a larger MAX_MANIFEST_BYTES; the module is down.
    let manifest = json!({
        "module_name": "alpha",
        "description": "a".repeat(3000),
        "tools": [{"name": "alpha.echo", "description": "Echo.", "parameters": [], "required_permission": "guest"}]
    });
    let mut redis = redis_server.connection().await;
    let _: () = redis.set_ex("module_manifest:alpha", manifest.to_string(), 3600).await.unwrap();
    let services = module_services(&[("alpha", format!("http://127.0.0.1:{}", free_port()))]);
    let env = [("MODULE_SERVICES", services.as_str()), ("REDIS_URL", &redis_server.url())];
    let orchestrator = OrchestratorProcess::start(&[env[0], env[1], ("MAX_MANIFEST_BYTES", "2048")]);
    assert!(orchestrator.tool_names("permission=admin").await.is_empty(), "not adopted");
    let alpha = orchestrator.wait_for_module("alpha", "down", Duration::from_secs(10)).await;
    assert!(alpha["last_error"].as_str().unwrap().contains("cannot reach"), "{alpha}");
    let refused = "the cached entry `module_manifest:alpha` is over MAX_MANIFEST_BYTES (2048 bytes)";
    assert!(orchestrator.logged(|line| line.contains(refused)), "{:?}", orchestrator.logs());
    let metrics = orchestrator.metrics().await;
    assert!(metrics.contains(r#"orchestrator_cache_errors_total{cache="redis"}"#), "{metrics}");
    drop(orchestrator);

    // A replica at the budget it was cached with lists it.
    let generous = OrchestratorProcess::start(&env);
    assert_eq!(generous.tool_names("permission=admin").await, ["alpha.echo"]);
}
