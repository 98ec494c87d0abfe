//! Whole-process tests: the demo example module (`examples/demo.rs`) runs as
//! a real process on a free port and is called over HTTP.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::Process;

/// A running demo module; killed when dropped, even if the test panics.
struct Demo {
    process: Process,
    /// How many log lines [`Demo::next_event`] has looked at.
    seen: usize,
}

/// The demo binary, which `cargo test` builds with the package's examples.
fn demo_binary() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let path = deps.parent().unwrap().join("examples").join("demo");
    assert!(
        path.exists(),
        "{} is missing: run `cargo test -p module-sdk` (which builds examples) or `cargo build -p module-sdk --examples`",
        path.display()
    );
    path
}

impl Demo {
    /// Starts the demo with `env` on a port the kernel picks.
    fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(demo_binary());
        command.env_remove("SERVICE_AUTH_TOKEN").env_remove("MAX_BODY_BYTES").envs(env.iter().copied());
        Self { process: Process::start(command), seen: 0 }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.process.url())
    }

    /// The next JSON log event whose message is `message` (within 10 s).
    fn next_event(&mut self, message: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let logs = self.process.logs();
            for (index, line) in logs.iter().enumerate().skip(self.seen) {
                let event: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                if event["message"] == message {
                    self.seen = index + 1;
                    return event;
                }
            }
            assert!(Instant::now() < deadline, "no `{message}` event in the log: {logs:#?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

async fn execute(demo: &Demo, body: Value) -> Value {
    let response = client().post(demo.url("/execute")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

/// A raw body to `/execute`: the status and the JSON answer.
async fn execute_raw(demo: &Demo, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
    let response = client()
        .post(demo.url("/execute"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.expect("every answer is JSON"))
}

#[tokio::test]
async fn manifest_parameters_agree_with_input_schema() {
    let demo = Demo::start(&[]);
    let manifest: Value = client().get(demo.url("/manifest")).send().await.unwrap().json().await.unwrap();
    assert_eq!(manifest["module_name"], "demo");
    assert_eq!(manifest["contract_version"], "1");
    let names: Vec<&str> = manifest["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["demo.greet", "demo.plan_trip", "demo.sleep", "demo.explode"]);
    for tool in manifest["tools"].as_array().unwrap() {
        let schema = &tool["input_schema"];
        assert_eq!(schema["type"], "object");
        assert!(module_sdk::schema::unresolved_references(schema).is_empty());
        let properties = schema["properties"].as_object().unwrap();
        let required: Vec<&str> =
            schema["required"].as_array().map_or(vec![], |r| r.iter().map(|v| v.as_str().unwrap()).collect());
        let parameters = tool["parameters"].as_array().unwrap();
        let parameter_names: Vec<&str> = parameters.iter().map(|p| p["name"].as_str().unwrap()).collect();
        let property_names: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(parameter_names, property_names, "declaration order, same names");
        for parameter in parameters {
            let name = parameter["name"].as_str().unwrap();
            assert_eq!(parameter["required"], required.contains(&name), "{name}");
            assert!(!parameter["description"].as_str().unwrap().is_empty());
        }
    }
    let plan = &manifest["tools"][1];
    assert_eq!(plan["required_permission"], "user");
    let view: Vec<(&str, &str, bool)> = plan["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["type"].as_str().unwrap(), p["required"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        view,
        [
            ("origin", "object", true),
            ("stops", "array", true),
            ("mode", "string", false),
            ("max_hours_per_day", "number", false)
        ]
    );
    assert_eq!(plan["parameters"][2]["enum"], json!(["car", "train", "bike"]));
    assert_eq!(manifest["tools"][0]["parameters"][1]["enum"], json!(["plain", "formal"]));
    assert_eq!(manifest["tools"][2]["timeout_seconds"], 1.0);
    assert_eq!(manifest["tools"][3]["annotations"]["destructive"], true);
}

#[tokio::test]
async fn valid_calls_succeed_and_user_id_reaches_the_handler() {
    let demo = Demo::start(&[]);
    let greeting =
        execute(&demo, json!({"tool_name": "demo.greet", "arguments": {"name": "Ann", "excitement": 2}})).await;
    assert_eq!(
        greeting,
        json!({"tool_name": "demo.greet", "success": true, "result": {"text": "Hello, Ann!!"}, "error": null})
    );
    let trip = execute(
        &demo,
        json!({"tool_name": "demo.plan_trip", "user_id": "u-42", "arguments": {
            "origin": {"name": "Oslo", "coordinates": {"lat": 59.9, "lon": 10.7}},
            "stops": [{"name": "Bergen"}], "mode": "train"
        }}),
    )
    .await;
    assert_eq!(trip["result"]["legs"], json!(["Oslo -> Bergen"]));
    assert_eq!(trip["result"]["planned_for"], "u-42");
}

#[tokio::test]
async fn invalid_arguments_get_a_tool_result_naming_the_path() {
    let demo = Demo::start(&[]);
    let cases = [
        (json!({"name": "Ann", "excitement": "five"}), "arguments.excitement: expected integer, got \"five\""),
        (json!({}), "arguments.name: required field is missing"),
        (json!({"name": "Ann", "style": "shouty"}), "arguments.style"),
        (json!({"name": {"first": "Ann"}}), "arguments.name: expected string"),
        (json!({"name": "Ann", "excitement": 9}), "at most 5"),
        (json!({"name": "Ann", "excitment": 2}), "arguments: unexpected field(s) excitment"),
    ];
    for (arguments, expected) in cases {
        let result = execute(&demo, json!({"tool_name": "demo.greet", "arguments": arguments})).await;
        assert_eq!(result["success"], false);
        assert_eq!(result["error_kind"], "invalid_arguments");
        assert_eq!(result["result"], Value::Null);
        let error = result["error"].as_str().unwrap();
        assert!(error.contains(expected), "{error} should contain {expected}");
    }
    let nested = execute(
        &demo,
        json!({"tool_name": "demo.plan_trip", "arguments": {"origin": {"name": "A"}, "stops": [{"name": "B"}, {"name": ["C"]}]}}),
    )
    .await;
    assert_eq!(nested["error"], "arguments.stops[1].name: expected string, got [\"C\"]");
    let unknown = execute(&demo, json!({"tool_name": "demo.nope", "arguments": {}})).await;
    assert_eq!(unknown["error_kind"], "unknown_tool");
}

#[tokio::test]
async fn bodies_that_are_not_tool_calls_get_a_4xx_json_error() {
    let demo = Demo::start(&[]);
    let (status, body) = execute_raw(&demo, "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("not valid JSON"));
    for not_a_call in [
        json!({"tool_name": "demo.greet", "arguments": [1, 2]}),
        json!({"tool_name": "demo.greet", "arguments": "name=Ann"}),
        json!({"arguments": {}}),
        json!([1]),
    ] {
        let (status, body) = execute_raw(&demo, not_a_call.to_string()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{not_a_call}");
        assert!(body["error"].as_str().unwrap().contains("not a ToolCall"), "{body}");
    }
    let huge = format!(r#"{{"tool_name":"demo.greet","arguments":{{"name":"{}"}}}}"#, "x".repeat(3 * 1024 * 1024));
    let (status, body) = execute_raw(&demo, huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["error"].as_str().unwrap().contains("MAX_BODY_BYTES"));
    // The module still serves after all of that.
    let ok = execute(&demo, json!({"tool_name": "demo.greet", "arguments": {"name": "B"}})).await;
    assert_eq!(ok["success"], true);
}

#[tokio::test]
async fn the_body_limit_is_configurable() {
    let demo = Demo::start(&[("MAX_BODY_BYTES", "1000")]);
    let body = json!({"tool_name": "demo.greet", "arguments": {"name": "x".repeat(2000)}});
    let (status, _) = execute_raw(&demo, body.to_string()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_hung_handler_times_out_and_a_panic_is_contained() {
    let demo = Demo::start(&[]);
    let started = std::time::Instant::now();
    let slow = execute(&demo, json!({"tool_name": "demo.sleep", "arguments": {"millis": 60_000}})).await;
    assert_eq!(slow["error_kind"], "timeout");
    assert!(started.elapsed() < Duration::from_secs(5), "the 1 s timeout was enforced");
    let panicked = execute(&demo, json!({"tool_name": "demo.explode", "arguments": {"message": "boom"}})).await;
    assert_eq!(panicked["success"], false);
    assert_eq!(panicked["error_kind"], "execution_failed");
    assert!(!panicked["error"].as_str().unwrap().contains("boom"), "panic text stays in the logs");
    let after = execute(&demo, json!({"tool_name": "demo.sleep", "arguments": {"millis": 1}})).await;
    assert_eq!(after["success"], true);
}

#[tokio::test]
async fn auth_accepts_the_token_and_refuses_missing_or_wrong_ones() {
    let demo = Demo::start(&[("SERVICE_AUTH_TOKEN", "s3cret")]);
    let call = json!({"tool_name": "demo.greet", "arguments": {"name": "A"}});
    for (path, is_post) in [("/manifest", false), ("/execute", true)] {
        for token in [None, Some("Bearer wrong"), Some("s3cret"), Some("Basic s3cret")] {
            let mut request =
                if is_post { client().post(demo.url(path)).json(&call) } else { client().get(demo.url(path)) };
            if let Some(token) = token {
                request = request.header("Authorization", token);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path} with {token:?}");
            let body: Value = response.json().await.unwrap();
            assert!(body["error"].is_string());
        }
        let request = if is_post { client().post(demo.url(path)).json(&call) } else { client().get(demo.url(path)) };
        let response = request.bearer_auth("s3cret").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path} with the right token");
    }
    for open in ["/health", "/openapi.json"] {
        assert_eq!(client().get(demo.url(open)).send().await.unwrap().status(), StatusCode::OK, "{open}");
    }
}

#[tokio::test]
async fn health_and_openapi_describe_the_real_api() {
    let demo = Demo::start(&[]);
    let health: Value = client().get(demo.url("/health")).send().await.unwrap().json().await.unwrap();
    assert_eq!(health, json!({"status": "ok"}));
    let missing = client().get(demo.url("/tools")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let missing: Value = missing.json().await.unwrap();
    assert!(missing["error"].as_str().unwrap().contains("POST /execute"));
    let wrong_method = client().get(demo.url("/execute")).send().await.unwrap();
    assert_eq!(wrong_method.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(wrong_method.json::<Value>().await.unwrap()["error"].is_string());
    let doc: Value = client().get(demo.url("/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(doc["info"]["title"], "demo module");
    for path in ["/health", "/manifest", "/execute", "/openapi.json"] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
    assert!(doc["paths"]["/execute"]["post"]["requestBody"].is_object());
    let schemas = &doc["components"]["schemas"];
    for name in ["ToolCall", "ToolResult", "ModuleManifest", "ErrorBody"] {
        assert!(schemas[name].is_object(), "{name} is a component");
    }
    let result = &schemas["ToolResult"]["properties"]["result"];
    assert!(result.get("type").is_none(), "a ToolResult's result is any JSON value or null: {result}");
    let greet = &schemas["demo.greet.arguments"];
    assert_eq!(greet["properties"]["style"]["$ref"], "#/components/schemas/demo.greet.arguments/$defs/Style");
    let target = greet["properties"]["style"]["$ref"].as_str().unwrap().trim_start_matches('#');
    assert!(doc.pointer(target).is_some(), "rebased references resolve");
}

#[tokio::test]
async fn at_info_calls_log_nothing_but_the_module_own_failures() {
    let demo = Demo::start(&[]);
    for _ in 0..20 {
        execute(&demo, json!({"tool_name": "demo.greet", "user_id": "u", "arguments": {"name": "A"}})).await;
        execute(&demo, json!({"tool_name": "demo.greet", "arguments": {"name": 7}})).await;
    }
    let logs = demo.process.logs().join("\n");
    assert!(!logs.contains("\"tool call\""), "no per-call event at info: {logs}");
}

// Multi-threaded: the call in flight keeps going on a worker while this
// thread blocks in `terminate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_logs_one_event_at_debug_and_sigterm_lets_calls_finish() {
    let mut demo = Demo::start(&[("RUST_LOG", "debug")]);
    execute(&demo, json!({"tool_name": "demo.greet", "user_id": "u", "arguments": {"name": "A"}})).await;
    let event = demo.next_event("tool call");
    assert_eq!(event["tool"], "demo.greet");
    assert_eq!(event["module"], "demo");
    assert_eq!(event["outcome"], "success");
    assert_eq!(event["user_id_present"], true);
    assert!(event["duration_ms"].is_number());

    let in_flight = tokio::spawn({
        let url = demo.url("/execute");
        async move {
            let body = json!({"tool_name": "demo.sleep", "arguments": {"millis": 700}});
            client().post(url).json(&body).send().await.unwrap().json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let exit = demo.process.terminate();
    assert!(exit.success(), "clean exit after SIGTERM: {exit:?}");
    let finished = in_flight.await.unwrap();
    assert_eq!(finished["success"], true, "the call in flight finished: {finished}");
}
