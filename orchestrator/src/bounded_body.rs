//! Reading a module's HTTP answer up to a byte budget, with the SDK's
//! [`read_body`]: what one answer costs in memory is proportional to the
//! budget, whatever its framing.

use axum::body::Bytes;
use module_sdk::service::{BodyError, read_body};

/// `response`'s whole body (see [`read_body`]).
pub async fn read_bounded(
    response: reqwest::Response,
    max: usize,
    setting: &'static str,
) -> Result<Bytes, BodyError<reqwest::Error>> {
    read_body(axum::http::Response::from(response).into_body(), max, setting).await
}
