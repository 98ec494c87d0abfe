//! JSON request bodies read in one plain serde pass.
//!
//! axum's `Json` reads every body through `serde_path_to_error`, to name
//! the field a bad body fails at; that wrapper roughly doubles what reading
//! a valid body costs (callgrind: ~4 000 of a routed call's instructions).
//! [`JsonBody`] reads the body plainly, and only a body that fails is read
//! again through axum's `Json`, so a refusal is axum's, word for word.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

/// A request body of JSON read as a `T`, refused exactly as axum's `Json`
/// refuses it (the JSON content type is the router's
/// [`RequireJsonLayer`](module_sdk::service::RequireJsonLayer) to check).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = JsonRejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, JsonRejection> {
        let body = Bytes::from_request(request, state).await?;
        match serde_json::from_slice(&body) {
            Ok(value) => Ok(Self(value)),
            Err(_) => Json::from_bytes(&body).map(|Json(value)| Self(value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::extract::FromRequest;
    use axum::http::StatusCode;

    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Call {
        name: String,
        count: u32,
    }

    async fn read(body: &'static str) -> Result<Call, (StatusCode, String)> {
        let request = Request::builder().body(axum::body::Body::from(body)).unwrap();
        JsonBody::<Call>::from_request(request, &())
            .await
            .map(|JsonBody(call)| call)
            .map_err(|rejection| (rejection.status(), rejection.body_text()))
    }

    #[tokio::test]
    async fn a_valid_body_is_read_and_a_bad_one_refused_as_axum_refuses_it() {
        assert_eq!(read(r#"{"name":"a","count":2}"#).await.unwrap(), Call { name: "a".into(), count: 2 });
        for bad in [r#"{"name":"a","count":-1}"#, r#"{"name":"a"}"#, "{", "[1]", ""] {
            let axum = Json::<Call>::from_bytes(bad.as_bytes()).unwrap_err();
            assert_eq!(read(bad).await.unwrap_err(), (axum.status(), axum.body_text()), "{bad}");
        }
        let (status, text) = read(r#"{"name":"a","count":-1}"#).await.unwrap_err();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(text.contains("count"), "names the field: {text}");
    }
}
