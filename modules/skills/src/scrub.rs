//! Credentials scrubbing: what a script prints is cleaned of secrets
//! before it leaves the module.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Secret values shorter than this are not scrubbed (they would blank out
/// ordinary words and digits).
const MIN_SECRET_CHARS: usize = 4;

/// Bytes read past an output's cap so that a token shape straddling the
/// cut is still whole when scrubbed (a PEM key block of up to 4096-bit RSA).
const SHAPE_LOOKAHEAD_BYTES: usize = 4096;

/// Well-known token shapes; where a pattern has a group named `keep`, that
/// part stays (the `password=` of `password=hunter2`).
static TOKEN_SHAPES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // PEM private key blocks, whole.
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
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
    /// variables), plus the token shapes every scrubber knows.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> =
            secrets.into_iter().filter(|s| s.trim().chars().count() >= MIN_SECRET_CHARS).collect();
        // Longest first, so a secret containing another goes whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Self { secrets }
    }

    /// How many bytes past a cap must be read for [`Self::scrub_capped`] to
    /// see whole every secret (and token) that begins before the cap.
    pub fn lookahead_bytes(&self) -> usize {
        self.secrets.first().map_or(0, String::len).max(SHAPE_LOOKAHEAD_BYTES)
    }

    /// The first `cap` bytes of the scrubbed `read` and whether anything was
    /// left out, for `read`, an output's first `cap` + [`Self::lookahead_bytes`]
    /// bytes (`read_cut`: it went on past those). Scrubbing comes before the
    /// cut, so a secret the cut would split goes whole; an end of the kept
    /// text that begins a secret (split by the read's own cut) is redacted.
    pub fn scrub_capped(&self, read: &[u8], read_cut: bool, cap: usize) -> (String, bool) {
        let mut text = self.scrub(&String::from_utf8_lossy(read));
        let cut = read_cut || text.len() > cap;
        if text.len() > cap {
            let mut end = cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        if cut {
            let begun = self.secrets.iter().map(|secret| begun_secret(&text, secret)).max().unwrap_or(0);
            if begun > 0 {
                text.truncate(text.len() - begun);
                text.push_str(REDACTED);
            }
        }
        (text, cut)
    }

    /// `text` without secrets.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        for shape in TOKEN_SHAPES.iter() {
            if shape.is_match(&text) {
                text = shape
                    .replace_all(&text, |found: &regex::Captures<'_>| {
                        format!("{}{REDACTED}", found.name("keep").map_or("", |keep| keep.as_str()))
                    })
                    .into_owned();
            }
        }
        text
    }
}

/// The length of the longest end of `text` that is the beginning of
/// `secret` (and not all of it), 0 when none is.
fn begun_secret(text: &str, secret: &str) -> usize {
    (1..secret.len().min(text.len() + 1))
        .rev()
        .find(|&length| secret.is_char_boundary(length) && text.ends_with(&secret[..length]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_redacted() {
        let scrubber = Scrubber::new(["s3cr3t-value".to_owned(), "ab".to_owned()]);
        assert_eq!(scrubber.scrub("token is s3cr3t-value, ab"), "token is [redacted], ab");
    }

    #[test]
    fn a_secret_split_by_the_cap_goes_whole() {
        let secret = "tk-9f8e7d6c5b4a-secret";
        let scrubber = Scrubber::new([secret.to_owned()]);
        for padding in 0..30 {
            let output = format!("{}{secret}{}", ".".repeat(padding), "y".repeat(30));
            let read = &output.as_bytes()[..output.len().min(20 + scrubber.lookahead_bytes())];
            let (kept, cut) = scrubber.scrub_capped(read, read.len() < output.len(), 20);
            // Whole markers, and at the end perhaps one the cut split.
            let rest = kept.replace(REDACTED, "");
            let rest = (1..REDACTED.len()).rev().find_map(|n| rest.strip_suffix(&REDACTED[..n])).unwrap_or(&rest);
            assert!(rest.chars().all(|c| c == '.' || c == 'y'), "padding {padding}: {kept}");
            assert!(cut, "padding {padding}");
        }
        // The read itself ended inside the secret: its beginning is redacted.
        assert_eq!(scrubber.scrub_capped(b"ab tk-9f8e", true, 100), ("ab [redacted]".to_owned(), true));
        assert_eq!(scrubber.scrub_capped(b"ab tk", false, 100), ("ab tk".to_owned(), false));
        assert_eq!(begun_secret("ab tk-9", secret), 4);
        assert_eq!(begun_secret("x", secret), 0);
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
        ];
        for (input, expected) in cases {
            assert_eq!(scrubber.scrub(input), expected, "{input}");
        }
        assert_eq!(scrubber.scrub("nothing to hide: 42 words"), "nothing to hide: 42 words");
    }
}
