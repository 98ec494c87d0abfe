//! Spans of tool calls exported over OTLP/HTTP (protobuf), by the
//! orchestrator and by every module, off unless `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set.
//!
//! A call is one span whose ids are the ones the logs already show and
//! `traceparent` already carries: the orchestrator's span has the id it
//! sends to the module, so the module's span is its child in the caller's
//! trace. A span is built once the call has ended and handed to the SDK's
//! batch processor: a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048) that
//! a thread of its own sends every `OTEL_BSP_SCHEDULE_DELAY` (5 s) or
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (512) spans. A full queue drops spans
//! (counted, and logged at shutdown): a slow or absent collector never
//! holds a call. An export gives up after `OTEL_EXPORTER_OTLP_TIMEOUT`
//! (10 s, retries included). `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME` (default: the executable's name) and
//! `OTEL_RESOURCE_ATTRIBUTES` are read as the specification says. A trace
//! is exported as `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` say
//! (`sampler.rs`); by default when its `sampled` flag is set: a caller's
//! unsampled trace is not, a trace started here is.
//!
//! Why spans are built here rather than bridged from `tracing` with
//! `tracing-opentelemetry`: a call logs one event, not a span, and the
//! exported ids must be the logged ones; a span made from the call's record
//! needs neither a subscriber layer on every event nor the SDK's id generator.

mod client;
mod sampler;

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, Key, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};

use crate::contract::ErrorKind;
use crate::metrics::CANCELLED_OUTCOME;
use crate::trace_context::{SAMPLED_FLAG, TraceParent};
use sampler::Sampler;

/// The exporter of this process, once started.
static EXPORTER: OnceLock<Exporter> = OnceLock::new();

/// The variables that turn exporting on (either one, not empty).
const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// An export's time, retries included, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise.
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

struct Exporter {
    processor: BatchSpanProcessor,
    scope: InstrumentationScope,
    /// `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`.
    sampler: Sampler,
}

/// Why the exporter did not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// Not called on a Tokio runtime, which would send the exports.
    #[error("no Tokio runtime to send exports on: {0}")]
    NoRuntime(#[from] tokio::runtime::TryCurrentError),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(#[from] reqwest::Error),
    /// The exporter refused its settings.
    #[error(transparent)]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Which side of a call a span stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallSide {
    /// The orchestrator routing a call to a module (an OTLP client span).
    Routing,
    /// A module serving a call (an OTLP server span).
    Serving,
}

/// One finished tool call, as a span.
#[derive(Debug, Clone, Copy)]
pub struct CallSpan<'a> {
    /// The call's own span: its trace, its span id (the `parent_id` it
    /// passes on) and its flags.
    pub context: TraceParent,
    /// The caller's span, when the trace came from a caller.
    pub parent: Option<TraceParent>,
    /// Routing or serving.
    pub side: CallSide,
    /// The module of the tool (empty when no module was found).
    pub module: &'a str,
    /// The tool's full name.
    pub tool: &'a str,
    /// How the call failed, if it did.
    pub error_kind: Option<ErrorKind>,
    /// Whether the caller went away before the answer (`error_kind` is then
    /// `None`): the span's outcome and error type are `cancelled`.
    pub cancelled: bool,
    /// How long the call took (the span ends when it is recorded).
    pub duration: Duration,
}

/// Starts exporting spans when an OTLP endpoint is set (and
/// `OTEL_SDK_DISABLED` is not `true`); a setting that cannot be used is
/// logged and spans are then not exported. Needs a Tokio runtime, on which
/// the exports are sent; does nothing when called again.
pub(crate) fn start_from_env() {
    let variable = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    let Some(endpoint) = ENDPOINT_VARIABLES.iter().find_map(|name| variable(name)) else {
        return;
    };
    let endpoint = shown_endpoint(&endpoint);
    if variable("OTEL_SDK_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
        return;
    }
    if EXPORTER.get().is_some() {
        return;
    }
    match Exporter::from_env() {
        Ok(exporter) => {
            if EXPORTER.set(exporter).is_ok() {
                tracing::info!(%endpoint, "exporting call spans over OTLP");
            }
        }
        Err(error) => {
            tracing::error!(%endpoint, %error, "call spans are NOT exported: the OTLP exporter did not start")
        }
    }
}

