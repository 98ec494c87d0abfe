//! The identity behind a request: its bearer token checked against the
//! service token (`ORCHESTRATOR_API_TOKEN`), the API keys and the JWT
//! settings; with none configured, development mode trusts every request.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use module_sdk::service::unauthorized;

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
            .authenticate(bearer_token(&parts.headers))
            .map(Self)
            .map_err(|refusal| unauthorized(&refusal.to_string()))
    }
}

/// The token of an `Authorization: Bearer <token>` header, the scheme read
/// case-insensitively (RFC 9110).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}
