//! The module's tools: add reminders and recurring tasks, list and cancel
//! them, and tell the time; all keyed by the caller's `user_id`.

use std::sync::Arc;
use std::time::Duration;

use guarded_http::{GuardedClient, GuardedError};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::row::LISTED_ID_MAX_CHARS;
use crate::schedule::{SCHEDULE_PATTERN, Schedule, ScheduleError, time_zone};
use crate::store::{NewTask, Store, Task, TaskKey, TaskSpec};
use crate::task::{ExecutionData, TaskView, rfc3339};

/// A delay: numbers with units s, m, h, d, as in `30s`, `5m`, `1h30m`, `2d`.
pub const DELAY_PATTERN: &str = r"^\s*([0-9]{1,6}\s*[smhd]\s*){1,4}$";

/// An RFC 3339 time with its offset, e.g. `2026-05-17T09:00:00+02:00` or `2026-05-17T07:00:00Z`.
pub const TIME_PATTERN: &str = r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";

/// The shape of an IANA time zone name (`UTC`, `Europe/Berlin`, `America/Argentina/Buenos_Aires`).
pub const TIME_ZONE_PATTERN: &str = r"^(UTC|[A-Z][A-Za-z_+-]{1,30}(/[A-Za-z0-9_+-]{1,30}){1,2})$";

/// The longest `cursor` of `list_tasks`: a creation time (20 characters at
/// most), `:` and a listed id, so every `next_cursor` given out fits.
const CURSOR_MAX_CHARS: u32 = 21 + LISTED_ID_MAX_CHARS as u32;

/// The shape of a `cursor` of `list_tasks`: `<created_at>:<id>`, a number of
/// milliseconds and a [listed id](crate::row::listed_id) (a hand-edited row's id is
/// shown as it is written, cut short when long), so that a caller, or a
/// generator of sample arguments, sees from the schema that not every
/// string is one.
const CURSOR_PATTERN: &str = "^-?[0-9]{1,19}:";

/// Tasks `list_tasks` shows when the call gives no `limit`.
const LIST_DEFAULT_LIMIT: u32 = 50;

/// The largest `limit` of `list_tasks`.
const LIST_MAX_LIMIT: u32 = 500;

/// How far ahead from its first run a recurring schedule's runs are checked
/// against the shortest interval: eight days, so every weekday and every
/// boundary between two days is seen (month ends and DST changes are
/// visited after that: `Schedule::interval_shorter_than`).
const INTERVAL_CHECK_SPAN: Duration = Duration::from_secs(8 * 86_400);

/// The most runs read for that check, all its windows together. The first
/// eight days fit unless runs come under 35 s apart (8 days / 20,000; runs
/// of 5-field cron are a minute apart at least, `every Ns` runs evenly
/// spaced); a schedule running every few minutes uses it up after a few
/// month ends, whose gaps are then the ones of every other day.
const INTERVAL_CHECK_MAX_RUNS: usize = 20_000;

/// How long the address check of a new `api_call` may wait for name resolution.
const PREFLIGHT_BUDGET: Duration = Duration::from_secs(3);

/// What the tools share: the store, the zone of times without one, the
/// `api_call` client (for its address check) and the firing loop's bell.
#[derive(Debug)]
pub struct Scheduler {
    /// The tasks.
    pub store: Arc<Store>,
    /// The zone of reminders and of schedules that name none.
    pub default_zone: String,
    /// The client `api_call` tasks go through.
    pub client: GuardedClient,
    /// Rung when a task is added, so the loop looks again.
    pub wake: Arc<Notify>,
}

/// Arguments of `add_reminder`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddReminder {
    /// When to remind: `{"delay": "5m"}` (from now) or `{"at": "2026-05-17T09:00:00+02:00"}`.
    pub when: When,
    /// What to remind the user of, e.g. "call mom".
    #[schemars(length(min = 1, max = 4000))]
    pub message: String,
}

