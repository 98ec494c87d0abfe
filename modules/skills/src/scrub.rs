//! Credentials scrubbing: what a script prints is cleaned of secrets
//! before it leaves the module.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Secret values shorter than this are not scrubbed (they would blank out
/// ordinary words and digits).
const MIN_SECRET_CHARS: usize = 4;

/// Bytes read past an output's cap so that a token shape straddling the
/// cut is still whole when scrubbed (a PEM key block of up to 4096-bit RSA;
/// a longer one, cut before its END line, goes from its BEGIN line on).
const SHAPE_LOOKAHEAD_BYTES: usize = 4096;

/// Well-known token shapes; where a pattern has a group named `keep`, that
/// part stays (the `password=` of `password=hunter2`).
static TOKEN_SHAPES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // PEM private key blocks, whole.
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
        // A key's BEGIN line and the base64 and header (`Proc-Type: ...`)
        // lines after it, for a block without its END line (longer than the
        // lookahead past a cut, or cut by the script); within the whole
        // block otherwise. Two shapes, not one alternation: that would look
        // for an END line to the end of the text from every BEGIN line
        // (quadratic on many of them).
        r"(?m)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:\r?\n(?:[A-Za-z-]+: [A-Za-z0-9,-]*|[A-Za-z0-9+/=]+)\r?$)*",
        // HTTP bearer tokens.
        r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9\-._~+/]+=*",
        // AWS access key ids.
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",
        // GitHub, Slack, OpenAI/Anthropic-style API keys.
        r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
        r"\bsk-[A-Za-z0-9_\-]{20,}",
        // JSON Web Tokens.
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        // key=value and key: value for secret-sounding keys, the key kept.
        r#"(?i)(?P<keep>\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|secret[_-]?key|auth)["']?\s*[=:]\s*["']?)[^\s"',;&]+"#,
    ]
    .iter()
    .map(|pattern| Regex::new(pattern).expect("a valid pattern"))
    .collect()
});

/// Replaces known secret values and token shapes with [`REDACTED`].
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    secrets: Vec<String>,
}

