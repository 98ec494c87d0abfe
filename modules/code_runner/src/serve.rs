//! Serving the module: the SDK's routes, with a `/health` that answers
//! `503` and the reason when the sandbox does not work here.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use module_sdk::{Module, ServeConfig, ServeError};

use crate::MODULE_NAME;

/// Why the sandbox does not work, if it does not.
#[derive(Clone)]
struct Broken(Option<Arc<str>>);

/// Serves `module` until SIGINT or SIGTERM, then lets calls in flight finish.
pub async fn serve(module: Module, config: ServeConfig, broken: Option<String>) -> Result<(), ServeError> {
    let address = SocketAddr::new(config.host, config.port);
    let io_error = |source| ServeError::Io { address: address.to_string(), source };
    let sdk = module.router(&config)?;
    let app =
        Router::new().route("/health", get(health)).with_state(Broken(broken.map(Arc::from))).fallback_service(sdk);
    let listener = tokio::net::TcpListener::bind(address).await.map_err(io_error)?;
    let bound = listener.local_addr().map_err(io_error)?;
    let shutdown = module_sdk::service::shutdown_signal();
    // The SDK's target, so that harnesses keeping "listening" events under
    // any RUST_LOG keep this one too.
    tracing::info!(
        target: "module_sdk::server",
        module = MODULE_NAME,
        address = %bound,
        auth = config.auth_token.is_some(),
        "module listening"
    );
    module_sdk::service::serve_router(listener, app, config.limits, shutdown).await;
    tracing::info!("module stopped");
    Ok(())
}

/// `200 {"status":"ok"}`, or `503` with the reason code is not run.
async fn health(State(Broken(broken)): State<Broken>) -> Response {
    match broken {
        None => axum::Json(serde_json::json!({"status": "ok"})).into_response(),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(
                serde_json::json!({"status": "unavailable", "error": format!("the sandbox does not work: {reason}")}),
            ),
        )
            .into_response(),
    }
}
