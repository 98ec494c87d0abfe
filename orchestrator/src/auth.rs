//! The identity behind a request: its bearer token checked against the
//! service token (`ORCHESTRATOR_API_TOKEN`), the API keys and the JWT
//! settings; with none configured, development mode trusts every request.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use axum::response::Response;
use module_sdk::service::{bearer_token, unauthorized};

use crate::http::AppState;
use crate::identity::Identity;

/// The proven identity of a request; add it as a handler argument to
/// protect a route (a `401` with a JSON error otherwise).
pub struct Authorized(pub Identity);

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        state
            .orchestrator
            .identities
            .authenticate(parts.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer_token))
            .await
            .map(Self)
            .map_err(|refusal| unauthorized(&refusal.to_string()))
    }
}
