//! Serving the HTTP API: cached manifests first, discovery in the
//! background, then requests until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;

use module_sdk::service::ServingThreads;
use tokio::net::TcpListener;

use crate::app::{BuildError, Orchestrator};
use crate::http::router;

/// Why the server stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The orchestrator could not be built from its configuration.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The JWKS could not be loaded.
    #[error(transparent)]
    Jwks(#[from] crate::identity::jwt::JwtError),
    /// The serving threads could not be started.
    #[error("cannot start SERVING_THREADS ({count}) serving threads: {source}")]
    Threads {
        /// How many were asked for.
        count: usize,
        /// Why a runtime or a thread could not be made.
        source: std::io::Error,
    },
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

    orchestrator.start_identities().await?;
    if !orchestrator.identities.required() {
        tracing::warn!(
            "DEVELOPMENT MODE: no ORCHESTRATOR_API_TOKEN, api key or JWT_JWKS is configured, so every request is \
             trusted to say who it is; configure identities before exposing this orchestrator"
        );
    }
    orchestrator.registry.load_cached().await;
    orchestrator.registry.spawn_discovery(config.refresh_interval);
    orchestrator.metrics.spawn_retaining(&orchestrator.registry, crate::metrics::RETAIN_EVERY);
    let shutdown = module_sdk::service::shutdown_signal();
    tracing::info!(
        address = %bound,
        modules = config.module_services.len(),
        cache = orchestrator.registry.cache_kind(),
        auth = orchestrator.identities.mode(),
        approvals = orchestrator.approvals.kind(),
        "orchestrator listening"
    );
    // The same connection budgets as modules; each connection served on one
    // thread for its whole life (the module connections of its calls too).
    let threads = ServingThreads::start(config.serving_threads)
        .map_err(|source| ServeError::Threads { count: config.serving_threads, source })?;
    let app = router(orchestrator);
    module_sdk::service::serve_router_on(listener, app, config.limits, shutdown, &threads).await;
    drop(threads);
    module_sdk::otlp::shutdown().await;
    tracing::info!("orchestrator stopped");
    Ok(())
}
