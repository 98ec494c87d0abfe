//! Reading a stored task, whatever an older version or a hand edit left
//! in its row.
//!
//! A row is always read: a value of the wrong type, a schedule, time zone
//! or `execution_data` that no longer parses is not an error of the whole
//! query (one bad row would stop every claim, and every `list_tasks` of its
//! owner) but the task's [`Task::unreadable`], the reason it cannot be
//! fired. The store marks such a task failed when it comes due and leaves
//! its row for an operator.

use rusqlite::Row;
use rusqlite::types::ValueRef;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::schedule::{Schedule, time_zone};
use crate::store::{Task, TaskSpec};
use crate::task::ExecutionData;

/// The columns of a task, in the order [`task_from_row`] reads them.
pub const TASK_COLUMNS: &str = "id, user_id, task_type, description, execution_data, schedule, timezone, status, \
     next_run, last_run, runs, max_runs, until, last_outcome, created_at";

/// Most characters of a stored value quoted in a reason.
const SHOWN_CHARS: usize = 60;

/// Most characters of a [`listed_id`]: a UUID (36) fits whole, and so
/// does every id `cancel_task` takes (64).
pub const LISTED_ID_MAX_CHARS: usize = 64;

/// Hex digits of the digest that stands for the rest of a longer id.
const LISTED_ID_DIGEST_CHARS: usize = 16;

/// A task's id as listings order tasks and `list_tasks`' cursors name
/// them: the stored id when it has at most [`LISTED_ID_MAX_CHARS`]
/// characters (every id the module writes), else its first characters,
/// `~` and 16 hex digits of the SHA-256 of the whole, so that a cursor
/// stays short whatever id a hand edit or an older version left (the
/// store orders by this too: `listed_id` in SQL).
pub fn listed_id(stored: &str) -> String {
    if stored.chars().count() <= LISTED_ID_MAX_CHARS {
        return stored.to_owned();
    }
    let digest = Sha256::digest(stored.as_bytes());
    let hex: String = digest.iter().take(LISTED_ID_DIGEST_CHARS / 2).map(|byte| format!("{byte:02x}")).collect();
    let head: String = stored.chars().take(LISTED_ID_MAX_CHARS - 1 - LISTED_ID_DIGEST_CHARS).collect();
    format!("{head}~{hex}")
}

/// A stored value read as text, as [`task_from_row`] reads it: numbers as
/// their text, a blob as empty text.
pub fn text_of(value: ValueRef<'_>) -> Option<String> {
    match value {
        ValueRef::Null => None,
        ValueRef::Text(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Integer(n) => Some(n.to_string()),
        ValueRef::Real(x) => Some(x.to_string()),
        ValueRef::Blob(_) => Some(String::new()),
    }
}

/// The task in `row` (selected as [`TASK_COLUMNS`]); the only error is a
/// column that is not there. Every value that cannot be read is replaced by
/// an empty one and named in [`Task::unreadable`].
pub fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    row.get_ref(14)?;
    let mut read = Reader { row, problems: Vec::new() };
    let stored_id = read.text(0, "id");
    // Only the form ids are written in: every statement names a task by
    // that text, so an id in another form (upper case, braces) would be
    // fired and never acknowledged, and cancelled under another task's id.
    let id = Uuid::try_parse(&stored_id).ok().filter(|id| id.to_string() == stored_id).unwrap_or_else(|| {
        read.problems.push(format!("id {:?} is not a UUID in its lower-case hyphenated form", shown(&stored_id)));
        Uuid::nil()
    });
    let user_id = read.text(1, "user_id");
    let task_type = read.text(2, "task_type");
    let description = read.text(3, "description");
    let data = read.text(4, "execution_data");
    let schedule = read.optional_text(5, "schedule");
    let timezone = read.text(6, "timezone");
    let status = read.text(7, "status");
    let next_run = read.integer(8, "next_run");
    let last_run = read.integer(9, "last_run");
    let runs = read.count(10, "runs").unwrap_or(0);
    let max_runs = read.count(11, "max_runs");
    let until = read.integer(12, "until");
    let last_outcome = read.optional_text(13, "last_outcome");
    let created_at = read.integer(14, "created_at").unwrap_or(0);
    if status == "active" && matches!(read.value(8), ValueRef::Null) {
        read.problems.push("next_run is empty (NULL) in an active task".to_owned());
    }
    match serde_json::from_str::<ExecutionData>(&data) {
        Ok(parsed) if parsed.task_type() == task_type => {}
        Ok(parsed) => read.problems.push(format!(
            "execution_data is a {} but task_type is {:?}",
            parsed.task_type(),
            shown(&task_type)
        )),
        Err(error) => read.problems.push(format!("execution_data does not parse: {error}")),
    }
    if let Some(Err(error)) = schedule.as_deref().map(Schedule::from_normalized) {
        read.problems.push(format!("schedule: {error}"));
    }
    if let Err(error) = time_zone(&timezone) {
        read.problems.push(format!("timezone: {error}"));
    }
    let unreadable = (!read.problems.is_empty()).then(|| read.problems.join("; "));
    Ok(Task {
        id,
        stored_id,
        spec: TaskSpec {
            user_id,
            task_type,
            description,
            // Shown as it is stored when it is not JSON, for whoever repairs it.
            execution_data: serde_json::from_str(&data).unwrap_or(Value::String(data)),
            schedule,
            timezone,
            max_runs,
            until,
        },
        status,
        next_run,
        last_run,
        runs,
        last_outcome,
        created_at,
        unreadable,
    })
}

