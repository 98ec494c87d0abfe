//! JSON request bodies read in one plain serde pass.
//!
//! axum's `Json` reads every body through `serde_path_to_error`, to name
//! the field a bad body fails at; that wrapper roughly doubles what reading
//! a valid body costs (callgrind: ~4 000 of a routed call's instructions).
//! [`JsonBody`] reads the body plainly, and only a body that fails is read
//! again through axum's `Json`, so a refusal is axum's, word for word. The
//! bytes are read as a module reads its calls
//! ([`request_body`]): within
//! `MAX_BODY_BYTES`, a body that comes in one piece kept as it came.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::response::Response;
use module_sdk::service::{body_refused, request_body};
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// State that knows the largest request body the server accepts.
pub trait BodyLimit {
    /// `MAX_BODY_BYTES`.
    fn max_body_bytes(&self) -> usize;
}

/// A request body of JSON read as a `T`; refused with `413` past
/// `MAX_BODY_BYTES`, and otherwise exactly as axum's `Json` refuses it (the
/// JSON content type is the router's
/// [`RequireJsonLayer`](module_sdk::service::RequireJsonLayer) to check).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: BodyLimit + Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let body = request_body(request.into_body(), state.max_body_bytes()).await?;
        match read_json(&body) {
            Ok(value) => Ok(Self(value)),
            // Read again for axum's refusal (or the value, should axum read it after all).
            Err(_) => Json::from_bytes(&body).map(|Json(value)| Self(value)).map_err(refusal),
        }
    }
}

/// The answer to a body axum's `Json` refused: its status and words.
pub(crate) fn refusal(rejection: JsonRejection) -> Response {
    body_refused(rejection.status(), rejection.body_text())
}

/// `T` read from the JSON text `bytes`. The text is checked to be UTF-8
/// once, as a whole, rather than string by string as `from_slice` checks it
/// (a call's body and a module's answer hold a dozen short strings); text
/// that is not UTF-8 is read by `from_slice`, for its error.
pub(crate) fn read_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::extract::FromRequest;
    use axum::http::StatusCode;

    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Call {
        name: String,
        count: u32,
    }

    /// A server state accepting bodies up to this many bytes.
    struct Limit(usize);

    impl BodyLimit for Limit {
        fn max_body_bytes(&self) -> usize {
            self.0
        }
    }

    /// `body` read under a limit of `max` bytes: the call, or the refusal's
    /// status and the `error` of its JSON body.
    async fn read_within(body: Body, max: usize) -> Result<Call, (StatusCode, String)> {
        let request = Request::builder().body(body).unwrap();
        match JsonBody::<Call>::from_request(request, &Limit(max)).await {
            Ok(JsonBody(call)) => Ok(call),
            Err(refusal) => {
                let status = refusal.status();
                let bytes = axum::body::to_bytes(refusal.into_body(), usize::MAX).await.unwrap();
                let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                Err((status, error["error"].as_str().unwrap().to_owned()))
            }
        }
    }

    async fn read(body: &'static str) -> Result<Call, (StatusCode, String)> {
        read_within(Body::from(body), 1000).await
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

    #[test]
    fn text_checked_as_a_whole_reads_as_from_slice_reads_it() {
        let texts: [&[u8]; 6] = [
            "{\"name\":\"caf\\u00e9 \u{e9}\",\"count\":2}".as_bytes(),
            b"{\"name\":\"a\",\"count\":2,\"extra\":\"\xff\"}",
            b"{\"name\":\"\xff\",\"count\":2}",
            b"{\"name\":\"a\",\"count\":2}\xff",
            b"{\"name\":\"a\",\"count\":\"2\"}",
            b"",
        ];
        for text in texts {
            let whole = read_json::<Call>(text).map_err(|error| error.to_string());
            let sliced = serde_json::from_slice::<Call>(text).map_err(|error| error.to_string());
            assert_eq!(whole, sliced, "{}", String::from_utf8_lossy(text));
        }
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_naming_the_setting_whatever_its_framing() {
        let call = r#"{"name":"a","count":2}"#;
        assert!(read_within(Body::from(call), call.len()).await.is_ok(), "exactly the limit is accepted");
        let declared = read_within(Body::from(call), call.len() - 1).await.unwrap_err();
        // Without a declared length (chunked): cut off once past the limit.
        let pieces = call.as_bytes().chunks(4).map(|piece| Ok::<_, std::io::Error>(piece.to_vec()));
        let streamed = read_within(Body::from_stream(futures::stream::iter(pieces)), 10).await.unwrap_err();
        for (status, text) in [declared, streamed] {
            assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
            assert!(text.contains("MAX_BODY_BYTES"), "{text}");
        }
    }
}
