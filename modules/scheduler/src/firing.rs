//! The firing loop: claim the runs that are due, deliver each (making an
//! `api_call` first), then acknowledge it with the task's next run.
//!
//! A recurring task's next run is the first one after *now*, so a task that
//! missed several runs while the module was down fires once and resumes its
//! schedule. The loop sleeps until the next run is due (at most the poll
//! interval) and wakes early when a task is added. At start, and whenever
//! the wall clock goes back, it brings back the leases and next runs a
//! clock set ahead left far out ([`Store::rewind`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use guarded_http::header::{HeaderMap, HeaderName, HeaderValue};
use guarded_http::{GuardedClient, GuardedError, GuardedRequest, read_capped};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::delivery::{Event, Webhook};
use crate::schedule::Schedule;
use crate::store::{Next, Outcome, Store, Task};
use crate::task::{ExecutionData, rfc3339};

/// Everything the firing loop needs.
#[derive(Debug, Clone)]
pub struct Firing {
    /// The tasks.
    pub store: Arc<Store>,
    /// Where runs are delivered.
    pub webhook: Webhook,
    /// The client `api_call` tasks go through.
    pub client: GuardedClient,
    /// Most bytes of an `api_call` response kept.
    pub api_call_max_bytes: usize,
    /// This process's name in claims.
    pub worker: String,
    /// How long a claim holds.
    pub lease: Duration,
    /// Most runs claimed (and delivered concurrently) at once.
    pub batch: u32,
    /// Longest sleep between looks.
    pub poll: Duration,
    /// Rung when a task is added (and by the loop itself when a delivery ends).
    pub wake: Arc<Notify>,
}

impl Firing {
    /// Fires due runs until the process ends, one [tick](Self::fire_due)
    /// after another. Each run is delivered on a task of its own, at most
    /// `batch` at once, and the loop claims more as soon as a slot frees: a
    /// run whose `api_call` or delivery hangs (up to its timeouts and
    /// retries) holds one slot, not every other run due meanwhile. Every
    /// tick renews the leases of the runs this process is delivering, free
    /// slots or not, and while there are any it ticks at least three times
    /// a lease, so no other process takes over a run still being delivered
    /// here. A run whose lease lapsed anyway (the store failed meanwhile) is
    /// claimed again but not sent again while its delivery lasts. It returns
    /// when `stop` is rung, between two ticks (never inside one, so no claim
    /// is written after it returned).
    pub async fn run(self, stop: Arc<Notify>) {
        let firing = Arc::new(self);
        let in_flight = InFlight::new(firing.batch);
        let mut clock = ClockWatch::default();
        loop {
            if clock.went_back(Timestamp::now().as_millisecond()) && !firing.rewind().await {
                clock = ClockWatch::default();
            }
            let sleep = match firing.tick(&in_flight).await {
                // Every slot is delivering; a run that ends rings the bell.
                Ok(tick) if tick.free == 0 => firing.poll,
                // Every free slot took a run: more may be due.
                Ok(tick) if tick.claimed >= tick.free => continue,
                Ok(_) => firing.until_next_look().await,
                // Not at once: a store that fails now (a full disk, a lock
                // held past the busy timeout) would fail again in a tight loop.
                Err(error) => {
                    tracing::error!(%error, retry_in_ms = firing.poll.as_millis(), "firing due tasks failed; retrying");
                    firing.poll
                }
            };
            let sleep = if in_flight.is_empty() { sleep } else { sleep.min(firing.lease / 3) };
            tokio::select! {
                () = tokio::time::sleep(sleep) => {}
                () = firing.wake.notified() => {}
                () = stop.notified() => return,
            }
        }
    }

    /// Starts [`Firing::run`] on a task of its own; [`Running::stop`] ends it.
    pub fn start(self) -> Running {
        let (store, worker, stop) = (self.store.clone(), self.worker.clone(), Arc::new(Notify::new()));
        Running { store, worker, task: tokio::spawn(self.run(stop.clone())), stop }
    }

