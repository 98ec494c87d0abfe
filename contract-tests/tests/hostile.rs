//! The `contract-tests` command against modules that attack it instead of
//! keeping the contract (`fixtures/hostile_module.py`, one attack per
//! `HOSTILE_MODE`): each run ends, within the checker's budgets, with a
//! report that names the budget or the attack, and never passes.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use test_support::Process;

/// Far longer than any of these runs takes with its budgets; a run still
/// going then has none, and is killed so the test fails instead of hanging.
const HANG_GUARD: Duration = Duration::from_secs(300);

/// The hostile module attacking in `mode`.
fn start_hostile(mode: &str) -> Process {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_module.py");
    let mut command = Command::new("python3");
    command.arg(&script).env("HOSTILE_MODE", mode);
    Process::start(command)
}

/// What the checker printed, and its exit status, run against `module` with `more` arguments.
async fn check(module: &Process, more: &[&str]) -> (String, Option<i32>) {
    let url = module.url();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_contract-tests"))
        .args([&["--url", url.as_str()], more].concat())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(HANG_GUARD, run)
        .await
        .unwrap_or_else(|_| panic!("contract-tests {more:?} against {url} still ran after {HANG_GUARD:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (format!("{stdout}{stderr}"), output.status.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_max_response_bytes_is_cut_off_and_fails_its_check() {
    let module = start_hostile("chunked_manifest");
    let (report, status) = check(&module, &["--max-response-bytes", "1048576"]).await;
    assert_eq!(status, Some(1), "{report}");
    assert!(
        report.contains(
            "  FAIL manifest.available: GET /manifest: the answer is larger than 1048576 bytes (--max-response-bytes); the rest was not read"
        ),
        "{report}"
    );
}
