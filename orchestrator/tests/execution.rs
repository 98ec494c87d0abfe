//! Whole-process tests of routed execution: the permission checked again at
//! `/execute`, the user injected, modules that die mid-call or outlive their
//! timeout or answer what no client can read, and every outcome a ToolResult.

mod common;

use std::time::{Duration, Instant};

use common::modules::{answering_module, sdk_module, stalling_module};
use common::{ModuleServer, OrchestratorProcess, module_services};
use serde_json::json;

#[tokio::test]
async fn a_guest_is_refused_an_admin_tool_it_never_listed() {
    let (alpha, calls) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(alpha);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("alpha", alpha.url())]))]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;
    assert!(!orchestrator.tool_names("permission=guest").await.contains(&"alpha.wipe".to_owned()));

    for permission in [json!("guest"), json!("superuser"), json!(null)] {
        let result = orchestrator
            .execute(
                json!({"tool_name": "alpha.wipe", "arguments": {}, "user_id": "u1", "user_permission": permission}),
            )
            .await;
        assert_eq!(result["success"], false);
        assert_eq!(result["error_kind"], "permission_denied", "{result}");
        assert!(result["error"].as_str().unwrap().contains("requires `admin`"), "{result}");
    }
    let outside_persona = orchestrator
        .execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "x"}, "user_permission": "owner", "modules": ["beta"]}))
        .await;
    assert_eq!(outside_persona["error_kind"], "unknown_tool", "a module outside the persona reads as unknown");
    // Module names are trimmed as in `GET /tools?modules=`.
    let padded = orchestrator
        .execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "x"}, "user_permission": "owner", "modules": [" alpha "]}))
        .await;
    assert_eq!(padded["success"], true, "{padded}");
    assert_eq!(calls.count(), 1, "no refused call reached the module, only the padded persona's");

    let admin = orchestrator
        .execute(json!({"tool_name": "alpha.wipe", "arguments": {}, "user_id": "u1", "user_permission": "admin"}))
        .await;
    assert_eq!(admin["success"], true, "{admin}");
    assert_eq!(calls.count(), 2);
}

#[tokio::test]
async fn calls_carry_the_user_and_bad_calls_are_answered_clearly() {
    let (alpha, _) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(alpha);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("alpha", alpha.url())]))]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    let echoed = orchestrator
        .execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "hi"}, "user_id": "user-42"}))
        .await;
    assert_eq!(
        echoed,
        json!({"tool_name": "alpha.echo", "success": true, "result": {"text": "hi", "user_id": "user-42"}, "error": null})
    );

    let cases = [
        (json!({"tool_name": "alpha.erase"}), "unknown_tool", "its tools this caller may use: alpha.echo"),
        (json!({"tool_name": "gamma.echo"}), "unknown_tool", "no module `gamma`"),
        (json!({"tool_name": "echo"}), "unknown_tool", "expected `<module>.<tool>`"),
        (json!({"tool_name": "alpha.echo", "arguments": {"text": 5}}), "invalid_arguments", "text"),
    ];
    for (request, kind, detail) in cases {
        let result = orchestrator.execute(request.clone()).await;
        assert_eq!(result["success"], false, "{request}");
        assert_eq!(result["error_kind"], kind, "{result}");
        assert!(result["error"].as_str().unwrap().contains(detail), "{result}");
    }

    let (status, body) = orchestrator.post("/execute", &json!({"tool_name": "alpha.echo", "arguments": [1]})).await;
    assert_eq!(status, 422);
    assert!(body["error"].as_str().unwrap().contains("arguments"), "{body}");
}

