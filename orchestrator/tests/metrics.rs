//! `GET /metrics` of a real orchestrator: routed calls by tool and outcome,
//! module states, discovery failures, cache lookups and approvals (decided
//! at `/approvals` and over `/mcp`), for the service token only, bounded
//! against made-up tool names (at `/execute`, `/v1/tool-calls` and `/mcp`),
//! and scraped by a real `prometheus`.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::identities::{TestKey, keys_file};
use common::modules::approval_module;
use common::{ModuleServer, OrchestratorProcess, free_port, module_services};
use rmcp::model::{CallToolRequestParams, CallToolResponse, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use test_support::{PrometheusServer, ScrapeTarget};

const SERVICE_TOKEN: &str = "service-token-for-metrics-0123456789";

/// The value of the series `series` (name and labels as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn routed_calls_states_and_approvals_are_counted_and_scraped_by_prometheus() {
    let (bank, _) = approval_module("bank");
    let bank = ModuleServer::sdk(bank);
    let services = module_services(&[("bank", bank.url()), ("gone", format!("http://127.0.0.1:{}", free_port()))]);
    let ada = TestKey::new("ada", "ada", "user");
    let root = TestKey::new("root", "root", "admin");
    let keys = keys_file(&[TestKey::new("ada", "ada", "user"), TestKey::new("root", "root", "admin")]);
    let orchestrator = OrchestratorProcess::start(&[
        ("MODULE_SERVICES", &services),
        ("API_KEYS_FILE", keys.path().to_str().unwrap()),
        ("ORCHESTRATOR_API_TOKEN", SERVICE_TOKEN),
    ])
    .with_token(SERVICE_TOKEN);
    orchestrator.wait_for_module("bank", "up", Duration::from_secs(10)).await;
    // One discovery of every module now, so `gone` has failed at least once.
    orchestrator.post("/refresh-tools", &json!({})).await;

    for text in ["a", "b", "c"] {
        let result = orchestrator.execute(json!({"tool_name": "bank.echo", "arguments": {"text": text}})).await;
        assert_eq!(result["success"], true, "{result}");
    }
    orchestrator.execute(json!({"tool_name": "bank.echo", "arguments": {"text": 7}})).await;
    for n in 0..50 {
        orchestrator.execute(json!({"tool_name": format!("bank.made_up_{n}"), "arguments": {}})).await;
    }
    // A call needing approval whose arguments are refused before any approval is asked for.
    let invalid = json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": "five"}});
    let (status, refused) = orchestrator.post_with("/execute", Some(&ada.key), &invalid).await;
    assert_eq!((status, &refused["error_kind"]), (200, &json!("invalid_arguments")), "{refused}");
    let transfer = json!({"tool_name": "bank.transfer", "arguments": {"to": "carol", "cents": 5}});
    let (status, pending) = orchestrator.post_with("/execute", Some(&ada.key), &transfer).await;
    assert_eq!((status, &pending["error_kind"]), (200, &json!("permission_denied")), "{pending}");
    let (_, listed) = orchestrator.get_with("/approvals", Some(&root.key)).await;
    let id = listed["approvals"][0]["id"].as_str().unwrap().to_owned();
    // Made-up names at /v1/tool-calls and /mcp count as unknown too, never under their own name.
    let message = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bank__made_up_model", "arguments": "{}"}}
    ]});
    let request = json!({"user_id": "ada", "user_permission": "user", "message": message});
    let (status, answer) = orchestrator.post("/v1/tool-calls?format=openai", &request).await;
    assert_eq!(status, 200, "{answer}");
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", orchestrator.url)).auth_header(ada.key.clone());
    let recent = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let client = serve_client_with_lifecycle((), test_support::mcp_client::transport(config), recent).await.unwrap();
    let made_up = client.call_tool(CallToolRequestParams::new("bank__made_up_mcp")).await;
    assert!(made_up.unwrap_err().to_string().contains("no tool named"));
    // Confirmations over /mcp that cannot decide are refusals, as at POST /approvals/{id}:
    // an approval that does not exist, and one of another tool's call.
    let confirmed =
        BTreeMap::from([("approval".to_owned(), json!({"action": "accept", "content": {"approve": true}}))]);
    for (tool, state) in [("bank__transfer", "no-such-approval"), ("bank__echo", id.as_str())] {
        let retry = CallToolRequestParams::new(tool).with_request_state(state).with_input_responses(confirmed.clone());
        let refused = match client.call_tool_once(retry).await {
            Ok(CallToolResponse::Complete(result)) => result.is_error == Some(true),
            Ok(_) => false,
            Err(_) => true,
        };
        assert!(refused, "{tool} with {state} decides nothing");
    }
    client.cancel().await.unwrap();
    let (status, _) =
        orchestrator.post_with(&format!("/approvals/{id}"), Some(&root.key), &json!({"decision": "deny"})).await;
    assert_eq!(status, 200);

    let client = reqwest::Client::new();
    let metrics_url = format!("{}/metrics", orchestrator.url);
    let anonymous = client.get(&metrics_url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "metrics need an identity");
    let user = client.get(&metrics_url).bearer_auth(&ada.key).send().await.unwrap();
    assert_eq!(user.status(), 403, "metrics are for the service token, not a user's key");
    let response = client.get(&metrics_url).bearer_auth(SERVICE_TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    let text = response.text().await.unwrap();
    let expected = [
        (r#"tool_calls_total{tool="bank.echo",outcome="success"}"#, 3.0),
        (r#"tool_calls_total{tool="bank.echo",outcome="invalid_arguments"}"#, 1.0),
        (r#"tool_calls_total{tool="unknown",outcome="unknown_tool"}"#, 52.0),
        (r#"tool_calls_total{tool="bank.transfer",outcome="invalid_arguments"}"#, 1.0),
        (r#"tool_call_duration_seconds_count{tool="bank.echo"}"#, 4.0),
        (r#"tool_calls_in_flight{tool="bank.echo"}"#, 0.0),
        (r#"orchestrator_module_state{module="bank",state="up"}"#, 1.0),
        (r#"orchestrator_module_state{module="gone",state="down"}"#, 1.0),
        (r#"orchestrator_module_state{module="gone",state="up"}"#, 0.0),
        (r#"orchestrator_approvals_requested_total{outcome="pending"}"#, 1.0),
        (r#"orchestrator_approvals_decided_total{outcome="denied"}"#, 1.0),
        (r#"orchestrator_approvals_decided_total{outcome="refused"}"#, 2.0),
    ];
    let wrong: Vec<_> = expected
        .iter()
        .filter_map(|(series, value)| {
            let found = sample(&text, series);
            (found != Some(*value)).then(|| format!("{series}: {found:?}, not {value}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?} in\n{text}");
    let failures = sample(&text, r#"orchestrator_discovery_failures_total{module="gone"}"#);
    assert!(failures.is_some_and(|n| n >= 1.0), "{text}");
    let misses = sample(&text, r#"orchestrator_manifest_cache_lookups_total{outcome="miss"}"#);
    assert!(misses.is_some_and(|n| n >= 1.0), "an empty memory cache misses: {text}");
    assert!(!text.contains("made_up"), "caller-sent names make no series: {text}");

    let Some(prometheus) = PrometheusServer::start(&[ScrapeTarget {
        job: "orchestrator",
        address: url_address(&orchestrator.url),
        bearer_token: Some(SERVICE_TOKEN),
    }]) else {
        return;
    };
    let query = r#"tool_calls_total{job="orchestrator",tool="bank.echo",outcome="success"}"#;
    assert_eq!(prometheus.wait_for_value(query, 3.0, Duration::from_secs(30)).await, 3.0);
    orchestrator.execute(json!({"tool_name": "bank.echo", "arguments": {"text": "d"}})).await;
    prometheus.wait_for_value(query, 4.0, Duration::from_secs(30)).await;
    let down = r#"orchestrator_module_state{job="orchestrator",module="gone",state="down"}"#;
    assert_eq!(prometheus.wait_for_value(down, 1.0, Duration::from_secs(30)).await, 1.0);
    let up = prometheus.wait_for_value(r#"up{job="orchestrator"}"#, 1.0, Duration::from_secs(30)).await;
    assert_eq!(up, 1.0, "the scrape with the service token succeeds");
}

/// The socket address of `http://127.0.0.1:PORT`.
fn url_address(url: &str) -> std::net::SocketAddr {
    url.trim_start_matches("http://").parse().expect("the orchestrator's URL is an address")
}
