//! The least a proxy built on the orchestrator's HTTP stack does: hyper's
//! HTTP/1.1 server on the orchestrator's serving threads (each connection
//! served on one of them), the request body read whole, the orchestrator's
//! own pooled module client (`ModuleClient::post`), the answer read whole
//! and sent back. No router, no call parsing, permission, validation, metrics
//! or trace of its own: the floor under what a routed call can cost on this
//! stack, measured beside the orchestrator and nginx. It runs on the
//! system allocator (the orchestrator's binary uses mimalloc), so it is a
//! conservative floor.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use module_sdk::service::ServingThreads;
use orchestrator::module_client::ModuleClient;

/// The `traceparent` every forwarded call carries (the orchestrator sends one too).
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// Serves on a free loopback port until killed, forwarding every request's
/// body to `module_url`/execute; prints the "listening" line with the
/// address that `test_support::Process` reads.
pub fn serve(module_url: &str) {
    let target: Arc<str> = Arc::from(format!("{module_url}/execute"));
    // As many serving threads as the orchestrator has by default, accepting
    // on a runtime of its own, as the orchestrator does.
    let count = orchestrator::Config::default().serving_threads;
    let threads = ServingThreads::start(count).expect("serving threads");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async move {
        let tls = orchestrator::tls::client_config(&[]).expect("Mozilla's roots");
        let client = Arc::new(ModuleClient::new(64, None, count, tls).expect("no token to check"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let address = listener.local_addr().expect("a bound address");
        println!("{}", serde_json::json!({"message": "floor proxy listening", "address": address}));
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let _ = stream.set_nodelay(true);
            let (client, target) = (Arc::clone(&client), Arc::clone(&target));
            let service =
                hyper::service::service_fn(move |request| forward(Arc::clone(&client), Arc::clone(&target), request));
            threads.serve(stream, move |stream| async move {
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
}

/// `request`'s body posted to `target`, the module's answer sent back as it came.
async fn forward(
    client: Arc<ModuleClient>,
    target: Arc<str>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let failed = |status: StatusCode| {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = status;
        response
    };
    let Ok(body) = request.into_body().collect().await.map(|body| body.to_bytes()) else {
        return Ok(failed(StatusCode::BAD_REQUEST));
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let traceparent = HeaderValue::from_static(TRACEPARENT);
    let Ok(answer) = client.post(&target, traceparent, body, deadline).await else {
        return Ok(failed(StatusCode::BAD_GATEWAY));
    };
    let (parts, body) = answer.into_parts();
    Ok(match body.collect().await {
        Ok(body) => Response::from_parts(parts, Full::new(body.to_bytes())),
        Err(_) => failed(StatusCode::BAD_GATEWAY),
    })
}