#[tokio::test]
async fn a_refused_call_names_only_what_the_caller_may_see() {
    let (alpha, _) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(alpha);
    // Nothing listens on port 1: `gone` is never reached, and its discovery
    // error names its internal address.
    let services = module_services(&[("alpha", alpha.url()), ("gone", "http://127.0.0.1:1".into())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;
    let error = |result: serde_json::Value| result["error"].as_str().unwrap().to_owned();

    let guest = error(orchestrator.execute(json!({"tool_name": "alpha.erase", "user_permission": "guest"})).await);
    assert!(guest.contains("its tools this caller may use: alpha.echo"), "{guest}");
    assert!(!guest.contains("wipe"), "an admin tool is not named to a guest: {guest}");
    let persona = json!({"tool_name": "alpha.erase", "user_permission": "owner", "modules": ["beta"]});
    let persona = error(orchestrator.execute(persona).await);
    assert!(
        persona.contains("no module `alpha`; this caller's modules: none"),
        "a hidden module is unknown: {persona}"
    );
    // Its real tools too: a caller cannot tell them from made-up ones.
    let real = json!({"tool_name": "alpha.echo", "user_permission": "owner", "modules": ["beta"]});
    let real = orchestrator.execute(real).await;
    assert_eq!(real["error_kind"], "unknown_tool", "{real}");
    assert!(error(real.clone()).contains("no module `alpha`; this caller's modules: none"), "{real}");
    let unknown = json!({"tool_name": "gamma.echo", "user_permission": "owner", "modules": ["beta"]});
    let unknown = error(orchestrator.execute(unknown).await);
    assert!(unknown.contains("this caller's modules: none"), "{unknown}");
    assert!(!unknown.contains("alpha") && !unknown.contains("gone"), "configured modules stay unnamed: {unknown}");
    let everyone = error(orchestrator.execute(json!({"tool_name": "gamma.echo"})).await);
    assert!(everyone.contains("this caller's modules: alpha"), "{everyone}");

    // A caller that may use `gone` is told why it is unreachable; another is not.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let allowed = error(orchestrator.execute(json!({"tool_name": "gone.x"})).await);
        if allowed.contains("127.0.0.1:1") {
            break;
        }
        assert!(Instant::now() < deadline, "the discovery error is never given: {allowed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outsider = orchestrator.execute(json!({"tool_name": "gone.x", "modules": ["alpha"]})).await;
    assert_eq!(outsider["error_kind"], "unknown_tool", "{outsider}");
    assert!(error(outsider.clone()).contains("no module `gone`; this caller's modules: alpha"), "{outsider}");
}

#[tokio::test]
async fn a_module_killed_mid_call_or_gone_gives_unavailable() {
    let (stalling, calls) = stalling_module("slow");
    let mut slow = ModuleServer::start(stalling);
    let (alpha, _) = sdk_module("alpha");
    let mut alpha = ModuleServer::sdk(alpha);
    let services = module_services(&[("slow", slow.url()), ("alpha", alpha.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services)]);
    orchestrator.wait_for_module("slow", "up", Duration::from_secs(10)).await;
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    let call = orchestrator.execute(json!({"tool_name": "slow.stall", "arguments": {}}));
    let kill = async {
        while calls.count() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        slow.kill();
    };
    let (result, ()) = tokio::join!(call, kill);
    assert_eq!(result["success"], false);
    assert_eq!(result["error_kind"], "unavailable", "{result}");
    assert!(result["error"].as_str().unwrap().contains("broke during the call"), "{result}");

    // A module that is gone before the call: the connection is refused.
    alpha.kill();
    let result = orchestrator.execute(json!({"tool_name": "alpha.echo", "arguments": {"text": "x"}})).await;
    assert_eq!(result["error_kind"], "unavailable", "{result}");
    assert!(result["error"].as_str().unwrap().contains("cannot be reached"), "{result}");
}

#[tokio::test]
async fn a_tool_that_outlives_its_timeout_gives_timeout() {
    let (stalling, calls) = stalling_module("slow");
    let slow = ModuleServer::start(stalling);
    let services = module_services(&[("slow", slow.url())]);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &services), ("DEFAULT_TOOL_TIMEOUT", "0.5")]);
    orchestrator.wait_for_module("slow", "up", Duration::from_secs(10)).await;

    // `wait` names its own timeout (1 s): the orchestrator waits that plus a grace second.
    let started = Instant::now();
    let result = orchestrator.execute(json!({"tool_name": "slow.wait", "arguments": {}})).await;
    assert_eq!(result["error_kind"], "timeout", "{result}");
    assert!(result["error"].as_str().unwrap().contains("within 2 s"), "{result}");
    assert!(started.elapsed() >= Duration::from_secs(2));

    // `stall` names none: the configured default applies.
    let result = orchestrator.execute(json!({"tool_name": "slow.stall", "arguments": {}})).await;
    assert_eq!(result["error_kind"], "timeout", "{result}");
    assert!(result["error"].as_str().unwrap().contains("within 0.5 s"), "{result}");
    assert_eq!(calls.count(), 2, "a timed-out call is not sent again");
}