/// When a reminder fires.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum When {
    /// After a delay.
    Delay {
        /// How long from now, e.g. `30s`, `5m`, `2h`, `1d`, `1h30m`.
        #[schemars(regex(pattern = DELAY_PATTERN), length(max = 40))]
        delay: String,
    },
    /// At a time.
    At {
        /// An RFC 3339 time with offset, e.g. `2026-05-17T09:00:00+02:00`. A time already past fires at once.
        #[schemars(regex(pattern = TIME_PATTERN), extend("format" = "date-time"))]
        at: String,
    },
}

/// Arguments of `add_recurring_task`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AddRecurringTask {
    /// When it runs: `daily 9am`, `weekdays 6pm`, `weekends 10:30`, `monday 10:30`, `hourly`, `every 15m`, `every 2h`, or five cron fields `minute hour day-of-month month day-of-week` such as `30 9 * * 1-5`.
    #[schemars(regex(pattern = SCHEDULE_PATTERN), length(max = 200))]
    pub schedule: String,
    /// The IANA time zone the schedule is read in, e.g. `Europe/Berlin`; default: the module's setting (UTC unless set).
    #[schemars(regex(pattern = TIME_ZONE_PATTERN))]
    pub timezone: Option<String>,
    /// What the task is for, in a few words.
    #[schemars(length(min = 1, max = 500))]
    pub description: String,
    /// What to do each time it runs; `task_type` picks the kind.
    pub execution_data: ExecutionData,
    /// Stop after this many runs.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_runs: Option<u32>,
    /// No run after this time (RFC 3339 with offset).
    #[schemars(regex(pattern = TIME_PATTERN), extend("format" = "date-time"))]
    pub until: Option<String>,
}

/// Arguments of `list_tasks`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListTasks {
    /// Only tasks with this status (default `all`).
    #[serde(default)]
    pub status: TaskStatus,
    /// Show at most this many of the newest tasks (default 50).
    #[schemars(range(min = 1, max = LIST_MAX_LIMIT))]
    pub limit: Option<u32>,
    /// Skip this many of the newest tasks first (after `cursor`, when
    /// given), to see older ones (default 0). `cursor` pages more reliably.
    pub skip: Option<u32>,
    /// Show only tasks older than those of an earlier answer: its
    /// `next_cursor`. Tasks added or removed meanwhile do not shift the page.
    #[schemars(length(max = CURSOR_MAX_CHARS), regex(pattern = CURSOR_PATTERN))]
    pub cursor: Option<String>,
}

/// A task's status, as a filter.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Every task.
    #[default]
    All,
    /// It will run again.
    Active,
    /// It ran for the last time.
    Done,
    /// It was cancelled.
    Cancelled,
    /// Its one run could not be delivered.
    Failed,
}

/// Arguments of `cancel_task`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelTask {
    /// The task's id, from `add_reminder`, `add_recurring_task` or `list_tasks`.
    #[schemars(length(min = 1, max = 64))]
    pub task_id: String,
}

/// Arguments of `get_current_time`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetCurrentTime {
    /// An IANA time zone to show the time in too, e.g. `Asia/Tokyo`; default: the module's setting.
    #[schemars(regex(pattern = TIME_ZONE_PATTERN))]
    pub timezone: Option<String>,
}

/// A scheduled reminder.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReminderAdded {
    /// The task's id (for `cancel_task`).
    pub task_id: String,
    /// When it fires (RFC 3339 with offset).
    pub next_run: String,
}

/// A scheduled recurring task.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecurringAdded {
    /// The task's id (for `cancel_task`).
    pub task_id: String,
    /// The schedule in cron form (5 fields, or 6 with seconds first).
    pub schedule: String,
    /// The time zone it runs in.
    pub timezone: String,
    /// Its next three runs (RFC 3339 with offset; fewer when `max_runs` or `until` end it sooner).
    pub next_runs: Vec<String>,
}

