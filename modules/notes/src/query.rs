//! A model's search text turned into a safe FTS5 query.
//!
//! The text is user text, never FTS syntax: it is cut into Unicode words
//! (UAX #29), and each word becomes a quoted FTS string (a quote inside is
//! doubled), so `AND`, `NEAR(`, `:`, `^`, parentheses and stray quotes are
//! only ever words to look for. The words are joined with `OR`, so BM25
//! ranks notes by how many of them they share and how rare those are; when
//! there are several words, the whole phrase is added as one more
//! alternative, so a note holding the exact phrase ranks above one that
//! merely shares a word. A word written with a trailing `*` (`birth*`)
//! matches as a prefix.

use unicode_segmentation::UnicodeSegmentation;

/// Most distinct words of a query that are searched for; the rest are ignored.
pub const MAX_QUERY_WORDS: usize = 32;

/// Longest word that is searched for, in characters; longer ones are cut.
const MAX_WORD_CHARS: usize = 100;

/// One word to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    prefix: bool,
}

/// The FTS5 `MATCH` expression for `text`, or `None` when it holds no word
/// (only punctuation, emoji, operators...): nothing can match then.
pub fn fts_query(text: &str) -> Option<String> {
    let words = words(text);
    if words.is_empty() {
        return None;
    }
    let mut alternatives: Vec<String> = Vec::with_capacity(words.len() + 1);
    if words.len() > 1 {
        let phrase: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        alternatives.push(quoted(&phrase.join(" ")));
    }
    for word in &words {
        let term = quoted(&word.text);
        alternatives.push(if word.prefix { format!("{term}*") } else { term });
    }
    Some(alternatives.join(" OR "))
}

/// The distinct words of `text` (case-insensitively), in order, at most
/// [`MAX_QUERY_WORDS`].
fn words(text: &str) -> Vec<Word> {
    let mut found: Vec<Word> = Vec::new();
    for (start, word) in text.unicode_word_indices() {
        if found.len() == MAX_QUERY_WORDS {
            break;
        }
        let prefix = text[start + word.len()..].starts_with('*');
        let text: String = word.chars().take(MAX_WORD_CHARS).collect::<String>().to_lowercase();
        match found.iter_mut().find(|w| w.text == text) {
            Some(seen) => seen.prefix &= prefix,
            None => found.push(Word { text, prefix }),
        }
    }
    found
}

/// `text` as an FTS5 string: in double quotes, inner quotes doubled.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_joined_with_the_phrase_first() {
        assert_eq!(
            fts_query("When is my sister's birthday?").unwrap(),
            r#""when is my sister's birthday" OR "when" OR "is" OR "my" OR "sister's" OR "birthday""#
        );
        assert_eq!(fts_query("Birthday").unwrap(), r#""birthday""#);
    }

    #[test]
    fn operators_are_only_words() {
        assert_eq!(
            fts_query(r#"a AND b NEAR(c) title:x"#).unwrap(),
            r#""a and b near c title:x" OR "a" OR "and" OR "b" OR "near" OR "c" OR "title:x""#
        );
        assert_eq!(fts_query(r#"say "hi"#).unwrap(), r#""say hi" OR "say" OR "hi""#);
    }

    #[test]
    fn a_trailing_star_asks_for_a_prefix() {
        assert_eq!(fts_query("birth*").unwrap(), r#""birth"*"#);
        assert_eq!(fts_query("*").as_deref(), None);
    }

    #[test]
    fn no_words_means_no_query() {
        for text in ["", "   ", "\0\0", "🎂🎉", "(((", "\"", "* : ^ -", "(\u{0})"] {
            assert_eq!(fts_query(text), None, "{text:?}");
        }
    }

    #[test]
    fn words_are_bounded() {
        let many: String = (0..1000).map(|i| format!("w{i} ")).collect();
        let query = fts_query(&many).unwrap();
        assert_eq!(query.matches(" OR ").count(), MAX_QUERY_WORDS);
        let long = "x".repeat(10_000);
        assert_eq!(fts_query(&long).unwrap().len(), MAX_WORD_CHARS + 2);
    }
}