/// What the logs show of an OTLP endpoint: its scheme, host and port only,
/// as a user name, password, path or query may carry a credential.
fn shown_endpoint(endpoint: &str) -> String {
    match url::Url::parse(endpoint.trim()) {
        Ok(url) if url.has_host() => {
            let host = url.host_str().unwrap_or_default();
            match url.port() {
                Some(port) => format!("{}://{host}:{port}", url.scheme()),
                None => format!("{}://{host}", url.scheme()),
            }
        }
        _ => "(not a URL with a host)".to_owned(),
    }
}

impl Exporter {
    fn from_env() -> Result<Self, StartError> {
        let runtime = tokio::runtime::Handle::try_current()?;
        let timeout = export_timeout();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client::RuntimeClient::new(runtime, timeout)?)
            .with_timeout(timeout)
            .build()?;
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        processor.set_resource(&resource());
        let scope =
            InstrumentationScope::builder(env!("CARGO_PKG_NAME")).with_version(env!("CARGO_PKG_VERSION")).build();
        let setting = |name: &str| std::env::var(name).ok();
        let sampler = Sampler::from_settings(
            setting("OTEL_TRACES_SAMPLER").as_deref(),
            setting("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        );
        Ok(Self { processor, scope, sampler })
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT`
/// (milliseconds), as the exporter reads them, for the HTTP client too.
fn export_timeout() -> Duration {
    ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.trim().parse().ok())
        .map_or(DEFAULT_EXPORT_TIMEOUT, Duration::from_millis)
}

/// The process's resource: the SDK's (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`), named after the executable when neither
/// names the service.
fn resource() -> Resource {
    let detected = Resource::builder().build();
    let named =
        detected.get(&Key::new("service.name")).is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named {
        return detected;
    }
    let executable =
        std::env::current_exe().ok().and_then(|path| Some(path.file_stem()?.to_string_lossy().into_owned()));
    Resource::builder().with_service_name(executable.unwrap_or_else(|| env!("CARGO_PKG_NAME").to_owned())).build()
}

/// Whether this process exports spans.
pub fn enabled() -> bool {
    EXPORTER.get().is_some()
}

/// The flags of trace `trace_id` started here: sampled when spans are
/// exported and the sampler (`OTEL_TRACES_SAMPLER`) takes it.
pub fn new_trace_flags(trace_id: &[u8; 16]) -> u8 {
    let sampled = EXPORTER.get().is_some_and(|exporter| exporter.sampler.samples(trace_id, None));
    if sampled { SAMPLED_FLAG } else { 0 }
}

/// Queues `span` for export, when spans are exported and the sampler takes
/// its trace (by default: when its caller sampled it, or it started here).
pub fn record(span: &CallSpan<'_>) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    if !exporter.sampler.samples(&span.context.trace_id_bytes(), span.parent.map(|parent| parent.sampled())) {
        return;
    }
    exporter.processor.on_end(span_data(span, exporter.scope.clone()));
}

/// [`record`]s a call this module served: its span is a child of the
/// caller's `trace`, or the root of a new trace without one.
pub(crate) fn record_served_call(
    trace: Option<TraceParent>,
    duration: Duration,
    module: &str,
    tool: &str,
    error_kind: Option<ErrorKind>,
    cancelled: bool,
) {
    if !enabled() {
        return;
    }
    let ids = RandomIdGenerator::default();
    let span_id = loop {
        let id = ids.new_span_id();
        if id != SpanId::INVALID {
            break id.to_bytes();
        }
    };
    let context = match trace {
        Some(trace) => trace.with_parent(span_id),
        None => {
            let trace_id = ids.new_trace_id().to_bytes();
            TraceParent::new(trace_id, span_id, new_trace_flags(&trace_id))
        }
    };
    if let Some(context) = context {
        let side = CallSide::Serving;
        record(&CallSpan { context, parent: trace, side, module, tool, error_kind, cancelled, duration });
    }
}

/// Sends the spans still queued and stops exporting (within 5 s, the SDK's
/// bound); for a graceful shutdown.
pub async fn shutdown() {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    // Blocking: the export it waits for runs on this runtime, so not on one of its workers.
    let flushed = tokio::task::spawn_blocking(|| exporter.processor.shutdown()).await;
    match flushed {
        Ok(Ok(())) => tracing::debug!("call spans flushed"),
        Ok(Err(error)) => tracing::warn!(%error, "call spans were not all exported at shutdown"),
        Err(error) => tracing::warn!(%error, "call spans were not all exported at shutdown"),
    }
}

/// The OTLP span of `span`, in the GenAI semantic conventions' terms for a
/// tool call (`execute_tool`, `gen_ai.tool.name`, `error.type`).
fn span_data(span: &CallSpan<'_>, instrumentation_scope: InstrumentationScope) -> SpanData {
    let end_time = SystemTime::now();
    let start_time = end_time.checked_sub(span.duration).unwrap_or(end_time);
    let failure = match span.error_kind {
        Some(kind) => Some(kind.as_str()),
        None => span.cancelled.then_some(CANCELLED_OUTCOME),
    };
    let outcome = failure.unwrap_or("success");
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", span.tool.to_owned()),
        KeyValue::new("tool.outcome", outcome),
    ];
    if !span.module.is_empty() {
        attributes.push(KeyValue::new("tool.module", span.module.to_owned()));
    }
    let status = match failure {
        Some(failure) => {
            attributes.push(KeyValue::new("error.type", failure));
            Status::error(failure)
        }
        None => Status::Unset,
    };
    let context = &span.context;
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(context.trace_id_bytes()),
            SpanId::from_bytes(context.parent_id_bytes()),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: span.parent.map_or(SpanId::INVALID, |parent| SpanId::from_bytes(parent.parent_id_bytes())),
        parent_span_is_remote: span.parent.is_some(),
        span_kind: match span.side {
            CallSide::Routing => SpanKind::Client,
            CallSide::Serving => SpanKind::Server,
        },
        name: format!("execute_tool {}", span.tool).into(),
        start_time,
        end_time,
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logged_endpoint_keeps_no_credential() {
        let shown = |endpoint| shown_endpoint(endpoint);
        assert_eq!(
            shown("https://user:secret@otel.example.com:4318/v1/traces?token=abc#x"),
            "https://otel.example.com:4318"
        );
        assert_eq!(shown(" http://[::1]/ "), "http://[::1]");
        assert_eq!(shown("http://collector"), "http://collector");
        assert_eq!(shown("secret-token"), "(not a URL with a host)");
    }

