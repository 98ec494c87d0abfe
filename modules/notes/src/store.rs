//! Every user's notes in one SQLite database, searched with FTS5.
//!
//! - Durability: WAL journal with `synchronous = FULL`, one transaction per
//!   change, committed before the tool answers: a note acknowledged is a
//!   note kept, even if the process is killed the next instant. A change
//!   whose call was given up while it waited for the write lock is rolled
//!   back instead of written after its caller was told it timed out.
//! - Isolation: every statement names the caller's `user_id`; a search
//!   joins each full-text match to its note and keeps only the caller's.
//!   The index also holds a per-user token, so a search walks the caller's
//!   part of the index rather than every user's.
//! - Limits: per-user counts and bytes are kept in a `usage` table by
//!   triggers, all users' in `store_usage` (the sum of each note's
//!   `store_bytes`, what it costs the file, see [`store_bytes`]), and
//!   checked inside the writing transaction, so concurrent saves cannot
//!   overshoot them.
//! - Schema: migrations numbered by `PRAGMA user_version`, applied at open.
//!
//! One connection writes (behind a mutex); reads take a connection from a
//! small pool, so searches run while a save commits. At most
//! [`MAX_READERS`] read connections exist; a read past that waits for one.
//! All methods block: call them off the async workers.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use module_sdk::{ErrorKind, ToolErrorKind};
use rusqlite::types::Value as SqlValue;
use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior, params_from_iter,
};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::cursor::Cursor;
use crate::note::{Note, SearchHit, leading_within};

/// The schema, one step per version; step `i` brings `user_version` from `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE notes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    owner TEXT NOT NULL,             -- the user's token in the full-text index (see owner_token)
    content TEXT NOT NULL,
    tags TEXT NOT NULL,              -- the normalized tags as a JSON array of strings
    source TEXT,
    size_bytes INTEGER NOT NULL,     -- bytes of content, counted against the user's quota
    created_at INTEGER NOT NULL,     -- microseconds since 1970, UTC
    updated_at INTEGER NOT NULL
);
CREATE INDEX notes_newest_first ON notes (user_id, created_at, seq);

CREATE TABLE note_tags (
    user_id TEXT NOT NULL,
    tag TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (user_id, tag, seq)
) WITHOUT ROWID;
CREATE INDEX note_tags_of_note ON note_tags (seq);

CREATE TABLE usage (
    user_id TEXT PRIMARY KEY,
    notes INTEGER NOT NULL,
    bytes INTEGER NOT NULL
) WITHOUT ROWID;

CREATE VIRTUAL TABLE notes_fts USING fts5(
    content, tags, owner,
    content = 'notes', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2',
    prefix = '2 3'
);

CREATE TRIGGER notes_inserted AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts (rowid, content, tags, owner) VALUES (new.seq, new.content, new.tags, new.owner);
    INSERT INTO note_tags (user_id, tag, seq) SELECT new.user_id, value, new.seq FROM json_each(new.tags);
    INSERT INTO usage (user_id, notes, bytes) VALUES (new.user_id, 1, new.size_bytes)
        ON CONFLICT (user_id) DO UPDATE SET notes = notes + 1, bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER notes_deleted AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, content, tags, owner)
        VALUES ('delete', old.seq, old.content, old.tags, old.owner);
    DELETE FROM note_tags WHERE seq = old.seq;
    UPDATE usage SET notes = notes - 1, bytes = bytes - old.size_bytes WHERE user_id = old.user_id;
END;

CREATE TRIGGER notes_updated AFTER UPDATE OF content, tags ON notes BEGIN
    INSERT INTO notes_fts (notes_fts, rowid, content, tags, owner)
        VALUES ('delete', old.seq, old.content, old.tags, old.owner);
    INSERT INTO notes_fts (rowid, content, tags, owner) VALUES (new.seq, new.content, new.tags, new.owner);
    DELETE FROM note_tags WHERE seq = old.seq;
    INSERT INTO note_tags (user_id, tag, seq) SELECT new.user_id, value, new.seq FROM json_each(new.tags);
    UPDATE usage SET bytes = bytes - old.size_bytes + new.size_bytes WHERE user_id = new.user_id;
END;
"#,
    r#"
-- size_bytes counts the bytes of content, tags and source (it counted content only,
-- so tags and source were stored beyond the quota); usage is summed again from it.
UPDATE notes SET size_bytes = length(CAST(content AS BLOB)) + coalesce(length(CAST(source AS BLOB)), 0)
    + (SELECT coalesce(sum(length(CAST(value AS BLOB))), 0) FROM json_each(notes.tags));
DELETE FROM usage;
INSERT INTO usage (user_id, notes, bytes) SELECT user_id, count(*), sum(size_bytes) FROM notes GROUP BY user_id;
"#,
    r#"
-- All users' notes together, for NOTES_STORE_MAX_BYTES: kept from usage by triggers,
-- counting each note's size_bytes and its user id (its row holds it). A user with no
-- notes left loses their usage row, so user ids no longer in use take nothing.
DELETE FROM usage WHERE notes = 0;
CREATE TABLE store_usage (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    notes INTEGER NOT NULL,
    bytes INTEGER NOT NULL           -- size_bytes and user id bytes of every note
);
INSERT INTO store_usage (id, notes, bytes)
    SELECT 1, coalesce(sum(notes), 0), coalesce(sum(bytes + notes * length(CAST(user_id AS BLOB))), 0) FROM usage;

CREATE TRIGGER usage_inserted AFTER INSERT ON usage BEGIN
    UPDATE store_usage SET notes = notes + new.notes,
        bytes = bytes + new.bytes + new.notes * length(CAST(new.user_id AS BLOB));
END;

CREATE TRIGGER usage_updated AFTER UPDATE ON usage BEGIN
    UPDATE store_usage SET notes = notes - old.notes + new.notes,
        bytes = bytes - old.bytes - old.notes * length(CAST(old.user_id AS BLOB))
            + new.bytes + new.notes * length(CAST(new.user_id AS BLOB));
END;

CREATE TRIGGER usage_deleted AFTER DELETE ON usage BEGIN
    UPDATE store_usage SET notes = notes - old.notes,
        bytes = bytes - old.bytes - old.notes * length(CAST(old.user_id AS BLOB));
END;

CREATE TRIGGER usage_emptied AFTER UPDATE OF notes ON usage WHEN new.notes = 0 BEGIN
    DELETE FROM usage WHERE user_id = new.user_id;
END;
"#,
    r#"
-- NOTES_STORE_MAX_BYTES counts what each note costs the file: store_bytes, written at
-- save (store_bytes() in store.rs, computed here the same way for existing notes). It
-- counted the note's bytes, user id and 256 bytes, while its tag rows, the index copies
-- of its user id and tags, and the full-text index took up to 5.6 times that.
ALTER TABLE notes ADD COLUMN store_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE notes SET store_bytes = 256 + 4 * length(CAST(user_id AS BLOB))
    + 7 * (length(CAST(content AS BLOB)) + length(CAST(tags AS BLOB)) + coalesce(length(CAST(source AS BLOB)), 0))
    + (SELECT coalesce(sum(48 + 3 * (length(CAST(notes.user_id AS BLOB)) + length(CAST(value AS BLOB)))), 0)
       FROM json_each(notes.tags));
DROP TRIGGER usage_inserted;
DROP TRIGGER usage_updated;
DROP TRIGGER usage_deleted;
UPDATE store_usage SET notes = (SELECT count(*) FROM notes), bytes = (SELECT coalesce(sum(store_bytes), 0) FROM notes);

CREATE TRIGGER notes_counted AFTER INSERT ON notes BEGIN
    UPDATE store_usage SET notes = notes + 1, bytes = bytes + new.store_bytes;
END;

CREATE TRIGGER notes_uncounted AFTER DELETE ON notes BEGIN
    UPDATE store_usage SET notes = notes - 1, bytes = bytes - old.store_bytes;
