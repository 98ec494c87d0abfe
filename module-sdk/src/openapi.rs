//! The OpenAPI 3.1 document served at `/openapi.json`: the real routes and
//! bodies, plus, in development mode, each tool's argument schema as a
//! named component.

use serde_json::Value;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

use crate::contract::ModuleManifest;

#[derive(OpenApi)]
#[openapi(paths(
    crate::server::health,
    crate::server::manifest,
    crate::server::execute,
    crate::server::openapi,
    crate::server::metrics,
    crate::mcp::http::serve_mcp
))]
struct ModuleApi;

/// The document for the module described by `manifest`; with
/// `tool_schemas`, each tool's `input_schema` as the component
/// `<tool>.arguments`. The document is served without the token, so a
/// module with one leaves them out: they are the manifest's, which needs it.
pub fn openapi_document(manifest: &ModuleManifest, tool_schemas: bool) -> Value {
    let mut doc = ModuleApi::openapi();
    doc.info.title = format!("{} module", manifest.module_name);
    doc.info.description = Some(manifest.description.clone());
    doc.info.version = manifest.version.clone().unwrap_or_else(|| "0.0.0".to_owned());
    if let Some(components) = doc.components.as_mut() {
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
    let mut doc = serde_json::to_value(doc).expect("an OpenAPI document always serializes");
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .expect("the document has component schemas");
    for tool in manifest.tools.iter().filter(|_| tool_schemas) {
        if let Some(schema) = &tool.input_schema {
            let component = format!("{}.arguments", tool.name);
            let mut schema = schema.clone();
            if let Some(root) = schema.as_object_mut() {
                root.remove("$schema");
            }
            rebase_references(&mut schema, &format!("#/components/schemas/{component}"));
            schemas.insert(component, schema);
        }
    }
    doc
}

/// Rewrites local references (`#/$defs/X`) to point inside the component the
/// schema now lives in, since they resolve against the whole document.
fn rebase_references(node: &mut Value, base: &str) {
    match node {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(target) if key == "$ref" && target.starts_with("#/") => {
                        *target = format!("{base}{}", &target[1..]);
                    }
                    _ => rebase_references(value, base),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase_references(item, base)),
        _ => {}
    }
}
