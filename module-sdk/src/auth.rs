//! Bearer-token auth for `/manifest` and `/execute`, compared in constant time.

use axum::extract::FromRequestParts;
use axum::http::{StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::server::{AppState, error_response};

/// Proof that the request carried the module's service token (or that the
/// module runs without one); add it as a handler argument to protect a route.
pub(crate) struct Authorized;

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.auth_token.as_deref() else {
            return Ok(Self);
        };
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        match presented {
            Some(token) if bool::from(token.as_bytes().ct_eq(expected.as_bytes())) => Ok(Self),
            Some(_) => Err(unauthorized("the bearer token is not this module's service token")),
            None => Err(unauthorized("missing `Authorization: Bearer <token>` header: this module requires its service token")),
        }
    }
}

fn unauthorized(message: &str) -> Response {
    let mut response = error_response(StatusCode::UNAUTHORIZED, message);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    response.into_response()
}
