//! Prometheus metrics of tool calls, served at `GET /metrics` in the
//! OpenMetrics text format (prometheus-client, the Prometheus project's own
//! Rust client).
//!
//! Every tool's counters, histogram and gauge are created once when the
//! module is built, so a call only touches atomics, and a caller cannot add
//! label values: a call to a tool the module does not have is counted under
//! `tool="unknown"`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::contract::ErrorKind;

/// The `Content-Type` of [`CallMetrics::encode`]'s text.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The `tool` label of calls to a tool that does not exist.
pub const UNKNOWN_TOOL_LABEL: &str = "unknown";

/// The `outcome` of a call whose caller went away before its answer (not
/// an `error_kind`: no answer was sent).
pub const CANCELLED_OUTCOME: &str = "cancelled";

/// The labels of a call counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    tool: String,
    /// `success`, the call's `error_kind`, or [`CANCELLED_OUTCOME`].
    outcome: &'static str,
}

/// The label of a per-tool histogram or gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

/// Call durations from 1 ms to about 65 s, doubling.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The registry of a server's call metrics: `tool_calls_total{tool,outcome}`,
/// `tool_call_duration_seconds{tool}` and `tool_calls_in_flight{tool}`.
pub struct CallMetrics {
    registry: Registry,
    calls: Family<OutcomeLabels, Counter>,
    durations: Family<ToolLabel, Histogram, fn() -> Histogram>,
    in_flight: Family<ToolLabel, Gauge>,
}

impl Default for CallMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl CallMetrics {
    /// An empty registry with the three call metrics.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<OutcomeLabels, Counter>::default();
        let durations = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(duration_histogram);
        let in_flight = Family::<ToolLabel, Gauge>::default();
        registry.register("tool_calls", "Tool calls by tool and outcome (success or error_kind)", calls.clone());
        registry.register("tool_call_duration_seconds", "Time from a call's arrival to its answer", durations.clone());
        registry.register("tool_calls_in_flight", "Tool calls being run now", in_flight.clone());
        Self { registry, calls, durations, in_flight }
    }

    /// The metrics of the tool `tool`, created now (with a zero for every
    /// outcome, so dashboards see the series before the first failure): a
    /// counter for each outcome (`success`, each [`ErrorKind`],
    /// [`CANCELLED_OUTCOME`]: a fixed set), one histogram and one gauge, and
    /// no other series ever.
    pub fn tool(&self, tool: &str) -> ToolMetrics {
        let outcome =
            |outcome: &'static str| self.calls.get_or_create(&OutcomeLabels { tool: tool.to_owned(), outcome }).clone();
        let label = ToolLabel { tool: tool.to_owned() };
        ToolMetrics(Arc::new(ToolMetricsInner {
            success: outcome("success"),
            failures: ErrorKind::ALL.map(|kind| outcome(kind.as_str())),
            cancelled: outcome(CANCELLED_OUTCOME),
            duration: self.durations.get_or_create(&label).clone(),
            in_flight: self.in_flight.get_or_create(&label).clone(),
        }))
    }

    /// Removes every series of `tool` ([`CallMetrics::tool`]'s), for a
    /// server whose tools change: a gone tool's series leave `/metrics`. A
    /// [`ToolMetrics`] of it still held (a call in flight) counts on unseen.
    pub fn remove_tool(&self, tool: &str) {
        let outcomes = ["success", CANCELLED_OUTCOME].into_iter().chain(ErrorKind::ALL.map(ErrorKind::as_str));
        for outcome in outcomes {
            self.calls.remove(&OutcomeLabels { tool: tool.to_owned(), outcome });
        }
        let label = ToolLabel { tool: tool.to_owned() };
        self.durations.remove(&label);
        self.in_flight.remove(&label);
    }

    /// The registry, for a server that adds metrics of its own.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Every metric in the OpenMetrics text format ([`METRICS_CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// One tool's counters, duration histogram and in-flight gauge; cheap to clone.
#[derive(Clone)]
pub struct ToolMetrics(Arc<ToolMetricsInner>);

struct ToolMetricsInner {
    success: Counter,
    /// In the order of [`ErrorKind::ALL`].
    failures: [Counter; ErrorKind::ALL.len()],
    cancelled: Counter,
    duration: Histogram,
    in_flight: Gauge,
}

impl ToolMetrics {
    /// Counts a call as in flight until the returned guard is finished,
    /// cancelled or dropped (a caller that went away: counted as cancelled).
    pub fn start(&self) -> CallInFlight {
        self.start_at(Instant::now())
    }