END;

CREATE TRIGGER notes_recounted AFTER UPDATE OF store_bytes ON notes BEGIN
    UPDATE store_usage SET bytes = bytes - old.store_bytes + new.store_bytes;
END;
"#,
];

/// The columns of a note, in the order [`note_from_row`] reads them.
const NOTE_COLUMNS: &str = "n.id, n.content, n.tags, n.source, n.created_at, n.updated_at";

/// Column weights of BM25: words in the content count twice as much as
/// words in tags; the owner token counts for nothing.
const BM25_WEIGHTS: &str = "1.0, 0.5, 0.0";

/// Words of context in a search snippet.
const SNIPPET_WORDS: u32 = 24;

/// Most read connections open at once, idle or in use: concurrent reads
/// past it wait for one, instead of each opening a connection (tokio runs
/// up to 512 blocking threads).
pub const MAX_READERS: usize = 8;

/// A search's time budget unless [`Store::search_budget`] sets another.
pub const DEFAULT_SEARCH_BUDGET: Duration = Duration::from_secs(5);

/// JSON bytes of notes in one listing or search unless
/// [`Store::answer_max_bytes`] sets another.
pub const DEFAULT_ANSWER_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// SQLite virtual-machine steps between two checks of a search's deadline.
const STEPS_BETWEEN_CHECKS: i32 = 100;

/// What each note counts against `NOTES_STORE_MAX_BYTES` besides its text,
/// user id and tags ([`store_bytes`]): its id, owner token, times, their
/// index entries and its records in the full-text index.
pub const NOTE_ROW_BYTES: u64 = 256;

/// How many times a note's user id is counted: its row, the index of the
/// user's notes by time, its share of the user's `usage` row, and the
/// room index pages leave free.
pub const USER_ID_COPIES: u64 = 4;

/// What each tag of a note counts besides its text and user id: its
/// `note_tags` row and that row's copy in the index by note.
pub const TAG_ROW_BYTES: u64 = 48;

/// How many times a tag's text and its note's user id are counted for
/// each tag: its `note_tags` row, the index by note, and free room.
pub const TAG_COPIES: u64 = 3;

/// How many bytes each byte of a note's text (content, tags as JSON and
/// source) counts: once in its row, the rest for the full-text index and
/// the room pages leave free. Measured by filling a 1 MiB database to its
/// refusal, one save at a time, with notes of 2,000 bytes of each kind of
/// text, and comparing the file (after a WAL checkpoint, with `dbstat` for
/// each table) with the text's bytes: the index takes 5.4 bytes per byte
/// of text for distinct three-letter words (`abc abd ...`: one entry, and
/// one in each prefix index, per 4 bytes), the worst found; 3.2 for
/// two-letter words or two-character CJK words, 2.9 for prose, 1.9 for
/// one-character CJK words, 1.7 for long words; and rows of 2,000 bytes
/// take a 4 KiB page each. Counted 6 times, three-letter words filled the
/// file to 1.43 times the setting; 7 leaves room for what was not tried.
pub const TEXT_COPIES: u64 = 7;

/// Longest `user_id` that may save notes, in bytes: the id is stored in
/// every note's row, its index and each of its tags' rows, so an id of
/// open-ended length would grow the file far past what is counted.
pub const MAX_USER_ID_BYTES: usize = 256;

/// How much one user, and all users together, may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest note content, in bytes (UTF-8).
    pub note_max_bytes: u64,
    /// Most notes per user.
    pub user_max_notes: u64,
    /// Most bytes per user, all notes together: content, tags and source.
    pub user_max_bytes: u64,
    /// Most bytes of all users' notes together, each note counted as
    /// [`store_bytes`] (what it costs the database file).
    pub store_max_bytes: u64,
}

/// A note to store; its tags are already normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewNote {
    /// Its text.
    pub content: String,
    /// Its normalized tags.
    pub tags: Vec<String>,
    /// Where it came from.
    pub source: Option<String>,
}

/// A change to a note: what is `None` stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoteChange {
    /// The new text.
    pub content: Option<String>,
    /// The new normalized tags (replacing the old ones).
    pub tags: Option<Vec<String>>,
}

/// Which notes a search or listing keeps besides the user's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only notes carrying every one of these normalized tags.
    pub tags: Vec<String>,
    /// Only notes saved or changed at or after this time.
    pub since: Option<OffsetDateTime>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The notes, newest first.
    pub notes: Vec<Note>,
    /// Where the next page starts, when there are more notes.
    pub next: Option<Cursor>,
}

/// Why a storage operation failed; messages are meant for the model.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such note among the caller's.
    #[error("there is no note with id {0} among your notes; search_notes and list_notes show the ids you have")]
    NotFound(Uuid),
    /// The note is larger than the per-note limit.
    #[error(
        "the note is {size} bytes, more than the limit of {limit} bytes per note (NOTES_NOTE_MAX_BYTES); shorten it or split it"
    )]
    TooLarge {
        /// The note's size.
        size: u64,
        /// The per-note limit.
        limit: u64,
    },
    /// The user already has the most notes allowed.
    #[error(
        "you already have {limit} notes, the limit per user (NOTES_USER_MAX_NOTES); delete notes you no longer need"
    )]
    TooManyNotes {
        /// The per-user note limit.
        limit: u64,
    },
    /// The user's byte quota would be exceeded.
    #[error(
        "storing {size} more bytes would exceed your notes quota ({used} of {limit} bytes used, NOTES_USER_MAX_BYTES); delete or shorten notes"
    )]
    QuotaExceeded {
        /// The bytes to add.
        size: u64,
        /// Bytes stored now.
        used: u64,
        /// The per-user byte limit.
        limit: u64,
    },
    /// All users' notes together would pass `NOTES_STORE_MAX_BYTES`.
    #[error(
        "storing it counts {size} more bytes (text, tags and user id, with their rows and full-text index), which would take all users' notes past NOTES_STORE_MAX_BYTES ({used} of {limit} bytes used); delete notes you no longer need, or ask the operator to raise the setting"
    )]
    StoreFull {
        /// The bytes to add, as counted against the setting ([`store_bytes`]).
        size: u64,
        /// Bytes of all users' notes now.
        used: u64,
        /// The setting.
        limit: u64,
    },
    /// The caller's `user_id` is longer than [`MAX_USER_ID_BYTES`].
    #[error(
        "the user_id is {0} bytes, more than the {MAX_USER_ID_BYTES} bytes (MAX_USER_ID_BYTES) a user id may have to save notes"
    )]
    UserIdTooLong(usize),
    /// The database was written by a newer version of this module.
    #[error("the database has schema version {found}, newer than this module's {known}; run a newer module")]
    SchemaTooNew {
        /// The version in the file.
        found: i64,
        /// The newest version this module knows.
        known: i64,
    },
    /// The database's directory could not be created.
    #[error("cannot create the directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A search ran past its time budget (or its call was given up) and was stopped.
    #[error(
        "the search was stopped after its time budget of {budget_ms} ms (NOTES_SEARCH_MAX_MS); search for fewer, longer words, with fewer `*` prefixes"
    )]
    SearchTooLong {
        /// The budget, in milliseconds.
        budget_ms: u128,
    },
    /// The call was given up (its timeout passed) before its change was committed.
    #[error("the call was given up before its change was written (the database was busy); nothing was changed")]
    GivenUp,
    /// Another connection or process held the database's lock for longer
    /// than the busy timeout (in milliseconds).
    #[error(
        "the notes database stayed locked by another process for over {0} ms (NOTES_BUSY_TIMEOUT_MS); try again shortly"
    )]
    Busy(u128),
    /// SQLite failed.
    #[error("the notes database failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