    #[test]
    fn a_span_carries_the_ids_the_logs_show_and_the_call() {
        let parent = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let context = parent.with_parent([7; 8]).unwrap();
        let span = CallSpan {
            context,
            parent: Some(parent),
            side: CallSide::Serving,
            module: "echo",
            tool: "echo.say",
            error_kind: Some(ErrorKind::InvalidArguments),
            cancelled: false,
            duration: Duration::from_millis(3),
        };
        let data = span_data(&span, InstrumentationScope::builder("test").build());
        assert_eq!(data.span_context.trace_id().to_string(), parent.trace_id());
        assert_eq!(data.span_context.span_id().to_string(), context.parent_id());
        assert_eq!(data.parent_span_id.to_string(), parent.parent_id());
        assert_eq!(data.span_kind, SpanKind::Server);
        assert_eq!(data.name, "execute_tool echo.say");
        assert!(data.start_time <= data.end_time);
        let attribute =
            |key: &str| data.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.to_string());
        assert_eq!(attribute("gen_ai.tool.name").as_deref(), Some("echo.say"));
        assert_eq!(attribute("tool.module").as_deref(), Some("echo"));
        assert_eq!(attribute("tool.outcome").as_deref(), Some("invalid_arguments"));
        assert_eq!(attribute("error.type").as_deref(), Some("invalid_arguments"));
        assert_eq!(data.status, Status::error("invalid_arguments"));
    }

    #[test]
    fn a_root_span_has_no_parent_and_a_success_no_error() {
        let context = TraceParent::new([1; 16], [2; 8], SAMPLED_FLAG).unwrap();
        let span = CallSpan {
            context,
            parent: None,
            side: CallSide::Routing,
            module: "",
            tool: "nowhere.tool",
            error_kind: None,
            cancelled: false,
            duration: Duration::from_millis(3),
        };
        let data = span_data(&span, InstrumentationScope::builder("test").build());
        let cancelled = span_data(&CallSpan { cancelled: true, ..span }, InstrumentationScope::builder("test").build());
        assert_eq!(cancelled.status, Status::error(CANCELLED_OUTCOME));
        assert_eq!(data.parent_span_id, SpanId::INVALID);
        assert_eq!(data.span_kind, SpanKind::Client);
        assert_eq!(data.status, Status::Unset);
        assert!(data.attributes.iter().all(|kv| kv.key.as_str() != "tool.module" && kv.key.as_str() != "error.type"));
    }
}
