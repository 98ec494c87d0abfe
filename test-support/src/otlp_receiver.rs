//! A small OTLP/HTTP receiver standing in for an OpenTelemetry Collector
//! (which Debian does not package): it accepts `POST /v1/traces` with an
//! `ExportTraceServiceRequest` in protobuf, as exporters send it, and keeps
//! the spans for a test to read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use tokio::runtime::Runtime;

/// One span as the receiver got it, ids in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// The sending service's `service.name`.
    pub service: String,
    /// The span's name.
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// 16 hex digits, empty for a root span.
    pub parent_span_id: String,
    /// The OTLP span kind (2 server, 3 client).
    pub kind: i32,
    /// The attributes whose values are strings.
    pub attributes: BTreeMap<String, String>,
}

/// A receiver on a port of its own, on a runtime of its own (so it answers
/// while a test blocks on a process); stopped when dropped.
pub struct OtlpReceiver {
    address: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    runtime: Option<Runtime>,
}

impl OtlpReceiver {
    /// Starts listening on a free port of 127.0.0.1.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the receiver");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let address = listener.local_addr().expect("the bound address");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new().route("/v1/traces", post(receive)).with_state(Arc::clone(&spans));
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a Tokio listener");
            axum::serve(listener, router).await
        });
        Self { address, spans, runtime: Some(runtime) }
    }

    /// `http://127.0.0.1:PORT`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().expect("the span list").clone()
    }

    /// The spans of `trace_id` once there are at least `count`, waiting at
    /// most `within`; panics with what arrived then.
    pub async fn wait_for_trace(&self, trace_id: &str, count: usize, within: Duration) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let spans: Vec<_> = self.spans().into_iter().filter(|span| span.trace_id == trace_id).collect();
            if spans.len() >= count {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "fewer than {count} spans of trace {trace_id} arrived within {within:?}: {:?}",
                self.spans()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    /// Stops without waiting (a test's async context may not block).
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// `POST /v1/traces`: keeps the request's spans; answers an empty
/// `ExportTraceServiceResponse`, or 400 for a body that does not decode.
async fn receive(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "text/plain")],
            b"not an ExportTraceServiceRequest".to_vec(),
        );
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|resource| strings(&resource.attributes)).unwrap_or_default();
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
            received.push(ReceivedSpan {
                service: service.clone(),
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                kind: span.kind,
                attributes: strings(&span.attributes),
            });
        }
    }
    spans.lock().expect("the span list").extend(received);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], answer)
}

/// The string-valued attributes of `attributes`.
fn strings(attributes: &[KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(text) => Some((kv.key.clone(), text.clone())),
            _ => None,
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