impl ToolErrorKind for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::TooLarge { .. } | StoreError::UserIdTooLong(_) => ErrorKind::InvalidArguments,
            StoreError::SearchTooLong { .. } | StoreError::GivenUp => ErrorKind::Timeout,
            StoreError::Busy(_) => ErrorKind::Unavailable,
            StoreError::TooManyNotes { .. }
            | StoreError::QuotaExceeded { .. }
            | StoreError::StoreFull { .. }
            | StoreError::SchemaTooNew { .. }
            | StoreError::Directory { .. }
            | StoreError::Sqlite(_) => ErrorKind::ExecutionFailed,
        }
    }
}

/// The notes database.
pub struct Store {
    path: PathBuf,
    limits: Limits,
    busy_timeout: Duration,
    search_budget: Duration,
    answer_max_bytes: u64,
    writer: Mutex<Connection>,
    readers: Mutex<Readers>,
    /// Signalled when a read connection is given back (or could not be opened).
    reader_freed: Condvar,
}

/// The read connections: those idle, and how many exist.
#[derive(Default)]
struct Readers {
    idle: Vec<Connection>,
    open: usize,
}

impl Store {
    /// Opens (creating when missing, with its directory) the database at
    /// `path` and brings its schema up to date. `busy_timeout` is how long a
    /// statement waits for a lock held by another connection.
    pub fn open(path: &Path, limits: Limits, busy_timeout: Duration) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|source| StoreError::Directory { path: parent.to_owned(), source })?;
        }
        let mut writer = connect(path, busy_timeout)?;
        // WAL is a property of the file; it stays once set.
        writer.pragma_update(None, "journal_mode", "WAL")?;
        migrate(&mut writer)?;
        Ok(Self {
            path: path.to_owned(),
            limits,
            busy_timeout,
            search_budget: DEFAULT_SEARCH_BUDGET,
            answer_max_bytes: DEFAULT_ANSWER_MAX_BYTES,
            writer: Mutex::new(writer),
            readers: Mutex::new(Readers::default()),
            reader_freed: Condvar::new(),
        })
    }

    /// The longest one search may run before it is stopped
    /// ([`StoreError::SearchTooLong`]).
    pub fn search_budget(mut self, budget: Duration) -> Self {
        self.search_budget = budget;
        self
    }

    /// The most bytes of notes, as JSON, one listing page or one search
    /// answers with: the leading notes that fit, and always the first.
    pub fn answer_max_bytes(mut self, bytes: u64) -> Self {
        self.answer_max_bytes = bytes;
        self
    }

    /// The limits this store enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Stores `note` for `user_id`; the stored note. Nothing is stored once
    /// `abandoned` says the call was given up (see [`StoreError::GivenUp`]).
    pub fn save(&self, user_id: &str, note: NewNote, abandoned: impl Fn() -> bool) -> Result<Note, StoreError> {
        self.write(abandoned, |tx| insert(tx, user_id, &note, self.limits, now_micros()))
    }

    /// Stores many notes for `user_id` in one transaction (all or none),
    /// with the same limits as [`Store::save`]; how many were stored. For
    /// imports and benchmarks, where one commit per note is too slow.
    pub fn import(&self, user_id: &str, notes: impl IntoIterator<Item = NewNote>) -> Result<usize, StoreError> {
        self.write(
            || false,
            |tx| {
                let now = now_micros();
                let mut count = 0;
                for note in notes {
                    insert(tx, user_id, &note, self.limits, now)?;
                    count += 1;
                }
                Ok(count)
            },
        )
    }

    /// Changes `user_id`'s note `id`; the note as it is now. An empty
    /// change leaves the note, `updated_at` included, as it was. Nothing is
    /// changed once `abandoned` says the call was given up.
    pub fn update(
        &self,
        user_id: &str,
        id: Uuid,
        change: NoteChange,
        abandoned: impl Fn() -> bool,
    ) -> Result<Note, StoreError> {
        if change == NoteChange::default() {
            return self.get(user_id, id);
        }
        self.write(abandoned, |tx| {
            let (old_size, old_cost, mut content, tags, source) = tx
                .query_row(
                    "SELECT size_bytes, store_bytes, content, tags, source FROM notes WHERE id = ?1 AND user_id = ?2",
                    (id.to_string(), user_id),
                    |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, i64>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                            row.get::<_, Option<String>>(4)?,
                        ))
                    },
                )
                .optional()?
                .ok_or(StoreError::NotFound(id))?;
            if let Some(new_content) = change.content {
                check_size(byte_size(&new_content), self.limits)?;
                content = new_content;
            }
            let tags = change.tags.unwrap_or_else(|| serde_json::from_str(&tags).unwrap_or_default());
            let size = stored_bytes(&content, &tags, source.as_deref());
            let grown = size.saturating_sub(old_size as u64);
            let (_, used) = usage(tx, user_id)?;
            // A change that does not grow the note is allowed even over the quota.
            if grown > 0 && used + grown > self.limits.user_max_bytes {
                return Err(StoreError::QuotaExceeded { size: grown, used, limit: self.limits.user_max_bytes });
            }
            let cost = store_bytes(user_id, &content, &tags, source.as_deref());
            let cost_grown = cost.saturating_sub(old_cost as u64);
            if cost_grown > 0 {
                check_store_room(tx, cost_grown, self.limits)?;
            }
            tx.execute(
                "UPDATE notes SET content = ?1, tags = ?2, size_bytes = ?3, store_bytes = ?4, updated_at = ?5
                 WHERE id = ?6 AND user_id = ?7",
                (&content, tags_json(&tags), size as i64, cost as i64, now_micros(), id.to_string(), user_id),
            )?;
            find(tx, user_id, id)
        })
    }

    /// Deletes `user_id`'s note `id`; the note as it was. Nothing is deleted
    /// once `abandoned` says the call was given up.
    pub fn delete(&self, user_id: &str, id: Uuid, abandoned: impl Fn() -> bool) -> Result<Note, StoreError> {
        self.write(abandoned, |tx| {
            let note = find(tx, user_id, id)?;
            tx.execute("DELETE FROM notes WHERE id = ?1 AND user_id = ?2", (id.to_string(), user_id))?;
            Ok(note)
        })
    }

    /// `user_id`'s note `id`.
    pub fn get(&self, user_id: &str, id: Uuid) -> Result<Note, StoreError> {
        self.read(|conn| find(conn, user_id, id))
    }

    /// `user_id`'s notes matching the FTS5 expression `fts_query` (see
    /// [`crate::query::fts_query`]) and `filter`, best first, at most `limit`
    /// and those that fit in [`Store::answer_max_bytes`] (at least one).
    /// SQLite stops the search at its time budget, or as soon as
    /// `abandoned` says the call was given up.
    pub fn search(
        &self,
        user_id: &str,
        fts_query: &str,
        filter: &Filter,
        limit: usize,
        abandoned: impl Fn() -> bool + Send + 'static,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let mut sql = format!(
            "SELECT {NOTE_COLUMNS}, bm25(notes_fts, {BM25_WEIGHTS}) AS rank,
                    snippet(notes_fts, 0, '**', '**', '…', {SNIPPET_WORDS})
             FROM notes_fts JOIN notes n ON n.seq = notes_fts.rowid
             WHERE notes_fts MATCH ? AND n.user_id = ?"
        );
        // The owner token lets FTS5 skip other users' notes inside the index;
        // `n.user_id = ?` below is what guarantees isolation.
        let expression = format!("owner : \"{}\" AND {{content tags}} : ({fts_query})", owner_token(user_id));
        let mut parameters = vec![SqlValue::from(expression), SqlValue::from(user_id.to_owned())];
        filter.append(&mut sql, &mut parameters, user_id);
        sql.push_str(" ORDER BY rank LIMIT ?");
        parameters.push(SqlValue::from(limit as i64));
        let budget = self.search_budget;
        self.read(|conn| {
            // Counted from here: the wait for a read connection is not the search's.
            let deadline = Instant::now() + budget;
            conn.progress_handler(STEPS_BETWEEN_CHECKS, Some(move || Instant::now() >= deadline || abandoned()))?;
            let hits = (|| {
                let mut statement = conn.prepare_cached(&sql)?;
                let hits = statement.query_map(params_from_iter(parameters), |row| {
                    Ok(SearchHit { note: note_from_row(row)?, score: -row.get::<_, f64>(6)?, snippet: row.get(7)? })
                })?;
                hits.collect::<Result<Vec<_>, _>>()
            })();
            let mut hits = hits.map_err(|error| match error.sqlite_error_code() {
                Some(ErrorCode::OperationInterrupted) => StoreError::SearchTooLong { budget_ms: budget.as_millis() },
                _ => error.into(),
            })?;
            hits.truncate(leading_within(&hits, self.answer_max_bytes));
            Ok(hits)
        })
    }

    /// A page of `user_id`'s notes matching `filter`, newest first, starting
    /// after `after` (from the start when `None`), at most `limit` and those
    /// that fit in [`Store::answer_max_bytes`] (at least one).
    pub fn list(
        &self,
        user_id: &str,
        filter: &Filter,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Page, StoreError> {
        let mut sql = format!("SELECT {NOTE_COLUMNS}, n.seq FROM notes n WHERE n.user_id = ?");
        let mut parameters = vec![SqlValue::from(user_id.to_owned())];
        if let Some(after) = after {
            sql.push_str(" AND (n.created_at, n.seq) < (?, ?)");
            parameters.extend([SqlValue::from(after.created_at_micros), SqlValue::from(after.seq)]);
        }
        filter.append(&mut sql, &mut parameters, user_id);
        sql.push_str(" ORDER BY n.created_at DESC, n.seq DESC LIMIT ?");
        // One more than asked tells whether there is a next page.
        parameters.push(SqlValue::from(limit as i64 + 1));
        let mut rows = self.read(|conn| {
            let mut statement = conn.prepare_cached(&sql)?;
            let rows = statement.query_map(params_from_iter(parameters), |row| {
                Ok((note_from_row(row)?, row.get::<_, i64>(4)?, row.get::<_, i64>(6)?))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })?;
        let shown = leading_within(rows.iter().take(limit).map(|(note, _, _)| note), self.answer_max_bytes);
        let more = rows.len() > shown;
        rows.truncate(shown);
        let next = rows
            .last()
            .filter(|_| more)
            .map(|(_, created_at_micros, seq)| Cursor { created_at_micros: *created_at_micros, seq: *seq });
        Ok(Page { notes: rows.into_iter().map(|(note, _, _)| note).collect(), next })
    }

    /// Runs `work` in one immediate (write-locking) transaction, committed
    /// when it succeeds, unless `abandoned` says the call was given up:
    /// checked once this store's writer is free (before waiting for
    /// SQLite's lock) and just before the commit, when the change is rolled
    /// back instead, so a call answered `timeout` while it waited for a lock
    /// (behind other writes, or another process's) changes nothing.
    fn write<T>(
        &self,
        abandoned: impl Fn() -> bool,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = lock(&self.writer);
        if abandoned() {
            return Err(StoreError::GivenUp);
        }
        let written = (|| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = work(&tx)?;
            if abandoned() {
                return Err(StoreError::GivenUp);
            }
            tx.commit()?;
            Ok(value)
        })();
        written.map_err(|error| self.busy(error))
    }

    /// `error`, or [`StoreError::Busy`] when it is SQLite's answer to a lock
    /// held past the busy timeout, so that it names the setting.
    fn busy(&self, error: StoreError) -> StoreError {
        match error {
            StoreError::Sqlite(sqlite)
                if matches!(sqlite.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)) =>
            {
                StoreError::Busy(self.busy_timeout.as_millis())
            }
            other => other,
        }
    }

    /// Runs `work` on a read connection from the pool, waiting for one
    /// when [`MAX_READERS`] are in use.
    fn read<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut readers = lock(&self.readers);
        let idle = loop {
            if let Some(conn) = readers.idle.pop() {
                break Some(conn);
            }
            if readers.open < MAX_READERS {
                readers.open += 1;
                break None;
            }
            readers = self.reader_freed.wait(readers).unwrap_or_else(PoisonError::into_inner);
        };
        drop(readers);
        // Given back however this ends: an error, a panic in `work`.
        let mut lease = Lease { store: self, conn: None };
        let conn = match idle {
            Some(conn) => conn,
            None => connect(&self.path, self.busy_timeout).map_err(|error| self.busy(error))?,
        };
        work(lease.conn.insert(conn)).map_err(|error| self.busy(error))
    }
}