/// The caller's tasks.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TaskList {
    /// The newest tasks that fit `limit` and the answer's size budget, oldest first.
    pub tasks: Vec<TaskView>,
    /// How many tasks match `status` in all: more than `tasks` holds when
    /// older ones were left out (filter by `status` to see others).
    pub total: u64,
    /// Present when older tasks match too: pass it as `cursor` to see them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The current time.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CurrentTime {
    /// Now in UTC (RFC 3339).
    pub utc: String,
    /// Now in `timezone` (RFC 3339 with offset).
    pub local: String,
    /// The zone of `local`.
    pub timezone: String,
    /// Now in seconds since 1970.
    pub unix_seconds: i64,
}

/// Remind the user of something once: after a delay ("in 5 minutes") or
/// at a time. The reminder is delivered to the agent when it is due.
#[tool(timeout_seconds = 30)]
pub async fn add_reminder(ctx: Context, args: AddReminder) -> Result<ReminderAdded, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let scheduler = ctx.state::<Scheduler>()?;
    let limits = scheduler.store.limits();
    let now = Timestamp::now();
    let due = match &args.when {
        When::Delay { delay } => now.as_millisecond() + parse_delay(delay)?,
        When::At { at } => parse_time("when.at", at)?.max(now.as_millisecond()),
    };
    check_ahead(due, now, limits.max_ahead)?;
    let message = args.message;
    check_data_size("message", message.len() as u64, limits.max_data_bytes)?;
    let execution_data = ExecutionData::Reminder { message: message.clone() };
    let spec = TaskSpec {
        user_id,
        task_type: execution_data.task_type().into(),
        description: message,
        execution_data: serde_json::to_value(&execution_data)
            .map_err(|e| ToolError::execution_failed(e.to_string()))?,
        schedule: None,
        timezone: scheduler.default_zone.clone(),
        max_runs: Some(1),
        until: None,
    };
    let task = NewTask { spec, next_run: due };
    let task = add(&ctx, &scheduler, task).await?;
    let zone = zone_of(&task);
    Ok(ReminderAdded { task_id: task.id.to_string(), next_run: rfc3339(due, &zone) })
}

/// Schedule a task that repeats: a reminder, a prompt for the agent to run,
/// or an HTTP request whose response is delivered. Returns the schedule in
/// cron form and its next three runs.
#[tool(timeout_seconds = 30)]
pub async fn add_recurring_task(ctx: Context, args: AddRecurringTask) -> Result<RecurringAdded, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let scheduler = ctx.state::<Scheduler>()?;
    let limits = scheduler.store.limits();
    let schedule = Schedule::parse(&args.schedule).map_err(|e| invalid("schedule", e))?;
    let zone_name = args.timezone.unwrap_or_else(|| scheduler.default_zone.clone());
    let zone = time_zone(&zone_name).map_err(|e| invalid("timezone", e))?;
    let until = args.until.as_deref().map(|until| parse_time("until", until)).transpose()?;
    let now = Timestamp::now();
    let (max_ahead, min_interval) = (limits.max_ahead, limits.min_interval);
    check_runs(schedule.clone(), zone.clone(), now, max_ahead, min_interval, until, args.max_runs).await?;
    let sample = schedule.upcoming(now, &zone, 3).map_err(|e| invalid("schedule", e))?;
    let max_runs = args.max_runs.map(|n| n as usize).unwrap_or(usize::MAX);
    let runs: Vec<i64> = sample
        .iter()
        .map(|t| t.as_millisecond())
        .take_while(|t| until.is_none_or(|until| *t <= until))
        .take(max_runs.min(3))
        .collect();
    let Some(first) = runs.first().copied() else {
        return Err(ToolError::execution_failed("the schedule has no run before `until`; nothing was scheduled"));
    };
    check_ahead(first, now, limits.max_ahead)?;
    let data_size = serde_json::to_vec(&args.execution_data).map_or(u64::MAX, |bytes| bytes.len() as u64);
    check_data_size("execution_data", data_size, limits.max_data_bytes)?;
    if let ExecutionData::ApiCall { url, .. } = &args.execution_data {
        preflight(&scheduler.client, url).await?;
    }
    let spec = TaskSpec {
        user_id,
        task_type: args.execution_data.task_type().into(),
        description: args.description,
        execution_data: serde_json::to_value(&args.execution_data)
            .map_err(|e| ToolError::execution_failed(e.to_string()))?,
        schedule: Some(schedule.as_cron().to_owned()),
        timezone: zone_name.clone(),
        max_runs: args.max_runs,
        until,
    };
    let task = NewTask { spec, next_run: first };
    let task = add(&ctx, &scheduler, task).await?;
    Ok(RecurringAdded {
        task_id: task.id.to_string(),
        schedule: schedule.as_cron().to_owned(),
        next_runs: runs.iter().map(|ms| rfc3339(*ms, &zone)).collect(),
        timezone: zone_name,
    })
}

