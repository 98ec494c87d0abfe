//! A script's stdout as the answer gives it: its JSON value when it printed
//! JSON, else its text.

use serde_json::Value;

use crate::scrub::Scrubber;

/// The answer's `stdout`: `raw` (what the script printed, all of it when
/// not `cut`) parsed and scrubbed when it is JSON, else `scrubbed` (the
/// scrubbed text). Cut output is no longer the script's JSON, even when it
/// parses (a long number cut short is another number). The raw text is
/// parsed, not the scrubbed one: scrubbing text with escapes in it can
/// take part of a secret and leave the rest (the BEGIN line of a PEM key
/// whose lines are joined by `\n`), and parsing decodes what the text hid.
pub fn stdout_value(scrubber: &Scrubber, raw: &[u8], scrubbed: String, cut: bool) -> Value {
    if cut {
        return Value::String(scrubbed);
    }
    match serde_json::from_slice(raw) {
        Ok(parsed) => scrubber.scrub_json(parsed),
        Err(_) => Value::String(scrubbed),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::scrub::REDACTED;

    /// `stdout_value` as the runner calls it, on a whole output.
    fn value(scrubber: &Scrubber, printed: &str) -> Value {
        stdout_value(scrubber, printed.as_bytes(), scrubber.scrub(printed), false)
    }

    #[test]
    fn secrets_escaped_in_json_are_redacted_once_parsed() {
        let secret = "p\u{e4}ss\"w0rd-1";
        let scrubber = Scrubber::new([secret.to_owned(), "31415926535".to_owned()]);
        let key = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----";
        let bearer = "Authorization: Bearer abc+def";
        // As Python's `json.dumps` prints them: escaped, so the raw text
        // does not show them whole.
        let printed = json!({"x": secret, secret: [key, bearer], "n": 31415926535_u64, "api_key": "xyz123"})
            .to_string()
            .replace('\u{e4}', "\\u00e4")
            .replace('+', "\\u002b");
        let expected = json!({
            "x": REDACTED, REDACTED: [REDACTED, format!("Authorization: Bearer {REDACTED}")],
            "n": REDACTED, "api_key": REDACTED
        });
        assert_eq!(value(&scrubber, &printed), expected);
        let scrubbed = scrubber.scrub(&printed);
        assert_eq!(stdout_value(&scrubber, printed.as_bytes(), scrubbed.clone(), true), Value::String(scrubbed));
    }
}