impl Filter {
    /// Appends this filter's conditions on `n` (a `notes` row) to `sql`.
    fn append(&self, sql: &mut String, parameters: &mut Vec<SqlValue>, user_id: &str) {
        if let Some(since) = self.since {
            sql.push_str(" AND n.updated_at >= ?");
            parameters.push(SqlValue::from(micros(since)));
        }
        for tag in &self.tags {
            sql.push_str(" AND n.seq IN (SELECT seq FROM note_tags WHERE user_id = ? AND tag = ?)");
            parameters.extend([SqlValue::from(user_id.to_owned()), SqlValue::from(tag.clone())]);
        }
    }
}

/// A read connection's place in the pool, taken by [`Store::read`]: when
/// dropped, the connection goes back to the idle ones without the progress
/// handler a search set (even when the search panicked, so no later read on
/// it is interrupted), or, when none could be opened or the handler could
/// not be cleared, the place is freed; then a waiting read is woken.
struct Lease<'a> {
    store: &'a Store,
    conn: Option<Connection>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let conn =
            self.conn.take().and_then(|mut conn| conn.progress_handler(0, None::<fn() -> bool>).ok().map(|()| conn));
        let mut readers = lock(&self.store.readers);
        match conn {
            Some(conn) => readers.idle.push(conn),
            None => readers.open -= 1,
        }
        self.store.reader_freed.notify_one();
    }
}

/// A connection with this module's settings.
fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// Applies the migrations the database has not seen yet, each in its own transaction.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as i64;
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if version > known {
            return Err(StoreError::SchemaTooNew { found: version, known });
        }
        let Some(step) = MIGRATIONS.get(version as usize) else { return Ok(()) };
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::info!(version = version + 1, "notes database migrated");
    }
}

/// Inserts one note after checking the limits.
fn insert(tx: &Transaction<'_>, user_id: &str, note: &NewNote, limits: Limits, now: i64) -> Result<Note, StoreError> {
    if user_id.len() > MAX_USER_ID_BYTES {
        return Err(StoreError::UserIdTooLong(user_id.len()));
    }
    check_size(byte_size(&note.content), limits)?;
    let size = stored_bytes(&note.content, &note.tags, note.source.as_deref());
    let (count, used) = usage(tx, user_id)?;
    if count >= limits.user_max_notes {
        return Err(StoreError::TooManyNotes { limit: limits.user_max_notes });
    }
    if used + size > limits.user_max_bytes {
        return Err(StoreError::QuotaExceeded { size, used, limit: limits.user_max_bytes });
    }
    let cost = store_bytes(user_id, &note.content, &note.tags, note.source.as_deref());
    check_store_room(tx, cost, limits)?;
    let id = Uuid::new_v4();
    let mut statement = tx.prepare_cached(
        "INSERT INTO notes (id, user_id, owner, content, tags, source, size_bytes, store_bytes, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    )?;
    statement.execute((
        id.to_string(),
        user_id,
        owner_token(user_id),
        &note.content,
        tags_json(&note.tags),
        &note.source,
        size as i64,
        cost as i64,
        now,
    ))?;
    let stamp = timestamp(now);
    Ok(Note {
        note_id: id.to_string(),
        content: note.content.clone(),
        tags: note.tags.clone(),
        source: note.source.clone(),
        created_at: stamp.clone(),
        updated_at: stamp,
    })
}

/// `user_id`'s note `id`, read through `conn`.
fn find(conn: &Connection, user_id: &str, id: Uuid) -> Result<Note, StoreError> {
    let sql = format!("SELECT {NOTE_COLUMNS} FROM notes n WHERE n.id = ?1 AND n.user_id = ?2");
    conn.prepare_cached(&sql)?
        .query_row((id.to_string(), user_id), note_from_row)
        .optional()?
        .ok_or(StoreError::NotFound(id))
}

/// The user's note count and content bytes.
fn usage(conn: &Connection, user_id: &str) -> Result<(u64, u64), StoreError> {
    let found = conn
        .prepare_cached("SELECT notes, bytes FROM usage WHERE user_id = ?1")?
        .query_row([user_id], |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64)))
        .optional()?;
    Ok(found.unwrap_or((0, 0)))
}

