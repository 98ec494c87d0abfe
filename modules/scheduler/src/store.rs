//! Every user's tasks in one SQLite database.
//!
//! - Durability: WAL journal with `synchronous = FULL`; a task is committed
//!   before the tool answers, and a run is acknowledged (its next run
//!   written) only after its delivery, so nothing acknowledged is lost.
//! - Firing: due runs are found through the `(status, next_run)` index and
//!   *claimed* in one write transaction (`claimed_by`, `lease_until`), so
//!   two processes on one file never fire the same run. The process
//!   delivering a run renews its lease while the delivery lasts; one that
//!   dies between claim and acknowledgement leaves a lease that expires; the
//!   run is then claimed and delivered again (at-least-once).
//! - Isolation: every statement of a tool names the caller's `user_id`.
//! - Retention: a user keeps at most `user_max_finished` finished (done,
//!   cancelled, failed) tasks; the transaction that finishes, cancels or
//!   adds one deletes the oldest beyond that, and the oldest of all users
//!   beyond `max_finished` (counted by triggers), but not one a live claim
//!   still holds: it goes once its lease lapses.
//! - Unreadable rows (an older version's, a hand edit's) are marked failed
//!   when they come due and otherwise left as they are (see [`crate::row`]).
//! - Schema: migrations numbered by `PRAGMA user_version`, applied at open.
//!
//! - Connections: a `Store` has two, each used by one call at a time: one
//!   for writes and one for reads, so a write that waits for another
//!   process's lock (up to the busy timeout) holds up the writes behind it
//!   (which would wait for that lock too) but not a read: a read (WAL)
//!   never waits for a writer. The tools and the firing loop open a
//!   `Store` each, so a write of the loop does not hold up the tools' writes.
//!
//! All methods block: call them off the async workers.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use module_sdk::{ErrorKind, ToolErrorKind};
use rusqlite::functions::FunctionFlags;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Statement, Transaction, TransactionBehavior};
use serde_json::Value;
use uuid::Uuid;

use crate::row::{TASK_COLUMNS, listed_id, task_from_row, text_of};
use crate::schedule::{Schedule, time_zone};

/// The schema, one step per version; step `i` brings `user_version` from `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    task_type TEXT NOT NULL,          -- reminder, agent_task or api_call
    description TEXT NOT NULL,
    execution_data TEXT NOT NULL,     -- JSON
    schedule TEXT,                    -- normalized cron; NULL for a one-time reminder
    timezone TEXT NOT NULL,
    status TEXT NOT NULL,             -- active, done, cancelled or failed
    next_run INTEGER,                 -- milliseconds since 1970 UTC; NULL unless active
    last_run INTEGER,
    runs INTEGER NOT NULL DEFAULT 0,
    max_runs INTEGER,
    until INTEGER,
    last_outcome TEXT,
    claimed_by TEXT,                  -- the process firing the current run
    lease_until INTEGER,              -- when that claim lapses
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX tasks_due ON tasks (status, next_run);
CREATE INDEX tasks_of_user ON tasks (user_id, status, created_at);
"#,
    r#"
CREATE INDEX tasks_held ON tasks (lease_until) WHERE lease_until IS NOT NULL;
"#,
    r#"
ALTER TABLE tasks ADD COLUMN finished_at INTEGER;  -- when it stopped being active; NULL while active
UPDATE tasks SET finished_at = COALESCE(last_run, created_at) WHERE status <> 'active';
CREATE INDEX tasks_finished ON tasks (user_id, finished_at) WHERE finished_at IS NOT NULL;
"#,
    r#"
-- All users' finished tasks together, for SCHEDULER_MAX_FINISHED (user ids are open-ended):
-- counted by triggers as finished_at is set and cleared, so the check scans nothing, and
-- the oldest are found by the index on finished_at alone.
CREATE TABLE finished_count (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    tasks INTEGER NOT NULL
);
INSERT INTO finished_count (id, tasks) SELECT 1, count(*) FROM tasks WHERE finished_at IS NOT NULL;
CREATE INDEX tasks_finished_all ON tasks (finished_at) WHERE finished_at IS NOT NULL;

CREATE TRIGGER task_inserted_finished AFTER INSERT ON tasks WHEN new.finished_at IS NOT NULL BEGIN
    UPDATE finished_count SET tasks = tasks + 1;
END;

CREATE TRIGGER task_deleted_finished AFTER DELETE ON tasks WHEN old.finished_at IS NOT NULL BEGIN
    UPDATE finished_count SET tasks = tasks - 1;
END;

CREATE TRIGGER task_finished_changed AFTER UPDATE OF finished_at ON tasks
    WHEN (old.finished_at IS NULL) <> (new.finished_at IS NULL) BEGIN
    UPDATE finished_count SET tasks = tasks + (new.finished_at IS NOT NULL) - (old.finished_at IS NOT NULL);
END;
"#,
    r#"
-- When the claim was taken or last renewed, by its holder's clock (with lease_until, the lease's
-- length): a clock put back tells a claim made on a clock ahead from another process's long lease.
ALTER TABLE tasks ADD COLUMN claimed_at INTEGER;
"#,
];

/// How much one user, and all of them together, may schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most active tasks of all users together.
    pub max_tasks: u64,
    /// Most active tasks per user.
    pub user_max_tasks: u64,
    /// Most finished (done, cancelled, failed) tasks kept per user.
    pub user_max_finished: u64,
    /// Most finished tasks kept of all users together.
    pub max_finished: u64,
    /// Most bytes of tasks (as JSON) one `list_tasks` answer carries.
    pub list_max_bytes: u64,
    /// Shortest time between two runs of a recurring task.
    pub min_interval: Duration,
    /// Largest `execution_data`, in bytes of JSON.
    pub max_data_bytes: u64,
    /// Furthest ahead a first run may be.
    pub max_ahead: Duration,
}

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database's directory could not be created.
    #[error("cannot create the directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer version of the module.
    #[error("the database schema is version {0}, newer than this module knows ({1}); upgrade the module")]
    TooNew(i64, usize),
    /// The caller has no task with this id.
    #[error("no task {0} of yours; list_tasks shows your task ids")]
    NotFound(Uuid),
    /// The caller already has as many active tasks as allowed.
    #[error(
        "you already have {0} active tasks, the limit per user (SCHEDULER_USER_MAX_TASKS); cancel one with cancel_task first"
    )]
    TooManyTasks(u64),
    /// Another connection or process held the database's lock for longer
    /// than the busy timeout (in milliseconds).
    #[error(
        "the database stayed locked by another process for over {0} ms (SCHEDULER_BUSY_TIMEOUT_MS); try again shortly"
    )]
    Busy(u128),
    /// All users together already have as many active tasks as allowed.
    #[error(
        "the scheduler already holds {0} active tasks, its limit for all users together (SCHEDULER_MAX_TASKS); \
         try again once some have run or been cancelled"
    )]
    Full(u64),
    /// The call was given up (its timeout passed, or its caller went away)
    /// before its change was written.
    #[error("the call was given up before its change was written (the database was busy); nothing was changed")]
    GivenUp,
}

impl ToolErrorKind for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::TooManyTasks(_) => ErrorKind::InvalidArguments,
            StoreError::GivenUp => ErrorKind::Timeout,
            StoreError::Sqlite(_) | StoreError::Busy(_) | StoreError::Full(_) => ErrorKind::Unavailable,
            StoreError::Directory { .. } | StoreError::TooNew(..) => ErrorKind::ExecutionFailed,
        }
    }
}

/// What the caller chose for a task: shared by a task to store
/// ([`NewTask`]) and a stored one ([`Task`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    /// The owner.
    pub user_id: String,
    /// `reminder`, `agent_task` or `api_call`.
    pub task_type: String,
    /// What the task is for, in the user's words.
    pub description: String,
    /// What to do when it fires (JSON).
    pub execution_data: Value,
    /// The normalized cron schedule; `None` for a one-time reminder.
    pub schedule: Option<String>,
    /// The IANA time zone of the schedule.
    pub timezone: String,
    /// Stop after this many runs.
    pub max_runs: Option<u32>,
    /// No run after this time (milliseconds since 1970 UTC).
    pub until: Option<i64>,
}