/// Reads the columns of one row, noting each value of the wrong type.
struct Reader<'r, 's> {
    row: &'r Row<'s>,
    problems: Vec<String>,
}

impl<'r> Reader<'r, '_> {
    /// The value of column `index` (all are there: [`task_from_row`] checked the last one).
    fn value(&self, index: usize) -> ValueRef<'r> {
        self.row.get_ref(index).unwrap_or(ValueRef::Null)
    }

    /// A text column; numbers are read as their text.
    fn text(&mut self, index: usize, name: &str) -> String {
        self.optional_text(index, name).unwrap_or_else(|| {
            self.problems.push(format!("{name} is empty (NULL)"));
            String::new()
        })
    }

    /// A text column that may be NULL.
    fn optional_text(&mut self, index: usize, name: &str) -> Option<String> {
        let value = self.value(index);
        if let ValueRef::Blob(bytes) = value {
            self.problems.push(format!("{name} is a blob of {} bytes, not text", bytes.len()));
        }
        text_of(value)
    }

    /// A whole-number column that may be NULL.
    fn integer(&mut self, index: usize, name: &str) -> Option<i64> {
        match self.value(index) {
            ValueRef::Null => None,
            ValueRef::Integer(n) => Some(n),
            other => {
                let problem = format!("{name} is {}, not a whole number", described(other));
                self.problems.push(problem);
                None
            }
        }
    }

    /// A count (0 to 2^32 - 1) that may be NULL.
    fn count(&mut self, index: usize, name: &str) -> Option<u32> {
        let n = self.integer(index, name)?;
        u32::try_from(n).map_err(|_| self.problems.push(format!("{name} is {n}, not a count"))).ok()
    }
}

/// A stored value as a reason shows it: its type and the start of it.
fn described(value: ValueRef<'_>) -> String {
    match value {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => format!("the real number {x}"),
        ValueRef::Text(bytes) => format!("the text {:?}", shown(&String::from_utf8_lossy(bytes))),
        ValueRef::Blob(bytes) => format!("a blob of {} bytes", bytes.len()),
    }
}

/// At most [`SHOWN_CHARS`] characters of `text`.
fn shown(text: &str) -> String {
    text.chars().take(SHOWN_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_id_is_the_stored_one_unless_long_and_then_short_and_still_tells_ids_apart() {
        let uuid = Uuid::new_v4().to_string();
        assert_eq!(listed_id(&uuid), uuid);
        let longest = "é".repeat(LISTED_ID_MAX_CHARS);
        assert_eq!(listed_id(&longest), longest, "counted in characters, not bytes");
        let shared = "é".repeat(300);
        let (a, b) = (listed_id(&format!("{shared}a")), listed_id(&format!("{shared}b")));
        assert_ne!(a, b);
        for listed in [&a, &b] {
            assert_eq!(listed.chars().count(), LISTED_ID_MAX_CHARS, "{listed}");
            assert!(listed.starts_with(&"é".repeat(47)), "{listed}");
        }
        assert_eq!(a, listed_id(&format!("{shared}a")), "the same every time");
    }
}
