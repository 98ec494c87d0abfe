//! The `contract-tests` command as a user runs it: against a Python module
//! written without the SDK and against the plain-axum fixture, with its
//! reports and exit statuses (0 passed, 1 a check failed, 2 could not run).

// These tests need only a few of the fixture's defects; defects.rs uses them all.
#[allow(dead_code)]
#[path = "fixtures/plain_module.rs"]
mod plain_module;

use std::path::Path;
use std::process::{Command, Output};

use contract_tests::Check;
use plain_module::{Defect, TOKEN, serve};
use serde_json::Value;
use test_support::Process;

const PYTHON_TOKEN: &str = "python-token";

async fn contract_tests(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_contract-tests")).args(args).output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn start_python_module() -> Process {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_module.py");
    let mut command = Command::new("python3");
    command.arg(&script).env("SERVICE_AUTH_TOKEN", PYTHON_TOKEN);
    Process::start(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_module_without_the_sdk_passes_with_a_junit_report() {
    let dir = tempfile::tempdir().unwrap();
    let python = start_python_module();
    let report = dir.path().join("report.xml");
    let output = contract_tests(&[
        "--url",
        &python.url(),
        "--token",
        PYTHON_TOKEN,
        "--report",
        "junit",
        "--out",
        report.to_str().unwrap(),
    ])
    .await;
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}\n{}", text(&output.stderr), python.logs().join("\n"));
    assert_eq!(stdout.matches("\n  PASS ").count(), Check::ALL.len(), "{stdout}");
    assert!(stdout.contains("(pyfixture)"), "{stdout}");
    let xml = std::fs::read_to_string(&report).unwrap();
    assert!(xml.contains(&format!("tests=\"{}\"", Check::ALL.len())), "{xml}");
    assert!(xml.contains("failures=\"0\"") && xml.contains("name=\"execute.wrong_enum\""), "{xml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_exits_1_and_is_named_in_every_report() {
    let module = serve(Defect::UnknownToolNotFound).await;
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("report.json");
    let output = contract_tests(&[
        "--url",
        &module.url,
        "--token",
        TOKEN,
        "--report",
        "json",
        "--out",
        json_path.to_str().unwrap(),
    ])
    .await;
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
    assert!(stdout.contains(&format!("{}: {} passed, 0 failed, 0 skipped", plain.url, Check::ALL.len())), "{stdout}");
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
    ] {
        let output = contract_tests(&args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output.stderr));
    }
}