/// A task to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// What the caller chose.
    pub spec: TaskSpec,
    /// The first run, in milliseconds since 1970 UTC.
    pub next_run: i64,
}

/// A stored task as the tools show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Its id; the nil UUID when the stored one is not a UUID (the task is
    /// then [`unreadable`](Self::unreadable), and `stored_id` shows it).
    pub id: Uuid,
    /// The id as stored, which the tools show: `id` as text, unless the
    /// stored id is not a UUID.
    pub stored_id: String,
    /// What the caller chose.
    pub spec: TaskSpec,
    /// `active`, `done`, `cancelled` or `failed`.
    pub status: String,
    /// The next run (ms since 1970 UTC), when active.
    pub next_run: Option<i64>,
    /// The last run's scheduled time.
    pub last_run: Option<i64>,
    /// Runs so far.
    pub runs: u32,
    /// How the last run went.
    pub last_outcome: Option<String>,
    /// When it was created.
    pub created_at: i64,
    /// Why its stored row cannot be fired (a value an older version or a
    /// hand edit left that no longer parses); `None` for a sound task.
    pub unreadable: Option<String>,
}

impl Task {
    /// The status the tools show and `list_tasks` filters by: `failed` for
    /// an [unreadable](Self::unreadable) task, which can never run, even
    /// before it comes due and the claim marks it so; else the stored one.
    pub fn shown_status(&self) -> &str {
        if self.unreadable.is_some() { "failed" } else { &self.status }
    }

    /// Where the task stands in a listing, newest first.
    pub fn key(&self) -> TaskKey {
        TaskKey { created_at: self.created_at, id: listed_id(&self.stored_id) }
    }

    /// How an unreadable task's outcome is written and shown.
    pub fn unreadable_outcome(why: &str) -> String {
        format!("failed: the stored task cannot be read ({why}); it is kept as it is for an operator to repair")
    }
}

/// A task's place in a listing: by creation time (as stored), then by
/// [listed id](crate::row::listed_id), the greater the newer. A page goes on from the key of the
/// last task of the one before, so tasks added or deleted meanwhile
/// neither shift the next page nor repeat on it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TaskKey {
    /// When the task was created (ms since 1970 UTC).
    pub created_at: i64,
    /// Its [listed id](crate::row::listed_id): the stored one, unless that is very long.
    pub id: String,
}

/// One page of a user's tasks ([`Store::list`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The page, newest first.
    pub tasks: Vec<Task>,
    /// How many tasks match the status, on every page.
    pub total: u64,
    /// How many match from this page on: more than `tasks` holds when
    /// older ones were left for the next page.
    pub remaining: u64,
}

/// How a fired run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The webhook acknowledged it.
    Delivered,
    /// Every delivery attempt failed; why.
    Failed(String),
}

/// What follows an acknowledged run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The task runs again at this time (ms since 1970 UTC).
    At(i64),
    /// It runs no more (a one-time task, or a schedule that `max_runs` or
    /// `until` ended): it is done, or failed when a one-time task's run
    /// could not be delivered.
    Ended,
    /// Its schedule has no run within `SCHEDULER_MAX_AHEAD_DAYS`, as far
    /// as it is searched (a hand edit's schedule that never runs): it is
    /// failed, with why.
    NoneWithin(String),
}

/// Storage of tasks.
#[derive(Debug)]
pub struct Store {
    /// Writes go through this one.
    writer: Mutex<Connection>,
    /// Reads go through this one, so none waits behind a write.
    reader: Mutex<Connection>,
    limits: Limits,
    busy_timeout: Duration,
}