impl Scrubber {
    /// A scrubber for these secret values (the skill's allow-listed
    /// variables), plus the token shapes every scrubber knows. A value with
    /// whitespace around it (a token file's newline) is looked for trimmed
    /// too, as a script that uses it prints it. Each is looked for in its
    /// JSON-escaped spellings as well ([`json_spellings`]), so that a
    /// secret a script prints inside JSON that goes back as text (one value
    /// per line, too many items, cut) is still found.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut kept = Vec::new();
        for secret in secrets.into_iter().filter(|s| s.trim().chars().count() >= MIN_SECRET_CHARS) {
            let trimmed = secret.trim();
            if trimmed.len() < secret.len() {
                kept.extend(json_spellings(trimmed));
            }
            kept.extend(json_spellings(&secret));
        }
        kept.sort_unstable();
        kept.dedup();
        Self { secrets: kept }
    }

    /// How many bytes past a cap must be read for [`Self::scrub_capped`] to
    /// see whole every secret (and token) that begins before the cap.
    pub fn lookahead_bytes(&self) -> usize {
        self.secrets.iter().map(String::len).max().unwrap_or(0).max(SHAPE_LOOKAHEAD_BYTES)
    }

    /// The first `cap` bytes of the scrubbed `read` and whether anything was
    /// left out, for `read`, an output's first `cap` + [`Self::lookahead_bytes`]
    /// bytes (`read_cut`: it went on past those). Scrubbing comes before the
    /// cut, so a secret the cut would split goes whole. When the read was
    /// cut, nothing from its last [`Self::lookahead_bytes`] bytes is kept:
    /// a secret or token beginning there may be split by the read's end (a
    /// character of it too, decoded as U+FFFD) and so not be found.
    pub fn scrub_capped(&self, read: &[u8], read_cut: bool, cap: usize) -> (String, bool) {
        let text = String::from_utf8_lossy(read);
        let keep_below = if read_cut { text.len().saturating_sub(self.lookahead_bytes()) } else { text.len() };
        let (scrubbed, left_out) = self.redact(&text, keep_below, cap);
        (scrubbed, read_cut || left_out)
    }

    /// `text` without secrets.
    pub fn scrub(&self, text: &str) -> String {
        self.redact(text, text.len(), usize::MAX).0
    }

    /// Whether `text` holds a secret that reads as a number but not as an
    /// `i64` or `u64`: parsed as JSON it becomes an `f64`, may be rounded
    /// (`98765432109876543210` is `9.876543210987655e19`), and then no
    /// longer matches.
    pub fn holds_number_secret(&self, text: &str) -> bool {
        self.secrets.iter().any(|secret| {
            let trimmed = secret.trim();
            trimmed.parse::<f64>().is_ok()
                && trimmed.parse::<i64>().is_err()
                && trimmed.parse::<u64>().is_err()
                && text.contains(secret.as_str())
        })
    }

    /// `value`, parsed from a script's unscrubbed JSON, without secrets.
    /// Every string, object key and number is scrubbed as decoded: the raw
    /// text may spell a secret with escapes (`\u00e4`, `\"`, the `\n` of a
    /// PEM key) that only the decoded form shows. Then the value's JSON text
    /// is scrubbed for shapes that span a key and its value
    /// (`"password": "hunter2"`), and read back; when that text no longer
    /// parses, it is the answer, as text.
    pub fn scrub_json(&self, value: Value) -> Value {
        let value = self.scrub_decoded(value);
        let text = value.to_string();
        let scrubbed = self.scrub(&text);
        if scrubbed == text {
            return value;
        }
        serde_json::from_str(&scrubbed).unwrap_or(Value::String(scrubbed))
    }

    /// `value` with every string, object key and number scrubbed (a
    /// number holding a secret becomes the string [`REDACTED`]).
    fn scrub_decoded(&self, value: Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.scrub(&text)),
            Value::Number(number) => {
                let text = number.to_string();
                let scrubbed = self.scrub(&text);
                if scrubbed == text { Value::Number(number) } else { Value::String(scrubbed) }
            }
            Value::Array(items) => Value::Array(items.into_iter().map(|item| self.scrub_decoded(item)).collect()),
            Value::Object(entries) => Value::Object(
                entries.into_iter().map(|(key, item)| (self.scrub(&key), self.scrub_decoded(item))).collect(),
            ),
            other => other,
        }
    }

    /// `text` up to byte `keep_below` with every secret and token shape
    /// replaced, at most `cap` bytes; whether anything was left out.
    /// Matches are found on the whole `text` and overlapping ones merged,
    /// so two secrets sharing characters go as one.
    fn redact(&self, text: &str, keep_below: usize, cap: usize) -> (String, bool) {
        let mut out = String::new();
        let mut from = 0;
        for (start, end) in merged(self.matches(text)) {
            if !push_plain(&mut out, &text[from..start], keep_below.saturating_sub(from), cap) {
                return (out, true);
            }
            if out.len() + REDACTED.len() > cap {
                return (out, true);
            }
            out.push_str(REDACTED);
            from = end;
        }
        let whole = push_plain(&mut out, &text[from..], keep_below.saturating_sub(from), cap);
        (out, !whole)
    }

    /// The byte ranges of every secret (overlapping occurrences too) and
    /// every token shape (without its `keep` group) in `text`.
    fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        let mut ranges = Vec::new();
        for secret in &self.secrets {
            let mut from = 0;
            while let Some(at) = text[from..].find(secret.as_str()) {
                let start = from + at;
                ranges.push((start, start + secret.len()));
                from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            }
        }
        for shape in TOKEN_SHAPES.iter() {
            for found in shape.captures_iter(text) {
                let whole = found.get(0).expect("group 0 is the match");
                let start = found.name("keep").map_or(whole.start(), |keep| keep.end());
                ranges.push((start, whole.end()));
            }
        }
        ranges
    }
}

/// `secret` as printed and as JSON encoders spell it inside a string:
/// `serde_json`'s escapes (`\"`, `\\`, `\n`, `\u001f`), and the ASCII-only
/// form ([`ascii_json`]) in lowercase hex, as Python's `json.dumps` writes
/// it, and in uppercase; for a secret with a `/`, each of those escaped
/// spellings with `\/` for it too, as PHP's `json_encode` writes it (by
/// default ASCII-only, or with `JSON_UNESCAPED_UNICODE`).
fn json_spellings(secret: &str) -> Vec<String> {
    let quoted = serde_json::to_string(secret).expect("a string serializes");
    let escaped = quoted[1..quoted.len() - 1].to_owned();
    let mut spellings = vec![secret.to_owned(), escaped, ascii_json(secret, false), ascii_json(secret, true)];
    if secret.contains('/') {
        let slashed: Vec<String> = spellings[1..].iter().map(|spelling| spelling.replace('/', "\\/")).collect();
        spellings.extend(slashed);
    }
    spellings
}

