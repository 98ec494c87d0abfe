//! The bearer token callers present to the orchestrator
//! (`ORCHESTRATOR_API_TOKEN`), compared in constant time.

use axum::extract::FromRequestParts;
use axum::http::{StatusCode, header, request::Parts};
use axum::response::Response;
use subtle::ConstantTimeEq;

use crate::http::{AppState, error_response};

/// Proof that the request carried the API token (or that none is configured).
pub struct Authorized;

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.orchestrator.config.api_token.as_deref() else {
            return Ok(Self);
        };
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let message = match presented {
            Some(token) if bool::from(token.as_bytes().ct_eq(expected.as_bytes())) => return Ok(Self),
            Some(_) => "the bearer token is not this orchestrator's ORCHESTRATOR_API_TOKEN",
            None => "missing `Authorization: Bearer <token>` header: this orchestrator requires its ORCHESTRATOR_API_TOKEN",
        };
        let mut response = error_response(StatusCode::UNAUTHORIZED, message);
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        Err(response)
    }
}