/// List the caller's scheduled tasks with their last run, next run, runs so
/// far and last outcome: the newest ones, up to `limit` and the answer's
/// size budget, and how many there are in all.
#[tool(read_only, idempotent)]
pub async fn list_tasks(ctx: Context, args: ListTasks) -> Result<TaskList, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let limit = args.limit.unwrap_or(LIST_DEFAULT_LIMIT).clamp(1, LIST_MAX_LIMIT);
    let status = match args.status {
        TaskStatus::All => None,
        TaskStatus::Active => Some("active"),
        TaskStatus::Done => Some("done"),
        TaskStatus::Cancelled => Some("cancelled"),
        TaskStatus::Failed => Some("failed"),
    };
    let skip = args.skip.unwrap_or(0);
    let after = args.cursor.as_deref().map(parse_cursor).transpose()?;
    let listing =
        ctx.blocking(move |s: &Scheduler| s.store.list(&user_id, status, after.as_ref(), limit, skip)).await?;
    let budget = ctx.state::<Scheduler>()?.store.limits().list_max_bytes;
    let tasks = within_bytes(listing.tasks.into_iter(), budget);
    // The oldest shown is the first: older ones are on the next page.
    let next_cursor = match tasks.first() {
        Some((key, _)) if listing.remaining > tasks.len() as u64 => Some(format!("{}:{}", key.created_at, key.id)),
        _ => None,
    };
    Ok(TaskList { tasks: tasks.into_iter().map(|(_, view)| view).collect(), total: listing.total, next_cursor })
}

/// The [`TaskKey`] a `cursor` (a `next_cursor`) stands for: `<created_at>:<id>`.
fn parse_cursor(text: &str) -> Result<TaskKey, ToolError> {
    let key = text
        .split_once(':')
        .and_then(|(created_at, id)| Some(TaskKey { created_at: created_at.parse().ok()?, id: id.to_owned() }));
    key.ok_or_else(|| {
        let shown: String = text.chars().take(64).collect();
        ToolError::invalid_arguments(format!(
            "arguments.cursor {shown:?} is not a cursor; pass the next_cursor of an earlier list_tasks answer"
        ))
    })
}

/// The leading tasks (newest first) whose views' JSON fits in `budget`
/// bytes together, oldest first, each with its key; always the first one,
/// so that one task larger than the budget (`SCHEDULER_MAX_DATA_BYTES` may
/// exceed it) is still seen and paging moves past it.
fn within_bytes(newest_first: impl Iterator<Item = Task>, budget: u64) -> Vec<(TaskKey, TaskView)> {
    let mut used = 0u64;
    let mut shown: Vec<(TaskKey, TaskView)> = newest_first
        .map(|task| (task.key(), TaskView::of(task)))
        .enumerate()
        .take_while(|(index, (_, view))| {
            used = used.saturating_add(serde_json::to_vec(view).map_or(u64::MAX, |bytes| bytes.len() as u64));
            *index == 0 || used <= budget
        })
        .map(|(_, shown)| shown)
        .collect();
    shown.reverse();
    shown
}

