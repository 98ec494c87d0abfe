//! Small text helpers shared by the tools.

/// Runs of whitespace turned into one space, ends trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to `max_chars` characters; true when it was cut.
pub fn cut_chars(mut text: String, max_chars: usize) -> (String, bool) {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => {
            text.truncate(end);
            (text, true)
        }
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_collapsed() {
        assert_eq!(collapse_whitespace("  a \n\t b  "), "a b");
        assert_eq!(collapse_whitespace(" \n "), "");
    }

    #[test]
    fn text_is_cut_on_character_boundaries() {
        assert_eq!(cut_chars("ééé".into(), 2), ("éé".into(), true));
        assert_eq!(cut_chars("ab".into(), 2), ("ab".into(), false));
    }
}
