//! A real module's `GET /openapi.json` passes an independent validator (the
//! Python `openapi-spec-validator`) and a schema-driven fuzzer
//! (Schemathesis), both installed by scripts/test.sh.

use std::process::Command;

use test_support::{Process, built_binary};

fn start_demo() -> Process {
    let mut command = Command::new(built_binary("examples/demo"));
    command.env("RUST_LOG", "warn");
    Process::start(command)
}

#[tokio::test]
async fn the_module_document_is_valid_openapi() {
    let demo = start_demo();
    let response = demo.client().request(reqwest::Method::GET, "/openapi.json").send().await.unwrap();
    assert_eq!(response.status(), 200);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), response.bytes().await.unwrap()).unwrap();
    let script =
        "import json, sys\nfrom openapi_spec_validator import validate\nvalidate(json.load(open(sys.argv[1])))";
    let output = Command::new("python3")
        .args(["-c", script])
        .arg(file.path())
        .output()
        .expect("python3 runs (scripts/test.sh installs openapi-spec-validator)");
    assert!(
        output.status.success(),
        "openapi-spec-validator refused the document: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every answer Schemathesis provokes is documented (status, content type,
/// body), none is a server error. `positive_data_acceptance` is left out:
/// `POST /mcp` also needs an `Accept` header of both JSON and event streams
/// (the MCP transport's rule), which the document does not express yet.
#[tokio::test]
async fn a_schema_driven_fuzzer_finds_no_undocumented_answer() {
    let demo = start_demo();
    let document = format!("{}/openapi.json", demo.url());
    // Schemathesis keeps a cache of its findings in `.schemathesis/` of its working directory.
    let scratch = tempfile::tempdir().unwrap();
    let scratch_path = scratch.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("st")
            .current_dir(scratch_path)
            .args(["run", &document, "--checks", "all", "--exclude-checks", "positive_data_acceptance"])
            .args(["--max-examples", "30", "--seed", "17", "--no-color"])
            .output()
            .expect("schemathesis (`st`) runs: scripts/test.sh installs it")
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "schemathesis found answers the document does not describe:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
