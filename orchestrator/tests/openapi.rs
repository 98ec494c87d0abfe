//! `GET /openapi.json` of a real orchestrator: open without a token, every
//! route of the API in it, and valid OpenAPI 3.1 by an independent validator
//! (the Python `openapi-spec-validator`, installed by scripts/test.sh).

mod common;

use common::OrchestratorProcess;
use test_support::openapi_checks::{assert_fuzzer_finds_nothing, assert_valid_openapi};
#[tokio::test]
async fn the_document_lists_every_route_and_passes_an_independent_validator() {
    let orchestrator = OrchestratorProcess::start(&[("ORCHESTRATOR_API_TOKEN", "openapi-test-token-0123456789abcdef")]);
    let (status, doc) = orchestrator.get_with("/openapi.json", None).await;
    assert_eq!(status, 200, "the document needs no token");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{doc}");
    let paths = doc["paths"].as_object().unwrap();
    let routes = [
        ("/health", "get"),
        ("/modules", "get"),
        ("/tools", "get"),
        ("/refresh-tools", "post"),
        ("/execute", "post"),
        ("/v1/tool-calls", "post"),
        ("/approvals", "get"),
        ("/approvals/{id}", "get"),
        ("/approvals/{id}", "post"),
        ("/metrics", "get"),
        ("/mcp", "post"),
        ("/openapi.json", "get"),
    ];
    for (path, method) in routes {
        assert!(paths.get(path).and_then(|item| item.get(method)).is_some(), "{method} {path} is missing");
    }
    let execute = &paths["/execute"]["post"];
    assert!(execute["requestBody"]["content"]["application/json"]["schema"]["$ref"].is_string(), "{execute}");
    for status in ["200", "401", "415", "422"] {
        assert!(execute["responses"].get(status).is_some(), "/execute documents {status}");
    }

    assert_valid_openapi(&serde_json::to_vec(&doc).unwrap());
}

/// Schemathesis (installed by scripts/test.sh) sends requests generated from
/// the document to a real orchestrator routing to a real module, and checks
/// every answer against it: documented status codes, content types and
/// bodies, no server errors. `positive_data_acceptance` is left out: a
/// `message` of `POST /v1/tool-calls` is any JSON by the document, and one
/// that is not in the provider's shape gets its documented `422`.
#[tokio::test]
async fn a_schema_driven_fuzzer_finds_no_undocumented_answer() {
    let (alpha, _) = common::modules::sdk_module("alpha");
    let alpha = common::ModuleServer::sdk(alpha);
    let orchestrator =
        OrchestratorProcess::start(&[("MODULE_SERVICES", &common::module_services(&[("alpha", alpha.url())]))]);
    orchestrator.wait_for_module("alpha", "up", std::time::Duration::from_secs(10)).await;
    assert_fuzzer_finds_nothing(format!("{}/openapi.json", orchestrator.url)).await;
}
