//! `POST /api-keys/{id}/revoke` and `POST /api-keys/{id}/restore`: what
//! `orchestrator revoke-key` and `restore-key` do, for admin and owner
//! identities (not in development mode).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use module_sdk::contract::ErrorBody;
use module_sdk::service::error_response;
use serde_json::json;

use super::IdentityKind;
use super::revocations::RevocationError;
use crate::auth::Authorized;
use crate::http::AppState;

/// The API key routes, to merge into the API's router.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api-keys/{id}/revoke", post(revoke)).route("/api-keys/{id}/restore", post(restore))
}

/// Revokes the API key `id` on every orchestrator sharing this one's Redis
/// (each refuses it within `REVOCATION_REFRESH_SECONDS`, this one at once).
#[utoipa::path(post, path = "/api-keys/{id}/revoke", params(("id" = String, Path, description = "The key's `id` in `[[api_keys]]`")),
    security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"key_id\", \"revoked\": true, \"changed\": false when it already was}`"),
    (status = 401, body = ErrorBody, description = "No valid identity"),
    (status = 403, body = ErrorBody, description = "Not an admin or owner identity, a key of a higher permission than the caller's, or development mode"),
    (status = 404, body = ErrorBody, description = "No key of this orchestrator has this id"),
    (status = 409, body = ErrorBody, description = "No REDIS_URL: revoke by editing the keys file"),
    (status = 503, body = ErrorBody, description = "Redis could not be reached")
))]
pub(crate) async fn revoke(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Response {
    set_revoked(&identity, &state, &id, true).await
}

/// Restores the API key `id` revoked before, on every orchestrator sharing
/// this one's Redis.
#[utoipa::path(post, path = "/api-keys/{id}/restore", params(("id" = String, Path, description = "The key's `id` in `[[api_keys]]`")),
    security((), ("bearer" = [])), responses(
    (status = 200, body = Object, description = "`{\"key_id\", \"revoked\": false, \"changed\": false when it was not revoked}`"),
    (status = 401, body = ErrorBody, description = "No valid identity"),
    (status = 403, body = ErrorBody, description = "Not an admin or owner identity, a key of a higher permission than the caller's, or development mode"),
    (status = 404, body = ErrorBody, description = "No key of this orchestrator has this id"),
    (status = 409, body = ErrorBody, description = "No REDIS_URL: revoke by editing the keys file"),
    (status = 503, body = ErrorBody, description = "Redis could not be reached")
))]
pub(crate) async fn restore(
    Authorized(identity): Authorized,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Response {
    set_revoked(&identity, &state, &id, false).await
}

/// Revokes or restores key `id` for `identity`: an admin or owner of at
/// least the key's permission, the key one of this orchestrator's, never
/// development mode, which trusts whoever asks and has no keys of its own,
/// while the Redis it shares may hold the revocations of production
/// orchestrators.
async fn set_revoked(identity: &super::Identity, state: &AppState, id: &str, revoked: bool) -> Response {
    if identity.kind == IdentityKind::Development {
        return error_response(
            StatusCode::FORBIDDEN,
            "development mode (no identities configured) revokes and restores no API keys: it has none of its own, \
             and trusts whoever asks; use `orchestrator revoke-key` or `restore-key`, or an orchestrator with identities",
        );
    }
    if !identity.is_admin() {
        return error_response(StatusCode::FORBIDDEN, "only admin and owner identities may revoke or restore API keys");
    }
    // Only a configured key: a typo would otherwise answer `changed: true`
    // while the real key stays live, and fill the set every replica reads.
    let Some(key) = state.orchestrator.identities.key(id) else {
        return error_response(
            StatusCode::NOT_FOUND,
            format!("`{id}` is not the id of an API key of this orchestrator ([[api_keys]] / API_KEYS_FILE)"),
        );
    };
    if key.permission > identity.permission {
        return error_response(
            StatusCode::FORBIDDEN,
            format!(
                "API key `{id}` has permission {}, above this identity's {}: only an identity of at least the \
                 key's permission may revoke or restore it",
                key.permission, identity.permission
            ),
        );
    }
    match state.orchestrator.identities.set_revoked(id, revoked).await {
        Ok(changed) => {
            tracing::info!(key = id, revoked, changed, by = identity.name, "API key revocation changed");
            Json(json!({ "key_id": id, "revoked": revoked, "changed": changed })).into_response()
        }
        Err(error @ RevocationError::NotShared) => error_response(StatusCode::CONFLICT, error.to_string()),
        Err(error @ RevocationError::Unavailable(_)) => {
            error_response(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
        }
    }
}
