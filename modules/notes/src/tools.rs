//! The module's tools: save, search, list, update and delete the calling
//! user's notes (the `user_id` the orchestrator injects).

use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::cursor::{CURSOR_PATTERN, Cursor};
use crate::note::{Note, SearchHit};
use crate::query::fts_query;
use crate::store::{Filter, NewNote, NoteChange, Store};
use crate::tags::normalize_tags;

/// Longest search text, in characters; only its first words are used anyway.
pub const MAX_QUERY_CHARS: u64 = 16 * 1024;

/// Longest `source`, in characters.
pub const MAX_SOURCE_CHARS: u64 = 500;

/// Arguments of `save_note`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveNote {
    /// The note's text: one fact or memory, written so it makes sense on its own later (e.g. "Alice's sister's birthday is May 3").
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub content: String,
    /// Tags to file it under, e.g. `["family", "birthdays"]`; stored trimmed and lower-case (at most 16, 64 characters each).
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(min = 1, max = 64), regex(pattern = r"\S")))]
    pub tags: Option<Vec<String>>,
    /// Where the note came from (a conversation, a URL, a document name), if worth keeping.
    #[serde(default)]
    #[schemars(length(max = 500))]
    pub source: Option<String>,
}

/// Arguments of `search_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchNotes {
    /// What to look for, in plain words (any language); e.g. "sister birthday". Operators are not needed: notes holding more of the words, and the exact phrase, rank first. End a word with `*` to match it as a prefix (`birth*`).
    #[schemars(length(max = 16384))]
    pub query: String,
    /// Only notes carrying every one of these tags.
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(min = 1, max = 64), regex(pattern = r"\S")))]
    pub tags: Option<Vec<String>>,
    /// Most results to return (default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// Only notes saved or changed at or after this time (RFC 3339, e.g. `2026-05-01T00:00:00Z`).
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    pub since: Option<String>,
}

/// Arguments of `list_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListNotes {
    /// Only notes carrying every one of these tags.
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(min = 1, max = 64), regex(pattern = r"\S")))]
    pub tags: Option<Vec<String>>,
    /// Most notes on this page (default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page, to continue; leave out for the first page.
    #[serde(default)]
    #[schemars(regex(pattern = CURSOR_PATTERN))]
    pub cursor: Option<String>,
}

/// Arguments of `update_note`: give `content`, `tags` or both (with
/// neither, the note is answered unchanged).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateNote {
    /// The note's id, from `save_note`, `search_notes` or `list_notes`.
    #[schemars(extend("format" = "uuid"))]
    pub note_id: String,
    /// The note's new text, replacing the old.
    #[serde(default)]
    #[schemars(length(min = 1), regex(pattern = r"\S"))]
    pub content: Option<String>,
    /// The note's new tags, replacing the old ones (`[]` removes them all).
    #[serde(default)]
    #[schemars(length(max = 16), inner(length(min = 1, max = 64), regex(pattern = r"\S")))]
    pub tags: Option<Vec<String>>,
}

/// Arguments of `delete_note`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteNote {
    /// The note's id, from `save_note`, `search_notes` or `list_notes`.
    #[schemars(extend("format" = "uuid"))]
    pub note_id: String,
}

/// A saved note.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SavedNote {
    /// The new note's id.
    pub note_id: String,
    /// Its tags as stored (normalized, duplicates removed).
    pub tags: Vec<String>,
    /// When it was saved (RFC 3339, UTC).
    pub created_at: String,
}

/// Search results.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The matching notes, best first; empty when nothing matches.
    pub results: Vec<SearchHit>,
}

/// One page of notes.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NoteList {
    /// The notes, newest first.
    pub notes: Vec<Note>,
    /// Pass this as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// What a deletion removed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeletedNote {
    /// The deleted note, as it was.
    pub note: Note,
}

/// Save a note to the user's long-term memory: a fact, preference or
/// anything to remember later. Returns its id and stored tags.
#[tool]
pub async fn save_note(ctx: Context, args: SaveNote) -> Result<SavedNote, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let tags = tags_argument("tags", args.tags.as_deref())?;
    let note = NewNote { content: args.content, tags, source: args.source };
    let abandoned = ctx.given_up();
    let saved = ctx.blocking(move |store: &Store| store.save(&user_id, note, abandoned)).await?;
    Ok(SavedNote { note_id: saved.note_id, tags: saved.tags, created_at: saved.created_at })
}

