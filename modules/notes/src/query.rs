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
//! matches as a prefix: when it has at least [`MIN_PREFIX_CHARS`]
//! characters (shorter prefixes are not indexed, and would walk every
//! user's part of the index: `a*` is the word `a`), and for at most
//! [`MAX_PREFIX_WORDS`] words of a query.

use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_segmentation::UnicodeSegmentation;

/// Most distinct words of a query that are searched for; the rest are ignored.
pub const MAX_QUERY_WORDS: usize = 32;

/// Longest word that is searched for, in characters; longer ones are cut.
const MAX_WORD_CHARS: usize = 100;

/// Fewest characters before a `*` for a prefix search: the shortest prefix
/// the full-text index holds (`prefix = '2 3'` in the store's schema).
pub const MIN_PREFIX_CHARS: usize = 2;

/// Most words of one query searched as prefixes; each walks every word of
/// the index that starts with it.
pub const MAX_PREFIX_WORDS: usize = 8;

/// Why a search text is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// More prefix words than [`MAX_PREFIX_WORDS`].
    #[error(
        "the query has {found} words ending in `*`; at most {MAX_PREFIX_WORDS} prefix searches are allowed in one query (a fixed budget): drop the `*` from some words"
    )]
    TooManyPrefixes {
        /// How many the query has.
        found: usize,
    },
}

/// One word to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    prefix: bool,
}

