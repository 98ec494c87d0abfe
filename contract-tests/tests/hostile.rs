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

/// Schemas whose valid arguments would not fit in memory or time are not
/// called, and fail `execute.valid_arguments` naming the generator's budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_asking_for_more_than_the_generators_budgets_are_reported_not_called() {
    for (mode, line) in [
        (
            "huge_string",
            "  FAIL execute.valid_arguments: hostile.text not called: a valid sample needs a string of at least 100000000 characters, more than the 1048576 a generated sample may hold (MAX_SAMPLE_CHARS)",
        ),
        (
            "huge_array",
            "  FAIL execute.valid_arguments: hostile.list not called: a valid sample needs an array of at least 4000000000 items, more than the 100000 values a generated sample may hold (MAX_SAMPLE_VALUES)",
        ),
        (
            "self_referencing",
            "  FAIL execute.valid_arguments: hostile.tree not called: a valid sample holds more than 100000 values (MAX_SAMPLE_VALUES)",
        ),
    ] {
        let module = start_hostile(mode);
        let (report, status) = check(&module, &[]).await;
        assert_eq!(status, Some(1), "{mode}: {report}");
        assert!(report.contains(line), "{mode}: expected {line:?} in\n{report}");
        assert!(!module.logs().iter().any(|line| line.contains("\"called\"")), "{mode}: {:?}", module.logs());
    }
}

/// A tool whose `input_schema` is over the schema budgets an orchestrator
/// checks is not called either: at the full level `schema.input_budget`
/// fails its schema and `execute.valid_arguments` notes the tool; at the
/// base level, where `schema.input_budget` only warns, `execute.valid_arguments`
/// fails it, so a module whose tools are never called cannot pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_over_the_schema_budgets_is_not_called() {
    let module = start_hostile("schema_over_budget");
    let not_called = "hostile.graph not called: its input_schema is over the schema budgets (";
    let noted = format!("         note: {not_called}");
    let failed = format!("  FAIL execute.valid_arguments: {not_called}");
    for (level, label, line) in [("full", "FAIL", &noted), ("base", "WARN", &failed)] {
        let (report, exit) = check(&module, &["--level", level]).await;
        assert_eq!(exit, Some(1), "{report}");
        assert!(report.contains(&format!("  {label} schema.input_budget: hostile.graph input_schema: ")), "{report}");
        assert!(report.contains(line.as_str()), "{level}: expected {line:?} in\n{report}");
    }
    assert!(!module.logs().iter().any(|line| line.contains("\"called\"")), "{:?}", module.logs());
}

/// Past `--max-tools`, the other tools are not called, and the run says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_past_max_tools_are_not_called() {
    let module = start_hostile("many_tools");
    let (report, status) = check(&module, &["--max-tools", "3"]).await;
    assert_eq!(status, Some(1), "{report}");
    assert!(
        report.contains(
            "  FAIL execute.valid_arguments: 997 of the 1000 tools not called: only the first 3 are (--max-tools)"
        ),
        "{report}"
    );
    let called: Vec<String> = module.logs().into_iter().filter(|line| line.contains("\"called\"")).collect();
    assert!(
        called.iter().all(|line| ["t0", "t1", "t2"].iter().any(|t| line.contains(&format!("hostile.{t}\"")))),
        "{called:?}"
    );
}

/// Tools that never answer, each trusted with 600 s: the run ends at
/// `--max-run-seconds`, cutting off the call in flight, calling nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_ends_at_max_run_seconds() {
    let module = start_hostile("hanging");
    let (report, status) = check(&module, &["--max-run-seconds", "3"]).await;
    assert_eq!(status, Some(1), "{report}");
    let out_of_time = "the run's time ran out (--max-run-seconds); no request is made after it";
    assert!(
        report.contains(&format!("  FAIL execute.valid_arguments: hostile.wait0 with {{}}: {out_of_time}")),
        "{report}"
    );
    assert!(report.contains("1 of the 2 tools not called: the run's time ran out (--max-run-seconds)"), "{report}");
    assert!(
        report.contains(&format!(
            "  FAIL execute.unknown_tool: call to hostile.contract_tests_no_such_tool: {out_of_time}"
        )),
        "{report}"
    );
}

