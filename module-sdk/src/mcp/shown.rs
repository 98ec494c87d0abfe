//! What an error message shows of a name or cursor a client sent: every
//! error answer is also logged (rmcp logs each at `warn`), so a megabyte
//! name must not become a megabyte log line.

use std::borrow::Cow;

/// The most characters of a client's text an error message shows.
pub const MAX_SHOWN_CHARS: usize = 80;

/// `text` as an error message shows it: whole within [`MAX_SHOWN_CHARS`],
/// else its first ones and `...`.
pub fn shown(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MAX_SHOWN_CHARS) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}...", &text[..end])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_at_a_character() {
        assert_eq!(shown("echo__say"), "echo__say");
        let longest = "é".repeat(MAX_SHOWN_CHARS);
        assert_eq!(shown(&longest), longest);
        assert_eq!(shown(&"é".repeat(1 << 20)), format!("{longest}..."));
    }
}
