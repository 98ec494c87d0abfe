//! What the tools answer with: notes as a model reads them.

use schemars::JsonSchema;
use serde::Serialize;

/// One stored note.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Note {
    /// The note's id, for `update_note` and `delete_note`.
    pub note_id: String,
    /// The note's text.
    pub content: String,
    /// Its tags, normalized (lower case, single spaces).
    pub tags: Vec<String>,
    /// Where the note came from, when the saver said so.
    pub source: Option<String>,
    /// When it was saved (RFC 3339, UTC).
    pub created_at: String,
    /// When it was last changed (RFC 3339, UTC); equal to `created_at` until then.
    pub updated_at: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SearchHit {
    /// The matching note.
    pub note: Note,
    /// Relevance (BM25; higher is better). Comparable only within one search.
    pub score: f64,
    /// A short extract of the content around the matches, matched words in `**bold**`.
    pub snippet: String,
}

/// How many of `items`, from the first, fit together in `budget` bytes of
/// JSON; at least one when there is one, so that a note larger than the
/// budget is still seen and a listing moves past it.
pub fn leading_within<T: Serialize>(items: impl IntoIterator<Item = T>, budget: u64) -> usize {
    let mut used = 0u64;
    items
        .into_iter()
        .enumerate()
        .take_while(|(index, item)| {
            used = used.saturating_add(serde_json::to_vec(item).map_or(u64::MAX, |json| json.len() as u64));
            *index == 0 || used <= budget
        })
        .count()
}
