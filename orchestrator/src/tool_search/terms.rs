//! Text to search terms: words split at anything that is not a letter or a
//! digit (so `.`, `_` and `__` of tool names too) and at camelCase humps,
//! lower-cased and stemmed with the Snowball English stemmer, so that
//! `webSearch`, `web_search` and "searching the web" share `web` and `search`.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Words longer than this are cut: no real word is, and a term's cost stays bounded.
const MAX_TERM_CHARS: usize = 64;

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The search terms of `text`, in order, repeats kept.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        for part in humps(word) {
            let lower: String = part.chars().take(MAX_TERM_CHARS).flat_map(char::to_lowercase).collect();
            out.push(STEMMER.stem(&lower).into_owned());
        }
    }
    out
}

/// `word` split at camelCase humps: `webSearch` is `web`, `Search`;
/// `HTTPServer` is `HTTP`, `Server`; `v2Config` is `v2`, `Config`.
fn humps(word: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let previous = chars[i - 1].1;
        let next_is_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
        let hump = c.is_uppercase() && (!previous.is_uppercase() || next_is_lower);
        if hump {
            parts.push(&word[start..at]);
            start = at;
        }
    }
    parts.push(&word[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_at_separators_and_humps_and_words_are_stemmed() {
        assert_eq!(terms("research.web_search"), ["research", "web", "search"]);
        assert_eq!(terms("notes__findNotes"), ["note", "find", "note"]);
        assert_eq!(terms("HTTPServer v2Config"), ["http", "server", "v2", "config"]);
        assert_eq!(terms("Searching the WEB!"), ["search", "the", "web"]);
        assert_eq!(terms("  ...  "), Vec::<String>::new());
    }

    #[test]
    fn any_unicode_is_read_without_panicking() {
        assert_eq!(terms("Größe ÜBER ñandú").len(), 3);
        assert_eq!(terms("ÜBER")[0], "über");
        assert_eq!(terms("日本語のテキスト 🦀"), ["日本語のテキスト"]);
        assert_eq!(terms("ǅungla İstanbul\u{0} \u{202e}x").len(), 3);
        let long = "a".repeat(10_000);
        assert_eq!(terms(&long)[0].chars().count(), MAX_TERM_CHARS);
    }
}
