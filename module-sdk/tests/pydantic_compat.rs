//! What the SDK serializes validates under the pydantic models of the
//! existing format (strict mode), so existing orchestrators can use our
//! modules unchanged. Needs python3 with pydantic (`scripts/test.sh`
//! installs it).

use std::io::Write;
use std::process::{Command, Stdio};

use module_sdk::contract::{ToolCall, ToolResult};
use module_sdk::{Context, contract::ModuleManifest};
use module_sdk::{ErrorKind, Module, Permission, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Metric,
    Imperial,
}

// Only the schema of these argument types matters here.
#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct Forecast {
    /// City name.
    city: String,
    /// Days ahead (1-7).
    #[serde(default)]
    days: Option<u8>,
    /// Units of the answer.
    unit: Unit,
    /// Extra fields to include.
    #[serde(default)]
    fields: Vec<String>,
    /// Where exactly.
    at: Option<Point>,
}

#[allow(dead_code)]
#[derive(Deserialize, JsonSchema)]
struct Point {
    lat: f64,
    lon: f64,
}

#[derive(Serialize, JsonSchema)]
struct Weather {
    /// Degrees.
    temperature: f64,
}

/// Forecast the weather.
#[tool(permission = "user", read_only, timeout_seconds = 5)]
async fn forecast(_ctx: Context, _args: Forecast) -> Result<Weather, ToolError> {
    Ok(Weather { temperature: 21.5 })
}

fn manifest() -> ModuleManifest {
    Module::new("weather", "Weather tools.").version("0.1.0").tool(forecast).build().unwrap().manifest().clone()
}

/// Runs the pydantic models over `documents`: the exit code and the report.
fn pydantic(documents: &Value) -> (Option<i32>, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/pydantic_contract.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test.sh installs it with pydantic)");
    child.stdin.take().unwrap().write_all(documents.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn manifests_calls_and_results_validate_under_the_existing_pydantic_models() {
    let manifest = manifest();
    assert_eq!(manifest.tools[0].required_permission, Permission::User);
    let call = ToolCall {
        tool_name: "weather.forecast".into(),
        arguments: json!({"city": "Oslo", "unit": "metric"}).as_object().unwrap().clone(),
        user_id: Some("u1".into()),
    };
    let results = [
        ToolResult::success("weather.forecast", json!({"temperature": 21.5})),
        ToolResult::failure(
            "weather.forecast",
            ErrorKind::InvalidArguments,
            "arguments.city: required field is missing",
        ),
    ];
    let documents = json!({
        "manifests": [manifest],
        "calls": [call],
        "results": results,
    });
    let (code, report) = pydantic(&documents);
    assert_eq!(code, Some(0), "pydantic rejected our JSON:\n{report}");
}

#[test]
fn the_strict_models_do_reject_wrong_json_types() {
    // Proof that the check above can fail: a manifest with a numeric
    // description and a parameter whose `required` is a string.
    let mut broken: Value = serde_json::to_value(manifest()).unwrap();
    broken["description"] = json!(5);
    broken["tools"][0]["parameters"][0]["required"] = json!("yes");
    let documents = json!({"manifests": [broken], "calls": [], "results": []});
    let (code, report) = pydantic(&documents);
    assert_eq!(code, Some(1));
    assert!(report.contains("description") && report.contains("required"), "{report}");
}