/// Cancel one of the caller's tasks: it will not run again.
#[tool(permission = "user", destructive, idempotent)]
pub async fn cancel_task(ctx: Context, args: CancelTask) -> Result<TaskView, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let id = task_id(&args.task_id)?;
    let now = Timestamp::now().as_millisecond();
    let abandoned = ctx.given_up();
    let task = ctx.blocking(move |s: &Scheduler| s.store.cancel(&user_id, id, now, abandoned)).await?;
    Ok(TaskView::of(task))
}

/// The current date and time, in UTC and in a time zone.
#[tool(read_only, idempotent)]
pub async fn get_current_time(ctx: Context, args: GetCurrentTime) -> Result<CurrentTime, ToolError> {
    let scheduler = ctx.state::<Scheduler>()?;
    let name = args.timezone.unwrap_or_else(|| scheduler.default_zone.clone());
    let zone = time_zone(&name).map_err(|e| invalid("timezone", e))?;
    let now = Timestamp::now();
    let ms = now.as_millisecond();
    Ok(CurrentTime {
        utc: rfc3339(ms, &TimeZone::UTC).replace("+00:00", "Z"),
        local: rfc3339(ms, &zone),
        timezone: name,
        unix_seconds: now.as_second(),
    })
}

/// Stores `task` and wakes the firing loop.
async fn add(ctx: &Context, scheduler: &Scheduler, task: NewTask) -> Result<Task, ToolError> {
    let now = Timestamp::now().as_millisecond();
    let abandoned = ctx.given_up();
    let task = ctx.blocking(move |s: &Scheduler| s.store.add(task, now, abandoned)).await?;
    scheduler.wake.notify_one();
    Ok(task)
}

/// What [`check_runs`] found wrong with a schedule, if anything.
enum RunsCheck {
    /// Runs within the limits.
    Fine,
    /// No first run within `max_ahead`.
    NoneWithin,
    /// No run within `max_ahead` after the first, which neither `until` nor
    /// `max_runs` makes the last: the firing loop would mark the task failed.
    ApartFurther,
    /// Runs this close at times, closer than `shortest`.
    Closer(Duration),
}

