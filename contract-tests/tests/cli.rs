//! The `contract-tests` command as a user runs it: against Python modules
//! written without the SDK (one with every extension, one with only the
//! base fields) and against the plain-axum fixture, at both levels, with its
//! reports and exit statuses (0 passed, 1 a check failed, 2 could not run).

// These tests need only a few of the fixture's defects; defects.rs uses them all.
#[allow(dead_code)]
#[path = "fixtures/plain_module.rs"]
mod plain_module;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use contract_tests::{Check, Level};
use plain_module::{Defect, TOKEN, serve};
use serde_json::Value;
use test_support::Process;

const PYTHON_TOKEN: &str = "python-token";

/// What the base-only Python module does differently from the full
/// contract: these checks warn at `--level base` and fail at `--level full`.
const EXTENSION_FINDINGS: [&str; 11] = [
    "openapi.document",
    "auth.missing_token",
    "auth.wrong_token",
    "execute.result_shape",
    "execute.missing_required",
    "execute.wrong_type",
    "execute.wrong_enum",
    "execute.arguments_not_object",
    "execute.unknown_tool",
    "execute.non_json_body",
    "execute.missing_tool_name",
];

/// The checks of extensions the base-only Python module does not send:
/// every check above base but the OpenAPI document (which it has, in a form
/// `EXTENSION_FINDINGS` names) and the 413 to a body over its limit (which
/// it answers).
fn absent_extensions() -> BTreeSet<&'static str> {
    let present = ["openapi.document", "execute.body_too_large"];
    Check::ALL.iter().filter(|c| c.level() != Level::Base && !present.contains(&c.name())).map(|c| c.name()).collect()
}

async fn contract_tests(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_contract-tests")).args(args).output().await.unwrap()
}

/// The command against the module at `url` with `token`, then `more` arguments.
async fn check(url: &str, token: &str, more: &[&str]) -> Output {
    contract_tests(&[&["--url", url, "--token", token], more].concat()).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The checks of each status (`PASS`, `WARN`, `FAIL`, `SKIP`) in the printed report.
fn statuses(stdout: &str) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut found: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("  ") else { continue };
        if let Some((label, rest)) = rest.split_once(' ')
            && ["PASS", "WARN", "FAIL", "SKIP"].contains(&label)
            && let Some((check, _)) = rest.split_once(':')
        {
            found.entry(label).or_default().insert(check);
        }
    }
    found
}

fn start_python_module() -> Process {
    start_python("python_module.py")
}

fn start_base_python_module() -> Process {
    start_python("base_python_module.py")
}

fn start_python(fixture: &str) -> Process {
    Process::start(python_command(fixture))
}

fn python_command(fixture: &str) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(fixture);
    let mut command = Command::new("python3");
    command.arg(&script).env("SERVICE_AUTH_TOKEN", PYTHON_TOKEN);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_module_without_the_sdk_passes_with_a_junit_report() {
    let dir = tempfile::tempdir().unwrap();
    let python = start_python_module();
    let report = dir.path().join("report.xml");
    let output = check(&python.url(), PYTHON_TOKEN, &["--report", "junit", "--out", report.to_str().unwrap()]).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}\n{}", text(&output.stderr), python.logs().join("\n"));
    assert_eq!(stdout.matches("\n  PASS ").count(), Check::ALL.len(), "{stdout}");
    assert!(stdout.contains("(pyfixture)"), "{stdout}");
    let xml = std::fs::read_to_string(&report).unwrap();
    assert!(xml.contains(&format!("tests=\"{}\"", Check::ALL.len())), "{xml}");
    assert!(xml.contains("failures=\"0\"") && xml.contains("name=\"execute.wrong_enum\""), "{xml}");
    assert!(xml.contains("<property name=\"level\" value=\"full\"/>"), "{xml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_python_module_passes_every_check_at_base_too() {
    let python = start_python_module();
    let output = check(&python.url(), PYTHON_TOKEN, &["--level", "base"]).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", text(&output.stderr));
    assert!(stdout.contains(&format!("{} (pyfixture), level base\n", python.url())), "{stdout}");
    assert!(
        stdout.contains(&format!("{}: {} passed, 0 warned, 0 failed, 0 skipped", python.url(), Check::ALL.len())),
        "{stdout}"
    );
}