    /// One tick of [`Firing::run`] with slots of its own: claims up to
    /// `batch` due runs and delivers them, all of it before it returns; how
    /// many.
    pub async fn fire_due(self: &Arc<Self>) -> Result<usize, String> {
        let tick = self.tick(&InFlight::new(self.batch)).await?;
        for delivery in tick.started {
            delivery.await.map_err(|e| e.to_string())?;
        }
        Ok(tick.claimed)
    }

    /// One look at the database: renews the leases of the runs in
    /// `in_flight`, claims as many due runs as it has free slots, and starts
    /// delivering each on a task of its own (one already in flight is
    /// skipped).
    async fn tick(self: &Arc<Self>, in_flight: &InFlight) -> Result<Tick, String> {
        let free = in_flight.free();
        let delivering = in_flight.ids();
        let now = Timestamp::now().as_millisecond();
        let lease_until = now.saturating_add(i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX));
        let (store, worker) = (self.store.clone(), self.worker.clone());
        let limit = u32::try_from(free).unwrap_or(u32::MAX);
        let due = tokio::task::spawn_blocking(move || {
            if !delivering.is_empty() {
                store.renew(&worker, &delivering, now, lease_until)?;
            }
            if limit == 0 {
                return Ok(Vec::new());
            }
            store.claim(&worker, now, lease_until, limit)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        let claimed = due.len();
        let mut started = Vec::with_capacity(claimed);
        for task in due {
            let Some(delivering) = in_flight.start(task.id, self.wake.clone()).await else { continue };
            let firing = self.clone();
            started.push(tokio::spawn(async move {
                firing.fire(task).await;
                drop(delivering);
            }));
        }
        Ok(Tick { free, claimed, started })
    }

    /// [`Store::rewind`] at now (the clock went back, or the loop starts):
    /// leases and recurring next runs a clock set ahead left far out are
    /// brought back. False when the store failed (to try again next look).
    async fn rewind(&self) -> bool {
        let store = self.store.clone();
        let now = Timestamp::now().as_millisecond();
        let lease_until = now.saturating_add(i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX));
        let rewound = tokio::task::spawn_blocking(move || store.rewind(now, lease_until))
            .await
            .map_err(|e| e.to_string())
            .and_then(|rewound| rewound.map_err(|e| e.to_string()));
        match rewound {
            Ok((0, 0)) => true,
            Ok((leases, next_runs)) => {
                tracing::warn!(leases, next_runs, "the clock was ahead: leases and next runs set from now");
                true
            }
            Err(error) => {
                tracing::error!(%error, "could not check the times a clock set ahead left; trying again");
                false
            }
        }
    }

    /// How long to sleep: until the next run, at most the poll interval.
    async fn until_next_look(&self) -> Duration {
        let store = self.store.clone();
        let now = Timestamp::now().as_millisecond();
        let next = tokio::task::spawn_blocking(move || store.next_wake(now)).await.ok().and_then(Result::ok).flatten();
        match next {
            Some(at) => Duration::from_millis(u64::try_from(at - now).unwrap_or(0)).min(self.poll),
            None => self.poll,
        }
    }

    /// Delivers one claimed run and acknowledges it.
    async fn fire(&self, task: Task) {
        let outcome = match self.webhook.deliver(&self.event(&task).await).await {
            Ok(()) => Outcome::Delivered,
            Err(why) => {
                tracing::warn!(task = %task.id, %why, "a run could not be delivered");
                Outcome::Failed(why)
            }
        };
        let now = Timestamp::now();
        let (store, worker) = (self.store.clone(), self.worker.clone());
        // The search for the next run is CPU work too: off the async workers.
        let finished = tokio::task::spawn_blocking(move || {
            let next = next_run(&task, now, store.limits().max_ahead);
            if let Next::NoneWithin(why) = &next {
                tracing::error!(task = %task.id, user = %task.spec.user_id, reason = %why,
                    "a recurring task has no run within SCHEDULER_MAX_AHEAD_DAYS; it is marked failed");
            }
            store.finish(&task, &worker, &outcome, &next, now.as_millisecond())
        })
        .await;
        match finished {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => tracing::warn!("a run's claim lapsed before it was acknowledged; it may fire again"),
            Ok(Err(error)) => tracing::error!(%error, "acknowledging a run failed; it will fire again"),
            Err(error) => tracing::error!(%error, "acknowledging a run failed; it will fire again"),
        }
    }