/// Refuses a schedule with no run within `max_ahead`, searched no further
/// (one that never runs would have croner search to the year 5000); one
/// with no run within `max_ahead` after its first, unless `until` or
/// `max_runs` ends it there (the firing loop, which searches the next run no
/// further, would mark it failed once it fired); or one whose runs come
/// closer than `shortest` at times. Reading up to twice `max_ahead` of the
/// calendar and eight days of runs (up to `INTERVAL_CHECK_MAX_RUNS` cron
/// evaluations) is CPU work, so it is done on a blocking thread, leaving the
/// async workers to other calls.
async fn check_runs(
    schedule: Schedule,
    zone: TimeZone,
    now: Timestamp,
    max_ahead: Duration,
    shortest: Duration,
    until: Option<i64>,
    max_runs: Option<u32>,
) -> Result<(), ToolError> {
    let checked = tokio::task::spawn_blocking(move || -> Result<RunsCheck, ScheduleError> {
        let Some(first) = schedule.first_run_within(now, &zone, max_ahead)? else { return Ok(RunsCheck::NoneWithin) };
        let searched_to =
            first.as_millisecond().saturating_add(i64::try_from(max_ahead.as_millis()).unwrap_or(i64::MAX));
        // As `firing::next_run` decides after the first run: `until` before the end of the search ends the task.
        let goes_on = max_runs.is_none_or(|max| max > 1) && until.is_none_or(|until| until >= searched_to);
        if goes_on && schedule.first_run_within(first, &zone, max_ahead)?.is_none() {
            return Ok(RunsCheck::ApartFurther);
        }
        let gap = schedule.interval_shorter_than(shortest, now, INTERVAL_CHECK_SPAN, &zone, INTERVAL_CHECK_MAX_RUNS)?;
        Ok(gap.map_or(RunsCheck::Fine, RunsCheck::Closer))
    })
    .await?
    .map_err(|e| invalid("schedule", e))?;
    let days = max_ahead.as_secs() / 86_400;
    match checked {
        RunsCheck::Fine => Ok(()),
        RunsCheck::NoneWithin => Err(ToolError::invalid_arguments(format!(
            "arguments.schedule has no run in the next {days} days, the limit (SCHEDULER_MAX_AHEAD_DAYS), as far as it \
             is searched; write a schedule that runs sooner"
        ))),
        RunsCheck::ApartFurther => Err(ToolError::invalid_arguments(format!(
            "arguments.schedule has no run in the {days} days after its first run, the limit \
             (SCHEDULER_MAX_AHEAD_DAYS), as far as it is searched: its runs are further apart than that, and the task \
             would be marked failed after its first run; write a schedule that runs more often, or end it there with \
             `until` or `max_runs`"
        ))),
        RunsCheck::Closer(gap) => Err(ToolError::invalid_arguments(format!(
            "arguments.schedule runs every {} seconds at times; the shortest interval allowed is {} seconds \
             (SCHEDULER_MIN_INTERVAL_SECONDS)",
            gap.as_secs(),
            shortest.as_secs()
        ))),
    }
}

/// Milliseconds of a delay such as `1h30m`.
fn parse_delay(text: &str) -> Result<i64, ToolError> {
    let mut total: i64 = 0;
    let mut number = String::new();
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: i64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            _ => 0,
        };
        let value: i64 = number.parse().unwrap_or(-1);
        if unit == 0 || value < 0 {
            return Err(ToolError::invalid_arguments(format!(
                "arguments.delay {text:?} is not a delay; write e.g. 30s, 5m, 2h, 1d or 1h30m"
            )));
        }
        total = total.saturating_add(value.saturating_mul(unit));
        number.clear();
    }
    Ok(total.saturating_mul(1000))
}

/// Milliseconds since 1970 of an RFC 3339 time.
fn parse_time(argument: &str, text: &str) -> Result<i64, ToolError> {
    text.trim().replace(' ', "T").parse::<Timestamp>().map(|t| t.as_millisecond()).map_err(|e| {
        ToolError::invalid_arguments(format!(
            "arguments.{argument} {text:?} is not an RFC 3339 time ({e}); write e.g. 2026-05-17T09:00:00+02:00"
        ))
    })
}

/// Refuses a first run further ahead than the limit.
fn check_ahead(due: i64, now: Timestamp, max_ahead: Duration) -> Result<(), ToolError> {
    let limit = now.checked_add((max_ahead.as_secs() as i64).seconds()).map_or(i64::MAX, |t| t.as_millisecond());
    if due > limit {
        return Err(ToolError::invalid_arguments(format!(
            "the first run would be more than {} days ahead, the limit (SCHEDULER_MAX_AHEAD_DAYS); schedule something sooner",
            max_ahead.as_secs() / 86_400
        )));
    }
    Ok(())
}

/// Refuses `argument` (`message` or `execution_data`) of `size` bytes when it is over the limit.
fn check_data_size(argument: &str, size: u64, limit: u64) -> Result<(), ToolError> {
    if size > limit {
        return Err(ToolError::invalid_arguments(format!(
            "arguments.{argument} is {size} bytes, more than the limit of {limit} bytes per task (SCHEDULER_MAX_DATA_BYTES)"
        )));
    }
    Ok(())
}