#[tokio::test]
async fn a_models_tool_calls_run_as_the_caller_through_the_same_checks() {
    let (alpha, calls) = sdk_module("alpha");
    let alpha = ModuleServer::sdk(alpha);
    let orchestrator = OrchestratorProcess::start(&[("MODULE_SERVICES", &module_services(&[("alpha", alpha.url())]))]);
    orchestrator.wait_for_module("alpha", "up", Duration::from_secs(10)).await;

    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "alpha__echo", "arguments": "{\"text\": \"hi\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "alpha__wipe", "arguments": "{}"}}
    ]});
    let request = json!({"user_id": "u9", "user_permission": "guest", "modules": ["alpha"], "message": message});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &request).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer[0]["tool_call_id"], "c1");
    assert!(answer[0]["content"].as_str().unwrap().contains("u9"), "the user is injected: {answer}");
    assert_eq!(answer[1]["tool_call_id"], "c2");
    // The same words as the library's `RequestedCall::executable` (one production path).
    let refused = answer[1]["content"].as_str().unwrap();
    assert!(refused.starts_with("Error (unknown_tool): there is no tool named `alpha__wipe`"), "{answer}");
    assert_eq!(calls.count(), 1, "only the echo reached the module");

    let (status, answer) = orchestrator.post("/v1/tool-calls", &request).await;
    assert_eq!(status, 400);
    assert!(answer["error"].as_str().unwrap().contains("format"), "{answer}");
}

#[tokio::test]
async fn a_result_no_client_can_read_fails_the_call_at_every_door_and_is_counted_so() {
    let tool =
        |name: &str| json!({"name": name, "description": "A tool.", "parameters": [], "required_permission": "guest"});
    let manifest =
        json!({"module_name": "odd", "description": "Odd answers.", "tools": [tool("odd.big"), tool("odd.deep")]});
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let answers = [
        ("odd.big", r#"{"tool_name":"odd.big","success":true,"result":1e400}"#.to_owned()),
        ("odd.deep", format!(r#"{{"tool_name":"odd.deep","success":true,"result":{deep}}}"#)),
    ];
    let odd = ModuleServer::start(answering_module(manifest, &answers));
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &module_services(&[("odd", odd.url())])),
        ("RUST_LOG", "info,orchestrator::execute=debug"),
    ]);
    orchestrator.wait_for_module("odd", "up", Duration::from_secs(10)).await;
    let reasons = [("odd.big", "number out of range"), ("odd.deep", "recursion limit")];

    for (tool, reason) in reasons {
        let result = orchestrator.execute(json!({"tool_name": tool, "arguments": {}})).await;
        assert_eq!((&result["tool_name"], &result["success"]), (&json!(tool), &json!(false)), "{result}");
        assert_eq!(result["error_kind"], "execution_failed", "{result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains("module `odd` answered with something that is not a ToolResult"), "{error}");
        assert!(error.contains(reason), "{error}");
    }
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "odd__big", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "odd__deep", "arguments": "{}"}}
    ]});
    let request = json!({"user_permission": "guest", "message": message});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &request).await;
    assert_eq!(status, 200, "{answer}");
    for (index, (_, reason)) in reasons.iter().enumerate() {
        let content = answer[index]["content"].as_str().unwrap();
        assert!(content.starts_with("Error (execution_failed): module `odd` answered with something"), "{answer}");
        assert!(content.contains(reason), "{answer}");
    }

    // Counted and logged as the failures the callers got, never as successes.
    let metrics = orchestrator.metrics().await;
    for (tool, _) in reasons {
        let failed = format!(r#"tool_calls_total{{tool="{tool}",outcome="execution_failed"}} 2"#);
        assert!(metrics.lines().any(|line| line == failed), "{failed}: {metrics}");
        let success = format!(r#"tool_calls_total{{tool="{tool}",outcome="success"}}"#);
        assert!(!metrics.lines().any(|line| line.starts_with(&success) && !line.ends_with(" 0")), "{metrics}");
        let logged = |line: &str| {
            line.contains("routed call")
                && line.contains(&format!(r#""tool":"{tool}""#))
                && line.contains("execution_failed")
        };
        assert!(orchestrator.logged(logged), "{tool}: {:?}", orchestrator.logs());
    }
    let routed = orchestrator.logs().into_iter().filter(|line| line.contains("routed call")).collect::<Vec<_>>();
    assert!(routed.iter().all(|line| line.contains(r#""outcome":"execution_failed""#)), "{routed:?}");
}
