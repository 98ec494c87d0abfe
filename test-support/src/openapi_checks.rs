//! Independent checks of a server's OpenAPI document: the Python
//! `openapi-spec-validator`, and Schemathesis (`st`), a fuzzer that sends
//! requests generated from the document and checks every answer against it.
//! Both are installed by scripts/test.sh.

use std::process::Command;

/// `document` (the JSON of an OpenAPI document) passes openapi-spec-validator.
pub fn assert_valid_openapi(document: &[u8]) {
    let file = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(file.path(), document).expect("the document is written");
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

/// Schemathesis, run against the live server whose document is at
/// `document_url`, finds no answer the document does not describe (status,
/// content type, body) and no server error. `positive_data_acceptance` is
/// left out: the callers' documents say why for their servers.
pub async fn assert_fuzzer_finds_nothing(document_url: String) {
    // Schemathesis keeps a cache of its findings in `.schemathesis/` of its working directory.
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let scratch_path = scratch.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("st")
            .current_dir(scratch_path)
            .args(["run", &document_url, "--checks", "all", "--exclude-checks", "positive_data_acceptance"])
            .args(["--max-examples", "30", "--seed", "17", "--no-color"])
            .output()
            .expect("schemathesis (`st`) runs: scripts/test.sh installs it")
    })
    .await
    .expect("the fuzzer's thread finishes");
    assert!(
        output.status.success(),
        "schemathesis found answers the document does not describe:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
