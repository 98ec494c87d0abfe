//! Serving the HTTP API: cached manifests first, discovery in the
//! background, then requests until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use tokio::net::TcpListener;

use crate::app::{BuildError, Orchestrator};
use crate::http::router;

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The orchestrator could not be built from its configuration.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The address could not be bound.
    #[error("cannot serve on {address}: {source}")]
    Io {
        /// The address from HOST and PORT.
        address: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
}

/// Loads cached manifests, starts discovery, and serves until a shutdown signal.
pub async fn serve(orchestrator: Orchestrator) -> Result<(), ServeError> {
    let orchestrator = Arc::new(orchestrator);
    let config = Arc::clone(&orchestrator.config);
    let address = SocketAddr::new(config.host, config.port);
    let io_error = |source| ServeError::Io { address, source };
    let listener = TcpListener::bind(address).await.map_err(io_error)?;
    let bound = listener.local_addr().map_err(io_error)?;

    orchestrator.registry.load_cached().await;
    orchestrator.registry.spawn_discovery(config.refresh_interval);
    tracing::info!(
        address = %bound,
        modules = config.module_services.len(),
        cache = orchestrator.registry.cache_kind(),
        auth = config.api_token.is_some(),
        "orchestrator listening"
    );
    // The same connection budgets as modules; bodies without a declared
    // length stop at MAX_BODY_BYTES through the router's body limit.
    let app = router(orchestrator).layer(DefaultBodyLimit::max(config.limits.max_body_bytes));
    module_sdk::service::serve_router(listener, app, config.limits, module_sdk::service::shutdown_signal()).await;
    tracing::info!("orchestrator stopped");
    Ok(())
}