    /// [`ToolMetrics::start`] for a call that arrived at `started` (a clock
    /// read the caller already made).
    pub fn start_at(&self, started: Instant) -> CallInFlight {
        self.0.in_flight.inc();
        CallInFlight { metrics: self.clone(), started, recorded: false }
    }
}

/// A call being run; see [`ToolMetrics::start`].
pub struct CallInFlight {
    metrics: ToolMetrics,
    started: Instant,
    /// Whether the outcome was counted (by `finish` or `cancel`).
    recorded: bool,
}

impl CallInFlight {
    /// Records the call's outcome (`None` for success) and duration, and
    /// gives the duration back (for the caller's own log and span).
    pub fn finish(mut self, error_kind: Option<ErrorKind>) -> Duration {
        self.recorded = true;
        let inner = &self.metrics.0;
        let counter = match error_kind {
            None => &inner.success,
            Some(kind) => {
                let index = ErrorKind::ALL.iter().position(|k| *k == kind).unwrap_or(ErrorKind::ALL.len() - 1);
                &inner.failures[index]
            }
        };
        inner.record(counter, self.started)
    }

    /// Records the call as [`CANCELLED_OUTCOME`] with its duration so far,
    /// and gives the duration back; what dropping the guard also does.
    pub fn cancel(mut self) -> Duration {
        self.recorded = true;
        self.metrics.0.record(&self.metrics.0.cancelled, self.started)
    }
}

impl ToolMetricsInner {
    /// Counts a call that arrived at `started` in `counter`, and its duration.
    fn record(&self, counter: &Counter, started: Instant) -> Duration {
        counter.inc();
        let elapsed = started.elapsed();
        self.duration.observe(elapsed.as_secs_f64());
        elapsed
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        let inner = &self.metrics.0;
        if !self.recorded {
            inner.record(&inner.cancelled, self.started);
        }
        inner.in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_outcome_and_in_flight_returns_to_zero() {
        let metrics = CallMetrics::new();
        let greet = metrics.tool("demo.greet");
        greet.start().finish(None);
        greet.start().finish(Some(ErrorKind::InvalidArguments));
        let running = greet.start();
        let text = metrics.encode();
        assert!(text.contains(r#"tool_calls_total{tool="demo.greet",outcome="success"} 1"#), "{text}");
        assert!(text.contains(r#"tool_calls_total{tool="demo.greet",outcome="invalid_arguments"} 1"#), "{text}");
        assert!(text.contains(r#"tool_calls_total{tool="demo.greet",outcome="timeout"} 0"#), "{text}");
        assert!(text.contains(r#"tool_calls_in_flight{tool="demo.greet"} 1"#), "{text}");
        assert!(text.contains(r#"tool_call_duration_seconds_count{tool="demo.greet"} 2"#), "{text}");
        drop(running);
        let text = metrics.encode();
        assert!(text.contains(r#"tool_calls_in_flight{tool="demo.greet"} 0"#), "{text}");
        assert!(text.contains(r#"tool_calls_total{tool="demo.greet",outcome="cancelled"} 1"#), "{text}");
        assert!(text.contains(r#"tool_call_duration_seconds_count{tool="demo.greet"} 3"#), "{text}");
        greet.start().cancel();
        assert!(metrics.encode().contains(r#"tool_calls_total{tool="demo.greet",outcome="cancelled"} 2"#));
        assert!(metrics.encode().ends_with("# EOF\n"));
    }

    #[test]
    fn a_tool_has_a_series_per_outcome_and_removing_it_removes_them_all() {
        // `success`, each error kind, `cancelled`.
        const OUTCOMES: usize = ErrorKind::ALL.len() + 2;
        let metrics = CallMetrics::new();
        let (gone, kept) = (metrics.tool("demo.gone"), metrics.tool("demo.kept"));
        gone.start().finish(None);
        kept.start().finish(None);
        let series = |text: &str, tool: &str| {
            let label = format!("tool=\"{tool}\"");
            text.lines().filter(|line| !line.starts_with('#') && line.contains(&label)).count()
        };
        let text = metrics.encode();
        // The outcomes, the histogram's 18 buckets, sum and count, the gauge.
        assert_eq!(series(&text, "demo.gone"), OUTCOMES + 18 + 2 + 1, "{text}");
        metrics.remove_tool("demo.gone");
        let text = metrics.encode();
        assert_eq!(series(&text, "demo.gone"), 0, "{text}");
        assert_eq!(series(&text, "demo.kept"), OUTCOMES + 18 + 2 + 1, "{text}");
        // A call still holding the gone tool's metrics counts unseen, and finishes.
        gone.start().finish(None);
        assert_eq!(series(&metrics.encode(), "demo.gone"), 0);
    }
}