/// A module that answers 413 to a body over its limit without reading it
/// (as aiohttp, nginx and Go's net/http may) breaks off the client's write:
/// that is its refusal, noted, and neither a failed check nor a server error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_refusing_an_oversized_body_unread_passes_both_levels() {
    let mut command = python_command("python_module.py");
    command.env("OVERSIZED_BODY_UNREAD", "1");
    let python = Process::start(command);
    // The client sometimes reads the 413 before the connection breaks: a few runs see the break.
    for level in ["base", "full", "full"] {
        let output = check(&python.url(), PYTHON_TOKEN, &["--level", level]).await;
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{level}: {stdout}\n{}", text(&output.stderr));
        assert_eq!(statuses(&stdout).get("FAIL"), None, "{level}: {stdout}");
        assert_eq!(statuses(&stdout)["PASS"].len(), Check::ALL.len(), "{level}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_only_python_module_passes_base_with_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let python = start_base_python_module();
    let report = dir.path().join("report.xml");
    let junit = ["--level", "base", "--report", "junit", "--out", report.to_str().unwrap()];
    let output = check(&python.url(), PYTHON_TOKEN, &junit).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}\n{}", text(&output.stderr), python.logs().join("\n"));
    assert!(stdout.contains(&format!("{} (legacy), level base\n", python.url())), "{stdout}");
    let found = statuses(&stdout);
    assert_eq!(found.get("FAIL"), None, "{stdout}");
    assert_eq!(found["WARN"], BTreeSet::from(EXTENSION_FINDINGS), "{stdout}");
    let skipped = absent_extensions().len();
    assert_eq!(found["SKIP"], absent_extensions(), "{stdout}");
    let passed = Check::ALL.len() - EXTENSION_FINDINGS.len() - skipped;
    assert_eq!(found["PASS"].len(), passed, "{stdout}");
    assert!(
        found["PASS"].contains("execute.valid_arguments") && found["PASS"].contains("http.no_server_errors"),
        "{stdout}"
    );
    for warning in [
        "  WARN execute.unknown_tool: call to legacy.contract_tests_no_such_tool: expected success: false with error_kind \"unknown_tool\", got success: false, no error_kind",
        "  WARN auth.missing_token: GET /manifest: expected 401, got 403",
        "  WARN execute.non_json_body: POST /execute with a body that is not JSON: 422 but the body is not {\"error\": string}: {\"detail\":",
        "  SKIP schema.input_metaschema: no tool has an input_schema (an extension)",
    ] {
        assert!(stdout.contains(warning), "{warning}\n{stdout}");
    }
    assert!(
        stdout.contains(&format!(
            "{}: {passed} passed, {} warned, 0 failed, {skipped} skipped",
            python.url(),
            EXTENSION_FINDINGS.len()
        )),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&report).unwrap();
    assert!(xml.contains("failures=\"0\"") && xml.contains("<property name=\"level\" value=\"base\"/>"), "{xml}");
    assert!(xml.contains("<system-out>warning: call to legacy.contract_tests_no_such_tool"), "{xml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_only_python_module_fails_full_naming_the_extension_checks() {
    let dir = tempfile::tempdir().unwrap();
    let python = start_base_python_module();
    let json_path = dir.path().join("report.json");
    // No --level: full is the default.
    let output = check(&python.url(), PYTHON_TOKEN, &["--report", "json", "--out", json_path.to_str().unwrap()]).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{}", text(&output.stderr));
    assert!(stdout.contains("(legacy), level full\n"), "{stdout}");
    let found = statuses(&stdout);
    assert_eq!(found["FAIL"], BTreeSet::from(EXTENSION_FINDINGS), "{stdout}");
    assert_eq!(found.get("WARN"), None, "{stdout}");
    assert!(
        stdout.contains("  FAIL execute.missing_required: legacy.echo with required `text` left out: expected success: false with error_kind \"invalid_arguments\", got 422 {\"detail\":"),
        "{stdout}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["passed"], false);
    assert_eq!(report["modules"][0]["level"], "full");
    let results = report["modules"][0]["results"].as_array().unwrap();
    let unknown = results.iter().find(|r| r["check"] == "execute.unknown_tool").unwrap();
    assert_eq!((&unknown["level"], &unknown["status"]), (&Value::from("base"), &Value::from("failed")));
    let openapi = results.iter().find(|r| r["check"] == "openapi.document").unwrap();
    assert_eq!((&openapi["level"], &openapi["status"]), (&Value::from("full"), &Value::from("failed")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_exits_1_and_is_named_in_every_report() {
    let module = serve(Defect::UnknownToolNotFound).await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let output = check(&module.url, TOKEN, &["--report", "json", "--out", json_path.to_str().unwrap()]).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("  FAIL execute.unknown_tool: call to fixture.contract_tests_no_such_tool: expected success: false with error_kind \"unknown_tool\", got success: false, error_kind \"not_found\""),
        "{stdout}"
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report["passed"], false);
    let failed: Vec<&str> = report["modules"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "failed")
        .map(|r| r["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["execute.unknown_tool"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_modules_are_checked_in_one_run() {
    let python = start_python_module();
    let plain = serve(Defect::None).await;
    // The token is the plain module's: the Python module refuses it, which
    // fails that module's checks only.
    let output = contract_tests(&["--url", &plain.url, "--url", &python.url(), "--token", TOKEN]).await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("{} (fixture)", plain.url)), "{stdout}");
    let summary = format!("{}: {} passed, 0 warned, 0 failed, 0 skipped", plain.url, Check::ALL.len());
    assert!(stdout.contains(&summary), "{stdout}");
    assert!(stdout.contains("  FAIL manifest.available: GET /manifest: expected 200, got 401"), "{stdout}");
}

#[tokio::test]
async fn an_unreachable_module_exits_2() {
    // A port the kernel just handed out and nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let output = contract_tests(&["--url", &url]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("nothing answers there"), "{}", text(&output.stderr));
}

#[tokio::test]
async fn bad_arguments_exit_2() {
    for args in [
        vec![],
        vec!["--url", "not a url"],
        vec!["--url", "ftp://127.0.0.1:21"],
        vec!["--url", "http://127.0.0.1:1", "--report", "json"],
        vec!["--url", "http://127.0.0.1:1", "--report", "xml", "--out", "x"],
        vec!["--url", "http://127.0.0.1:1", "--level", "strict"],
    ] {
        let output = contract_tests(&args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output.stderr));
    }
}
