//! The orchestrator's OpenAPI 3.1 document, served at `GET /openapi.json`:
//! every route of the HTTP API with its bodies and error answers, made by
//! utoipa from the handlers' own annotations and the body types.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "orchestrator",
        description = "Lists each caller's tools in its model provider's format and routes their calls to tool modules. \
                       A POST or DELETE that a browser says comes from a page of another origin is refused with 403 \
                       (`/mcp`: see MCP_ALLOWED_ORIGINS)."
    ),
    paths(
        crate::http::health,
        crate::http::modules,
        crate::http::tools,
        crate::http::refresh_tools,
        crate::http::execute,
        crate::http::tool_calls,
        crate::approvals::routes::list,
        crate::approvals::routes::show,
        crate::approvals::routes::decide,
        crate::identity::routes::revoke,
        crate::identity::routes::restore,
        crate::metrics::serve_metrics,
        crate::mcp::http::serve_mcp,
        crate::mcp::http::open_stream,
        crate::mcp::http::close_session,
        serve_openapi
    ),
    components(schemas(crate::registry::ModuleStatus, crate::approvals::Approval))
)]
struct OrchestratorApi;

/// The document as JSON text, made once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut doc = OrchestratorApi::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    if let Some(components) = doc.components.as_mut() {
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
    doc.to_json().expect("an OpenAPI document always serializes")
});

/// The OpenAPI document; like `/health`, it needs no token (it holds no
/// module's or caller's data).
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub async fn serve_openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT.as_str()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The names of the properties `schema` declares, through `$ref`s and `allOf`s of `doc`.
    fn properties(doc: &Value, schema: &Value) -> Vec<String> {
        if let Some(name) = schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
            return properties(doc, &doc["components"]["schemas"][name]);
        }
        let own = schema["properties"].as_object().into_iter().flat_map(|p| p.keys().cloned());
        let parts = schema["allOf"].as_array().into_iter().flatten().flat_map(|part| properties(doc, part));
        own.chain(parts).collect()
    }

    #[test]
    fn a_shown_approval_declares_its_arguments_as_json_text() {
        let doc: Value = serde_json::from_str(&DOCUMENT).unwrap();
        let shown =
            &doc["paths"]["/approvals/{id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
        let declared = properties(&doc, shown);
        for field in ["arguments_json", "arguments", "id", "status"] {
            assert!(declared.iter().any(|p| p == field), "`{field}` is not declared: {shown} {declared:?}");
        }
    }
}