/// Refuses an `api_call` URL the guarded client would refuse.
async fn preflight(client: &GuardedClient, url: &str) -> Result<(), ToolError> {
    match tokio::time::timeout(PREFLIGHT_BUDGET, client.preflight(url)).await {
        Ok(Ok(_)) | Err(_) => Ok(()),
        Ok(Err(error @ GuardedError::Refused { .. })) => Err(ToolError::permission_denied(error.to_string())),
        Ok(Err(error)) => Err(invalid("execution_data.url", error)),
    }
}

/// The task id `text` (`arguments.task_id`); a text that is not a UUID
/// is refused naming the argument, never taken for some other id.
fn task_id(text: &str) -> Result<Uuid, ToolError> {
    Uuid::try_parse(text.trim()).map_err(|_| {
        let shown: String = text.chars().take(64).collect();
        ToolError::invalid_arguments(format!(
            "arguments.task_id {shown:?} is not a task id (a UUID); list_tasks shows your task ids"
        ))
    })
}

fn zone_of(task: &Task) -> TimeZone {
    TimeZone::get(&task.spec.timezone).unwrap_or(TimeZone::UTC)
}

fn invalid(argument: &str, error: impl std::fmt::Display) -> ToolError {
    ToolError::invalid_arguments(format!("arguments.{argument}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_add_up_their_parts() {
        assert_eq!(parse_delay("30s").unwrap(), 30_000);
        assert_eq!(parse_delay("1h30m").unwrap(), 5_400_000);
        assert_eq!(parse_delay(" 2 d ").unwrap(), 172_800_000);
        assert!(parse_delay("5y").is_err());
    }

    #[test]
    fn a_task_over_a_budget_is_refused_naming_the_argument_and_the_setting() {
        let message = check_data_size("message", 2_000, 1_000).unwrap_err().to_string();
        assert!(
            message.contains(
                "arguments.message is 2000 bytes, more than the limit of 1000 bytes per task (SCHEDULER_MAX_DATA_BYTES)"
            ),
            "{message}"
        );
        assert!(check_data_size("execution_data", 1_000, 1_000).is_ok());
        let now = Timestamp::now();
        let day = Duration::from_secs(86_400);
        let far = check_ahead(now.as_millisecond() + 2 * 86_400_000, now, day).unwrap_err().to_string();
        assert!(far.contains("more than 1 days ahead, the limit (SCHEDULER_MAX_AHEAD_DAYS)"), "{far}");
    }

    #[test]
    fn an_id_or_a_cursor_that_is_not_one_is_refused_naming_the_argument() {
        let error = task_id("abc").unwrap_err();
        assert_eq!(error.kind(), module_sdk::ErrorKind::InvalidArguments);
        assert!(error.to_string().contains("arguments.task_id \"abc\" is not a task id (a UUID)"), "{error}");
        let id = Uuid::new_v4();
        assert_eq!(task_id(&format!(" {} ", id.to_string().to_uppercase())).unwrap(), id);
        let cursor = parse_cursor(&format!("17:{id}")).unwrap();
        assert_eq!((cursor.created_at, cursor.id), (17, id.to_string()));
        for bad in ["", "17", "x:abc", "99999999999999999999:abc"] {
            let error = parse_cursor(bad).unwrap_err().to_string();
            assert!(error.contains("arguments.cursor"), "{error}");
        }
    }

    #[test]
    fn the_schema_refuses_a_cursor_of_the_wrong_shape_and_takes_every_next_cursor() {
        let schema = serde_json::to_value(schemars::schema_for!(ListTasks)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let id = Uuid::new_v4();
        for cursor in [format!("17:{id}"), format!("{}:{id}", i64::MIN), "0:hand-edited id".to_owned()] {
            assert!(validator.is_valid(&serde_json::json!({"cursor": cursor})), "{cursor}");
        }
        for cursor in ["example", "another example", "x:abc", "17"] {
            assert!(!validator.is_valid(&serde_json::json!({"cursor": cursor})), "{cursor}");
        }
    }

    #[tokio::test]
    async fn the_interval_check_leaves_the_async_worker_free_and_answers_as_before() {
        // A run every minute: eight days of them, over ten thousand, to read.
        let schedule = Schedule::parse("every 1m").unwrap();
        let now = Timestamp::now();
        let ahead = Duration::from_secs(3660 * 86_400);
        let mut check = std::pin::pin!(check_runs(
            schedule.clone(),
            TimeZone::UTC,
            now,
            ahead,
            Duration::from_secs(60),
            None,
            None
        ));
        assert!(futures::poll!(check.as_mut()).is_pending(), "the check yields while it reads the runs elsewhere");
        check.await.unwrap();
        let refused =
            check_runs(schedule, TimeZone::UTC, now, ahead, Duration::from_secs(120), None, None).await.unwrap_err();
        let refused = refused.to_string();
        assert!(
            refused.contains("runs every 60 seconds at times; the shortest interval allowed is 120 seconds (SCHEDULER_MIN_INTERVAL_SECONDS)"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_schedule_with_no_run_within_the_limit_is_refused_naming_it() {
        let now = Timestamp::now();
        let ahead = Duration::from_secs(3660 * 86_400);
        // The weekday nearest a 31 February: no such day, and `W` is left to the bounded search.
        let never = Schedule::parse("0 0 31W 2 *").unwrap();
        let refused =
            check_runs(never, TimeZone::UTC, now, ahead, Duration::from_secs(60), None, None).await.unwrap_err();
        assert_eq!(refused.kind(), module_sdk::ErrorKind::InvalidArguments);
        let refused = refused.to_string();
        assert!(
            refused
                .contains("arguments.schedule has no run in the next 3660 days, the limit (SCHEDULER_MAX_AHEAD_DAYS)"),
            "{refused}"
        );
        // 29 February, within four years: accepted.
        let leap_day = Schedule::parse("0 0 29 2 *").unwrap();
        check_runs(leap_day, TimeZone::UTC, now, ahead, Duration::from_secs(60), None, None).await.unwrap();
    }

    #[tokio::test]
    async fn a_schedule_whose_runs_are_further_apart_than_the_limit_is_refused_unless_it_ends_after_the_first() {
        // 20 December, a 30-day limit: 1 January is within it, the 1 January after is not.
        let now: Timestamp = "2026-12-20T00:00:00Z".parse().unwrap();
        let ahead = Duration::from_secs(30 * 86_400);
        let minute = Duration::from_secs(60);
        let yearly = Schedule::parse("0 9 1 1 *").unwrap();
        let check = |until, max_runs| check_runs(yearly.clone(), TimeZone::UTC, now, ahead, minute, until, max_runs);
        let refused = check(None, None).await.unwrap_err();
        assert_eq!(refused.kind(), module_sdk::ErrorKind::InvalidArguments);
        let refused = refused.to_string();
        assert!(
            refused.contains(
                "arguments.schedule has no run in the 30 days after its first run, the limit \
                 (SCHEDULER_MAX_AHEAD_DAYS), as far as it is searched: its runs are further apart than that"
            ),
            "{refused}"
        );
        // An `until` inside the search after the first run, or a single run, makes the first the last.
        let first_ms = "2027-01-01T09:00:00Z".parse::<Timestamp>().unwrap().as_millisecond();
        check(Some(first_ms + 86_400_000), None).await.unwrap();
        check(None, Some(1)).await.unwrap();
        assert!(check(None, Some(2)).await.is_err());
        assert!(check(Some(first_ms + 31 * 86_400_000), None).await.is_err());
        // Weekly runs are well within it.
        let weekly = Schedule::parse("0 9 * * 1").unwrap();
        check_runs(weekly, TimeZone::UTC, now, ahead, minute, None, None).await.unwrap();
    }
}
