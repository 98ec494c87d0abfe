//! A script's stdout as the answer gives it: its JSON value when it printed
//! JSON small and shallow enough to hold as a tree, else its text.

use serde_json::Value;

use crate::scrub::Scrubber;

/// The most `[`, `{` and `,` (outside strings) a stdout may hold to be
/// parsed: about its number of values (at most twice it). Past it stdout
/// is text, which costs its bytes once; a tree costs about 80 bytes per
/// value (1 MiB of `{},` would be about 28 MB).
const MAX_PARSED_ITEMS: usize = 20_000;

/// The deepest nesting of arrays and objects parsed; deeper stdout is
/// text. The answer wraps it in a few more levels, and its readers stop
/// at 128 (`serde_json`'s recursion limit).
const MAX_PARSED_DEPTH: usize = 32;

/// The answer's `stdout`: `raw` (what the script printed, all of it when
/// not `cut`) parsed and scrubbed when it is JSON within
/// [`MAX_PARSED_ITEMS`] and [`MAX_PARSED_DEPTH`], else `scrubbed` (the
/// scrubbed text). Cut output is no longer the script's JSON, even when it
/// parses (a long number cut short is another number). The raw text is
/// parsed, not the scrubbed one: scrubbing text with escapes in it can
/// take part of a secret and leave the rest (the BEGIN line of a PEM key
/// whose lines are joined by `\n`), and parsing decodes what the text hid.
/// Stdout holding a secret that reads as a number is text too: parsing
/// may round it ([`Scrubber::holds_number_secret`]).
pub fn stdout_value(scrubber: &Scrubber, raw: &[u8], scrubbed: String, cut: bool) -> Value {
    if cut || !small_and_shallow(raw) || scrubber.holds_number_secret(&String::from_utf8_lossy(raw)) {
        return Value::String(scrubbed);
    }
    match serde_json::from_slice(raw) {
        Ok(parsed) => scrubber.scrub_json(parsed),
        Err(_) => Value::String(scrubbed),
    }
}

/// Whether `raw`, read as JSON, has at most [`MAX_PARSED_ITEMS`] items and
/// [`MAX_PARSED_DEPTH`] levels; one pass, no allocation.
fn small_and_shallow(raw: &[u8]) -> bool {
    let (mut items, mut depth) = (0_usize, 0_usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in raw {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                items += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' => items += 1,
            _ => {}
        }
        if depth > MAX_PARSED_DEPTH || items > MAX_PARSED_ITEMS {
            return false;
        }
    }
    true
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

    #[test]
    fn a_number_secret_parsing_would_round_is_redacted() {
        let scrubber = Scrubber::new(["98765432109876543210".to_owned()]);
        let printed = r#"{"acct": 98765432109876543210}"#;
        assert_eq!(value(&scrubber, printed), Value::String(format!(r#"{{"acct": {REDACTED}}}"#)));
    }

    #[test]
    fn only_small_and_shallow_json_is_parsed() {
        let scrubber = Scrubber::default();
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(value(&scrubber, &nested(MAX_PARSED_DEPTH)).is_array());
        assert_eq!(value(&scrubber, &nested(MAX_PARSED_DEPTH + 1)), Value::String(nested(MAX_PARSED_DEPTH + 1)));
        let many = |count: usize| format!("[{}{{}}]", "{},".repeat(count - 1));
        // The outer `[`, and a `{` and a `,` for all but the last `{}`.
        let within = many(MAX_PARSED_ITEMS / 2);
        assert!(value(&scrubber, &within).is_array());
        let past = many(MAX_PARSED_ITEMS / 2 + 1);
        assert_eq!(value(&scrubber, &past), Value::String(past.clone()));
        // Brackets and commas inside strings are text, escaped quotes too.
        let in_strings = json!([format!("\"{}", nested(200)), ",".repeat(MAX_PARSED_ITEMS * 2)]).to_string();
        assert!(value(&scrubber, &in_strings).is_array());
    }
}
