//! The bearer token callers present to the orchestrator
//! (`ORCHESTRATOR_API_TOKEN`), compared in constant time.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::Response;
use module_sdk::service::{BearerRefusal, check_bearer, unauthorized};

use crate::http::AppState;

/// Proof that the request carried the API token (or that none is configured).
pub struct Authorized;

impl FromRequestParts<AppState> for Authorized {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.orchestrator.config.api_token.as_deref() else {
            return Ok(Self);
        };
        check_bearer(&parts.headers, expected).map(|()| Self).map_err(|refusal| {
            unauthorized(match refusal {
                BearerRefusal::Wrong => "the bearer token is not this orchestrator's ORCHESTRATOR_API_TOKEN",
                BearerRefusal::Missing => {
                    "missing `Authorization: Bearer <token>` header: this orchestrator requires its ORCHESTRATOR_API_TOKEN"
                }
            })
        })
    }
}
