//! Bearer-token auth for `/manifest` and `/execute`, compared in constant
//! time; the check itself is public so other services (the orchestrator)
//! answer exactly alike.

use axum::extract::FromRequestParts;
use axum::http::{HeaderMap, StatusCode, header, request::Parts};
use axum::response::Response;
use subtle::ConstantTimeEq;

use crate::server::{AppState, error_response};

/// Why a request's bearer token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerRefusal {
    /// No `Authorization: Bearer ...` header.
    Missing,
    /// A bearer token, but not the expected one.
    Wrong,
}

/// Checks that `headers` carry `Authorization: Bearer <expected>`, comparing
/// the tokens in constant time. The scheme is matched in any case (`bearer`,
/// `BEARER`), as RFC 9110 says, and may be followed by several spaces.
pub fn check_bearer(headers: &HeaderMap, expected: &str) -> Result<(), BearerRefusal> {
    let presented = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).and_then(bearer_token);
    match presented {
        Some(token) if bool::from(token.as_bytes().ct_eq(expected.as_bytes())) => Ok(()),
        Some(_) => Err(BearerRefusal::Wrong),
        None => Err(BearerRefusal::Missing),
    }
}

/// The token of an `Authorization` value whose scheme is `Bearer`, in any
/// case (public for servers that look the token up themselves, such as the
/// orchestrator's identities).
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim_start_matches(' '))
}

/// The `401` answer: `{"error": message}` with `WWW-Authenticate: Bearer`.
pub fn unauthorized(message: &str) -> Response {
    let mut response = error_response(StatusCode::UNAUTHORIZED, message);
    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    response
}

/// Proof that the request carried the module's service token (or that the
/// module runs without one); add it as a handler argument to protect a route.
pub(crate) struct Authorized;

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.auth_token.as_deref() else {
            return Ok(Self);
        };
        check_bearer(&parts.headers, expected).map(|()| Self).map_err(|refusal| {
            unauthorized(match refusal {
                BearerRefusal::Wrong => "the bearer token is not this module's service token",
                BearerRefusal::Missing => {
                    "missing `Authorization: Bearer <token>` header: this module requires its service token"
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn the_scheme_is_matched_in_any_case() {
        for value in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR   s3cret"] {
            assert_eq!(check_bearer(&headers(value), "s3cret"), Ok(()), "{value}");
        }
    }

    #[test]
    fn other_schemes_and_tokens_are_refused() {
        assert_eq!(check_bearer(&headers("Bearer other"), "s3cret"), Err(BearerRefusal::Wrong));
        assert_eq!(check_bearer(&headers("bearer s3cret2"), "s3cret"), Err(BearerRefusal::Wrong));
        for value in ["Basic s3cret", "Bearers3cret", "s3cret", "Bearer"] {
            assert_eq!(check_bearer(&headers(value), "s3cret"), Err(BearerRefusal::Missing), "{value}");
        }
        assert_eq!(check_bearer(&HeaderMap::new(), "s3cret"), Err(BearerRefusal::Missing));
    }
}
