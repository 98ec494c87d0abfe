//! How much JSON the `text` format's scanner may read to find the bare
//! objects in one model text.
//!
//! Each `{` outside a fence starts a parse, and a parse that fails sends the
//! scanner on to the next `{`, so text full of objects that open and never
//! close (or nest past serde_json's 127 levels) would be read again from
//! every `{` inside them: a 2 MiB message could cost seconds of CPU. The
//! budget caps the bytes all those parses read together, a fixed multiple of
//! the text's length; model text, even a long answer cut off in the middle
//! of a JSON object, reads each byte a few times.

use serde_json::Value;
use serde_json::value::RawValue;

use super::ProviderError;

/// How many bytes the parses of a text's bare objects may read together, per byte of the text.
pub const SCAN_BYTES_PER_TEXT_BYTE: usize = 8;

/// The bytes they may read whatever the text's length, so short texts are never refused.
pub const MIN_SCAN_BYTES: usize = 1 << 20;

/// The bytes one text's bare-object parses may still read.
#[derive(Debug)]
pub(crate) struct ScanBudget {
    limit: usize,
    read: usize,
}

impl ScanBudget {
    /// The budget of `text`: [`SCAN_BYTES_PER_TEXT_BYTE`] times its length, at least [`MIN_SCAN_BYTES`].
    pub fn of(text: &str) -> Self {
        Self { limit: text.len().saturating_mul(SCAN_BYTES_PER_TEXT_BYTE).max(MIN_SCAN_BYTES), read: 0 }
    }

    /// The bytes read so far.
    #[cfg(test)]
    pub fn read(&self) -> usize {
        self.read
    }

    /// The JSON object `rest` begins with and its length in bytes, if it
    /// begins with one serde_json can read as a [`Value`]: validated first
    /// without building anything, so a failed parse allocates nothing.
    /// An error once the parses of this text would read more than the budget.
    pub fn object(&mut self, rest: &str) -> Result<Option<(Value, usize)>, ProviderError> {
        let mut window = rest.len().min(self.limit - self.read);
        while !rest.is_char_boundary(window) {
            window -= 1;
        }
        let mut values = serde_json::Deserializer::from_str(&rest[..window]).into_iter::<&RawValue>();
        let raw = match values.next() {
            Some(Ok(raw)) => raw,
            Some(Err(error)) if error.is_eof() && window < rest.len() => return Err(self.spent()),
            Some(Err(error)) => {
                self.read += error_offset(&rest[..window], &error).max(1);
                return Ok(None);
            }
            // Nothing but the window's end: none of the budget is left.
            None if window < rest.len() => return Err(self.spent()),
            None => return Ok(None),
        };
        let length = values.byte_offset();
        // The same bytes again, now building the value (which can still fail, e.g. past 127 levels).
        if self.limit - self.read < 2 * length {
            return Err(self.spent());
        }
        self.read += 2 * length;
        Ok(serde_json::from_str::<Value>(raw.get()).ok().map(|value| (value, length)))
    }

    /// The error for a text whose parses ran out of budget (all of it counted as read).
    fn spent(&mut self) -> ProviderError {
        self.read = self.limit;
        ProviderError::ScanOverBudget { limit: self.limit }
    }
}

/// Where in `text` serde_json stopped with `error`: its line and column as a byte offset.
fn error_offset(text: &str, error: &serde_json::Error) -> usize {
    let line_start: usize = text.split_inclusive('\n').take(error.line().saturating_sub(1)).map(str::len).sum();
    (line_start + error.column()).min(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_read_with_its_length_and_a_failed_one_counts_what_was_read() {
        let mut budget = ScanBudget::of("");
        let (value, length) = budget.object("{\"a\": [1, {}]} and more").unwrap().unwrap();
        assert_eq!((value, length), (serde_json::json!({"a": [1, {}]}), 14));
        assert_eq!(budget.read(), 28);
        assert_eq!(budget.object("{\"a\":\n\n  x}").unwrap(), None);
        assert_eq!(budget.read(), 28 + 10, "stopped at the `x`, line 3 column 3");
        assert_eq!(budget.object("{not json}").unwrap(), None);
        // Deeper than serde_json's 127 levels: valid JSON, but no value can be built.
        let deep = format!("{}{}", "{\"a\":".repeat(130), "}".repeat(130));
        assert_eq!(budget.object(&deep).unwrap(), None);
    }

    #[test]
    fn parses_past_the_budget_are_refused_before_they_read_it() {
        let mut budget = ScanBudget { limit: 100, read: 0 };
        let long = format!("{{\"a\": \"{}\"}}", "x".repeat(200));
        assert_eq!(budget.object(&long).unwrap_err(), ProviderError::ScanOverBudget { limit: 100 });
        assert_eq!(budget.read(), 100);
        let mut budget = ScanBudget { limit: 100, read: 0 };
        assert!(budget.object(&format!("{{\"a\": \"{}\"}}", "é".repeat(60))).is_err(), "cut inside a character");
        let mut budget = ScanBudget { limit: 100, read: 0 };
        // Complete within the window, but building it would read it a second time past the budget.
        assert!(budget.object(&format!("{{\"a\": \"{}\"}}", "x".repeat(60))).is_err());
    }
}
