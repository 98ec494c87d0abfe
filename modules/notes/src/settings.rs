//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by
//! `Module::serve`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use module_sdk::{PathSetting, PathUse};

use crate::store::Limits;

/// `NOTES_DB`, for its errors.
pub const NOTES_DB: PathSetting = PathSetting { name: "NOTES_DB", what: "the database", usage: PathUse::Create };

/// The largest `NOTES_NOTE_MAX_BYTES` accepted. A listing or search answers
/// at least one note whatever its size, so this bounds one answer: a search
/// hit carries the content twice (the note, and a snippet that holds all of
/// a short note's text), and each byte of it may take 6 bytes of JSON (a
/// control character is written `\u0001`), so 12 × 512 KiB = 6 MiB (the
/// most `NOTES_ANSWER_MAX_BYTES` allows) plus tags and source, under the
/// orchestrator's 8 MiB answer limit.
pub const NOTE_MAX_BYTES_LIMIT: u64 = 512 * 1024;

/// Settings of the notes module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the notes module: per-user notes with tags, searched by relevance.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// The SQLite database file holding every user's notes; it and its
    /// directory are created when missing.
    #[arg(long, env = "NOTES_DB", default_value = "./data/notes.db")]
    pub notes_db: PathBuf,

    /// Largest note, in bytes of UTF-8 text (at most
    /// [`NOTE_MAX_BYTES_LIMIT`], 512 KiB).
    #[arg(long, env = "NOTES_NOTE_MAX_BYTES", default_value_t = 16 * 1024, value_parser = clap::value_parser!(u64).range(1..=NOTE_MAX_BYTES_LIMIT))]
    pub note_max_bytes: u64,

    /// Most notes one user may keep.
    #[arg(long, env = "NOTES_USER_MAX_NOTES", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_max_notes: u64,

    /// Most bytes of notes one user may keep, all notes together: their
    /// content, tags and source.
    #[arg(long, env = "NOTES_USER_MAX_BYTES", default_value_t = 20 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_max_bytes: u64,

    /// Most bytes of all users' notes together, each note counted as what
    /// it costs the database file (`notes::store::store_bytes`: its text
    /// seven times over, for its row and the full-text index, its user id and
    /// tags with their rows), so the file stays within 1.5 times this plus
    /// the empty database's pages (user ids are open-ended, so the number
    /// of users is not a bound).
    #[arg(long, env = "NOTES_STORE_MAX_BYTES", default_value_t = 1024 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub store_max_bytes: u64,

    /// How long a database statement waits for a lock held by another
    /// connection, in milliseconds.
    #[arg(long, env = "NOTES_BUSY_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub busy_timeout_ms: u64,

    /// Most bytes of notes (as JSON) one `list_notes` or `search_notes`
    /// answer carries (64 KiB to 6 MiB, under the orchestrator's 8 MiB
    /// answer limit); the leading notes that fit are shown, at least one.
    #[arg(long, env = "NOTES_ANSWER_MAX_BYTES", default_value_t = crate::store::DEFAULT_ANSWER_MAX_BYTES, value_parser = clap::value_parser!(u64).range(65_536..=6_291_456))]
    pub answer_max_bytes: u64,

    /// The longest one search may run, in milliseconds; past it the search
    /// is stopped and the call fails saying so.
    #[arg(long, env = "NOTES_SEARCH_MAX_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub search_max_ms: u64,
}

impl Settings {
    /// The storage limits these settings give.
    pub fn limits(&self) -> Limits {
        Limits {
            note_max_bytes: self.note_max_bytes,
            user_max_notes: self.user_max_notes,
            user_max_bytes: self.user_max_bytes,
            store_max_bytes: self.store_max_bytes,
        }
    }

    /// How long a statement waits for a lock.
    pub fn busy_timeout(&self) -> Duration {
        Duration::from_millis(self.busy_timeout_ms)
    }

    /// How long one search may run.
    pub fn search_budget(&self) -> Duration {
        Duration::from_millis(self.search_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let settings = Settings::try_parse_from(["notes"]).unwrap();
        assert_eq!(settings.notes_db, PathBuf::from("./data/notes.db"));
        assert_eq!(settings.limits().note_max_bytes, 16 * 1024);
        assert_eq!(settings.limits().store_max_bytes, 1 << 30);
        assert_eq!(settings.busy_timeout(), Duration::from_secs(5));
        assert_eq!(settings.search_budget(), crate::store::DEFAULT_SEARCH_BUDGET);
        assert_eq!(settings.answer_max_bytes, 4 << 20);
        assert!(Settings::try_parse_from(["notes", "--answer-max-bytes", "8388608"]).is_err());
        assert!(Settings::try_parse_from(["notes", "--user-max-notes", "0"]).is_err());
        assert!(Settings::try_parse_from(["notes", "--note-max-bytes", "lots"]).is_err());
        let largest = NOTE_MAX_BYTES_LIMIT.to_string();
        assert!(Settings::try_parse_from(["notes", "--note-max-bytes", &largest]).is_ok());
        let past = (NOTE_MAX_BYTES_LIMIT + 1).to_string();
        assert!(Settings::try_parse_from(["notes", "--note-max-bytes", &past]).is_err());
    }
}
