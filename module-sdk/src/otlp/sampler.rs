//! Which traces' spans are exported: `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG`, as the OpenTelemetry specification defines
//! them (`always_on`, `always_off`, `traceidratio`, and the `parentbased_`
//! forms of the three, `parentbased_always_on` by default). A parent-based
//! sampler follows a caller's `sampled` flag and applies its rule only to
//! traces started here; the others apply their rule to every trace. A ratio
//! decides by the trace id, so every process with the same ratio decides
//! the same for a trace.

/// The rule a sampler applies to a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// Every trace.
    On,
    /// No trace.
    Off,
    /// This share of traces (0 to 1), by trace id.
    Ratio(f64),
}

/// Which traces' spans this process exports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    rule: Rule,
    /// Whether a caller's `sampled` flag decides instead, when there is a caller.
    follows_parent: bool,
}

impl Default for Sampler {
    /// `parentbased_always_on`.
    fn default() -> Self {
        Self { rule: Rule::On, follows_parent: true }
    }
}

impl Sampler {
    /// The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name
    /// (`sampler` and `argument`); a value it cannot use is logged and the
    /// specification's default taken instead (the default sampler, a ratio of 1).
    pub(crate) fn from_settings(sampler: Option<&str>, argument: Option<&str>) -> Self {
        let Some(name) = sampler.map(str::trim).filter(|name| !name.is_empty()) else {
            return Self::default();
        };
        let (follows_parent, rule) = match name.strip_prefix("parentbased_") {
            Some(rule) => (true, rule),
            None => (false, name),
        };
        let rule = match rule {
            "always_on" => Rule::On,
            "always_off" => Rule::Off,
            "traceidratio" => Rule::Ratio(ratio(argument)),
            _ => {
                tracing::warn!(
                    OTEL_TRACES_SAMPLER = name,
                    "unknown sampler (always_on, always_off, traceidratio, or parentbased_ and one of those); \
                     using parentbased_always_on"
                );
                return Self::default();
            }
        };
        Self { rule, follows_parent }
    }

    /// Whether the spans of trace `trace_id` are exported, given the
    /// caller's `sampled` flag when the trace came from a caller.
    pub(crate) fn samples(&self, trace_id: &[u8; 16], parent_sampled: Option<bool>) -> bool {
        match (self.follows_parent, parent_sampled) {
            (true, Some(sampled)) => sampled,
            _ => match self.rule {
                Rule::On => true,
                Rule::Off => false,
                Rule::Ratio(share) => {
                    // The trace id's random low 63 bits against the share of 2^63, as the reference SDKs do.
                    let low = u64::from_be_bytes(trace_id[8..].try_into().unwrap_or_default()) >> 1;
                    (low as f64) < share * (1_u64 << 63) as f64
                }
            },
        }
    }
}

/// `OTEL_TRACES_SAMPLER_ARG` as a ratio: a number from 0 to 1, else 1 (logged).
fn ratio(argument: Option<&str>) -> f64 {
    let Some(text) = argument.map(str::trim).filter(|text| !text.is_empty()) else {
        return 1.0;
    };
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => share,
        _ => {
            tracing::warn!(OTEL_TRACES_SAMPLER_ARG = text, "not a ratio from 0 to 1; using 1 (every trace)");
            1.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trace ids whose low bytes are spread evenly (a fixed sequence, so the test is repeatable).
    fn trace_ids(count: u64) -> impl Iterator<Item = [u8; 16]> {
        (0..count).map(move |n| {
            let mut id = [1_u8; 16];
            id[8..].copy_from_slice(&n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
            id
        })
    }

    #[test]
    fn the_default_follows_the_caller_and_samples_traces_started_here() {
        for sampler in [Sampler::from_settings(None, None), Sampler::from_settings(Some("parentbased_always_on"), None)]
        {
            assert_eq!(sampler, Sampler::default());
            assert!(sampler.samples(&[1; 16], None));
            assert!(!sampler.samples(&[1; 16], Some(false)), "an unsampled caller's trace is not exported");
        }
        let unknown = Sampler::from_settings(Some("jaeger_remote"), None);
        assert_eq!(unknown, Sampler::default(), "an unknown sampler falls back to the default");
    }

    #[test]
    fn samplers_that_ignore_the_caller_apply_their_rule_to_every_trace() {
        let off = Sampler::from_settings(Some("always_off"), None);
        assert!(!off.samples(&[1; 16], Some(true)) && !off.samples(&[1; 16], None));
        let on = Sampler::from_settings(Some("always_on"), None);
        assert!(on.samples(&[1; 16], Some(false)));
        let parent_off = Sampler::from_settings(Some("parentbased_always_off"), None);
        assert!(parent_off.samples(&[1; 16], Some(true)) && !parent_off.samples(&[1; 16], None));
    }

    #[test]
    fn a_ratio_samples_its_share_of_trace_ids_the_same_every_time() {
        let quarter = Sampler::from_settings(Some("traceidratio"), Some("0.25"));
        let sampled = trace_ids(10_000).filter(|id| quarter.samples(id, Some(false))).count();
        assert!((2_300..=2_700).contains(&sampled), "{sampled} of 10000");
        let id = trace_ids(7).last().unwrap();
        assert_eq!(quarter.samples(&id, None), quarter.samples(&id, None));
        let none = Sampler::from_settings(Some("parentbased_traceidratio"), Some("0"));
        assert_eq!(trace_ids(1_000).filter(|id| none.samples(id, None)).count(), 0);
        assert!(none.samples(&[1; 16], Some(true)), "parent-based: the caller's choice stands");
        for bad in [Some("1.5"), Some("-0.1"), Some("half"), None] {
            let all = Sampler::from_settings(Some("traceidratio"), bad);
            assert_eq!(trace_ids(1_000).filter(|id| all.samples(id, None)).count(), 1_000, "{bad:?} is a ratio of 1");
        }
    }
}
