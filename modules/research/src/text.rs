//! Small text helpers shared by the tools: tidy whitespace, and an error
//! with all its causes on one line.

use std::error::Error;

/// Runs of whitespace turned into one space, ends trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// An error and its causes as `error: cause: cause` (reqwest's own message
/// names only the outermost layer, e.g. "error sending request").
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
    fn causes_are_chained() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&error), "outer: inner");
    }
}