/// Refuses `size` more bytes that would take all users' notes past
/// `NOTES_STORE_MAX_BYTES`.
fn check_store_room(conn: &Connection, size: u64, limits: Limits) -> Result<(), StoreError> {
    let used = store_usage(conn)?;
    if used + size > limits.store_max_bytes {
        return Err(StoreError::StoreFull { size, used, limit: limits.store_max_bytes });
    }
    Ok(())
}

/// All users' notes' bytes as counted against `NOTES_STORE_MAX_BYTES`.
fn store_usage(conn: &Connection) -> Result<u64, StoreError> {
    let bytes = conn.prepare_cached("SELECT bytes FROM store_usage")?.query_row([], |row| row.get::<_, i64>(0))?;
    Ok(bytes as u64)
}

fn check_size(size: u64, limits: Limits) -> Result<(), StoreError> {
    if size > limits.note_max_bytes {
        return Err(StoreError::TooLarge { size, limit: limits.note_max_bytes });
    }
    Ok(())
}

/// A note from the first six columns of `row` ([`NOTE_COLUMNS`]).
fn note_from_row(row: &Row<'_>) -> rusqlite::Result<Note> {
    let tags: String = row.get(2)?;
    Ok(Note {
        note_id: row.get(0)?,
        content: row.get(1)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        source: row.get(3)?,
        created_at: timestamp(row.get(4)?),
        updated_at: timestamp(row.get(5)?),
    })
}

/// The word that stands for `user_id` in the full-text index: `u` and 32
/// hex digits of its SHA-256, one token for any tokenizer, whatever the id.
fn owner_token(user_id: &str) -> String {
    let digest = Sha256::digest(user_id.as_bytes());
    let hex: String = digest[..16].iter().map(|byte| format!("{byte:02x}")).collect();
    format!("u{hex}")
}

fn tags_json(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_owned())
}

fn byte_size(content: &str) -> u64 {
    content.len() as u64
}

/// The bytes a note keeps, counted against its user's quota: its content,
/// tags and source (the `size_bytes` migration 2 computes in SQL).
fn stored_bytes(content: &str, tags: &[String], source: Option<&str>) -> u64 {
    let tags: usize = tags.iter().map(String::len).sum();
    (content.len() + tags + source.map_or(0, str::len)) as u64
}

/// What a note counts against `NOTES_STORE_MAX_BYTES` (its `store_bytes`;
/// migration 4 computes the same in SQL): about what it costs the database
/// file at most, so that the file stays within 1.5 times the setting (plus
/// the empty database's few hundred KiB). Each byte of its text (content,
/// tags as stored in JSON, and source) counts [`TEXT_COPIES`] times, its
/// user id [`USER_ID_COPIES`] times, each tag [`TAG_ROW_BYTES`] and
/// [`TAG_COPIES`] times its text and the user id, and the note
/// [`NOTE_ROW_BYTES`].
pub fn store_bytes(user_id: &str, content: &str, tags: &[String], source: Option<&str>) -> u64 {
    let user_id = user_id.len() as u64;
    let text = (content.len() + tags_json(tags).len() + source.map_or(0, str::len)) as u64;
    let tag_rows: u64 = tags.iter().map(|tag| TAG_ROW_BYTES + TAG_COPIES * (user_id + tag.len() as u64)).sum();
    NOTE_ROW_BYTES + USER_ID_COPIES * user_id + TEXT_COPIES * text + tag_rows
}

fn now_micros() -> i64 {
    micros(OffsetDateTime::now_utc())
}

fn micros(time: OffsetDateTime) -> i64 {
    i64::try_from(time.unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX)
}