    /// The event of one run; an `api_call` is made here and its outcome included.
    async fn event(&self, task: &Task) -> Event {
        let zone = TimeZone::get(&task.spec.timezone).unwrap_or(TimeZone::UTC);
        let scheduled = task.next_run.unwrap_or_default();
        let mut body = Map::new();
        body.insert("task_id".into(), json!(task.id));
        body.insert("user_id".into(), json!(task.spec.user_id));
        body.insert("task_type".into(), json!(task.spec.task_type));
        body.insert("description".into(), json!(task.spec.description));
        body.insert("execution_data".into(), task.spec.execution_data.clone());
        if let Ok(ExecutionData::ApiCall { url, method, headers, body: request_body }) =
            serde_json::from_value(task.spec.execution_data.clone())
        {
            body.insert("api_call_result".into(), self.api_call(url, method.as_method(), headers, request_body).await);
        }
        body.insert("scheduled_at".into(), json!(rfc3339(scheduled, &zone)));
        body.insert("fired_at".into(), json!(rfc3339(Timestamp::now().as_millisecond(), &zone)));
        Event { id: format!("{}:{scheduled}", task.id), body }
    }

    /// Makes an `api_call` through the guarded client: `{status, body,
    /// truncated}`, or `{error}` when it was refused or failed.
    async fn api_call(
        &self,
        url: String,
        method: guarded_http::Method,
        headers: std::collections::BTreeMap<String, String>,
        body: Option<String>,
    ) -> Value {
        let mut header_map = HeaderMap::new();
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
                header_map.insert(name, value);
            }
        }
        let request = GuardedRequest { method, url, headers: header_map, body: body.map(String::into_bytes) };
        let max = self.api_call_max_bytes;
        let budget = self.client.limits().total;
        let exchange = async {
            let (url, response) = self.client.send(request).await?;
            let status = response.status().as_u16();
            let (bytes, truncated) = read_capped(&url, response, max).await?;
            Ok::<_, guarded_http::GuardedError>(json!({
                "status": status,
                "body": String::from_utf8_lossy(&bytes),
                "truncated": truncated,
            }))
        };
        match tokio::time::timeout(budget, exchange).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => api_call_error(&error, budget),
            Err(_) => api_call_error(&GuardedError::TimedOut(budget.as_secs()), budget),
        }
    }
}

/// `{error}` of a failed `api_call`. A time-out says the request's budget
/// however it was met: the client's own timer (which can fire while the
/// body is read, where it knows no budget) or the one around the exchange.
fn api_call_error(error: &GuardedError, budget: Duration) -> Value {
    match error {
        GuardedError::TimedOut(_) => {
            json!({"error": format!("the request took longer than {} seconds", budget.as_secs())})
        }
        other => json!({"error": other.to_string()}),
    }
}

/// A firing loop started by [`Firing::start`].
#[derive(Debug)]
pub struct Running {
    store: Arc<Store>,
    worker: String,
    task: JoinHandle<()>,
    stop: Arc<Notify>,
}

