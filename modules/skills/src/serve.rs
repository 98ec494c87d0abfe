//! Serving a tool set that changes at run time: the SDK's router for the
//! current catalog sits behind a swappable cell; each request goes to the
//! router current when it arrives (calls in flight finish on theirs).

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use module_sdk::{ServeConfig, ServeError};
use tower::ServiceExt;

use crate::catalog::Catalog;
use crate::settings::Settings;
use crate::slots::RunSlots;
use crate::tools::module;

/// The module's current router, replaced whole on every reload.
#[derive(Clone)]
pub struct LiveRouter {
    current: Arc<RwLock<Router>>,
    config: Arc<ServeConfig>,
    /// Shared by every router, so a reload does not reset the count.
    slots: RunSlots,
}

impl LiveRouter {
    /// A router for the catalog found now.
    pub fn new(settings: &Settings, config: ServeConfig) -> Result<Self, String> {
        let slots = settings.run_slots();
        let router = build(settings, &config, &slots)?;
        Ok(Self { current: Arc::new(RwLock::new(router)), config: Arc::new(config), slots })
    }

    /// Reads `SKILLS_DIR` again and swaps the new tool set in; when the new
    /// set cannot be built, the old one keeps serving.
    pub fn reload(&self, settings: &Settings) {
        match build(settings, &self.config, &self.slots) {
            Ok(router) => *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = router,
            Err(error) => tracing::error!(%error, "skills not reloaded; the previous tools keep serving"),
        }
    }

    fn router(&self) -> Router {
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Serves until SIGINT or SIGTERM, then lets calls in flight finish.
    pub async fn serve(self) -> Result<(), ServeError> {
        let address = SocketAddr::new(self.config.host, self.config.port);
        let io_error = |source| ServeError::Io { address: address.to_string(), source };
        let listener = tokio::net::TcpListener::bind(address).await.map_err(io_error)?;
        let bound = listener.local_addr().map_err(io_error)?;
        let shutdown = module_sdk::service::shutdown_signal();
        // The SDK's target, so that harnesses keeping "listening" events under
        // any RUST_LOG keep this one too.
        tracing::info!(
            target: "module_sdk::server",
            module = crate::tools::MODULE_NAME,
            address = %bound,
            auth = self.config.auth_token.is_some(),
            "module listening"
        );
        let limits = self.config.limits;
        let app = Router::new().fallback(forward).with_state(self);
        // The SDK's connection loop: its header/body read timeouts and connection cap apply.
        module_sdk::service::serve_router(listener, app, limits, shutdown).await;
        tracing::info!("module stopped");
        Ok(())
    }
}

/// Hands the request to the current router.
async fn forward(State(live): State<LiveRouter>, request: Request) -> Response {
    match live.router().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
    .into_response()
}

/// The SDK router of the catalog under `SKILLS_DIR` now; its problems are logged.
fn build(settings: &Settings, config: &ServeConfig, slots: &RunSlots) -> Result<Router, String> {
    module(Catalog::discover_logged(settings), settings.max_manifest_bytes, slots.clone())
        .router(config)
        .map_err(|error| error.to_string())
}
