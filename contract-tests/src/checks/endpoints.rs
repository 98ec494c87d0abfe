//! `GET /health` and `GET /openapi.json`, the two routes that never need a token.

use serde_json::Value;

use crate::check::{Check, Findings};
use crate::client::{Auth, Failure, ModuleClient, shorten};

/// The routes every module serves, with their methods.
pub const ROUTES: [(&str, &str); 4] =
    [("/health", "get"), ("/manifest", "get"), ("/execute", "post"), ("/openapi.json", "get")];

/// Checks `/health`; `Err` when nothing answers at the module's URL at all.
pub async fn check_health(client: &ModuleClient, findings: &mut Findings) -> Result<(), Failure> {
    findings.ran(Check::HealthOk);
    match client.get("/health", Auth::Without).await {
        Err(failure @ Failure::Unreachable(_)) => return Err(failure),
        Err(failure) => findings.fail(Check::HealthOk, format!("GET /health: {failure}")),
        Ok(reply) if reply.status != 200 => {
            findings.fail(Check::HealthOk, format!("GET /health: expected 200, got {}", reply.status));
        }
        Ok(reply) => match reply.json() {
            Ok(body) if body.get("status").and_then(Value::as_str) == Some("ok") => {}
            Ok(body) => findings.fail(
                Check::HealthOk,
                format!("GET /health: expected {{\"status\":\"ok\"}}, got {}", shorten(&body.to_string())),
            ),
            Err(problem) => findings.fail(Check::HealthOk, format!("GET /health: {problem}")),
        },
    }
    Ok(())
}

/// Checks that `/openapi.json` is an OpenAPI 3.1 document with the four routes.
pub async fn check_openapi(client: &ModuleClient, findings: &mut Findings) {
    findings.ran(Check::OpenApiDocument);
    for problem in openapi_problems(client).await {
        findings.fail(Check::OpenApiDocument, format!("GET /openapi.json: {problem}"));
    }
}

async fn openapi_problems(client: &ModuleClient) -> Vec<String> {
    let reply = match client.get("/openapi.json", Auth::Without).await {
        Ok(reply) => reply,
        Err(failure) => return vec![failure.to_string()],
    };
    if reply.status != 200 {
        return vec![format!("expected 200, got {}", reply.status)];
    }
    match reply.json() {
        Ok(document) => document_problems(document),
        Err(problem) => vec![problem],
    }
}

/// What keeps `document` from being an OpenAPI 3.1 description of a module.
fn document_problems(document: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    match document.get("openapi").and_then(Value::as_str) {
        Some(version) if version.starts_with("3.1") => {}
        Some(version) => problems.push(format!("`openapi` is {version:?}, expected 3.1.x")),
        None => problems.push("no `openapi` version string".to_owned()),
    }
    let paths = document.get("paths").and_then(Value::as_object);
    for (path, method) in ROUTES {
        let listed = paths.and_then(|paths| paths.get(path)).and_then(|item| item.get(method)).is_some();
        if !listed {
            problems.push(format!("`paths` does not list {} {path}", method.to_uppercase()));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_needs_version_and_all_routes() {
        let good = json!({"openapi": "3.1.0", "paths": {
            "/health": {"get": {}}, "/manifest": {"get": {}}, "/execute": {"post": {}}, "/openapi.json": {"get": {}}
        }});
        assert!(document_problems(&good).is_empty());
        let bad = json!({"openapi": "3.0.3", "paths": {"/health": {"get": {}}, "/execute": {"get": {}}}});
        let problems = document_problems(&bad);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("3.0.3"));
        assert!(problems.iter().any(|p| p.contains("POST /execute")));
    }
}
