//! A real module's `GET /openapi.json` passes an independent validator (the
//! Python `openapi-spec-validator`) and a schema-driven fuzzer
//! (Schemathesis), both installed by scripts/test.sh.

use std::process::Command;

use test_support::openapi_checks::{assert_fuzzer_finds_nothing, assert_valid_openapi};
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
    assert_valid_openapi(&response.bytes().await.unwrap());
}

/// Every answer Schemathesis provokes is documented (status, content type,
/// body), none is a server error. `positive_data_acceptance` is left out:
/// `POST /mcp` also needs an `Accept` header of both JSON and event streams
/// (the MCP transport's rule), which the document does not express yet.
#[tokio::test]
async fn a_schema_driven_fuzzer_finds_no_undocumented_answer() {
    let demo = start_demo();
    assert_fuzzer_finds_nothing(format!("{}/openapi.json", demo.url())).await;
}