impl Running {
    /// Stops the loop (the process is stopping) and gives back the claims
    /// on the runs it was delivering, so that the process started next, or
    /// another on the same database, sends them at once rather than after
    /// `SCHEDULER_LEASE_SECONDS`; how many. A delivery still in flight ends
    /// with the process; a run it had sent is sent again, with the same
    /// `webhook-id`.
    pub async fn stop(self) -> Result<usize, String> {
        // Rung before it waits (a permit is kept): the loop ends after the
        // tick it is in, whose claims the release below then gives back.
        self.stop.notify_one();
        // Ended, or it panicked: either way it claims no more.
        let _ = self.task.await;
        let Self { store, worker, .. } = self;
        tokio::task::spawn_blocking(move || store.release(&worker))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

/// What one tick did.
struct Tick {
    /// Free slots when it began.
    free: usize,
    /// Runs it claimed.
    claimed: usize,
    /// The deliveries it started.
    started: Vec<JoinHandle<()>>,
}

/// The runs this process is delivering: at most `batch` at once, a slot
/// each, and their task ids, whose leases each tick renews and which are
/// not sent again while they are in flight.
#[derive(Debug)]
struct InFlight {
    slots: Arc<Semaphore>,
    ids: Arc<Mutex<HashSet<Uuid>>>,
}

impl InFlight {
    fn new(batch: u32) -> Self {
        Self { slots: Arc::new(Semaphore::new(batch as usize)), ids: Arc::default() }
    }

    /// Slots free now.
    fn free(&self) -> usize {
        self.slots.available_permits()
    }

    /// The runs in flight now.
    fn ids(&self) -> Vec<Uuid> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).iter().copied().collect()
    }

    fn is_empty(&self) -> bool {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
    }

    /// Takes a slot for the run of task `id` (waiting for one); `None` when
    /// that run is in flight already. Dropping what it gives rings `wake`.
    async fn start(&self, id: Uuid, wake: Arc<Notify>) -> Option<Delivering> {
        if !self.ids.lock().unwrap_or_else(PoisonError::into_inner).insert(id) {
            return None;
        }
        let mut delivering = Delivering { id, ids: self.ids.clone(), slot: None, wake };
        delivering.slot = Some(self.slots.clone().acquire_owned().await.ok()?);
        Some(delivering)
    }
}

/// One run in flight: its slot and its id in [`InFlight`], both given back
/// when it is dropped, whether its delivery ended, panicked or was
/// cancelled (else the run would stay in flight, never sent again, until a
/// restart).
#[derive(Debug)]
struct Delivering {
    id: Uuid,
    ids: Arc<Mutex<HashSet<Uuid>>>,
    slot: Option<OwnedSemaphorePermit>,
    wake: Arc<Notify>,
}

impl Drop for Delivering {
    fn drop(&mut self) {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        // The slot before the bell, so that the loop it wakes sees it free.
        drop(self.slot.take());
        self.wake.notify_one();
    }
}

/// How far back the wall clock may step (NTP corrects small errors) before
/// the loop looks for what a clock set ahead left ([`Store::rewind`]).
const CLOCK_BACK_MARGIN_MS: i64 = 1_000;

/// Notices the wall clock going back: the loop's memory of the latest
/// time it saw.
#[derive(Debug, Default)]
struct ClockWatch {
    latest: Option<i64>,
}

impl ClockWatch {
    /// True at the first look, and when `now` is more than
    /// [`CLOCK_BACK_MARGIN_MS`] before the latest time seen (which `now`
    /// then replaces).
    fn went_back(&mut self, now: i64) -> bool {
        let back = self.latest.is_none_or(|latest| now < latest.saturating_sub(CLOCK_BACK_MARGIN_MS));
        self.latest = Some(if back { now } else { self.latest.map_or(now, |latest| latest.max(now)) });
        back
    }
}