impl Store {
    /// Opens (creating when missing) the database at `path` and brings its
    /// schema up to date. `busy_timeout` is how long a statement waits for
    /// a lock held by another connection or process.
    pub fn open(path: &Path, limits: Limits, busy_timeout: Duration) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|source| StoreError::Directory { path: parent.to_owned(), source })?;
        }
        let mut writer = connect(path, busy_timeout)?;
        migrate(&mut writer)?;
        let reader = connect(path, busy_timeout)?;
        Ok(Self { writer: Mutex::new(writer), reader: Mutex::new(reader), limits, busy_timeout })
    }

    /// The limits this store enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Stores `task`, within the owner's task limit and that of all users
    /// together; the stored task. Nothing is stored once `abandoned` says
    /// the call was given up (see [`StoreError::GivenUp`]).
    pub fn add(&self, task: NewTask, now: i64, abandoned: impl Fn() -> bool) -> Result<Task, StoreError> {
        self.write_unless(abandoned, |tx| {
            let active: i64 = tx.query_row(
                "SELECT COUNT(*) FROM tasks WHERE user_id = ?1 AND status = 'active'",
                [&task.spec.user_id],
                |row| row.get(0),
            )?;
            if u64::try_from(active).unwrap_or(0) >= self.limits.user_max_tasks {
                return Err(StoreError::TooManyTasks(self.limits.user_max_tasks));
            }
            let everyone: i64 = tx
                .prepare_cached("SELECT COUNT(*) FROM tasks WHERE status = 'active'")?
                .query_row([], |row| row.get(0))?;
            if u64::try_from(everyone).unwrap_or(0) >= self.limits.max_tasks {
                return Err(StoreError::Full(self.limits.max_tasks));
            }
            let id = insert(&mut tx.prepare(INSERT_TASK)?, &task, now)?;
            self.prune_finished(tx, &task.spec.user_id, now)?;
            get(tx, &task.spec.user_id, id)
        })
    }

    /// Stores many tasks in one transaction, without the per-user limit
    /// (for the benchmark's set-up); how many were stored.
    pub fn import(&self, tasks: impl IntoIterator<Item = NewTask>, now: i64) -> Result<usize, StoreError> {
        self.write(|tx| {
            let mut statement = tx.prepare(INSERT_TASK)?;
            let mut count = 0;
            for task in tasks {
                insert(&mut statement, &task, now)?;
                count += 1;
            }
            Ok(count)
        })
    }

    /// The caller's tasks newest first, as `list_tasks` pages them: those
    /// whose [shown status](Task::shown_status) is `status` (any, when
    /// `None`), older than `after` (from the start, when `None`), past the
    /// first `skip` of them, at most `limit`. The status is the one shown,
    /// not the stored one, so an unreadable task is listed (and counted)
    /// among the failed ones, not the active ones it would never run as;
    /// finding those reads every task of the caller's that may match (a
    /// user's tasks are bounded by `user_max_tasks` and `user_max_finished`).
    pub fn list(
        &self,
        user_id: &str,
        status: Option<&str>,
        after: Option<&TaskKey>,
        limit: u32,
        skip: u32,
    ) -> Result<Listing, StoreError> {
        // Any stored status may be shown as failed (see `Task::shown_status`).
        let stored = status.filter(|status| *status != "failed");
        self.read(|conn| {
            // Ordered by the key as the rows are read (`task_from_row`), so
            // that a key compares with `after` as the order has it.
            let mut statement = conn.prepare_cached(&format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE user_id = ?1 AND (?2 IS NULL OR status = ?2)
                 ORDER BY CASE typeof(created_at) WHEN 'integer' THEN created_at ELSE 0 END DESC,
                          listed_id(id) DESC"
            ))?;
            let mut listing = Listing { tasks: Vec::new(), total: 0, remaining: 0 };
            let mut to_skip = skip;
            for task in statement.query_map((user_id, stored), task_from_row)? {
                let task = task?;
                if status.is_some_and(|status| task.shown_status() != status) {
                    continue;
                }
                listing.total += 1;
                if after.is_some_and(|after| task.key() >= *after) {
                    continue;
                }
                if to_skip > 0 {
                    to_skip -= 1;
                    continue;
                }
                listing.remaining += 1;
                if listing.tasks.len() < limit as usize {
                    listing.tasks.push(task);
                }
            }
            Ok(listing)
        })
    }

    /// Cancels the caller's task `id` at `now` (no further runs); the task
    /// as it is now. A task that is no longer active is answered as it is.
    /// Nothing is changed once `abandoned` says the call was given up (see
    /// [`StoreError::GivenUp`]).
    pub fn cancel(&self, user_id: &str, id: Uuid, now: i64, abandoned: impl Fn() -> bool) -> Result<Task, StoreError> {
        self.write_unless(abandoned, |tx| {
            tx.execute(
                "UPDATE tasks SET status = 'cancelled', next_run = NULL, finished_at = ?3
                 WHERE id = ?1 AND user_id = ?2 AND status = 'active'",
                (id.to_string(), user_id, now),
            )?;
            let task = get(tx, user_id, id)?;
            self.prune_finished(tx, user_id, now)?;
            Ok(task)
        })
    }

    /// Claims up to `limit` runs due at `now` for `worker`, until `lease_until`:
    /// runs nobody holds, or whose holder's lease has lapsed. A task whose
    /// stored row cannot be read ([`Task::unreadable`]: it is due, or active
    /// without a next run that is a time) is not returned but marked failed
    /// with the reason, in the same transaction, so it neither stops the
    /// other runs nor is claimed again; the rest of its row is left as it
    /// is, and no retention deletes it.
    pub fn claim(&self, worker: &str, now: i64, lease_until: i64, limit: u32) -> Result<Vec<Task>, StoreError> {
        self.write(|tx| {
            let mut statement = tx.prepare_cached(&format!(
                "UPDATE tasks SET claimed_by = ?1, lease_until = ?2, claimed_at = ?3
                 WHERE id IN (SELECT id FROM (SELECT id FROM tasks WHERE status = 'active' AND next_run <= ?3
                                               AND (lease_until IS NULL OR lease_until <= ?3)
                                             ORDER BY next_run LIMIT ?4)
                              UNION ALL
                              SELECT id FROM ({UNTIMED_ACTIVE} LIMIT ?4))
                 RETURNING {TASK_COLUMNS}"
            ))?;
            let claimed = statement
                .query_map((worker, lease_until, now, limit), |row| {
                    Ok((row.get::<_, SqlValue>(0)?, task_from_row(row)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut due = Vec::with_capacity(claimed.len());
            for (key, task) in claimed {
                match &task.unreadable {
                    None => due.push(task),
                    Some(why) => mark_unreadable(tx, &key, &task, why)?,
                }
            }
            Ok(due)
        })
    }

    /// Extends to `lease_until`, at `now`, the claims `worker` still holds
    /// on the runs of tasks `ids` (those it is delivering), so that no other
    /// process takes one over while its delivery lasts; how many it still held.
    pub fn renew(&self, worker: &str, ids: &[Uuid], now: i64, lease_until: i64) -> Result<usize, StoreError> {
        self.write(|tx| {
            let mut statement = tx.prepare_cached(
                "UPDATE tasks SET lease_until = ?3, claimed_at = ?4 WHERE id = ?1 AND claimed_by = ?2",
            )?;
            let mut held = 0;
            for id in ids {
                held += statement.execute((id.to_string(), worker, lease_until, now))?;
            }
            Ok(held)
        })
    }

    /// Gives back every claim `worker` holds, so that its runs are due at
    /// once again (for a process that stops: the one started next, or
    /// another on the same database, sends them without waiting for the
    /// lease to lapse); how many it held.
    pub fn release(&self, worker: &str) -> Result<usize, StoreError> {
        self.write(|tx| {
            Ok(tx.execute(
                "UPDATE tasks SET claimed_by = NULL, lease_until = NULL, claimed_at = NULL WHERE claimed_by = ?1",
                [worker],
            )?)
        })
    }

    /// Acknowledges the run of `task` claimed by `worker`: counts it, records
    /// its outcome, and sets what follows ([`Next`]): the task's next run,
    /// or the end of it, done or failed (a task with no run within the
    /// limit is failed with the reason, then this run's outcome). False
    /// when the claim had lapsed and was taken over. `now` is when, for the
    /// retention of finished tasks.
    pub fn finish(
        &self,
        task: &Task,
        worker: &str,
        outcome: &Outcome,
        next: &Next,
        now: i64,
    ) -> Result<bool, StoreError> {
        let (status, text) = match (outcome, next) {
            (_, Next::At(_)) => ("active", outcome_text(outcome)),
            (_, Next::NoneWithin(why)) => ("failed", format!("failed: {why}; this run: {}", outcome_text(outcome))),
            (Outcome::Failed(_), Next::Ended) if task.spec.schedule.is_none() => ("failed", outcome_text(outcome)),
            (_, Next::Ended) => ("done", outcome_text(outcome)),
        };
        let next = match next {
            Next::At(at) => Some(*at),
            Next::Ended | Next::NoneWithin(_) => None,
        };
        self.write(|tx| {
            // The stored status after the update: finished by this run, or
            // already (cancelled while it was firing); either way the
            // user's finished tasks may now be one too many.
            let stored: Option<String> = tx
                .query_row(
                    "UPDATE tasks SET claimed_by = NULL, lease_until = NULL, claimed_at = NULL, runs = runs + 1,
                         last_run = ?3,
                         last_outcome = ?4,
                         next_run = CASE WHEN status = 'active' AND ?5 = 'active' THEN ?6 ELSE NULL END,
                         finished_at = CASE WHEN status = 'active' AND ?5 <> 'active' THEN COALESCE(?3, created_at)
                                            ELSE finished_at END,
                         status = CASE WHEN status = 'active' THEN ?5 ELSE status END
                     WHERE id = ?1 AND claimed_by = ?2
                     RETURNING status",
                    rusqlite::params![task.id.to_string(), worker, task.next_run, text, status, next],
                    |row| row.get(0),
                )
                .optional()?;
            if stored.as_deref().is_some_and(|stored| stored != "active") {
                self.prune_finished(tx, &task.spec.user_id, now)?;
            }
            Ok(stored.is_some())
        })
    }

    /// When the loop should look again after `now`: the earliest next run of
    /// an active task nobody holds (or whose claim has lapsed), or the
    /// earliest lapse of a claim still held, whichever comes first. A run
    /// another process holds is not due for this one until its lease lapses,
    /// so it must not wake the loop before then.
    pub fn next_wake(&self, now: i64) -> Result<Option<i64>, StoreError> {
        self.read(|conn| {
            let unheld: Option<i64> = conn
                .prepare_cached(
                    // A next run that is not a whole number (a hand edit) is
                    // due now: the claim marks its task failed.
                    "SELECT CASE typeof(next_run) WHEN 'integer' THEN next_run ELSE ?1 END
                     FROM tasks WHERE status = 'active' AND next_run IS NOT NULL
                       AND (lease_until IS NULL OR lease_until <= ?1)
                     ORDER BY next_run LIMIT 1",
                )?
                .query_row([now], |row| row.get(0))
                .optional()?;
            let lapse: Option<i64> = conn.prepare_cached(EARLIEST_LAPSE)?.query_row([now], |row| row.get(0))?;
            Ok(unheld.into_iter().chain(lapse).min())
        })
    }

    /// Undoes what a wall clock set far ahead and then put back left
    /// behind, as seen at `now` (for a process whose clock just went back,
    /// and at start): a claim taken (or renewed) after `now`, so on a clock
    /// ahead, is moved back to `now` with its own lease's length, so the run
    /// is neither held for the length of the jump nor given up early by a
    /// process whose lease is shorter than its holder's (a claim that still
    /// holds is never cut short, whoever holds it); one from an older
    /// version, without that time, is cut to `lease_until` (now plus this
    /// process's lease) when it reaches beyond; and a recurring task's next run
    /// later than its schedule's first run after `now` (the next run is
    /// always the first after the time it was computed, so only a clock
    /// ahead of `now` puts it later) is brought back to it (that run is
    /// searched for within `max_ahead` of the limits only). One-time
    /// reminders keep their time: an absolute time cannot be told from a
    /// delay added to a wrong clock. How many leases and next runs changed.
    pub fn rewind(&self, now: i64, lease_until: i64) -> Result<(usize, usize), StoreError> {
        self.write(|tx| {
            // `lease_until > ?1` finds the claims through `tasks_held`: one taken
            // after now lapses after now.
            let leases = tx.execute(
                "UPDATE tasks SET lease_until = CASE WHEN claimed_at IS NULL THEN ?2
                                                     ELSE ?1 + (lease_until - claimed_at) END,
                                  claimed_at = ?1
                 WHERE lease_until > ?1 AND (claimed_at > ?1 OR (claimed_at IS NULL AND lease_until > ?2))",
                [now, lease_until],
            )?;
            // The few columns needed, not whole tasks: there may be many.
            let ahead = tx
                .prepare(
                    "SELECT id, next_run, schedule, timezone FROM tasks
                     WHERE status = 'active' AND next_run > ?1 AND schedule IS NOT NULL",
                )?
                .query_map([now], |row| {
                    Ok((
                        row.get::<_, SqlValue>(0)?,
                        row.get::<_, i64>(1).ok(),
                        row.get::<_, String>(2).ok(),
                        row.get::<_, String>(3).ok(),
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let Ok(now) = jiff::Timestamp::from_millisecond(now) else { return Ok((leases, 0)) };
            let mut update = tx.prepare("UPDATE tasks SET next_run = ?2 WHERE id = ?1")?;
            let mut next_runs = 0;
            for (key, stored, schedule, zone) in ahead {
                // A row that cannot be read is the claim's to mark (see `claim`).
                let (Some(stored), Some(schedule), Some(zone)) = (stored, schedule, zone) else { continue };
                let (Ok(schedule), Ok(zone)) = (Schedule::from_normalized(&schedule), time_zone(&zone)) else {
                    continue;
                };
                // Searched no further than the limit: a schedule that never
                // runs (a hand edit's) is left to the acknowledgement of its run.
                let Ok(Some(first)) = schedule.first_run_within(now, &zone, self.limits.max_ahead) else { continue };
                if first.as_millisecond() < stored {
                    next_runs += update.execute((key, first.as_millisecond()))?;
                }
            }
            Ok((leases, next_runs))
        })
    }

    /// Deletes `user_id`'s finished tasks beyond the newest
    /// `user_max_finished` (by when they finished), then all users' beyond
    /// the newest `max_finished`. One a process still holds a claim on at
    /// `now` (cancelled while firing) is left until it is acknowledged;
    /// once that claim's lease has lapsed (the process died) it goes too,
    /// as nobody will acknowledge it and a finished task is never claimed
    /// again.
    fn prune_finished(&self, tx: &Transaction<'_>, user_id: &str, now: i64) -> Result<(), StoreError> {
        let keep = i64::try_from(self.limits.user_max_finished).unwrap_or(i64::MAX);
        tx.prepare_cached(
            "DELETE FROM tasks WHERE user_id = ?1 AND finished_at IS NOT NULL
               AND (claimed_by IS NULL OR lease_until <= ?3)
               AND id NOT IN (SELECT id FROM tasks WHERE user_id = ?1 AND finished_at IS NOT NULL
                              ORDER BY finished_at DESC, id DESC LIMIT ?2)",
        )?
        .execute((user_id, keep, now))?;
        let finished: i64 = tx.prepare_cached("SELECT tasks FROM finished_count")?.query_row([], |row| row.get(0))?;
        let excess = finished.saturating_sub(i64::try_from(self.limits.max_finished).unwrap_or(i64::MAX));
        if excess > 0 {
            tx.prepare_cached(OLDEST_FINISHED_DELETED)?.execute((excess, now))?;
        }
        Ok(())
    }

    /// Runs `work` in one immediate write transaction, committed when it succeeds.
    fn write<T>(&self, work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.write_unless(|| false, work)
    }

    /// Runs `work` as [`Store::write`] does, unless `abandoned` says its
    /// call was given up: checked once the write connection is free (so a
    /// call given up while it waited behind other writes does not wait for
    /// SQLite's lock too) and once SQLite's write lock is taken, before
    /// `work` changes anything, so that a call answered `timeout` while it
    /// waited (behind other writes, or another process's) changes nothing.
    fn write_unless<T>(
        &self,
        abandoned: impl Fn() -> bool,
        work: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.on(&self.writer, |conn| {
            if abandoned() {
                return Err(StoreError::GivenUp);
            }
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            if abandoned() {
                return Err(StoreError::GivenUp);
            }
            let value = work(&tx)?;
            tx.commit()?;
            Ok(value)
        })
    }

    /// Runs `work` on the read connection.
    fn read<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.on(&self.reader, work)
    }

    /// Runs `work` on `conn`, once it is free; a lock it waited for past
    /// the busy timeout is answered as [`StoreError::Busy`], naming the setting.
    fn on<T>(
        &self,
        conn: &Mutex<Connection>,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        work(&mut conn).map_err(|error| match error {
            StoreError::Sqlite(sqlite)
                if matches!(
                    sqlite.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) =>
            {
                StoreError::Busy(self.busy_timeout.as_millis())
            }
            other => other,
        })
    }
}

/// The active tasks whose next run is not a number (a hand edit), each
/// found by the index: NULL sorts before every number, text and blobs
/// after, from `''` on.
const UNTIMED_ACTIVE: &str = "SELECT id FROM tasks WHERE status = 'active' AND next_run IS NULL
     UNION ALL SELECT id FROM tasks WHERE status = 'active' AND next_run >= ''";

/// Deletes the `?1` oldest finished tasks of all users no live claim (at
/// `?2`) holds, found by `tasks_finished_all`.
const OLDEST_FINISHED_DELETED: &str =
    "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE finished_at IS NOT NULL
     AND (claimed_by IS NULL OR lease_until <= ?2) ORDER BY finished_at, id LIMIT ?1)";

/// The earliest lapse after `?1` of a claim on an active task. The unary `+`
/// keeps the planner off `tasks_due` (by `status` it would read every active
/// task) and on `tasks_held`, which holds only the few claimed ones.
const EARLIEST_LAPSE: &str = "SELECT MIN(lease_until) FROM tasks WHERE lease_until > ?1 AND +status = 'active'";

/// Marks failed, with the reason, the claimed task whose row (with the key
/// `key`) cannot be read, and logs it: once, as a failed task is never
/// claimed again. Only its status, outcome and claim are written.
fn mark_unreadable(tx: &Transaction<'_>, key: &SqlValue, task: &Task, why: &str) -> Result<(), StoreError> {
    tracing::error!(task = ?key, user = %task.spec.user_id, reason = %why,
        "a stored task cannot be read; it is marked failed and kept for an operator to repair");
    tx.prepare_cached(
        "UPDATE tasks SET status = 'failed', last_outcome = ?2, claimed_by = NULL, lease_until = NULL,
                            claimed_at = NULL WHERE id = ?1",
    )?
    .execute((key, Task::unreadable_outcome(why)))?;
    Ok(())
}

/// How an outcome is written in `last_outcome`.
fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Delivered => "delivered".to_owned(),
        Outcome::Failed(why) => format!("failed: {why}"),
    }
}

/// Inserts one active task.
const INSERT_TASK: &str = "INSERT INTO tasks (id, user_id, task_type, description, execution_data, schedule, timezone,
     status, next_run, max_runs, until, created_at)
 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8, ?9, ?10, ?11)";

/// Stores `task` with [`INSERT_TASK`] under a new id; the id.
fn insert(statement: &mut Statement<'_>, task: &NewTask, now: i64) -> rusqlite::Result<Uuid> {
    let id = Uuid::new_v4();
    let spec = &task.spec;
    statement.execute(rusqlite::params![
        id.to_string(),
        spec.user_id,
        spec.task_type,
        spec.description,
        spec.execution_data.to_string(),
        spec.schedule,
        spec.timezone,
        task.next_run,
        spec.max_runs,
        spec.until,
        now
    ])?;
    Ok(id)
}

fn get(tx: &Transaction<'_>, user_id: &str, id: Uuid) -> Result<Task, StoreError> {
    tx.query_row(
        &format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1 AND user_id = ?2"),
        (id.to_string(), user_id),
        task_from_row,
    )
    .optional()?
    .ok_or(StoreError::NotFound(id))
}

/// A connection to the database at `path` whose statements wait up to
/// `busy_timeout` for a lock, in WAL mode.
fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(busy_timeout)?;
    // WAL is a property of the file; it stays once set.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // The order of listings, as `Task::key` has it.
    conn.create_scalar_function("listed_id", 1, FunctionFlags::SQLITE_DETERMINISTIC, |call| {
        Ok(listed_id(&text_of(call.get_raw(0)).unwrap_or_default()))
    })?;
    Ok(conn)
}