/// RFC 3339 text of a time in microseconds since 1970.
fn timestamp(micros: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000)
        .ok()
        .and_then(|time| time.format(&Rfc3339).ok())
        .unwrap_or_default()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a connection leaves no half-done transaction
    // (it is rolled back when dropped), so the connection is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::fts_query;

    const LIMITS: Limits =
        Limits { note_max_bytes: 1000, user_max_notes: 100, user_max_bytes: 10_000, store_max_bytes: 1 << 30 };

    fn store(limits: Limits) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sub/dir/notes.db"), limits, Duration::from_secs(5)).unwrap();
        (dir, store)
    }

    fn note(content: &str, tags: &[&str]) -> NewNote {
        NewNote { content: content.to_owned(), tags: tags.iter().map(|t| (*t).to_owned()).collect(), source: None }
    }

    #[test]
    fn concurrent_reads_share_at_most_max_readers_connections() {
        let (_dir, store) = store(LIMITS);
        let active = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 * MAX_READERS {
                scope.spawn(|| {
                    store
                        .read(|_conn| {
                            let now = active.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                            most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                            // Long enough for the others to pile up.
                            std::thread::sleep(Duration::from_millis(20));
                            active.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                });
            }
        });
        let most = most.into_inner();
        assert!((2..=MAX_READERS).contains(&most), "{most} reads at once");
        assert!(lock(&store.readers).open <= MAX_READERS);
    }

    #[test]
    fn a_read_that_panics_gives_back_its_connection_without_its_progress_handler() {
        let (_dir, store) = store(LIMITS);
        let saved = store.save("alice", note("kept", &[]), || false).unwrap();
        let id = Uuid::parse_str(&saved.note_id).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.read(|conn| -> Result<(), StoreError> {
                conn.progress_handler(1, Some(|| true))?;
                panic!("inside a search");
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(lock(&store.readers).idle.len(), 1, "the connection is back in the pool");
        assert_eq!(store.get("alice", id).unwrap(), saved, "and no handler interrupts it");
    }

    fn search(store: &Store, user: &str, text: &str, filter: &Filter) -> Vec<String> {
        let query = fts_query(text).unwrap().unwrap();
        store.search(user, &query, filter, 10, || false).unwrap().into_iter().map(|hit| hit.note.content).collect()
    }

    #[test]
    fn a_search_that_waited_for_a_read_connection_still_gets_its_whole_budget() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (_dir, store) = store(LIMITS);
        let store = store.search_budget(Duration::from_secs(1));
        // Enough rows that SQLite checks the deadline while it searches them.
        store.import("u", (0..100).map(|i| note(&format!("patient words {i}"), &[]))).unwrap();
        let release = &AtomicBool::new(false);
        let (busy, all_busy) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            for _ in 0..MAX_READERS {
                let busy = busy.clone();
                scope.spawn(|| {
                    store
                        .read(move |_| {
                            busy.send(()).unwrap();
                            while !release.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                            Ok(())
                        })
                        .unwrap()
                });
            }
            for _ in 0..MAX_READERS {
                all_busy.recv().unwrap();
            }
            let waiting = scope.spawn(|| search(&store, "u", "patient", &Filter::default()));
            // The search waits for a connection longer than its whole budget.
            std::thread::sleep(Duration::from_millis(1500));
            release.store(true, Ordering::SeqCst);
            assert_eq!(waiting.join().unwrap().len(), 10);
        });
    }

    #[test]
    fn notes_round_trip_and_are_found_by_words_in_any_case_or_accent() {
        let (_dir, store) = store(LIMITS);
        let saved = store.save("alice", note("My sister's birthday is May 3", &["family"]), || false).unwrap();
        store.save("alice", note("Le café près de la gare ouvre à 7h", &[]), || false).unwrap();
        let id = Uuid::parse_str(&saved.note_id).unwrap();
        assert_eq!(store.get("alice", id).unwrap(), saved);
        assert_eq!(search(&store, "alice", "when is my SISTER's birthday?", &Filter::default()).len(), 1);
        assert_eq!(search(&store, "alice", "cafe pres", &Filter::default()), ["Le café près de la gare ouvre à 7h"]);
        assert_eq!(search(&store, "alice", "birth*", &Filter::default()).len(), 1);
        assert_eq!(search(&store, "alice", "family", &Filter::default()).len(), 1, "tags are searched too");
        let hit = &store
            .search("alice", &fts_query("birthday").unwrap().unwrap(), &Filter::default(), 10, || false)
            .unwrap()[0];
        assert!(hit.snippet.contains("**birthday**"), "{}", hit.snippet);
        assert!(hit.score > 0.0);
    }

    #[test]
    fn other_users_notes_are_never_seen() {
        let (_dir, store) = store(LIMITS);
        let bobs = store.save("bob", note("bob's secret plan", &["secret"]), || false).unwrap();
        store.save("alice", note("alice's plan", &["secret"]), || false).unwrap();
        assert_eq!(search(&store, "alice", "secret plan", &Filter::default()), ["alice's plan"]);
        let id = Uuid::parse_str(&bobs.note_id).unwrap();
        assert!(matches!(store.get("alice", id), Err(StoreError::NotFound(_))));
        assert!(matches!(store.update("alice", id, NoteChange::default(), || false), Err(StoreError::NotFound(_))));
        assert!(matches!(store.delete("alice", id, || false), Err(StoreError::NotFound(_))));
        let page = store.list("alice", &Filter { tags: vec!["secret".into()], since: None }, None, 10).unwrap();
        assert_eq!(page.notes.len(), 1);
        assert_eq!(store.get("bob", id).unwrap().content, "bob's secret plan");
    }

    #[test]
    fn the_exact_phrase_ranks_above_a_shared_word() {
        let (_dir, store) = store(LIMITS);
        let phrase = "Remember: sister birthday on May 3, buy flowers before the weekend";
        store.save("u", note("Birthday party at the office: birthday cake, birthday card", &[]), || false).unwrap();
        store.save("u", note("The sister of my friend Bob: her birthday is in June", &[]), || false).unwrap();
        store.save("u", note(phrase, &[]), || false).unwrap();
        store.save("u", note("Dentist on Friday", &[]), || false).unwrap();
        let found = search(&store, "u", "sister birthday", &Filter::default());
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], phrase, "{found:?}");
        assert!(found[2].starts_with("Birthday party"), "one shared word ranks last: {found:?}");
    }

    #[test]
    fn tags_and_time_filter_searches_and_listings() {
        let (_dir, store) = store(LIMITS);
        store.save("u", note("plan one", &["work", "q3"]), || false).unwrap();
        let before = OffsetDateTime::now_utc();
        store.save("u", note("plan two", &["work"]), || false).unwrap();
        let work = Filter { tags: vec!["work".into()], since: None };
        let both = Filter { tags: vec!["work".into(), "q3".into()], since: None };
        let recent = Filter { tags: Vec::new(), since: Some(before) };
        assert_eq!(search(&store, "u", "plan", &work).len(), 2);
        assert_eq!(search(&store, "u", "plan", &both), ["plan one"]);
        assert_eq!(search(&store, "u", "plan", &recent), ["plan two"]);
        assert_eq!(store.list("u", &both, None, 10).unwrap().notes.len(), 1);
    }

    #[test]
    fn listings_and_searches_answer_the_notes_that_fit_their_byte_budget() {
        let (_dir, store) = store(LIMITS);
        // 990 control characters escape to 5940 bytes of JSON: two such notes fit in 15,000 bytes.
        let store = store.answer_max_bytes(15_000);
        let content = |i: usize| format!("word{i} {}", "\u{1}".repeat(990));
        store.import("u", (0..5).map(|i| note(&content(i), &[]))).unwrap();
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let page = store.list("u", &Filter::default(), after, 100).unwrap();
            pages.push(page.notes.iter().map(|n| n.content.clone()).collect::<Vec<_>>());
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        assert_eq!(pages.concat(), (0..5).rev().map(content).collect::<Vec<_>>(), "no gaps, no repeats");
        // A hit's snippet holds control characters too: fewer hits fit than notes.
        let hits = search(&store, "u", "word*", &Filter::default()).len();
        assert!((1..=2).contains(&hits), "{hits} hits");
        // A note larger than the budget is still answered, one a page.
        let tiny = store.answer_max_bytes(100);
        let page = tiny.list("u", &Filter::default(), None, 100).unwrap();
        assert_eq!(page.notes.len(), 1);
        assert!(page.next.is_some());
        assert_eq!(search(&tiny, "u", "word*", &Filter::default()).len(), 1);
    }

    #[test]
    fn the_largest_note_allowed_answers_under_the_orchestrators_answer_limit() {
        use crate::settings::NOTE_MAX_BYTES_LIMIT;
        use crate::tags::{MAX_TAG_CHARS, MAX_TAGS};
        use crate::tools::MAX_SOURCE_CHARS;
        let roomy = Limits {
            note_max_bytes: NOTE_MAX_BYTES_LIMIT,
            user_max_bytes: 1 << 30,
            store_max_bytes: 1 << 40,
            ..LIMITS
        };
        let (_dir, store) = store(roomy);
        // The worst case: control characters (6 bytes of JSON each) in every
        // field, in a note of few enough words that its snippet holds all of it.
        let control = |n: usize| "\u{1}".repeat(n);
        let content = format!("word{}", control(NOTE_MAX_BYTES_LIMIT as usize - 4));
        let tags =
            (b'a'..).take(MAX_TAGS).map(|last| format!("{}{}", control(MAX_TAG_CHARS - 1), last as char)).collect();
        let source = Some(control(MAX_SOURCE_CHARS as usize));
        store.save("u", NewNote { content, tags, source }, || false).unwrap();
        let hits = store.search("u", &fts_query("word").unwrap().unwrap(), &Filter::default(), 50, || false).unwrap();
        let answer = serde_json::to_vec(&hits).unwrap().len();
        assert!(answer > 12 * NOTE_MAX_BYTES_LIMIT as usize, "the snippet holds the whole note: {answer} bytes");
        // The orchestrator's answer limit (its DEFAULT_MAX_ANSWER_BYTES), with
        // room for the answer's envelope.
        assert!(answer < 8 * 1024 * 1024 - 64 * 1024, "{answer} bytes");
    }

    #[test]
    fn listings_page_newest_first_without_gaps_or_repeats() {
        let (_dir, store) = store(LIMITS);
        for i in 0..7 {
            store.save("u", note(&format!("note {i}"), &[]), || false).unwrap();
        }
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = store.list("u", &Filter::default(), after, 3).unwrap();
            seen.extend(page.notes.into_iter().map(|n| n.content));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let expected: Vec<String> = (0..7).rev().map(|i| format!("note {i}")).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn limits_hold_and_name_themselves() {
        let (_dir, store) = store(Limits { note_max_bytes: 10, user_max_notes: 2, user_max_bytes: 15, ..LIMITS });
        let big = store.save("u", note("12345678901", &[]), || false).unwrap_err();
        assert_eq!(
            big.to_string(),
            "the note is 11 bytes, more than the limit of 10 bytes per note (NOTES_NOTE_MAX_BYTES); shorten it or split it"
        );
        let first = store.save("u", note("1234567890", &[]), || false).unwrap();
        let over = store.save("u", note("123456", &[]), || false).unwrap_err();
        assert!(over.to_string().contains("(10 of 15 bytes used, NOTES_USER_MAX_BYTES)"), "{over}");
        let id = Uuid::parse_str(&first.note_id).unwrap();
        let grow = NoteChange { content: Some("12345678901".to_owned()), tags: None };
        assert!(matches!(store.update("u", id, grow, || false), Err(StoreError::TooLarge { .. })));
        store.save("u", note("12345", &[]), || false).unwrap();
        let many = store.save("u", note("1", &[]), || false).unwrap_err();
        assert!(many.to_string().contains("2 notes, the limit per user (NOTES_USER_MAX_NOTES)"), "{many}");
        store.delete("u", id, || false).unwrap();
        store.save("u", note("1234567890", &[]), || false).unwrap();
        store.save("other", note("1234567890", &[]), || false).unwrap();
    }

    #[test]
    fn one_users_notes_are_counted_together_and_leave_the_count_one_by_one() {
        let one = store_bytes("a", "0123456789", &[], None);
        let (_dir, store) = store(LIMITS);
        let first = store.save("a", note("0123456789", &[]), || false).unwrap();
        let second = store.save("a", note("9876543210", &[]), || false).unwrap();
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), 2 * one, "the second note of a user is counted");
        store.delete("a", Uuid::parse_str(&first.note_id).unwrap(), || false).unwrap();
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), one);
        store.delete("a", Uuid::parse_str(&second.note_id).unwrap(), || false).unwrap();
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), 0);
    }

    #[test]
    fn all_users_notes_together_stay_within_the_store_limit() {
        // Room for two 10-byte notes of 1-byte user ids, and 30 bytes of text more.
        let one = store_bytes("a", "0123456789", &[], None);
        assert_eq!(one, NOTE_ROW_BYTES + USER_ID_COPIES + TEXT_COPIES * (10 + "[]".len() as u64));
        let room = 2 * one + 30 * TEXT_COPIES;
        let (_dir, store) = store(Limits { note_max_bytes: 100, store_max_bytes: room, ..LIMITS });
        let a = store.save("a", note("0123456789", &[]), || false).unwrap();
        let b = store.save("b", note("0123456789", &[]), || false).unwrap();
        for user in ["a", "b", "c"] {
            let full = store.save(user, note("0123456789", &[]), || false).unwrap_err();
            assert!(
                matches!(full, StoreError::StoreFull { size, used, limit } if size == one && used == 2 * one && limit == room),
                "{full}"
            );
            assert!(full.to_string().contains("NOTES_STORE_MAX_BYTES"), "{full}");
        }
        let a_id = Uuid::parse_str(&a.note_id).unwrap();
        let grow = |by: usize| NoteChange { content: Some("x".repeat(10 + by)), tags: None };
        let over = store.update("a", a_id, grow(31), || false).unwrap_err();
        assert!(matches!(over, StoreError::StoreFull { size, .. } if size == 31 * TEXT_COPIES), "{over}");
        store.update("a", a_id, grow(30), || false).unwrap();
        store.update("a", a_id, grow(0), || false).unwrap();
        store.delete("b", Uuid::parse_str(&b.note_id).unwrap(), || false).unwrap();
        store.save("c", note("0123456789", &[]), || false).unwrap();
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), 2 * one, "b's note left the count");
        let users: i64 = lock(&store.writer).query_row("SELECT count(*) FROM usage", [], |row| row.get(0)).unwrap();
        assert_eq!(users, 2, "a user with no notes left keeps no usage row");
    }

    /// The database file's bytes, its WAL checkpointed into it (and counted too).
    fn file_bytes(store: &Store) -> u64 {
        lock(&store.writer).execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let wal = std::fs::metadata(store.path.with_extension("db-wal")).map_or(0, |wal| wal.len());
        std::fs::metadata(&store.path).unwrap().len() + wal
    }

    /// Distinct words of three letters or digits, from the `first`-th (of 46,656).
    fn short_words(first: usize, count: usize) -> String {
        const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let word =
            |i: usize| [LETTERS[i % 36] as char, LETTERS[i / 36 % 36] as char, LETTERS[i / 1296 % 36] as char, ' '];
        (first..first + count).flat_map(word).collect()
    }

    #[test]
    fn the_file_stays_within_one_and_a_half_times_the_store_limit_whatever_the_notes() {
        const SETTING: u64 = 2 << 20;
        // The schema and each table's first pages, whatever is stored.
        const EMPTY: u64 = 128 << 10;
        let long_user = |i: usize| format!("{i:0>width$}", width = MAX_USER_ID_BYTES);
        let control = |n: usize| "\u{1}".repeat(n);
        type Notes<'a> = Box<dyn Fn(usize) -> (String, NewNote) + 'a>;
        let kinds: [(&str, Notes); 4] = [
            // Many short distinct words: the largest full-text index per byte of text.
            ("short words", Box::new(|i| ("u".into(), note(&short_words(i * 500, 500), &[])))),
            // The longest user id, 16 tags of control characters (6 bytes each as
            // JSON) and the longest source.
            (
                "tags",
                Box::new(|i| {
                    let tags = (0..16).map(|tag| format!("{}{:02}{i}", control(50), tag)).collect();
                    (long_user(0), NewNote { content: "x".into(), tags, source: Some(control(500)) })
                }),
            ),
            // Each note another user's, of the longest user id.
            ("users", Box::new(|i| (long_user(i), note("x", &[])))),
            // A small note, then one too large to share its page: each takes a page.
            ("half pages", Box::new(|i| (long_user(0), note(&control(if i % 2 == 0 { 1 } else { 3900 }), &[])))),
        ];
        for (kind, notes) in kinds {
            let limits = Limits {
                note_max_bytes: 4096,
                user_max_notes: 1 << 20,
                user_max_bytes: 1 << 40,
                store_max_bytes: SETTING,
            };
            let (_dir, store) = store(limits);
            let refusal = (0..)
                .find_map(|i| {
                    let (user, note) = notes(i);
                    store.save(&user, note, || false).err()
                })
                .unwrap();
            assert!(matches!(refusal, StoreError::StoreFull { .. }), "{kind}: {refusal}");
            assert!(refusal.to_string().contains("NOTES_STORE_MAX_BYTES"), "{refusal}");
            let file = file_bytes(&store);
            assert!(
                file <= SETTING / 2 * 3 + EMPTY,
                "{kind}: {file} bytes of file for NOTES_STORE_MAX_BYTES={SETTING}"
            );
        }
    }

    #[test]
    fn a_change_given_up_while_it_waited_for_the_lock_is_not_written() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (_dir, store) = store(LIMITS);
        let kept = store.save("u", note("kept", &[]), || false).unwrap();
        let id = Uuid::parse_str(&kept.note_id).unwrap();
        // Another process holds the write lock; the calls wait for it, and
        // are given up (their timeout passes) before it is released.
        let other = Connection::open(&store.path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        // A call already given up does not wait for the lock at all.
        let at_once = store.save("u", note("late", &[]), || true).unwrap_err();
        assert!(matches!(at_once, StoreError::GivenUp), "{at_once}");
        let given_up = AtomicBool::new(false);
        let abandoned = || given_up.load(Ordering::SeqCst);
        std::thread::scope(|scope| {
            let calls = [
                scope.spawn(|| store.save("u", note("late", &[]), abandoned).map(|_| ())),
                scope.spawn(|| {
                    store
                        .update("u", id, NoteChange { content: Some("late".into()), tags: None }, abandoned)
                        .map(|_| ())
                }),
                scope.spawn(|| store.delete("u", id, abandoned).map(|_| ())),
            ];
            std::thread::sleep(Duration::from_millis(100));
            given_up.store(true, Ordering::SeqCst);
            other.execute_batch("ROLLBACK").unwrap();
            for call in calls {
                let error = call.join().unwrap().unwrap_err();
                assert!(matches!(error, StoreError::GivenUp), "{error}");
                assert_eq!(error.kind(), ErrorKind::Timeout);
            }
        });
        let page = store.list("u", &Filter::default(), None, 10).unwrap();
        assert_eq!(page.notes, [kept], "nothing was written");
    }

    #[test]
    fn a_lock_held_past_the_busy_timeout_is_unavailable_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        let store = Store::open(&path, LIMITS, Duration::from_millis(50)).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let busy = store.save("u", note("late", &[]), || false).unwrap_err();
        assert!(matches!(busy, StoreError::Busy(50)), "{busy}");
        assert_eq!(busy.kind(), ErrorKind::Unavailable);
        assert!(busy.to_string().contains("NOTES_BUSY_TIMEOUT_MS"), "{busy}");
    }

    #[test]
    fn a_user_id_longer_than_the_limit_saves_nothing() {
        let (_dir, store) = store(LIMITS);
        store.save(&"u".repeat(MAX_USER_ID_BYTES), note("kept", &[]), || false).unwrap();
        let long = store.save(&"u".repeat(MAX_USER_ID_BYTES + 1), note("x", &[]), || false).unwrap_err();
        assert!(matches!(long, StoreError::UserIdTooLong(257)), "{long}");
        assert_eq!(long.kind(), ErrorKind::InvalidArguments);
        assert!(long.to_string().contains("MAX_USER_ID_BYTES"), "{long}");
    }

    #[test]
    fn tags_and_source_count_against_the_quota() {
        let (_dir, store) = store(Limits { note_max_bytes: 10, user_max_notes: 100, user_max_bytes: 20, ..LIMITS });
        let sourced = NewNote { content: "a".into(), tags: Vec::new(), source: Some("s".repeat(20)) };
        let over = store.save("u", sourced, || false).unwrap_err();
        assert!(matches!(over, StoreError::QuotaExceeded { size: 21, used: 0, limit: 20 }), "{over}");
        let saved = store.save("u", note("a", &["0123456789", "abcdefgh"]), || false).unwrap();
        let id = Uuid::parse_str(&saved.note_id).unwrap();
        let retag =
            |tags: &[&str]| NoteChange { content: None, tags: Some(tags.iter().map(|t| (*t).into()).collect()) };
        store.update("u", id, retag(&["0123456789", "abcdefghi"]), || false).unwrap();
        let grown = store.update("u", id, retag(&["0123456789", "abcdefghij"]), || false).unwrap_err();
        assert!(matches!(grown, StoreError::QuotaExceeded { size: 1, used: 20, limit: 20 }), "{grown}");
        let longer = NoteChange { content: Some("ab".into()), tags: None };
        assert!(matches!(store.update("u", id, longer, || false), Err(StoreError::QuotaExceeded { size: 1, .. })));
        // Over a quota lowered since, a note can still shrink.
        let lowered = Limits { user_max_bytes: 5, ..store.limits() };
        let tight = Store::open(&store.path, lowered, Duration::from_secs(5)).unwrap();
        tight.update("u", id, retag(&["0123456789"]), || false).unwrap();
        store.update("u", id, retag(&[]), || false).unwrap();
        assert_eq!(usage(&lock(&store.writer), "u").unwrap(), (1, 1));
    }

    #[test]
    fn migrating_counts_the_tags_and_source_of_existing_notes_and_all_users_notes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(1)).unwrap();
        let sourced =
            NewNote { content: "abc".into(), tags: vec!["été".into(), "x".into()], source: Some("s\0s".into()) };
        store.save("u", sourced, || false).unwrap();
        store.save("u", note("de", &[]), || false).unwrap();
        store.save("v", note("f", &["g"]), || false).unwrap();
        // The database as version 1 left it: content bytes only, no store_usage, no store_bytes.
        lock(&store.writer)
            .execute_batch(
                "DROP TABLE store_usage;
                 DROP TRIGGER usage_emptied;
                 DROP TRIGGER notes_counted;
                 DROP TRIGGER notes_uncounted;
                 DROP TRIGGER notes_recounted;
                 ALTER TABLE notes DROP COLUMN store_bytes;
                 UPDATE notes SET size_bytes = length(content);
                 UPDATE usage SET bytes = (SELECT sum(size_bytes) FROM notes WHERE notes.user_id = usage.user_id);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        assert_eq!(usage(&lock(&store.writer), "u").unwrap(), (2, 5));
        drop(store);
        let store = Store::open(&path, LIMITS, Duration::from_secs(1)).unwrap();
        assert_eq!(usage(&lock(&store.writer), "u").unwrap(), (2, 3 + 5 + 1 + 3 + 2));
        assert_eq!(usage(&lock(&store.writer), "v").unwrap(), (1, 2));
        // Every note costs what a save counts (migration 4 computes store_bytes in SQL).
        let costs = [
            store_bytes("u", "abc", &["été".into(), "x".into()], Some("s\0s")),
            store_bytes("u", "de", &[], None),
            store_bytes("v", "f", &["g".into()], None),
        ];
        let migrated: Vec<u64> = lock(&store.writer)
            .prepare("SELECT store_bytes FROM notes ORDER BY seq")
            .unwrap()
            .query_map([], |row| row.get::<_, i64>(0).map(|cost| cost as u64))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(migrated, costs);
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), costs.iter().sum::<u64>());
        // The count follows saves, changes and deletions.
        let saved = store.save("v", note("hij", &["k"]), || false).unwrap();
        let id = Uuid::parse_str(&saved.note_id).unwrap();
        store.update("v", id, NoteChange { content: Some("lmnop".into()), tags: None }, || false).unwrap();
        let changed = store_bytes("v", "lmnop", &["k".into()], None);
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), costs.iter().sum::<u64>() + changed);
        store.delete("v", id, || false).unwrap();
        assert_eq!(store_usage(&lock(&store.writer)).unwrap(), costs.iter().sum::<u64>());
    }

    #[test]
    fn updates_reindex_and_keep_created_at() {
        let (_dir, store) = store(LIMITS);
        let saved = store.save("u", note("old words", &["a"]), || false).unwrap();
        let id = Uuid::parse_str(&saved.note_id).unwrap();
        let change = NoteChange { content: Some("new words".into()), tags: Some(vec!["b".into()]) };
        let updated = store.update("u", id, change, || false).unwrap();
        assert_eq!(updated.created_at, saved.created_at);
        assert!(updated.updated_at >= saved.updated_at);
        assert_eq!(updated.tags, ["b"]);
        assert!(search(&store, "u", "old", &Filter::default()).is_empty());
        assert_eq!(search(&store, "u", "new", &Filter::default()), ["new words"]);
        assert!(store.list("u", &Filter { tags: vec!["a".into()], since: None }, None, 5).unwrap().notes.is_empty());
        store.delete("u", id, || false).unwrap();
        assert!(search(&store, "u", "words", &Filter::default()).is_empty());
    }

    #[test]
    fn reopening_keeps_notes_and_a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        let id =
            Store::open(&path, LIMITS, Duration::from_secs(1)).unwrap().save("u", note("kept", &[]), || false).unwrap();
        let store = Store::open(&path, LIMITS, Duration::from_secs(1)).unwrap();
        assert_eq!(store.get("u", Uuid::parse_str(&id.note_id).unwrap()).unwrap().content, "kept");
        lock(&store.writer).pragma_update(None, "user_version", 99).unwrap();
        drop(store);
        let refused = Store::open(&path, LIMITS, Duration::from_secs(1)).err().unwrap();
        assert!(matches!(refused, StoreError::SchemaTooNew { found: 99, known: 4 }), "{refused}");
    }
}