/// What follows this run: for a recurring task the first run after `now`
/// (missed runs collapse into the one that just fired), and after the one
/// that just fired (a clock that stepped back while it was delivered must
/// not schedule it again), within `max_runs` and `until`; [`Next::Ended`]
/// for a one-time reminder or a finished schedule. The run is searched for
/// no further than `max_ahead` (`SCHEDULER_MAX_AHEAD_DAYS`), as
/// `add_recurring_task` searches for the first: a schedule with none by
/// then (a hand edit's that never runs, which croner would search for up
/// to the year 5000) is [`Next::NoneWithin`].
pub fn next_run(task: &Task, now: Timestamp, max_ahead: Duration) -> Next {
    let Some(Ok(schedule)) = task.spec.schedule.as_deref().map(Schedule::from_normalized) else { return Next::Ended };
    if task.spec.max_runs.is_some_and(|max| task.runs.saturating_add(1) >= max) {
        return Next::Ended;
    }
    let zone = TimeZone::get(&task.spec.timezone).unwrap_or(TimeZone::UTC);
    let fired = task.next_run.and_then(|ms| Timestamp::from_millisecond(ms).ok());
    let after = fired.map_or(now, |fired| fired.max(now));
    let until = task.spec.until;
    let searched_to = after.as_millisecond().saturating_add(i64::try_from(max_ahead.as_millis()).unwrap_or(i64::MAX));
    match schedule.first_run_within(after, &zone, max_ahead) {
        Ok(Some(next)) if until.is_none_or(|until| next.as_millisecond() <= until) => Next::At(next.as_millisecond()),
        // None before `until` either, when it comes first: the schedule ended.
        Ok(None) if until.is_none_or(|until| until >= searched_to) => Next::NoneWithin(format!(
            "the schedule {:?} has no run in the {} days after this one, the limit (SCHEDULER_MAX_AHEAD_DAYS), as far \
             as it is searched",
            schedule.as_cron(),
            max_ahead.as_secs() / 86_400
        )),
        _ => Next::Ended,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskSpec;

    #[test]
    fn an_api_call_timed_out_while_its_body_was_read_names_its_budget() {
        let budget = Duration::from_secs(30);
        // The client's own timer, firing during the body, knows no budget.
        let error = api_call_error(&GuardedError::TimedOut(0), budget);
        assert_eq!(error["error"], "the request took longer than 30 seconds");
        let other = api_call_error(&GuardedError::TooManyRedirects(3), budget);
        assert!(!other["error"].as_str().unwrap().contains("30 seconds"), "{other}");
    }

    fn task(schedule: Option<&str>, runs: u32, max_runs: Option<u32>, until: Option<i64>) -> Task {
        let id = Uuid::new_v4();
        Task {
            id,
            stored_id: id.to_string(),
            spec: TaskSpec {
                user_id: "u".into(),
                task_type: "reminder".into(),
                description: "d".into(),
                execution_data: Value::Null,
                schedule: schedule.map(Into::into),
                timezone: "UTC".into(),
                max_runs,
                until,
            },
            status: "active".into(),
            next_run: Some(0),
            last_run: None,
            runs,
            last_outcome: None,
            created_at: 0,
            unreadable: None,
        }
    }

    #[tokio::test]
    async fn a_delivery_that_panics_or_is_cancelled_gives_back_its_slot_and_its_run() {
        let in_flight = InFlight::new(1);
        let wake = Arc::new(Notify::new());
        let id = Uuid::new_v4();
        let delivering = in_flight.start(id, wake.clone()).await.unwrap();
        assert!(in_flight.start(id, wake.clone()).await.is_none(), "a run in flight is not sent twice");
        assert_eq!((in_flight.free(), in_flight.ids()), (0, vec![id]));
        let panicked = tokio::spawn(async move {
            let _delivering = delivering;
            panic!("a delivery that panics");
        });
        assert!(panicked.await.unwrap_err().is_panic());
        assert_eq!((in_flight.free(), in_flight.ids()), (1, vec![]), "freed by the panic");

        let delivering = in_flight.start(id, wake.clone()).await.expect("its run can be sent again");
        let hanging = tokio::spawn(async move {
            let _delivering = delivering;
            std::future::pending::<()>().await;
        });
        hanging.abort();
        assert!(hanging.await.unwrap_err().is_cancelled());
        assert_eq!((in_flight.free(), in_flight.ids()), (1, vec![]), "freed by the cancel");
    }

    #[test]
    fn the_clock_is_seen_going_back_at_the_first_look_and_past_the_margin_only() {
        let mut clock = ClockWatch::default();
        assert!(clock.went_back(10_000), "the first look checks");
        assert!(!clock.went_back(50_000));
        assert!(!clock.went_back(49_000), "within the margin");
        assert!(!clock.went_back(50_500));
        assert!(clock.went_back(48_999), "more than the margin before the latest, 50 500");
        assert!(!clock.went_back(48_999), "the new latest");
        assert!(!clock.went_back(100_000_000_000), "forward is not back");
        assert!(clock.went_back(60_000), "back from far ahead");
    }

    /// `SCHEDULER_MAX_AHEAD_DAYS`' default.
    const AHEAD: Duration = Duration::from_secs(3660 * 86_400);

    #[test]
    fn a_clock_that_stepped_back_during_a_delivery_does_not_schedule_the_run_that_fired_again() {
        let fired = 3_600 * 24 * 1000;
        let mut daily = task(Some("0 0 * * *"), 0, None, None);
        daily.next_run = Some(fired);
        // Acknowledged half a second before the midnight it fired for.
        let now = Timestamp::from_millisecond(fired - 500).unwrap();
        assert_eq!(next_run(&daily, now, AHEAD), Next::At(fired + 86_400_000), "the next midnight, not this one again");
    }

    #[test]
    fn missed_runs_collapse_into_one_and_limits_end_the_schedule() {
        // Every minute, but the module was down for an hour: the next run is the first after now.
        let now = Timestamp::from_second(3_600 * 24 + 30).unwrap();
        let every_minute = task(Some("* * * * *"), 0, None, None);
        assert_eq!(next_run(&every_minute, now, AHEAD), Next::At((3_600 * 24 + 60) * 1000));
        assert_eq!(next_run(&task(None, 0, None, None), now, AHEAD), Next::Ended, "one-time");
        let third_of_three = task(Some("* * * * *"), 2, Some(3), None);
        assert_eq!(next_run(&third_of_three, now, AHEAD), Next::Ended, "the third run was the last");
        let until_now = task(Some("* * * * *"), 0, None, Some(now.as_millisecond()));
        assert_eq!(next_run(&until_now, now, AHEAD), Next::Ended, "until");
    }

    #[test]
    fn a_schedule_with_no_run_within_the_limit_ends_failed_with_why_unless_until_ended_it_first() {
        let now = "2026-03-01T00:00:00Z".parse::<Timestamp>().unwrap();
        // The weekday nearest a 31 February: never (a hand edit; the tools refuse it).
        let never = task(Some("0 0 31W 2 *"), 0, None, None);
        let Next::NoneWithin(why) = next_run(&never, now, AHEAD) else { panic!("not failed") };
        assert!(
            why.contains(
                "\"0 0 31W 2 *\" has no run in the 3660 days after this one, the limit (SCHEDULER_MAX_AHEAD_DAYS)"
            ),
            "{why}"
        );
        // A run beyond the limit counts as none: 29 February 2028 is not within a year.
        let leap_day = task(Some("0 0 29 2 *"), 0, None, None);
        let year = Duration::from_secs(366 * 86_400);
        assert!(matches!(next_run(&leap_day, now, year), Next::NoneWithin(_)));
        assert_eq!(next_run(&leap_day, now, year * 3), Next::At(1_835_395_200_000), "2028-02-29 within three");
        // An `until` before the limit ends the schedule first: done, not failed.
        let ended = task(Some("0 0 31W 2 *"), 0, None, Some(now.as_millisecond() + 86_400_000));
        assert_eq!(next_run(&ended, now, AHEAD), Next::Ended);
    }
}
