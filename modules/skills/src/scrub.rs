//! Credentials scrubbing: what a script prints is cleaned of secrets
//! before it leaves the module.

use std::sync::LazyLock;

use regex::Regex;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Secret values shorter than this are not scrubbed (they would blank out
/// ordinary words and digits).
const MIN_SECRET_CHARS: usize = 4;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_redacted() {
        let scrubber = Scrubber::new(["s3cr3t-value".to_owned(), "ab".to_owned()]);
        assert_eq!(scrubber.scrub("token is s3cr3t-value, ab"), "token is [redacted], ab");
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