/// A module that redirects elsewhere (here to a stand-in for a cloud
/// metadata service) gets a failure naming where it points: the checker
/// follows no redirect, so nothing of the other host reaches the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_reported_not_followed() {
    let module = start_hostile("redirect");
    let (report, status) = check(&module, &[]).await;
    assert_eq!(status, Some(1), "{report}");
    assert!(
        report.contains("  FAIL manifest.available: GET /manifest: redirected (302) to http://127.0.0.1:"),
        "{report}"
    );
    assert!(report.contains("/manifest; redirects are not followed"), "{report}");
    assert!(!report.contains("INTERNAL-SECRET"), "{report}");
    assert!(!module.logs().iter().any(|line| line.contains("metadata read")), "{:?}", module.logs());
}

/// What a module sends is printed with its control characters escaped: a
/// module name holding a line break, a forged summary and escape sequences
/// stays on its own line, shown as sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_from_the_module_are_escaped() {
    let module = start_hostile("forged_lines");
    let (report, status) = check(&module, &[]).await;
    assert_eq!(status, Some(1), "{report}");
    for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!report.contains(raw), "{raw:?} printed raw:\n{report}");
    }
    assert!(!report.lines().any(|line| line.starts_with("http://127.0.0.1: 39 passed")), "{report}");
    let escaped = r"(hostile\nhttp://127.0.0.1: 39 passed, 0 warned, 0 failed, 0 skipped\u{1b}[1A\u{1b}[2K\u{1b}]0;owned\u{7}\u{202e}), level full";
    assert!(report.contains(escaped), "{report}");
}

/// An `output_schema` of a few KB that would take 2^40 steps to check a
/// result against is held to the schema budgets: `schema.output_budget`
/// warns naming the budget (CONTRACT.md does not state it), and the results
/// are not checked against it, so the run ends instead of hanging.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_schema_over_the_schema_budgets_is_reported_not_used() {
    let module = start_hostile("output_exponential");
    let (report, _) = check(&module, &[]).await;
    assert!(!report.contains("FAIL schema.output"), "{report}");
    assert!(
        report.contains(
            "  WARN schema.output_budget: hostile.answer output_schema: it has more than 10000 subschemas once references are inlined (budget MAX_SCHEMA_NODES)"
        ),
        "{report}"
    );
    assert!(
        report.contains(
            "         note: hostile.answer's results are not checked: its output_schema is over the schema budgets ("
        ),
        "{report}"
    );
    assert!(module.logs().iter().any(|line| line.contains("\"called\"")), "{:?}", module.logs());
}

/// Tools each within the one-schema budgets whose `input_schema`s hold more
/// patterns and text together than an orchestrator takes from one manifest:
/// `schema.input_budget` fails naming `MAX_SCHEMA_PATTERNS` for the tool
/// past it and `MAX_MANIFEST_SCHEMA_BYTES` for the manifest, as the
/// orchestrator would refuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_over_the_manifest_wide_budgets_fail_schema_input_budget() {
    let module = start_hostile("manifest_budgets");
    let (report, status) = check(&module, &["--max-tools", "1"]).await;
    assert_eq!(status, Some(1), "{report}");
    assert!(
        report.contains(
            "  FAIL schema.input_budget: hostile.t64 input_schema: it brings its manifest's schemas to more than 64 patterns (pattern, patternProperties; each schema's distinct ones, added up) (budget MAX_SCHEMA_PATTERNS)"
        ),
        "{report}"
    );
    assert!(
        report.contains(
            "\n         the tools' input_schemas take more than 16777216 bytes together once references are inlined (budget MAX_MANIFEST_SCHEMA_BYTES); an orchestrator refuses the whole manifest\n"
        ),
        "{report}"
    );
}