/// `secret` JSON-escaped with only printable ASCII kept as is: short
/// escapes where JSON has them, every other character as `\uXXXX`
/// (UTF-16 units, a surrogate pair past U+FFFF), hex `upper` or not.
fn ascii_json(secret: &str, upper: bool) -> String {
    let mut out = String::with_capacity(secret.len() * 2);
    for c in secret.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='\u{7f}' => out.push(c),
            _ => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    out.push_str(&if upper { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") });
                }
            }
        }
    }
    out
}

/// `ranges` sorted, with overlapping or touching ones joined.
fn merged(mut ranges: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    ranges.sort_unstable();
    let mut joined: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match joined.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => joined.push((start, end)),
        }
    }
    joined
}

/// Appends to `out` the longest beginning of `plain` (whole characters) of
/// at most `limit` bytes that keeps `out` within `cap`; whether all of it.
fn push_plain(out: &mut String, plain: &str, limit: usize, cap: usize) -> bool {
    let mut end = plain.len().min(limit).min(cap.saturating_sub(out.len()));
    while !plain.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&plain[..end]);
    end == plain.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_redacted() {
        let scrubber = Scrubber::new(["s3cr3t-value".to_owned(), "ab".to_owned()]);
        assert_eq!(scrubber.scrub("token is s3cr3t-value, ab"), "token is [redacted], ab");
        // A value with a newline at its end, printed without it.
        let padded = Scrubber::new([" tk-0123456789\n".to_owned()]);
        assert_eq!(padded.scrub("got tk-0123456789."), "got [redacted].");
    }

    #[test]
    fn json_escaped_secrets_are_redacted_in_text() {
        let scrubber = Scrubber::new(["p\u{e4}ss\"w\u{1f511}rd\n-1".to_owned()]);
        // As Python's `json.dumps` (ensure_ascii), serde_json, and an
        // encoder writing uppercase hex print it, one value per line.
        let printed = concat!(
            r#"{"p": "p\u00e4ss\"w\ud83d\udd11rd\n-1"}"#,
            "\n",
            "{\"p\":\"p\u{e4}ss\\\"w\u{1f511}rd\\n-1\"}\n",
            r#"{"p": "p\u00E4ss\"w\uD83D\uDD11rd\n-1"}"#,
        );
        assert_eq!(scrubber.scrub(printed), "{\"p\": \"[redacted]\"}\n{\"p\":\"[redacted]\"}\n{\"p\": \"[redacted]\"}");
    }

    #[test]
    fn secrets_with_escaped_slashes_are_redacted() {
        let scrubber = Scrubber::new(["https://u:p\u{e4}ss@db/x".to_owned()]);
        // As PHP's `json_encode` prints it, by default and with
        // `JSON_UNESCAPED_UNICODE`.
        let printed =
            concat!(r#"{"dsn":"https:\/\/u:p\u00e4ss@db\/x"}"#, "\n", "{\"dsn\":\"https:\\/\\/u:p\u{e4}ss@db\\/x\"}");
        assert_eq!(scrubber.scrub(printed), "{\"dsn\":\"[redacted]\"}\n{\"dsn\":\"[redacted]\"}");
        // A secret without a `/` gets no more spellings.
        assert_eq!(json_spellings("plain").len(), 4);
    }

    #[test]
    fn a_secret_split_by_the_cap_goes_whole() {
        let secret = "tk-9f8e7d6c5b4a-secret";
        let scrubber = Scrubber::new([secret.to_owned()]);
        for padding in 0..30 {
            let output = format!("{}{secret}{}", ".".repeat(padding), "y".repeat(30));
            let (kept, cut) = capped(&scrubber, &output, 20);
            assert!(unmarked(&kept).chars().all(|c| c == '.' || c == 'y'), "padding {padding}: {kept}");
            assert!(cut, "padding {padding}");
        }
        // A read that is not cut is kept whole, up to the cap.
        assert_eq!(scrubber.scrub_capped(b"ab tk", false, 100), ("ab tk".to_owned(), false));
    }

    /// The first `cap` + lookahead bytes of `output` through `scrub_capped`.
    fn capped(scrubber: &Scrubber, output: &str, cap: usize) -> (String, bool) {
        let read = &output.as_bytes()[..output.len().min(cap + scrubber.lookahead_bytes())];
        scrubber.scrub_capped(read, read.len() < output.len(), cap)
    }

    /// `kept` without its whole markers, for checking what is left.
    fn unmarked(kept: &str) -> String {
        kept.replace(REDACTED, "")
    }

    /// Output of 190 copies of `secret` then `target`, read so that the
    /// read's end splits `target` at every byte: nothing but the copies'
    /// separators may be kept, and the output is marked as cut. Scrubbing
    /// the copies shrinks the text, so the read's end falls within the cap.
    fn assert_no_split_is_kept(secret: &str, target: &str) {
        let scrubber = Scrubber::new([secret.to_owned()]);
        let copies = format!("{secret} ").repeat(190);
        let output = format!("{copies}{target} end");
        for split in 0..=target.len() {
            let cap = copies.len() + split - scrubber.lookahead_bytes();
            let (kept, cut) = capped(&scrubber, &output, cap);
            assert!(unmarked(&kept).chars().all(|c| c == ' '), "split at {split}: {kept:?}");
            assert!(cut, "split at {split}");
        }
    }

    #[test]
    fn a_secret_the_read_splits_inside_a_character_is_not_kept() {
        let secret = "pässwörd-0123456789-abcdefghijklmnopqrst";
        assert_no_split_is_kept(secret, secret);
    }

    #[test]
    fn a_token_the_read_splits_is_not_kept() {
        assert_no_split_is_kept("0123456789012345678901234567890123456789", "ghp_QQQQRRRRSSSSTTTTUUUUVVVVWWWWXXXXYYYY");
    }

    #[test]
    fn a_key_block_longer_than_the_lookahead_is_not_kept_when_the_cut_falls_inside_it() {
        let scrubber = Scrubber::default();
        // An 8192-bit RSA key's PEM is about 6.4 KB: the read ends inside it.
        let line = format!("{}MIIS\n", "MIISKAIBAAKCBAEAx9f3".repeat(3));
        let key = format!("-----BEGIN RSA PRIVATE KEY-----\n{}-----END RSA PRIVATE KEY-----\n", line.repeat(100));
        assert!(key.len() > scrubber.lookahead_bytes() + 1000, "{}", key.len());
        let output = format!("before\n{key}after");
        for cap in [10, 100, 1000] {
            let (kept, cut) = capped(&scrubber, &output, cap);
            assert!(!kept.contains("MIIS") && !kept.contains("x9f3"), "cap {cap}: {kept:?}");
            assert!(cut, "cap {cap}");
        }
    }

    #[test]
    fn many_key_lines_without_an_end_cost_linear_time() {
        // 40,000 BEGIN lines without END: an alternation inside one shape
        // scanned to the end from each (about 48 s for 1 MiB); here once.
        // The watchdog only catches a hang: this takes milliseconds.
        let output = "-----BEGIN PRIVATE KEY-----.".repeat(40_000);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || done_tx.send(Scrubber::default().scrub(&output)));
        let mut scrubbed = done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("scrubbed within a minute");
        scrubbed.retain(|c| c != '.');
        assert_eq!(scrubbed, REDACTED.repeat(40_000));
    }

    #[test]
    fn overlapping_secrets_go_whole() {
        let scrubber = Scrubber::new(["abcd1234".to_owned(), "1234wxyz".to_owned()]);
        assert_eq!(scrubber.scrub("x abcd1234wxyz y"), "x [redacted] y");
        assert_eq!(scrubber.scrub("x 1234wxyzabcd1234 y"), "x [redacted] y");
        let scrubber = Scrubber::new(["aaaa".to_owned()]);
        assert_eq!(scrubber.scrub("aaaaaa"), "[redacted]");
    }

    #[test]
    fn token_shapes_are_redacted() {
        let scrubber = Scrubber::default();
        let cases = [
            ("Authorization: Bearer abc.def-123", "Authorization: Bearer [redacted]"),
            ("key AKIAIOSFODNN7EXAMPLE here", "key [redacted] here"),
            ("password=hunter2 next", "password=[redacted] next"),
            (r#"{"api_key": "xyz123"}"#, r#"{"api_key": "[redacted]"}"#),
            ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh [redacted]"),
            ("k=sk-abcdefghijklmnopqrstuvwx", "k=[redacted]"),
            ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb", "a\n[redacted]\nb"),
            // No END line: the key's lines go, up to the first line that is not base64 or a header.
            ("a\n-----BEGIN PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIE+/x=\n> b", "a\n[redacted]\n> b"),
            // Text after a whole block stays, even text a PEM line could hold.
            (
                "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\nnext line\nword",
                "[redacted]\nnext line\nword",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(scrubber.scrub(input), expected, "{input}");
        }
        assert_eq!(scrubber.scrub("nothing to hide: 42 words"), "nothing to hide: 42 words");
    }
}
