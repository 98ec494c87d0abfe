//! The W3C Trace Context `traceparent` header
//! (<https://www.w3.org/TR/trace-context/>): `00-<trace-id>-<parent-id>-<flags>`,
//! 32 and 16 lowercase hex digits and two for the flags. The orchestrator
//! accepts it from callers (or starts a trace) and sends it to modules on
//! `POST /execute`; both log the trace id with each call.
//!
//! A small parser of our own: the format is one fixed-width line, and the
//! OpenTelemetry crates' propagator would bring their whole API along for it.

use std::fmt;

use axum::http::HeaderName;

/// The header's name, as a `HeaderName`: a lookup by it does not parse the
/// name again, as one by a `&str` does on every request.
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The `sampled` trace flag: the trace is recorded (its spans exported).
pub(crate) const SAMPLED_FLAG: u8 = 0x01;

/// A parsed `traceparent`: the trace, the caller's span in it, and the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: [u8; 16],
    parent_id: [u8; 8],
    flags: u8,
}

impl TraceParent {
    /// A trace context from its parts; `None` when either id is all zeros,
    /// which the specification forbids.
    pub fn new(trace_id: [u8; 16], parent_id: [u8; 8], flags: u8) -> Option<Self> {
        let nonzero = |bytes: &[u8]| bytes.iter().any(|b| *b != 0);
        (nonzero(&trace_id) && nonzero(&parent_id)).then_some(Self { trace_id, parent_id, flags })
    }

    /// Parses a header value; `None` when it is not a valid `traceparent`
    /// (a later version's extra fields after a `-` are ignored, as the
    /// specification asks).
    pub fn parse(header: &str) -> Option<Self> {
        let header = header.trim();
        let bytes = header.as_bytes();
        if bytes.len() < 55 || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let version = hex::<1>(&bytes[0..2])?[0];
        match version {
            0xff => return None,
            0x00 if bytes.len() != 55 => return None,
            _ if bytes.len() > 55 && bytes[55] != b'-' => return None,
            _ => {}
        }
        Self::new(hex(&bytes[3..35])?, hex(&bytes[36..52])?, hex::<1>(&bytes[53..55])?[0])
    }

    /// The same trace with `parent_id` as the caller's span: what a hop
    /// passes on.
    pub fn with_parent(self, parent_id: [u8; 8]) -> Option<Self> {
        Self::new(self.trace_id, parent_id, self.flags)
    }

    /// The trace id as 32 hex digits, as logs show it.
    pub fn trace_id(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// The parent (span) id as 16 hex digits.
    pub fn parent_id(&self) -> String {
        to_hex(&self.parent_id)
    }

    /// The version-00 header value (what `to_string` gives).
    pub fn header(&self) -> String {
        self.header_bytes().into_iter().map(char::from).collect()
    }

    /// The version-00 header value's bytes, written in place without the
    /// formatting machinery or an allocation: one is made for every routed
    /// call.
    pub fn header_bytes(&self) -> [u8; 55] {
        let mut header = [b'-'; 55];
        header[..2].copy_from_slice(b"00");
        write_hex(&self.trace_id, &mut header[3..35]);
        write_hex(&self.parent_id, &mut header[36..52]);
        write_hex(&[self.flags], &mut header[53..55]);
        header
    }

    /// Whether the trace is recorded: its `sampled` flag (bit `0x01`) is set.
    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED_FLAG != 0
    }

    /// The trace id's bytes.
    pub(crate) fn trace_id_bytes(&self) -> [u8; 16] {
        self.trace_id
    }

    /// The parent (span) id's bytes.
    pub(crate) fn parent_id_bytes(&self) -> [u8; 8] {
        self.parent_id
    }
}

impl fmt::Display for TraceParent {
    /// The version-00 header value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.header())
    }
}

/// `N` bytes from `2N` lowercase hex digits (upper case is invalid in a `traceparent`).
fn hex<const N: usize>(digits: &[u8]) -> Option<[u8; N]> {
    let value = |digit: u8| match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    };
    if digits.len() != 2 * N {
        return None;
    }
    let mut out = [0; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// `bytes` as lowercase hex digits.
fn to_hex(bytes: &[u8]) -> String {
    let mut digits = vec![0; 2 * bytes.len()];
    write_hex(bytes, &mut digits);
    digits.into_iter().map(char::from).collect()
}

/// Writes `bytes` into `out` (twice as long) as lowercase hex digits (not
/// `format!` per byte, which cost ~700 instructions and an allocation each).
fn write_hex(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_example_round_trips() {
        let parsed = TraceParent::parse(EXAMPLE).unwrap();
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.parent_id(), "00f067aa0ba902b7");
        assert_eq!(parsed.to_string(), EXAMPLE);
        assert_eq!(&parsed.header_bytes(), EXAMPLE.as_bytes());
        let child = parsed.with_parent([1; 8]).unwrap();
        assert_eq!(child.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-0101010101010101-01");
        assert!(child.sampled());
        assert!(!TraceParent::new([1; 16], [1; 8], 0).unwrap().sampled());
    }

    #[test]
    fn invalid_headers_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_keeps_the_known_fields() {
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        assert_eq!(TraceParent::parse(later).unwrap().to_string(), EXAMPLE);
        assert_eq!(TraceParent::parse(&format!("{}x", &later[..55])), None);
    }
}