/// Brings the schema to the newest version, one migration per transaction.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        let Some(step) = usize::try_from(version).ok().and_then(|v| MIGRATIONS.get(v)) else {
            if version as usize > MIGRATIONS.len() {
                return Err(StoreError::TooNew(version, MIGRATIONS.len()));
            }
            return Ok(());
        };
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: Limits = Limits {
        max_tasks: 1_000,
        user_max_tasks: 3,
        user_max_finished: 2,
        max_finished: 1_000,
        list_max_bytes: 1_000_000,
        min_interval: Duration::from_secs(60),
        max_data_bytes: 1024,
        max_ahead: Duration::from_secs(86_400),
    };

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db/scheduler.db"), LIMITS, Duration::from_secs(5)).unwrap();
        (dir, store)
    }

    /// The first page of `user`'s tasks, and the total.
    fn list(
        store: &Store,
        user: &str,
        status: Option<&str>,
        limit: u32,
        skip: u32,
    ) -> Result<(Vec<Task>, u64), StoreError> {
        store.list(user, status, None, limit, skip).map(|listing| (listing.tasks, listing.total))
    }

    fn reminder(user: &str, next_run: i64) -> NewTask {
        NewTask {
            spec: TaskSpec {
                user_id: user.into(),
                task_type: "reminder".into(),
                description: "call mom".into(),
                execution_data: json!({"task_type": "reminder", "message": "call mom"}),
                schedule: None,
                timezone: "UTC".into(),
                max_runs: None,
                until: None,
            },
            next_run,
        }
    }

    #[test]
    fn a_claimed_run_is_not_claimed_again_until_its_lease_lapses() {
        let (_dir, store) = store();
        let task = store.add(reminder("u", 1_000), 0, || false).unwrap();
        assert!(store.claim("a", 999, 5_000, 10).unwrap().is_empty(), "not due yet");
        let claimed = store.claim("a", 1_000, 5_000, 10).unwrap();
        assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), [task.id]);
        assert!(store.claim("b", 2_000, 9_000, 10).unwrap().is_empty(), "held by a");
        let taken_over = store.claim("b", 5_000, 9_000, 10).unwrap();
        assert_eq!(taken_over.len(), 1, "a's lease lapsed");
        assert!(!store.finish(&claimed[0], "a", &Outcome::Delivered, &Next::Ended, 6_000).unwrap(), "a lost its claim");
        assert!(store.finish(&taken_over[0], "b", &Outcome::Delivered, &Next::Ended, 6_000).unwrap());
        let done = &list(&store, "u", None, 10, 0).unwrap().0[0];
        assert_eq!((done.status.as_str(), done.runs, done.next_run), ("done", 1, None));
        assert!(store.claim("c", 99_000, 100_000, 10).unwrap().is_empty(), "done tasks never fire");
    }

    #[test]
    fn a_released_claim_is_due_at_once_and_only_its_holders_claims_are_released() {
        let (_dir, store) = store();
        let mine = store.add(reminder("u", 1_000), 0, || false).unwrap();
        store.claim("a", 1_000, 600_000, 1).unwrap();
        store.add(reminder("u", 1_000), 0, || false).unwrap();
        store.claim("b", 1_000, 600_000, 1).unwrap();
        assert_eq!(store.release("a").unwrap(), 1);
        let retaken = store.claim("c", 2_000, 600_000, 10).unwrap();
        assert_eq!(retaken.iter().map(|t| t.id).collect::<Vec<_>>(), [mine.id], "b's claim holds");
        assert_eq!(store.release("a").unwrap(), 0);
    }

    #[test]
    fn a_lock_held_past_the_busy_timeout_is_named_by_its_setting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_millis(50)).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let error = store.add(reminder("u", 1_000), 0, || false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unavailable);
        let message = error.to_string();
        assert!(message.contains("locked by another process for over 50 ms (SCHEDULER_BUSY_TIMEOUT_MS)"), "{message}");
        other.execute_batch("COMMIT").unwrap();
        store.add(reminder("u", 1_000), 0, || false).expect("the lock is free again");
    }

    #[test]
    fn a_read_is_answered_while_a_write_waits_for_another_processs_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(10)).unwrap();
        let kept = store.add(reminder("u", 1_000), 0, || false).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| store.add(reminder("u", 2_000), 0, || false));
            // The write now waits in SQLite for the lock, up to 10 s.
            std::thread::sleep(Duration::from_millis(200));
            let (tasks, _) = list(&store, "u", None, 10, 0).unwrap();
            assert_eq!(store.next_wake(0).unwrap(), Some(1_000));
            assert!(!waiting.is_finished(), "answered only once the write had given up");
            assert_eq!(tasks, std::slice::from_ref(&kept));
            other.execute_batch("COMMIT").unwrap();
            waiting.join().unwrap().expect("written once the lock is free");
        });
        assert_eq!(list(&store, "u", None, 10, 0).unwrap().1, 2);
    }

    #[test]
    fn a_change_given_up_while_it_waited_for_the_lock_is_not_made() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        let kept = store.add(reminder("u", 1_000), 0, || false).unwrap();
        // A call already given up does not wait for the lock at all.
        assert!(matches!(store.add(reminder("u", 1_000), 0, || true), Err(StoreError::GivenUp)));
        assert!(matches!(store.cancel("u", kept.id, 0, || true), Err(StoreError::GivenUp)));
        // Another process holds the write lock; the calls wait for it, and
        // are given up (their timeout passes) before it is released.
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let given_up = AtomicBool::new(false);
        let abandoned = || given_up.load(Ordering::SeqCst);
        std::thread::scope(|scope| {
            let calls = [
                scope.spawn(|| store.add(reminder("u", 1_000), 0, abandoned).map(|_| ())),
                scope.spawn(|| store.cancel("u", kept.id, 0, abandoned).map(|_| ())),
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
        let (tasks, _) = list(&store, "u", None, 10, 0).unwrap();
        assert_eq!(tasks, [kept], "nothing was written");
    }

    #[test]
    fn an_unreadable_row_is_marked_failed_and_kept_while_every_other_task_fires() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        let sound = store.add(reminder("alice", 1_000), 0, || false).unwrap();
        // What an older version or a hand edit may leave, one kind per user;
        // each is named in the reason.
        let edits = [
            ("schedule = 'every other tuesday'", "schedule"),
            ("timezone = 'Mars/Olympus_Mons'", "timezone"),
            ("execution_data = '{\"task_type\": \"reminder\", \"text\": \"x\"}'", "execution_data"),
            ("execution_data = '{not json'", "execution_data"),
            ("runs = 'many'", "runs"),
            ("max_runs = -1", "max_runs"),
            ("next_run = 'soon'", "next_run"),
            ("next_run = NULL", "next_run"),
            ("id = 'not-a-uuid'", "not-a-uuid"),
        ];
        let hand = Connection::open(&path).unwrap();
        for (n, (edit, _)) in edits.iter().enumerate() {
            let task = store.add(reminder(&format!("bob{n}"), 500), 0, || false).unwrap();
            hand.execute(&format!("UPDATE tasks SET {edit} WHERE id = ?1"), [task.id.to_string()]).unwrap();
        }
        let claimed = store.claim("w", 1_000, 9_000, 20).unwrap();
        assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), [sound.id], "the sound task fires");
        for (n, (_, named)) in edits.iter().enumerate() {
            let (tasks, total) = list(&store, &format!("bob{n}"), None, 10, 0).unwrap();
            assert_eq!((total, tasks[0].status.as_str()), (1, "failed"), "{named}");
            let outcome = tasks[0].last_outcome.as_deref().unwrap_or_default();
            assert!(
                outcome.starts_with("failed: the stored task cannot be read (") && outcome.contains(named),
                "{outcome}"
            );
        }
        assert!(store.claim("w", 2_000, 9_000, 20).unwrap().is_empty(), "marked once, never claimed again");
        assert!(store.finish(&claimed[0], "w", &Outcome::Delivered, &Next::Ended, 1_000).unwrap());
        let rows: i64 = hand.query_row("SELECT COUNT(*) FROM tasks", [], |row| row.get(0)).unwrap();
        assert_eq!(rows, 1 + edits.len() as i64, "every row is kept");
        let runs: String = hand.query_row("SELECT runs FROM tasks WHERE user_id = 'bob4'", [], |r| r.get(0)).unwrap();
        assert_eq!(runs, "many", "the bad value is left for an operator to see");
    }

    #[test]
    fn a_clock_put_back_brings_far_leases_and_recurring_next_runs_back_to_now() {
        let (_dir, store) = store();
        const HOUR: i64 = 3_600_000;
        // At 00:30 after a clock that read a year ahead: its leases and the
        // next runs it computed are a year out.
        let (now, year) = (HOUR / 2, 365 * 24 * HOUR);
        let held = store.add(reminder("v", 0), 0, || false).unwrap();
        assert_eq!(store.claim("gone", year, year + 600_000, 10).unwrap().len(), 1);
        let mut hourly = reminder("u", year + HOUR);
        hourly.spec.schedule = Some("0 * * * *".into());
        let ahead = store.add(hourly.clone(), 0, || false).unwrap();
        hourly.next_run = HOUR;
        let on_time = store.add(hourly, 0, || false).unwrap();
        let later = store.add(reminder("v", year), 0, || false).unwrap();
        assert_eq!(store.rewind(now, now + 600_000).unwrap(), (1, 1));
        let next_run = |user: &str, id: Uuid| {
            list(&store, user, None, 10, 0).unwrap().0.into_iter().find(|t| t.id == id).unwrap().next_run
        };
        assert_eq!(next_run("u", ahead.id), Some(HOUR), "the first run after now");
        assert_eq!(next_run("u", on_time.id), Some(HOUR), "untouched");
        assert_eq!(next_run("v", later.id), Some(year), "a one-time reminder keeps its time");
        assert!(store.claim("w", now + 599_999, now + 1_200_000, 10).unwrap().is_empty(), "the lease holds");
        let retaken = store.claim("w", now + 600_000, now + 1_200_000, 10).unwrap();
        assert_eq!(retaken.iter().map(|t| t.id).collect::<Vec<_>>(), [held.id], "a lease from now, not a year");
        assert_eq!(store.rewind(now + 600_000, now + 1_200_000).unwrap(), (0, 0), "nothing left ahead");
    }

    #[test]
    fn a_clock_put_back_leaves_a_claim_made_on_time_alone_whatever_its_lease() {
        let (dir, store) = store();
        // Another process with a ten-minute lease is delivering this run.
        let theirs = store.add(reminder("u", 1_000), 0, || false).unwrap();
        assert_eq!(store.claim("long", 1_000, 601_000, 10).unwrap().len(), 1);
        // This one starts (or sees its clock step back) with a 2 s lease.
        assert_eq!(store.rewind(2_000, 4_000).unwrap(), (0, 0), "a claim made before now is not cut");
        assert!(store.claim("short", 5_000, 7_000, 10).unwrap().is_empty(), "nor taken over");
        assert_eq!(store.renew("long", &[theirs.id], 200_000, 800_000).unwrap(), 1);
        // A claim of an older version, without the time it was taken: cut as before.
        Connection::open(dir.path().join("db/scheduler.db"))
            .unwrap()
            .execute("UPDATE tasks SET claimed_at = NULL", [])
            .unwrap();
        assert_eq!(store.rewind(300_000, 302_000).unwrap(), (1, 0));
        assert_eq!(store.claim("short", 302_000, 304_000, 10).unwrap().len(), 1);
    }

    #[test]
    fn a_claim_given_back_forgets_when_it_was_taken_so_an_older_versions_claim_is_cut() {
        let (dir, store) = store();
        let task = store.add(reminder("u", 1_000), 0, || false).unwrap();
        assert_eq!(store.claim("new", 1_000, 3_000, 10).unwrap().len(), 1);
        assert_eq!(store.release("new").unwrap(), 1);
        // A process of an older version (during a rolling upgrade) claims it
        // on a clock far ahead, writing no claimed_at.
        Connection::open(dir.path().join("db/scheduler.db"))
            .unwrap()
            .execute("UPDATE tasks SET claimed_by = 'old', lease_until = 9000000 WHERE id = ?1", [task.id.to_string()])
            .unwrap();
        assert_eq!(store.rewind(4_000, 6_000).unwrap(), (1, 0), "cut as an older version's claim");
        assert_eq!(store.claim("new", 6_000, 8_000, 10).unwrap().len(), 1);
    }

    #[test]
    fn a_claim_made_on_a_clock_ahead_keeps_its_own_lease_from_now() {
        let (_dir, store) = store();
        store.add(reminder("u", 1_000), 0, || false).unwrap();
        // Claimed with a 600 s lease on a clock at 1 000 000, then put back to 10 000.
        assert_eq!(store.claim("ahead", 1_000_000, 1_600_000, 10).unwrap().len(), 1);
        assert_eq!(store.rewind(10_000, 12_000).unwrap(), (1, 0));
        assert!(store.claim("short", 609_999, 611_000, 10).unwrap().is_empty(), "600 s from now, not 2 s");
        assert_eq!(store.claim("short", 610_000, 612_000, 10).unwrap().len(), 1);
    }

    #[test]
    fn a_row_whose_id_is_not_a_uuid_as_written_is_shown_by_that_id_and_never_fired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        let hand = Connection::open(&path).unwrap();
        let mut stored = Vec::new();
        for (user, id) in [("a", "upper"), ("b", "abc")] {
            let task = store.add(reminder(user, 500), 0, || false).unwrap();
            let id = if id == "upper" { task.id.to_string().to_uppercase() } else { id.to_owned() };
            hand.execute("UPDATE tasks SET id = ?1 WHERE id = ?2", (&id, task.id.to_string())).unwrap();
            stored.push(id);
        }
        // An id in upper case parses as a UUID, but no statement would find
        // its row by it: fired, it would never be acknowledged.
        assert!(store.claim("w", 1_000, 9_000, 10).unwrap().is_empty(), "both marked failed, neither fired");
        for (user, id) in [("a", &stored[0]), ("b", &stored[1])] {
            let (tasks, _) = list(&store, user, None, 10, 0).unwrap();
            assert_eq!((tasks[0].stored_id.as_str(), tasks[0].status.as_str()), (id.as_str(), "failed"));
            let why = tasks[0].unreadable.as_deref().unwrap_or_default();
            assert!(why.contains("is not a UUID in its lower-case hyphenated form"), "{why}");
        }
    }

    #[test]
    fn an_unreadable_active_task_is_listed_and_counted_among_the_failed_not_the_active() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        let sound = store.add(reminder("u", 1_000_000), 1, || false).unwrap();
        let damaged = store.add(reminder("u", 1_000_000), 2, || false).unwrap();
        Connection::open(&path)
            .unwrap()
            .execute("UPDATE tasks SET timezone = 'Mars/Olympus_Mons' WHERE id = ?1", [damaged.id.to_string()])
            .unwrap();
        let ids = |status| {
            let (tasks, total) = list(&store, "u", Some(status), 10, 0).unwrap();
            (tasks.into_iter().map(|t| t.id).collect::<Vec<_>>(), total)
        };
        assert_eq!(ids("active"), (vec![sound.id], 1));
        assert_eq!(ids("failed"), (vec![damaged.id], 1));
        assert_eq!(list(&store, "u", None, 10, 0).unwrap().1, 2);
    }

    #[test]
    fn a_page_goes_on_after_the_last_task_shown_whatever_was_added_or_removed_meanwhile() {
        let (_dir, store) = store();
        let store = Store { limits: Limits { user_max_tasks: 100, ..LIMITS }, ..store };
        let ids: Vec<Uuid> = (0..5).map(|n| store.add(reminder("u", 1_000_000), n, || false).unwrap().id).collect();
        let first = store.list("u", Some("active"), None, 2, 0).unwrap();
        assert_eq!(first.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [ids[4], ids[3]]);
        assert_eq!((first.total, first.remaining), (5, 5));
        // Meanwhile a newer task comes and one already shown goes.
        store.add(reminder("u", 1_000_000), 10, || false).unwrap();
        store.cancel("u", ids[4], 11, || false).unwrap();
        let after = first.tasks.last().map(Task::key);
        let second = store.list("u", Some("active"), after.as_ref(), 2, 0).unwrap();
        assert_eq!(second.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [ids[2], ids[1]], "none skipped or repeated");
        assert_eq!((second.total, second.remaining), (5, 3));
        // The task a cursor names may be gone too.
        store.cancel("u", ids[1], 12, || false).unwrap();
        let third = store.list("u", Some("active"), second.tasks.last().map(Task::key).as_ref(), 2, 0).unwrap();
        assert_eq!((third.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), third.remaining), (vec![ids[0]], 1));
    }

    #[test]
    fn a_renewed_claim_is_not_taken_over_and_only_its_holder_renews_it() {
        let (_dir, store) = store();
        let task = store.add(reminder("u", 1_000), 0, || false).unwrap();
        let claimed = store.claim("a", 1_000, 5_000, 10).unwrap();
        assert_eq!(store.renew("a", &[task.id], 3_000, 9_000).unwrap(), 1);
        assert!(store.claim("b", 6_000, 16_000, 10).unwrap().is_empty(), "renewed until 9 000");
        assert_eq!(store.renew("b", &[task.id], 3_000, 99_000).unwrap(), 0, "b holds no claim on it");
        let taken_over = store.claim("b", 9_000, 19_000, 10).unwrap();
        assert_eq!(taken_over.len(), 1, "a's renewed lease lapsed");
        assert_eq!(store.renew("a", &[task.id], 9_000, 29_000).unwrap(), 0, "a cannot take it back");
        assert!(store.finish(&taken_over[0], "b", &Outcome::Delivered, &Next::Ended, 9_500).unwrap());
        assert!(!store.finish(&claimed[0], "a", &Outcome::Delivered, &Next::Ended, 9_500).unwrap());
        assert_eq!(store.renew("b", &[task.id], 9_500, 39_000).unwrap(), 0, "an acknowledged run holds no claim");
    }

    #[test]
    fn a_run_held_by_another_process_wakes_the_loop_when_its_lease_lapses_not_before() {
        let (_dir, store) = store();
        store.add(reminder("u", 1_000), 0, || false).unwrap();
        assert_eq!(store.next_wake(0).unwrap(), Some(1_000));
        // Held until 5 000 by a process that may have died: due, but not for
        // this one until then (a wake at 1 000 would be a busy loop).
        store.claim("dead", 1_000, 5_000, 10).unwrap();
        assert_eq!(store.next_wake(2_000).unwrap(), Some(5_000));
        let later = store.add(reminder("u", 3_000), 0, || false).unwrap();
        assert_eq!(store.next_wake(2_000).unwrap(), Some(3_000), "an unheld run that comes first");
        store.cancel("u", later.id, 2_000, || false).unwrap();
        assert_eq!(store.next_wake(5_000).unwrap(), Some(1_000), "the lapsed claim's run is due");
        let retaken = store.claim("w", 5_000, 9_000, 10).unwrap();
        store.finish(&retaken[0], "w", &Outcome::Delivered, &Next::Ended, 5_000).unwrap();
        assert_eq!(store.next_wake(5_000).unwrap(), None, "nothing left to run");
    }

    #[test]
    fn active_tasks_without_a_time_are_found_through_the_index() {
        let (_dir, store) = store();
        let conn = store.reader.lock().unwrap();
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {UNTIMED_ACTIVE}")).unwrap();
        let plan: Vec<String> = statement.query_map([], |row| row.get(3)).unwrap().map(Result::unwrap).collect();
        let searches: Vec<&String> =
            plan.iter().filter(|step| step.contains("tasks_due (status=? AND next_run")).collect();
        assert_eq!(searches.len(), 2, "{plan:?}");
        assert!(plan.iter().all(|step| !step.contains("SCAN")), "{plan:?}");
    }

    #[test]
    fn held_runs_are_found_through_the_index() {
        let (_dir, store) = store();
        let conn = store.reader.lock().unwrap();
        let plan: String =
            conn.query_row(&format!("EXPLAIN QUERY PLAN {EARLIEST_LAPSE}"), [5], |row| row.get(3)).unwrap();
        assert!(plan.contains("tasks_held"), "{plan}");
    }

    #[test]
    fn recurring_tasks_advance_and_failed_one_time_tasks_are_marked() {
        let (_dir, store) = store();
        let mut recurring = reminder("u", 1_000);
        recurring.spec.schedule = Some("* * * * *".into());
        store.add(recurring, 0, || false).unwrap();
        store.add(reminder("u", 1_000), 0, || false).unwrap();
        let claimed = store.claim("w", 1_000, 2_000, 10).unwrap();
        for task in &claimed {
            let next = if task.spec.schedule.is_some() { Next::At(61_000) } else { Next::Ended };
            store.finish(task, "w", &Outcome::Failed("HTTP 500".into()), &next, 1_000).unwrap();
        }
        let (tasks, _) = list(&store, "u", None, 10, 0).unwrap();
        let statuses: Vec<(&str, Option<i64>)> = tasks.iter().map(|t| (t.status.as_str(), t.next_run)).collect();
        assert!(statuses.contains(&("active", Some(61_000))), "{statuses:?}");
        assert!(statuses.contains(&("failed", None)), "{statuses:?}");
        assert!(tasks.iter().all(|t| t.last_outcome.as_deref() == Some("failed: HTTP 500")));
        assert_eq!(list(&store, "u", Some("failed"), 10, 0).unwrap().0.len(), 1);
    }

    #[test]
    fn users_see_and_cancel_only_their_own_tasks_within_their_limit() {
        let (_dir, store) = store();
        let task = store.add(reminder("alice", 1_000), 0, || false).unwrap();
        assert!(list(&store, "bob", None, 10, 0).unwrap().0.is_empty());
        assert!(matches!(store.cancel("bob", task.id, 0, || false), Err(StoreError::NotFound(_))));
        assert_eq!(store.cancel("alice", task.id, 0, || false).unwrap().status, "cancelled");
        assert!(store.claim("w", 9_000, 10_000, 10).unwrap().is_empty(), "cancelled tasks never fire");
        for _ in 0..3 {
            store.add(reminder("alice", 1_000), 0, || false).unwrap();
        }
        let error = store.add(reminder("alice", 1_000), 0, || false).unwrap_err().to_string();
        assert!(
            error.contains("you already have 3 active tasks, the limit per user (SCHEDULER_USER_MAX_TASKS)"),
            "{error}"
        );
    }

    #[test]
    fn no_user_adds_a_task_past_the_limit_of_all_users_together() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits { max_tasks: 4, ..LIMITS };
        let store = Store::open(&dir.path().join("s.db"), limits, Duration::from_secs(5)).unwrap();
        let first = store.add(reminder("alice", 1_000), 0, || false).unwrap();
        for user in ["alice", "bob", "carol"] {
            store.add(reminder(user, 1_000), 0, || false).unwrap();
        }
        let error = store.add(reminder("dave", 1_000), 0, || false).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unavailable);
        let message = error.to_string();
        assert!(
            message.contains("4 active tasks, its limit for all users together (SCHEDULER_MAX_TASKS)"),
            "{message}"
        );
        store.cancel("alice", first.id, 0, || false).unwrap();
        store.add(reminder("dave", 1_000), 0, || false).expect("a cancelled task does not count");
    }

    #[test]
    fn only_the_newest_finished_tasks_are_kept_and_active_ones_never_go() {
        let (_dir, store) = store();
        let active = store.add(reminder("u", 1_000_000), 0, || false).unwrap();
        let other = store.add(reminder("other", 1_000_000), 0, || false).unwrap();
        let mut cancelled = Vec::new();
        for n in 0..5 {
            let task = store.add(reminder("u", 1_000_000), n, || false).unwrap();
            assert_eq!(
                store.cancel("u", task.id, 10 + n, || false).unwrap().status,
                "cancelled",
                "answered before pruning"
            );
            cancelled.push(task.id);
        }
        let (kept, total) = list(&store, "u", None, 100, 0).unwrap();
        let mut ids: Vec<Uuid> = kept.iter().map(|t| t.id).collect();
        ids.sort();
        let mut expected = vec![active.id, cancelled[3], cancelled[4]];
        expected.sort();
        assert_eq!((ids, total), (expected, 3), "the two newest cancelled and the active task");
        // A run that ends its task counts as finished too, and pushes out the oldest.
        let due = store.add(reminder("u", 500), 20, || false).unwrap();
        let claimed = store.claim("w", 500, 9_000, 10).unwrap();
        assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), [due.id]);
        assert!(store.finish(&claimed[0], "w", &Outcome::Delivered, &Next::Ended, 500).unwrap());
        let (done, _) = list(&store, "u", Some("done"), 100, 0).unwrap();
        assert_eq!(done.len(), 1);
        let (cancelled_left, _) = list(&store, "u", Some("cancelled"), 100, 0).unwrap();
        assert_eq!(cancelled_left.iter().map(|t| t.id).collect::<Vec<_>>(), [cancelled[4]]);
        assert_eq!(
            list(&store, "other", None, 100, 0).unwrap().0[0].id,
            other.id,
            "another user's tasks are untouched"
        );
    }

    /// The finished tasks as `finished_count` has them, and as counted.
    fn finished_counts(path: &Path) -> (i64, i64) {
        let conn = Connection::open(path).unwrap();
        let kept = conn.query_row("SELECT tasks FROM finished_count", [], |row| row.get(0)).unwrap();
        let counted =
            conn.query_row("SELECT COUNT(*) FROM tasks WHERE finished_at IS NOT NULL", [], |row| row.get(0)).unwrap();
        (kept, counted)
    }

    #[test]
    fn no_more_finished_tasks_than_the_limit_of_all_users_together_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, Limits { max_finished: 3, ..LIMITS }, Duration::from_secs(5)).unwrap();
        // Cancelled while its run is held until 50 000: kept while the claim holds.
        let held = store.add(reminder("held", 1_000), 0, || false).unwrap();
        assert_eq!(store.claim("w", 1_000, 50_000, 10).unwrap().len(), 1);
        store.cancel("held", held.id, 1, || false).unwrap();
        for (n, user) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            let task = store.add(reminder(user, 1_000_000), 10, || false).unwrap();
            store.cancel(user, task.id, 10 + n as i64, || false).unwrap();
        }
        let kept = |user: &str| list(&store, user, None, 10, 0).unwrap().1;
        assert_eq!(["held", "a", "b", "c", "d", "e"].map(kept), [1, 0, 0, 0, 1, 1], "the oldest of all users go");
        assert_eq!(finished_counts(&path), (3, 3));
        // Once its lease lapsed, the next finished task pushes it out too.
        let task = store.add(reminder("f", 1_000_000), 60_000, || false).unwrap();
        store.cancel("f", task.id, 60_000, || false).unwrap();
        assert_eq!(["held", "c", "d", "e", "f"].map(kept), [0, 0, 1, 1, 1]);
        assert_eq!(finished_counts(&path), (3, 3));
        // A done run and a hand-deleted row are counted too.
        let due = store.add(reminder("g", 500), 60_000, || false).unwrap();
        let claimed = store.claim("w", 60_000, 70_000, 10).unwrap();
        assert_eq!(claimed.iter().map(|t| t.id).collect::<Vec<_>>(), [due.id]);
        store.finish(&claimed[0], "w", &Outcome::Delivered, &Next::Ended, 60_001).unwrap();
        assert_eq!(["d", "e", "f", "g"].map(kept), [0, 1, 1, 1]);
        Connection::open(&path).unwrap().execute("DELETE FROM tasks WHERE user_id = 'e'", []).unwrap();
        assert_eq!(finished_counts(&path), (2, 2));
        let conn = store.reader.lock().unwrap();
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {OLDEST_FINISHED_DELETED}")).unwrap();
        let steps: Vec<String> = statement.query_map([1, 0], |row| row.get(3)).unwrap().map(Result::unwrap).collect();
        assert!(steps.iter().any(|step| step.contains("tasks_finished_all")), "{steps:?}");
    }

    #[test]
    fn a_database_of_the_previous_schema_gets_its_finished_tasks_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        for user in ["a", "b"] {
            let task = store.add(reminder(user, 1_000_000), 0, || false).unwrap();
            store.cancel(user, task.id, 1, || false).unwrap();
        }
        store.add(reminder("a", 1_000_000), 0, || false).unwrap();
        drop(store);
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "DROP TRIGGER task_inserted_finished; DROP TRIGGER task_deleted_finished;
                 DROP TRIGGER task_finished_changed; DROP TABLE finished_count; DROP INDEX tasks_finished_all;
                 ALTER TABLE tasks DROP COLUMN claimed_at; PRAGMA user_version = 3;",
            )
            .unwrap();
        Store::open(&path, LIMITS, Duration::from_secs(5)).unwrap();
        assert_eq!(finished_counts(&path), (2, 2));
    }

    /// A task of user `u` cancelled at `cancelled_at` while `dead` holds
    /// its run until 5 000, then pushed out of the newest two finished by
    /// two more cancelled tasks; its run as `dead` claimed it.
    fn claimed_then_cancelled_and_pushed_out(store: &Store, cancelled_at: i64) -> Task {
        let task = store.add(reminder("u", 1_000), 0, || false).unwrap();
        let mut claimed = store.claim("dead", 1_000, 5_000, 10).unwrap();
        assert_eq!(claimed.len(), 1);
        store.cancel("u", task.id, cancelled_at, || false).unwrap();
        for n in 1..=2 {
            let newer = store.add(reminder("u", 1_000_000), cancelled_at + n, || false).unwrap();
            store.cancel("u", newer.id, cancelled_at + n, || false).unwrap();
        }
        claimed.remove(0)
    }

    #[test]
    fn a_claimed_finished_task_is_not_pruned_while_its_lease_holds() {
        let (_dir, store) = store();
        let held = claimed_then_cancelled_and_pushed_out(&store, 2_000).id;
        let (cancelled, total) = list(&store, "u", Some("cancelled"), 10, 0).unwrap();
        assert_eq!(total, 3, "one over the limit of two, kept for its holder");
        assert!(cancelled.iter().any(|t| t.id == held));
    }

    #[test]
    fn a_claimed_cancelled_task_is_pruned_when_its_run_is_acknowledged() {
        let (_dir, store) = store();
        let held = claimed_then_cancelled_and_pushed_out(&store, 2_000);
        // Its holder acknowledges the run as it would a recurring task's
        // (a next run given): the task stays cancelled, and the one too
        // many finished tasks it was kept as goes.
        assert!(store.finish(&held, "dead", &Outcome::Delivered, &Next::At(1_000_000), 3_000).unwrap());
        let (cancelled, total) = list(&store, "u", Some("cancelled"), 10, 0).unwrap();
        assert_eq!(total, 2, "{cancelled:?}");
        assert!(cancelled.iter().all(|t| t.id != held.id));
    }

    #[test]
    fn a_claimed_finished_task_is_pruned_once_its_lease_lapsed() {
        let (_dir, store) = store();
        // Its holder died (SIGKILL): nobody will acknowledge the run, and
        // the next task finished after the lease lapsed takes it away.
        let held = claimed_then_cancelled_and_pushed_out(&store, 2_000).id;
        let later = store.add(reminder("u", 1_000_000), 6_000, || false).unwrap();
        store.cancel("u", later.id, 6_000, || false).unwrap();
        let (cancelled, total) = list(&store, "u", Some("cancelled"), 10, 0).unwrap();
        assert_eq!(total, 2, "{cancelled:?}");
        assert!(cancelled.iter().all(|t| t.id != held));
        assert!(store.claim("w", 9_000, 19_000, 10).unwrap().is_empty(), "nor was it claimed again");
        assert_eq!(store.next_wake(9_000).unwrap(), None, "nor does it wake the loop");
    }

    #[test]
    fn a_list_is_the_newest_tasks_up_to_its_limit_with_the_total() {
        let (_dir, store) = store();
        let ids: Vec<Uuid> = (0..3).map(|n| store.add(reminder("u", 1_000_000), n, || false).unwrap().id).collect();
        let (newest, total) = list(&store, "u", None, 2, 0).unwrap();
        assert_eq!(newest.iter().map(|t| t.id).collect::<Vec<_>>(), [ids[2], ids[1]]);
        assert_eq!(total, 3);
        assert_eq!(list(&store, "u", Some("done"), 2, 0).unwrap(), (vec![], 0));
    }

    #[test]
    fn due_runs_are_found_through_the_index() {
        let (_dir, store) = store();
        let conn = store.reader.lock().unwrap();
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT id FROM tasks WHERE status = 'active' AND next_run <= 5 ORDER BY next_run",
                [],
                |row| row.get(3),
            )
            .unwrap();
        assert!(plan.contains("USING INDEX tasks_due") || plan.contains("USING COVERING INDEX tasks_due"), "{plan}");
    }
}
