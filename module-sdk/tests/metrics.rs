//! `GET /metrics` of a real module process: counted by tool and outcome
//! (`cancelled` for a call whose caller gave up, which is logged too),
//! open without the bearer token (the contract's table), bounded against made-up tool names, and scraped
//! by a real `prometheus`.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use test_support::{Process, PrometheusServer, ScrapeTarget, built_binary};

const TOKEN: &str = "metrics-token";

fn start_demo() -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("SERVICE_AUTH_TOKEN", TOKEN).env("RUST_LOG", "warn");
    Process::start(command)
}

/// The value of the series `series` (name and labels as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn calls_are_counted_by_tool_and_outcome_and_scraped_by_prometheus() {
    let demo = start_demo();
    let client = demo.client().with_token(TOKEN);
    for name in ["Ann", "Bo", "Cy"] {
        client.call_ok("demo.greet", json!({"name": name}), None).await;
    }
    client.call("demo.greet", json!({"name": 7}), None).await;
    client.call("demo.no_such_tool", json!({}), None).await;

    let (status, _) = demo.client().get("/manifest").await;
    assert_eq!(status, 401, "the manifest needs the token");
    let response = demo.client().request(reqwest::Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    let text = response.text().await.unwrap();
    assert_eq!(sample(&text, r#"tool_calls_total{tool="demo.greet",outcome="success"}"#), Some(3.0), "{text}");
    assert_eq!(sample(&text, r#"tool_calls_total{tool="demo.greet",outcome="invalid_arguments"}"#), Some(1.0));
    assert_eq!(sample(&text, r#"tool_calls_total{tool="unknown",outcome="unknown_tool"}"#), Some(1.0));
    assert_eq!(sample(&text, r#"tool_call_duration_seconds_count{tool="demo.greet"}"#), Some(4.0));
    assert_eq!(sample(&text, r#"tool_calls_in_flight{tool="demo.greet"}"#), Some(0.0));

    let Some(prometheus) =
        PrometheusServer::start(&[ScrapeTarget { job: "demo", address: demo.address(), bearer_token: None }])
    else {
        return;
    };
    let query = r#"tool_calls_total{job="demo",tool="demo.greet",outcome="success"}"#;
    let scraped = prometheus.wait_for_value(query, 3.0, Duration::from_secs(30)).await;
    assert_eq!(scraped, 3.0);
    client.call_ok("demo.greet", json!({"name": "Di"}), None).await;
    prometheus.wait_for_value(query, 4.0, Duration::from_secs(30)).await;
    let up = prometheus.wait_for_value(r#"up{job="demo"}"#, 1.0, Duration::from_secs(30)).await;
    assert_eq!(up, 1.0, "the scrape without a token succeeds");
}

#[tokio::test]
async fn made_up_tool_names_add_no_series() {
    let demo = start_demo();
    let client = demo.client().with_token(TOKEN);
    let metrics =
        || async { client.request(reqwest::Method::GET, "/metrics").send().await.unwrap().text().await.unwrap() };
    let before = metrics().await.lines().count();
    for n in 0..300 {
        client.call(&format!("demo.made_up_{n}"), json!({}), None).await;
    }
    let text = metrics().await;
    assert_eq!(text.lines().count(), before, "{text}");
    assert_eq!(sample(&text, r#"tool_calls_total{tool="unknown",outcome="unknown_tool"}"#), Some(300.0));
}

#[tokio::test]
async fn a_call_whose_caller_gives_up_is_counted_and_logged_as_cancelled() {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("SERVICE_AUTH_TOKEN", TOKEN).env("RUST_LOG", "module_sdk=debug");
    let demo = Process::start(command);
    let client = demo.client().with_token(TOKEN);
    let call = json!({"tool_name": "demo.sleep", "arguments": {"millis": 900}, "user_id": null});
    let request = client.request(reqwest::Method::POST, "/execute").json(&call).timeout(Duration::from_millis(200));
    assert!(request.send().await.unwrap_err().is_timeout(), "the client gave up");
    let cancelled = r#"tool_calls_total{tool="demo.sleep",outcome="cancelled"}"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = demo.client().request(reqwest::Method::GET, "/metrics").send().await.unwrap().text().await.unwrap();
        if sample(&text, cancelled) == Some(1.0) || tokio::time::Instant::now() >= deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(sample(&text, cancelled), Some(1.0), "{text}");
    assert_eq!(sample(&text, r#"tool_calls_total{tool="demo.sleep",outcome="success"}"#), Some(0.0), "{text}");
    assert_eq!(sample(&text, r#"tool_call_duration_seconds_count{tool="demo.sleep"}"#), Some(1.0), "{text}");
    assert_eq!(sample(&text, r#"tool_calls_in_flight{tool="demo.sleep"}"#), Some(0.0), "{text}");
    let logged = |line: &str| line.contains("tool call") && line.contains("cancelled");
    assert!(demo.wait_for_log_line(logged, Duration::from_secs(10)), "no cancelled event: {:?}", demo.logs());
    let event = demo.events().into_iter().find(|event| event["outcome"] == "cancelled").unwrap();
    assert_eq!(event["tool"], "demo.sleep", "{event}");
    let duration_ms = event["duration_ms"].as_f64().unwrap();
    // The caller left after 200 ms (counted from before it connected) and the
    // call would have taken 900: the time recorded is the time until it left.
    assert!(duration_ms > 0.0 && duration_ms < 900.0, "the time until the caller left: {event}");
}