/// The FTS5 `MATCH` expression for `text`, or `None` when it holds no word
/// (only punctuation, emoji, operators...): nothing can match then.
pub fn fts_query(text: &str) -> Result<Option<String>, QueryError> {
    let words = words(text);
    if words.is_empty() {
        return Ok(None);
    }
    let prefixes = words.iter().filter(|word| word.prefix).count();
    if prefixes > MAX_PREFIX_WORDS {
        return Err(QueryError::TooManyPrefixes { found: prefixes });
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
    Ok(Some(alternatives.join(" OR ")))
}

/// The distinct words of `text` (case-insensitively), in order, at most
/// [`MAX_QUERY_WORDS`].
fn words(text: &str) -> Vec<Word> {
    let mut found: Vec<Word> = Vec::new();
    for (start, word) in text.unicode_word_indices() {
        if found.len() == MAX_QUERY_WORDS {
            break;
        }
        let starred = text[start + word.len()..].starts_with('*');
        let text: String = word.chars().take(MAX_WORD_CHARS).collect::<String>().to_lowercase();
        let prefix = starred && indexed_tail_chars(&text) >= MIN_PREFIX_CHARS;
        match found.iter_mut().find(|w| w.text == text) {
            Some(seen) => seen.prefix &= prefix,
            None => found.push(Word { text, prefix }),
        }
    }
    found
}

/// How many characters the prefix of `word` has for the index: its last run
/// of characters the index keeps in a word ([`indexed_char`]). The index's
/// tokenizer (`unicode61`) splits words at what UAX #29 keeps inside one
/// (`_`, `'`, `.` in `3.1`, spacing vowel signs such as U+093F) and folds
/// combining accents away, so `"xx_y"*` is the one-letter prefix `y*`. A
/// combining mark ends the run too, which may refuse a real prefix
/// (searched as a word then) but never lets a short one through.
fn indexed_tail_chars(word: &str) -> usize {
    word.chars().rev().take_while(|&c| indexed_char(c)).count()
}

/// Characters of the categories `unicode61` keeps in a word by default
/// (`L* N* Co`) whose category SQLite's own (older) tables give otherwise,
/// so it splits words at them: New Tai Lue vowel signs and Vedic signs,
/// letters since Unicode 8. The test
/// `the_index_keeps_every_character_counted_in_a_word` checks the list
/// against the bundled SQLite.
const SPLIT_BY_THE_INDEX: &[(char, char)] =
    &[('\u{19B0}', '\u{19C0}'), ('\u{19C8}', '\u{19C9}'), ('\u{1CF2}', '\u{1CF3}')];

/// Whether the index's tokenizer keeps `c` inside a word, counted as one
/// character of it: a letter, a number or a private-use character (not a
/// mark, Rust's `is_alphanumeric` counts spacing marks as letters).
fn indexed_char(c: char) -> bool {
    use GeneralCategory::*;
    let kept = matches!(
        get_general_category(c),
        UppercaseLetter
            | LowercaseLetter
            | TitlecaseLetter
            | ModifierLetter
            | OtherLetter
            | DecimalNumber
            | LetterNumber
            | OtherNumber
            | PrivateUse
    );
    kept && !SPLIT_BY_THE_INDEX.iter().any(|(first, last)| (*first..=*last).contains(&c))
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
            fts_query("When is my sister's birthday?").unwrap().unwrap(),
            r#""when is my sister's birthday" OR "when" OR "is" OR "my" OR "sister's" OR "birthday""#
        );
        assert_eq!(fts_query("Birthday").unwrap().unwrap(), r#""birthday""#);
    }

    #[test]
    fn operators_are_only_words() {
        assert_eq!(
            fts_query(r#"a AND b NEAR(c) title:x"#).unwrap().unwrap(),
            r#""a and b near c title:x" OR "a" OR "and" OR "b" OR "near" OR "c" OR "title:x""#
        );
        assert_eq!(fts_query(r#"say "hi"#).unwrap().unwrap(), r#""say hi" OR "say" OR "hi""#);
    }

    #[test]
    fn a_trailing_star_asks_for_a_prefix() {
        assert_eq!(fts_query("birth*").unwrap().unwrap(), r#""birth"*"#);
        assert_eq!(fts_query("*").unwrap(), None);
    }

    #[test]
    fn prefixes_are_bounded() {
        // One letter is not indexed as a prefix: it is searched as the word.
        assert_eq!(fts_query("a* bc*").unwrap().unwrap(), r#""a bc" OR "a" OR "bc"*"#);
        let eight: String = (0..MAX_PREFIX_WORDS).map(|i| format!("w{i}* ")).collect();
        assert!(fts_query(&eight).is_ok());
        let nine = format!("{eight} more*");
        let refused = fts_query(&nine).unwrap_err();
        assert_eq!(refused, QueryError::TooManyPrefixes { found: 9 });
        assert!(refused.to_string().contains("at most 8 prefix searches"), "{refused}");
        let letters: String = ('a'..='z').map(|c| format!("{c}* ")).collect();
        assert!(!fts_query(&letters).unwrap().unwrap().contains('*'), "single letters are words");
    }

    #[test]
    fn a_prefix_is_counted_as_the_index_splits_words() {
        // UAX #29 keeps these as one word; the index's tokenizer ends each
        // with the one-letter word `y` (the accent is folded away).
        for text in ["xx_y*", "xx'y*", "3.1*", "y\u{301}*", "xy\u{301}*"] {
            assert!(!fts_query(text).unwrap().unwrap().contains('*'), "{text:?}");
        }
        // Spacing vowel signs (U+093F) are letters to Rust, separators to the index.
        for text in ["x\u{93F}\u{93F}*", "x\u{93F}\u{93F}\u{93F}*", "\u{915}\u{93F}*"] {
            assert!(!fts_query(text).unwrap().unwrap().contains('*'), "{text:?}");
        }
        assert_eq!(fts_query("\u{915}\u{93F}\u{915}\u{915}*").unwrap().unwrap(), "\"\u{915}\u{93F}\u{915}\u{915}\"*");
        assert_eq!(fts_query("привет*").unwrap().unwrap(), r#""привет"*"#);
        assert_eq!(fts_query("xx_yz*").unwrap().unwrap(), r#""xx_yz"*"#);
        assert_eq!(fts_query("3.14*").unwrap().unwrap(), r#""3.14"*"#);
    }

    /// Every character counted in a prefix is one the real index keeps in a
    /// word: `a`, the character and `b` make one token, not two.
    #[test]
    fn the_index_keeps_every_character_counted_in_a_word() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        // The store's tokenizer (its schema's first migration).
        let tokenizer = "unicode61 remove_diacritics 2";
        assert!(crate::store::MIGRATIONS[0].contains(&format!("tokenize = '{tokenizer}'")));
        db.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5(c, tokenize = '{tokenizer}');
             CREATE VIRTUAL TABLE words USING fts5vocab(t, 'instance');
             BEGIN;"
        ))
        .unwrap();
        let mut insert = db.prepare("INSERT INTO t (rowid, c) VALUES (?1, ?2)").unwrap();
        // The private-use planes 15 and 16 (one range each in every table) by their ends.
        let planes = ['\u{F0000}', '\u{FFFFD}', '\u{100000}', '\u{10FFFD}'];
        let counted = ('\0'..'\u{F0000}').chain(planes).filter(|&c| indexed_char(c));
        let mut count = 0;
        for c in counted {
            insert.execute((c as u32, format!("a{c}b"))).unwrap();
            count += 1;
        }
        assert!(count > 140_000, "{count}");
        let split: Vec<String> = db
            .prepare("SELECT doc FROM words GROUP BY doc HAVING count(*) > 1")
            .unwrap()
            .query_map([], |row| row.get::<_, u32>(0))
            .unwrap()
            .map(|c| format!("U+{:04X}", c.unwrap()))
            .collect();
        assert!(split.is_empty(), "the index splits words at {} characters counted in one: {split:?}", split.len());
    }

    #[test]
    fn no_words_means_no_query() {
        for text in ["", "   ", "\0\0", "🎂🎉", "(((", "\"", "* : ^ -", "(\u{0})"] {
            assert_eq!(fts_query(text).unwrap(), None, "{text:?}");
        }
    }

    #[test]
    fn words_are_bounded() {
        let many: String = (0..1000).map(|i| format!("w{i} ")).collect();
        let query = fts_query(&many).unwrap().unwrap();
        assert_eq!(query.matches(" OR ").count(), MAX_QUERY_WORDS);
        let long = "x".repeat(10_000);
        assert_eq!(fts_query(&long).unwrap().unwrap().len(), MAX_WORD_CHARS + 2);
    }
}