/// Search the user's notes by relevance: the best matches with a score and
/// a snippet, matched words in **bold**. Use it before answering anything
/// the user may have told you before.
#[tool(read_only, idempotent)]
pub async fn search_notes(ctx: Context, args: SearchNotes) -> Result<SearchResults, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let filter = Filter {
        tags: tags_argument("tags", args.tags.as_deref())?,
        since: args.since.as_deref().map(parse_since).transpose()?,
    };
    let Some(query) = fts_query(&args.query).map_err(|error| ToolError::invalid_arguments(error.to_string()))? else {
        return Ok(SearchResults { results: Vec::new() });
    };
    let limit = args.limit.unwrap_or(10) as usize;
    let abandoned = ctx.given_up();
    let results = ctx.blocking(move |store: &Store| store.search(&user_id, &query, &filter, limit, abandoned)).await?;
    Ok(SearchResults { results })
}

/// List the user's notes, newest first, a page at a time (a page of long
/// notes holds fewer than `limit`; `next_cursor` goes on after them).
#[tool(read_only, idempotent)]
pub async fn list_notes(ctx: Context, args: ListNotes) -> Result<NoteList, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let filter = Filter { tags: tags_argument("tags", args.tags.as_deref())?, since: None };
    let after = args
        .cursor
        .as_deref()
        .map(Cursor::decode)
        .transpose()
        .map_err(|e| ToolError::invalid_arguments(format!("arguments.cursor: {e}")))?;
    let limit = args.limit.unwrap_or(20) as usize;
    let page = ctx.blocking(move |store: &Store| store.list(&user_id, &filter, after, limit)).await?;
    Ok(NoteList { notes: page.notes, next_cursor: page.next.map(Cursor::encode) })
}

/// Change one of the user's notes: its text, its tags, or both. Answers
/// the note as it is now.
// Replacing a note's text erases what it said, as `delete_note` does: the
// same permission and the `destructive` mark (for approvals).
#[tool(permission = "user", destructive, idempotent)]
pub async fn update_note(ctx: Context, args: UpdateNote) -> Result<Note, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let id = parse_note_id(&args.note_id)?;
    let change = NoteChange {
        content: args.content,
        tags: args.tags.as_deref().map(|t| tags_argument("tags", Some(t))).transpose()?,
    };
    let abandoned = ctx.given_up();
    ctx.blocking(move |store: &Store| store.update(&user_id, id, change, abandoned)).await
}

/// Delete one of the user's notes for good.
#[tool(permission = "user", destructive, idempotent)]
pub async fn delete_note(ctx: Context, args: DeleteNote) -> Result<DeletedNote, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let id = parse_note_id(&args.note_id)?;
    let abandoned = ctx.given_up();
    let note = ctx.blocking(move |store: &Store| store.delete(&user_id, id, abandoned)).await?;
    Ok(DeletedNote { note })
}

/// Normalized tags of the argument `name`, or an error naming the limit.
fn tags_argument(name: &str, tags: Option<&[String]>) -> Result<Vec<String>, ToolError> {
    normalize_tags(tags.unwrap_or_default()).map_err(|e| ToolError::invalid_arguments(format!("arguments.{name}: {e}")))
}

/// A note id: a UUID.
fn parse_note_id(text: &str) -> Result<Uuid, ToolError> {
    Uuid::try_parse(text.trim()).map_err(|_| {
        let shown: String = text.chars().take(60).collect();
        ToolError::invalid_arguments(format!(
            "arguments.note_id {shown:?} is not a note id; ids look like 0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6f and come from search_notes or list_notes"
        ))
    })
}

fn parse_since(text: &str) -> Result<OffsetDateTime, ToolError> {
    OffsetDateTime::parse(text.trim(), &Rfc3339).map_err(|e| {
        let shown: String = text.chars().take(60).collect();
        ToolError::invalid_arguments(format!(
            "arguments.since {shown:?} is not an RFC 3339 time such as 2026-05-01T00:00:00Z: {e}"
        ))
    })
}
