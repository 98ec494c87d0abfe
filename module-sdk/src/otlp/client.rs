//! The OTLP exporter's HTTP client: the workspace's reqwest (rustls, so
//! `https://` collectors work too), run on the process's Tokio runtime.
//! The SDK's batch thread has no runtime of its own and waits for the
//! spawned request; one HTTP stack in the binary instead of the exporter's
//! default, a blocking reqwest 0.13 with a runtime thread of its own.

use std::time::Duration;

use async_trait::async_trait;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use tokio::runtime::Handle;

/// The most of a collector's answer that is read: an
/// `ExportTraceServiceResponse` is a few bytes (a partial success message at most).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why an export's request failed beyond what reqwest says.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    /// The collector's answer was larger than [`MAX_ANSWER_BYTES`].
    #[error("the collector's answer is over {MAX_ANSWER_BYTES} bytes")]
    AnswerTooLarge,
}

/// Sends the exporter's requests with reqwest on `runtime`.
#[derive(Debug)]
pub(super) struct RuntimeClient {
    client: reqwest::Client,
    runtime: Handle,
}

impl RuntimeClient {
    /// A client whose requests give up after `timeout` (connecting included).
    pub(super) fn new(runtime: Handle, timeout: Duration) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        Ok(Self { client, runtime })
    }
}

#[async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        self.runtime.spawn(send(self.client.clone(), request)).await?
    }
}

/// Posts `request` and reads the answer, up to [`MAX_ANSWER_BYTES`].
async fn send(client: reqwest::Client, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let mut response = client.execute(reqwest::Request::try_from(request)?).await?;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(ExportError::AnswerTooLarge.into());
        }
        body.extend_from_slice(&chunk);
    }
    let mut answer = Response::new(Bytes::from(body));
    *answer.status_mut() = response.status();
    *answer.headers_mut() = std::mem::take(response.headers_mut());
    Ok(answer)
}
