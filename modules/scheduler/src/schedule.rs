//! Schedules: the phrases a model writes ("daily 9am", "weekdays 6pm",
//! "monday 10:30", "every 15m") and 5-field cron expressions, normalized to
//! one cron form and evaluated in a time zone by `croner` on `jiff`.
//!
//! DST follows the Open Cron Pattern Specification, as croner implements
//! it: a fixed-time run whose wall-clock time falls in a spring-forward gap
//! runs once, at the first instant after the gap; one whose time occurs
//! twice on a fall-back day runs once, at the earlier instant. Interval
//! schedules (`every 15m`) run on real instants, so they keep their pace
//! through both transitions.

use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// What a model may write as a schedule: the phrases exactly, or five cron
/// fields (their values are checked by croner, which names the bad field).
pub const SCHEDULE_PATTERN: &str = r"^\s*(every\s+(minute|hour|((1|2|3|4|5|6|10|12|15|20|30)\s*(s|secs?|seconds?|m|mins?|minutes?))|((1|2|3|4|6|8|12)\s*(h|hrs?|hours?))|(1\s*(d|days?)))|hourly|(every\s+day|daily|weekdays|weekends|(sunday|monday|tuesday|wednesday|thursday|friday|saturday)s?|sun|mon|tue|tues|wed|thu|thur|thurs|fri|sat)(\s+at)?\s+(([01]?[0-9]|2[0-3])(:[0-5][0-9])?|(0?[1-9]|1[0-2])(:[0-5][0-9])?\s*[ap]m)|[0-9A-Za-z*,/?#-]+(\s+[0-9A-Za-z*,/?#-]+){4})\s*$";

/// Intervals of `every N<unit>` that keep a steady pace across hour and day
/// boundaries, by unit: they divide the next unit up evenly.
const EVEN_SECONDS: &[u32] = &[1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
const EVEN_MINUTES: &[u32] = &[1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
const EVEN_HOURS: &[u32] = &[1, 2, 3, 4, 6, 8, 12];

/// Why a schedule could not be read; every message tells the model what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Neither a known phrase nor a valid cron expression.
    #[error(
        "cannot read the schedule {0:?} ({1}); write \"daily 9am\", \"weekdays 6pm\", \"monday 10:30\", \"every 15m\", or five cron fields \"minute hour day-of-month month day-of-week\" such as \"30 9 * * 1-5\""
    )]
    Unreadable(String, String),
    /// An `every` interval that does not divide its unit evenly.
    #[error(
        "\"every {0}{1}\" does not divide evenly into the {2}; use one of {3} {1}, or a cron expression such as \"0 9,13,17 * * *\""
    )]
    UnevenInterval(u32, char, &'static str, String),
    /// A time of day out of range.
    #[error("{0:?} is not a time of day; write 9am, 6:30pm or 18:30")]
    BadTime(String),
    /// The schedule never fires again.
    #[error("the schedule {0:?} has no future run")]
    NeverRuns(String),
    /// Days of the month that none of the months named has (`0 0 30 2 *`).
    #[error(
        "the schedule {0:?} never runs: no month in {2:?} has a day {1:?} (February has 29 days at most; April, June, September and November 30); use days 1-28, or L for the last day of the month"
    )]
    NoSuchDay(String, String, String),
}

/// A schedule in its normalized cron form, ready to evaluate.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    text: String,
}

impl Schedule {
    /// Reads a phrase or a 5-field cron expression.
    pub fn parse(input: &str) -> Result<Self, ScheduleError> {
        let text = match phrase(input)? {
            Some(cron) => cron,
            None => {
                let fields = input.split_whitespace().collect::<Vec<_>>();
                if fields.len() != 5 {
                    let why = format!("{} fields, not a phrase or the 5 fields of a cron expression", fields.len());
                    return Err(ScheduleError::Unreadable(shown(input), why));
                }
                fields.join(" ")
            }
        };
        Self::from_normalized(&text).map_err(|e| match e {
            ScheduleError::Unreadable(_, why) => ScheduleError::Unreadable(shown(input), why),
            other => other,
        })
    }

    /// A schedule stored in normalized form (5 fields, or 6 with seconds first).
    pub fn from_normalized(text: &str) -> Result<Self, ScheduleError> {
        let cron = parser().parse(text).map_err(|e| ScheduleError::Unreadable(shown(text), e.to_string()))?;
        check_days_exist(&cron, text)?;
        Ok(Self { cron, text: text.to_owned() })
    }

    /// The normalized cron form: 5 fields, or 6 (seconds first) for `every Ns`.
    pub fn as_cron(&self) -> &str {
        &self.text
    }

    /// The first run strictly after `after`, computed on the wall clock of `zone`.
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Result<Timestamp, ScheduleError> {
        let start = after.to_zoned(zone.clone());
        self.cron
            .find_next_occurrence(&start, false)
            .map(|zoned| zoned.timestamp())
            .map_err(|_| ScheduleError::NeverRuns(self.text.clone()))
    }

    /// The first run strictly after `after` and no later than `ahead` after
    /// it, or `None` when there is none. Where [`Self::next_after`] lets
    /// croner search on to the year 5000 (seconds of CPU for a schedule that
    /// never runs), this search ends with the year `ahead` reaches.
    pub fn first_run_within(
        &self,
        after: Timestamp,
        zone: &TimeZone,
        ahead: Duration,
    ) -> Result<Option<Timestamp>, ScheduleError> {
        let end = jiff::SignedDuration::try_from(ahead).ok().and_then(|ahead| after.checked_add(ahead).ok());
        let Some(end) = end else { return self.next_after(after, zone).map(Some) };
        let year = |at: Timestamp| i32::from(at.to_zoned(zone.clone()).year());
        let Some(bounded) = self.within_years(year(after)..=year(end)) else { return Ok(None) };
        let run = bounded.find_next_occurrence(&after.to_zoned(zone.clone()), false).map(|zoned| zoned.timestamp());
        Ok(run.ok().filter(|run| *run <= end))
    }

    /// This schedule's cron with its year field cut to `years` (through
    /// croner's public year field, so no search of it goes past them), or
    /// `None` when it runs in none of them.
    fn within_years(&self, years: RangeInclusive<i32>) -> Option<Cron> {
        let kept: Vec<String> = years
            .filter(|year| self.cron.pattern.year_match(*year).unwrap_or(false))
            .map(|year| year.to_string())
            .collect();
        if kept.is_empty() {
            return None;
        }
        // Any cron with that year field: only its years are taken.
        let field = parser().parse(&format!("0 0 0 * * * {}", kept.join(","))).ok()?;
        let mut bounded = self.cron.clone();
        bounded.pattern.years = field.pattern.years;
        Some(bounded)
    }

    /// The next `count` runs after `after`.
    pub fn upcoming(&self, after: Timestamp, zone: &TimeZone, count: usize) -> Result<Vec<Timestamp>, ScheduleError> {
        let mut runs = Vec::with_capacity(count);
        let mut cursor = after;
        for _ in 0..count {
            cursor = self.next_after(cursor, zone)?;
            runs.push(cursor);
        }
        Ok(runs)
    }

    /// The first interval between two consecutive runs shorter than
    /// `shortest`, if there is one, among the runs of `span` from the first
    /// run after `after` and the runs around every month end and DST change
    /// of `zone` in the [`CHECK_HORIZON_MONTHS`] after it, reading at most
    /// `max_runs` runs in all.
    ///
    /// The first window starts at the first run, not at `after`, so a
    /// schedule of one day a month is checked on that day, whenever it is
    /// added. When every interval is at least `shortest`, a window holds at
    /// most `span / shortest + 1` runs, so reading that many covers it: a
    /// short gap cannot hide behind a long minute list (`0,6,…,54,55 * * * *`).
    /// Gaps that only occur where months of different lengths meet
    /// (`0 0,23 1,31 * *`: 23:00 on the 31st, then midnight) or where the
    /// clock jumps (`0 */2 * * *` on a spring-forward day) are found in the
    /// [`TURNING_POINT_WINDOW`] around each such point; a run already read
    /// is not read again, so a rare schedule costs no more than before.
    pub fn interval_shorter_than(
        &self,
        shortest: Duration,
        after: Timestamp,
        span: Duration,
        zone: &TimeZone,
        max_runs: usize,
    ) -> Result<Option<Duration>, ScheduleError> {
        let shortest_ms = i64::try_from(shortest.as_millis()).unwrap_or(i64::MAX).max(1);
        let mut budget = max_runs;
        let first = self.next_after(after, zone)?;
        let mut read_until = match self.short_gap_in(first, millis(span), shortest_ms, zone, &mut budget)? {
            Window::Short(gap) => return Ok(Some(gap)),
            Window::ReadUntil(last) => last,
        };
        let horizon = after.to_zoned(zone.clone()).checked_add(jiff::Span::new().months(CHECK_HORIZON_MONTHS));
        let Ok(horizon) = horizon.map(|zoned| zoned.timestamp()) else { return Ok(None) };
        let window_ms = millis(TURNING_POINT_WINDOW);
        for point in turning_points(after, horizon, zone) {
            let from = point.as_millisecond().saturating_sub(window_ms / 2).max(read_until.as_millisecond());
            let Ok(from) = Timestamp::from_millisecond(from) else { break };
            // Read on from the last run read, or from the first run of this window.
            let start = if from == read_until {
                read_until
            } else {
                // No run after this point (ever): nothing left to read.
                let Ok(next) = self.next_after(from, zone) else { break };
                next
            };
            if budget == 0 || start > horizon {
                break;
            }
            read_until = match self.short_gap_in(start, window_ms, shortest_ms, zone, &mut budget)? {
                Window::Short(gap) => return Ok(Some(gap)),
                Window::ReadUntil(last) => last,
            };
        }
        Ok(None)
    }

    /// The first gap under `shortest_ms` between the runs from `first` (a
    /// run) through `span_ms` later and the run after that, each run read
    /// taken from `budget`; or the last run read.
    fn short_gap_in(
        &self,
        first: Timestamp,
        span_ms: i64,
        shortest_ms: i64,
        zone: &TimeZone,
        budget: &mut usize,
    ) -> Result<Window, ScheduleError> {
        let runs = usize::try_from(span_ms / shortest_ms).unwrap_or(usize::MAX).saturating_add(1);
        let end = first.as_millisecond().saturating_add(span_ms);
        let mut previous = first;
        for _ in 0..runs {
            if previous.as_millisecond() > end || *budget == 0 {
                break;
            }
            *budget -= 1;
            let next = self.next_after(previous, zone)?;
            let gap = next.as_millisecond() - previous.as_millisecond();
            if gap < shortest_ms {
                return Ok(Window::Short(Duration::from_millis(gap.unsigned_abs())));
            }
            previous = next;
        }
        Ok(Window::ReadUntil(previous))
    }
}

/// How far ahead the interval check visits month ends and DST changes: four
/// years, so a 29 February is among them.
pub const CHECK_HORIZON_MONTHS: i64 = 48;

/// The runs read around one month end or DST change: from a day before it
/// to a day after.
pub const TURNING_POINT_WINDOW: Duration = Duration::from_secs(2 * 86_400);

/// What one window of the interval check found.
enum Window {
    /// A gap shorter than the shortest allowed.
    Short(Duration),
    /// No such gap; the last run read.
    ReadUntil(Timestamp),
}

/// Milliseconds of `duration`, saturating.
fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// How schedules are read: seconds optional (`every Ns`), a day matching
/// either day field (as cron has it) unless the weekday has `+`.
fn parser() -> CronParser {
    CronParser::builder().seconds(Seconds::Optional).dom_and_dow(false).build()
}

/// The instants after `after` and before `horizon` where a schedule's gaps
/// can differ from the rest: the start of every month on `zone`'s wall
/// clock and every change of its UTC offset, in order.
fn turning_points(after: Timestamp, horizon: Timestamp, zone: &TimeZone) -> Vec<Timestamp> {
    let first_of_month = after.to_zoned(zone.clone()).date().first_of_month();
    let month_starts = (1..=CHECK_HORIZON_MONTHS).filter_map(|months| {
        let date = first_of_month.checked_add(jiff::Span::new().months(months)).ok()?;
        date.to_zoned(zone.clone()).ok().map(|zoned| zoned.timestamp())
    });
    let offset_changes = zone.following(after).map(|transition| transition.timestamp());
    let mut points: Vec<Timestamp> = month_starts
        .chain(offset_changes.take_while(|point| *point < horizon))
        .filter(|point| *point < horizon)
        .collect();
    points.sort_unstable();
    points
}

/// Refuses a day-of-month field none of whose days the month field's
/// months have (`0 0 31 2,4,6,9,11 *`), which croner would otherwise search
/// for until the year 5000. 29 February is a day, of leap years. A field
/// with `L`, `W` or `#`, or a weekday field that is enough on its own (a
/// day runs when either field matches), is left to the bounded search
/// ([`Schedule::first_run_within`]).
fn check_days_exist(cron: &Cron, text: &str) -> Result<(), ScheduleError> {
    let pattern = &cron.pattern;
    let weekday_suffices = !pattern.is_dow_wildcard() && !pattern.matches_dom_and_dow();
    if weekday_suffices || pattern.days.has_modifiers() {
        return Ok(());
    }
    let longest = |month: u16| match month {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let first_day = pattern.days.values().into_iter().min().unwrap_or(u16::MAX);
    if pattern.months.values().into_iter().any(|month| first_day <= longest(month)) {
        return Ok(());
    }
    let fields: Vec<&str> = text.split_whitespace().rev().collect();
    let field = |from_end: usize| fields.get(from_end).map_or_else(String::new, |field| shown(field));
    Err(ScheduleError::NoSuchDay(shown(text), field(2), field(1)))
}

/// The cron form of a phrase; `None` when the input is not a phrase (it may be cron).
fn phrase(input: &str) -> Result<Option<String>, ScheduleError> {
    let lower = input.trim().to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().filter(|w| *w != "at").collect();
    match words.as_slice() {
        ["hourly"] => Ok(Some("0 * * * *".into())),
        ["every", "minute"] => Ok(Some("* * * * *".into())),
        ["every", "hour"] => Ok(Some("0 * * * *".into())),
        ["every", rest @ ..] if !rest.is_empty() && !matches!(rest[0], "day") => every(&rest.concat()).map(Some),
        ["every", "day", time @ ..] | ["daily", time @ ..] => on_days("*", time, input),
        ["weekdays", time @ ..] => on_days("1-5", time, input),
        ["weekends", time @ ..] => on_days("0,6", time, input),
        [day, time @ ..] if weekday(day).is_some() && !time.is_empty() => {
            on_days(weekday(day).unwrap_or_default(), time, input)
        }
        _ => Ok(None),
    }
}

/// The cron form of an interval of `n` units.
type CronOf = fn(u32) -> String;

/// `every 15m`, `every 2h`, `every 30s`, `every 10 minutes`: aligned to
/// the clock (`*/15` minutes: :00, :15, :30, :45).
fn every(amount: &str) -> Result<String, ScheduleError> {
    let digits: String = amount.chars().take_while(char::is_ascii_digit).collect();
    let unit = &amount[digits.len()..];
    let Ok(n) = digits.parse::<u32>() else {
        return Err(ScheduleError::Unreadable(format!("every {amount}"), "the interval needs a number".into()));
    };
    let (unit, even, whole, form): (char, &[u32], &str, CronOf) = match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => ('s', EVEN_SECONDS, "minute", |n| format!("*/{n} * * * * *")),
        "m" | "min" | "mins" | "minute" | "minutes" => ('m', EVEN_MINUTES, "hour", |n| format!("*/{n} * * * *")),
        "h" | "hr" | "hrs" | "hour" | "hours" => ('h', EVEN_HOURS, "day", |n| format!("0 */{n} * * *")),
        "d" | "day" | "days" if n == 1 => return Ok("0 0 * * *".into()),
        _ => {
            let why = format!("unknown unit {unit:?}: use s, m or h");
            return Err(ScheduleError::Unreadable(format!("every {amount}"), why));
        }
    };
    if !even.contains(&n) {
        let choices = even.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        return Err(ScheduleError::UnevenInterval(n, unit, whole, choices));
    }
    Ok(form(n))
}

/// `M H * * <days>` from a time of day such as `9am`, `6:30pm`, `18:30`.
fn on_days(days: &str, time: &[&str], input: &str) -> Result<Option<String>, ScheduleError> {
    if time.is_empty() {
        let why = "the phrase needs a time of day such as 9am or 18:30".to_owned();
        return Err(ScheduleError::Unreadable(shown(input), why));
    }
    let (hour, minute) = time_of_day(&time.concat())?;
    Ok(Some(format!("{minute} {hour} * * {days}")))
}

/// Hour and minute of `9am`, `12pm`, `6:30pm`, `18:30`, `7`.
fn time_of_day(text: &str) -> Result<(u32, u32), ScheduleError> {
    let bad = || ScheduleError::BadTime(text.to_owned());
    let (clock, meridiem) = match text.strip_suffix("am").or_else(|| text.strip_suffix("pm")) {
        Some(clock) => (clock, Some(text.ends_with("pm"))),
        None => (text, None),
    };
    let (hour, minute) = clock.split_once(':').unwrap_or((clock, "0"));
    let hour: u32 = hour.parse().map_err(|_| bad())?;
    let minute: u32 = minute.parse().map_err(|_| bad())?;
    let hour = match meridiem {
        Some(_) if !(1..=12).contains(&hour) => return Err(bad()),
        Some(pm) => hour % 12 + if pm { 12 } else { 0 },
        None => hour,
    };
    if hour > 23 || minute > 59 {
        return Err(bad());
    }
    Ok((hour, minute))
}

/// The cron day-of-week number of a day name (`mon`, `monday`, `mondays`).
fn weekday(word: &str) -> Option<&'static str> {
    const DAYS: [(&str, &str); 7] = [
        ("sunday", "0"),
        ("monday", "1"),
        ("tuesday", "2"),
        ("wednesday", "3"),
        ("thursday", "4"),
        ("friday", "5"),
        ("saturday", "6"),
    ];
    let word = word.strip_suffix('s').filter(|w| w.len() > 3).unwrap_or(word);
    DAYS.iter().find(|(name, _)| word.len() >= 3 && name.starts_with(word)).map(|(_, n)| *n)
}

/// An input as quoted in an error: at most 80 characters.
fn shown(input: &str) -> String {
    input.chars().take(80).collect()
}

/// A time zone from its IANA name (`Europe/Berlin`, `UTC`).
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name.trim()).map_err(|_| {
        format!(
            "{:?} is not an IANA time zone name; write a name such as Europe/Berlin, America/New_York or UTC",
            shown(name)
        )
    })
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn cron(input: &str) -> String {
        Schedule::parse(input).unwrap_or_else(|e| panic!("{input}: {e}")).as_cron().to_owned()
    }

    fn zone(name: &str) -> TimeZone {
        time_zone(name).unwrap()
    }

    /// Every run of `schedule` in `zone` on the civil day `day`, as wall-clock times with offsets.
    fn runs_on(schedule: &str, name: &str, day: jiff::civil::Date) -> Vec<String> {
        let tz = zone(name);
        let schedule = Schedule::parse(schedule).unwrap();
        let start = day.yesterday().unwrap().at(12, 0, 0, 0).to_zoned(tz.clone()).unwrap().timestamp();
        let mut runs = Vec::new();
        let mut cursor = start;
        loop {
            cursor = schedule.next_after(cursor, &tz).unwrap();
            let local = cursor.to_zoned(tz.clone());
            if local.date() > day {
                return runs;
            }
            if local.date() == day {
                runs.push(local.strftime("%H:%M%:z").to_string());
            }
        }
    }

    #[test]
    fn a_short_gap_behind_a_long_minute_list_is_found() {
        let schedule = Schedule::parse("0,6,12,18,24,30,36,42,48,54,55 * * * *").unwrap();
        // Added at :55: the next ten runs are :00 to :54, six minutes apart.
        let at_55 = "2026-05-17T09:55:00Z".parse::<Timestamp>().unwrap();
        let day = Duration::from_secs(86_400);
        let five_minutes = Duration::from_secs(300);
        let found = schedule.interval_shorter_than(five_minutes, at_55, day, &TimeZone::UTC, 10_000).unwrap();
        assert_eq!(found, Some(Duration::from_secs(60)));
        let steady = Schedule::parse("*/6 * * * *").unwrap();
        assert_eq!(steady.interval_shorter_than(five_minutes, at_55, day, &TimeZone::UTC, 10_000).unwrap(), None);
        // A gap at the day boundary only: 23:59 then 00:00.
        let boundary = Schedule::parse("0,59 0,23 * * *").unwrap();
        let found = boundary.interval_shorter_than(five_minutes, at_55, day, &TimeZone::UTC, 10_000).unwrap();
        assert_eq!(found, Some(Duration::from_secs(60)));
        // A schedule of one day a month, added weeks before that day: the
        // span starts at its first run, where the 1-minute gap is.
        let monthly = Schedule::parse("0,1 9 1 * *").unwrap();
        let found = monthly.interval_shorter_than(five_minutes, at_55, day, &TimeZone::UTC, 10_000).unwrap();
        assert_eq!(found, Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_short_gap_at_a_month_end_or_a_dst_change_is_found_months_ahead() {
        let check = |schedule: &str, zone: &str, added: &str, shortest_hours: u64| {
            let added = added.parse::<Timestamp>().unwrap();
            let shortest = Duration::from_secs(shortest_hours * 3600);
            let eight_days = Duration::from_secs(8 * 86_400);
            let schedule = Schedule::parse(schedule).unwrap();
            schedule
                .interval_shorter_than(shortest, added, eight_days, &super::time_zone(zone).unwrap(), 20_000)
                .unwrap()
        };
        let hour = Some(Duration::from_secs(3600));
        // Added in June (30 days): the 1-hour gap is 23:00 on 31 July, then midnight.
        assert_eq!(check("0 0,23 1,31 * *", "UTC", "2026-06-05T10:00:00Z", 2), hour);
        // Added in November: 01:30 EST, then 03:30 EDT an hour later on 2027-03-14 (two hours on other days).
        assert_eq!(check("30 1,3 * * *", "America/New_York", "2026-11-23T10:00:00Z", 2), hour);
        assert_eq!(check("30 1,3 * * *", "UTC", "2026-11-23T10:00:00Z", 2), None);
        // croner skips an hour-step run the clock jumps over: 00:00 EST, then 04:00 EDT.
        assert_eq!(check("0 */2 * * *", "America/New_York", "2026-11-23T10:00:00Z", 2), None);
        // 30 September then 1 October: a day apart, never shorter.
        assert_eq!(check("0 9 1,30 * *", "Europe/Berlin", "2026-06-05T10:00:00Z", 20), None);
        // 28 February 2028 at 23:00, then 29 February at 00:00: only in a leap year.
        assert_eq!(check("0 0,23 28,29 2 *", "UTC", "2026-03-05T10:00:00Z", 2), hour);
        // Rare and dense schedules end within the run budget, without error.
        assert_eq!(check("0 0 29 2 1", "UTC", "2026-03-05T10:00:00Z", 2), None);
        assert_eq!(check("* * * * *", "America/New_York", "2026-03-05T10:00:00Z", 0), None);
    }

    #[test]
    fn phrases_become_cron() {
        assert_eq!(cron("daily 9am"), "0 9 * * *");
        assert_eq!(cron("Daily at 9:15 PM"), "15 21 * * *");
        assert_eq!(cron("every day 12am"), "0 0 * * *");
        assert_eq!(cron("daily 12pm"), "0 12 * * *");
        assert_eq!(cron("weekdays 6pm"), "0 18 * * 1-5");
        assert_eq!(cron("weekends 10:30"), "30 10 * * 0,6");
        assert_eq!(cron("monday 10:30"), "30 10 * * 1");
        assert_eq!(cron("Fridays at 17:00"), "0 17 * * 5");
        assert_eq!(cron("sun 8am"), "0 8 * * 0");
        assert_eq!(cron("every 15m"), "*/15 * * * *");
        assert_eq!(cron("every 15 minutes"), "*/15 * * * *");
        assert_eq!(cron("every 2h"), "0 */2 * * *");
        assert_eq!(cron("every 10s"), "*/10 * * * * *");
        assert_eq!(cron("every minute"), "* * * * *");
        assert_eq!(cron("hourly"), "0 * * * *");
        assert_eq!(cron("30   9 * *   1-5"), "30 9 * * 1-5");
        assert_eq!(cron("0 9 1 * MON"), "0 9 1 * MON");
    }

    #[test]
    fn bad_input_gets_an_error_that_says_what_to_write() {
        for (input, expected) in [
            ("sometimes", "cannot read the schedule \"sometimes\""),
            ("daily", "needs a time of day"),
            ("daily 25:00", "\"25:00\" is not a time of day"),
            ("daily 13pm", "\"13pm\" is not a time of day"),
            ("monday 10:75", "is not a time of day"),
            ("every 7m", "\"every 7m\" does not divide evenly into the hour; use one of 1, 2, 3"),
            ("every 5h", "does not divide evenly into the day"),
            ("every 3 fortnights", "unknown unit"),
            ("61 * * * *", "cannot read the schedule \"61 * * * *\""),
            ("* * * *", "4 fields"),
            ("* * * * * * *", "7 fields"),
            ("0 0 31 2 *", "never runs: no month in \"2\" has a day \"31\""),
            ("", "0 fields"),
        ] {
            let error = Schedule::parse(input)
                .and_then(|s| s.next_after(Timestamp::UNIX_EPOCH, &TimeZone::UTC))
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{input:?}: {error}");
        }
    }

    #[test]
    fn the_pattern_admits_every_phrase_and_cron_form() {
        let pattern = regex_lite(SCHEDULE_PATTERN);
        for text in
            ["daily 9am", "weekdays 6pm", "monday 10:30", "every 15m", "every 10 minutes", "hourly", "*/5 * * * *"]
        {
            assert!(pattern.is_match(text), "{text}");
        }
        for text in ["example", "", "rm -rf /", "daily"] {
            assert!(!pattern.is_match(text), "{text}");
        }
    }

    /// The schema's regex, checked the way the SDK validates arguments.
    fn regex_lite(pattern: &str) -> jsonschema::Validator {
        jsonschema::validator_for(&serde_json::json!({"type": "string", "pattern": pattern})).unwrap()
    }

    trait IsMatch {
        fn is_match(&self, text: &str) -> bool;
    }

    impl IsMatch for jsonschema::Validator {
        fn is_match(&self, text: &str) -> bool {
            self.is_valid(&serde_json::json!(text))
        }
    }

    #[test]
    fn a_daily_0230_task_runs_once_on_both_dst_days_in_berlin() {
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        assert_eq!(runs_on("daily 2:30am", "Europe/Berlin", date(2026, 3, 29)), ["03:00+02:00"]);
        // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        assert_eq!(runs_on("daily 2:30am", "Europe/Berlin", date(2026, 10, 25)), ["02:30+02:00"]);
        assert_eq!(runs_on("daily 2:30am", "Europe/Berlin", date(2026, 10, 26)), ["02:30+01:00"]);
    }

    #[test]
    fn a_daily_0230_task_runs_once_on_both_dst_days_in_new_york() {
        assert_eq!(runs_on("30 2 * * *", "America/New_York", date(2026, 3, 8)), ["03:00-04:00"]);
        assert_eq!(runs_on("30 2 * * *", "America/New_York", date(2026, 3, 9)), ["02:30-04:00"]);
        // 01:30 happens twice on 2026-11-01 (EDT, then EST): one run, the first.
        assert_eq!(runs_on("30 1 * * *", "America/New_York", date(2026, 11, 1)), ["01:30-04:00"]);
        assert_eq!(runs_on("30 2 * * *", "America/New_York", date(2026, 11, 1)), ["02:30-05:00"]);
    }

    #[test]
    fn intervals_keep_real_time_through_a_fall_back_hour() {
        let runs = runs_on("every 30m", "America/New_York", date(2026, 11, 1));
        // 25 hours that day: 50 half hours, 01:00 and 01:30 twice.
        assert_eq!(runs.len(), 50, "{runs:?}");
        assert_eq!(runs.iter().filter(|r| r.starts_with("01:30")).count(), 2, "{runs:?}");
    }

    #[test]
    fn every_15m_is_aligned_to_the_clock() {
        let tz = zone("Asia/Kolkata");
        let after = date(2026, 5, 17).at(10, 7, 42, 0).to_zoned(tz.clone()).unwrap().timestamp();
        let runs = Schedule::parse("every 15m").unwrap().upcoming(after, &tz, 4).unwrap();
        let shown: Vec<String> = runs.iter().map(|t| t.to_zoned(tz.clone()).strftime("%H:%M:%S").to_string()).collect();
        assert_eq!(shown, ["10:15:00", "10:30:00", "10:45:00", "11:00:00"]);
    }

    #[test]
    fn month_ends_and_leap_days() {
        let tz = TimeZone::UTC;
        let start = |y, m, d| date(y, m, d).at(0, 0, 0, 0).to_zoned(tz.clone()).unwrap().timestamp();
        let days = |schedule: &str, after, n| -> Vec<String> {
            let runs = Schedule::parse(schedule).unwrap().upcoming(after, &tz, n).unwrap();
            runs.iter().map(|t| t.to_zoned(tz.clone()).date().to_string()).collect()
        };
        // Day 31 only in the months that have one.
        assert_eq!(days("0 9 31 * *", start(2026, 1, 1), 3), ["2026-01-31", "2026-03-31", "2026-05-31"]);
        // The last day of the month (`L`).
        assert_eq!(days("0 9 L * *", start(2028, 1, 15), 3), ["2028-01-31", "2028-02-29", "2028-03-31"]);
        // 29 February: leap years only.
        assert_eq!(days("0 0 29 2 *", start(2025, 1, 1), 2), ["2028-02-29", "2032-02-29"]);
    }

    #[test]
    fn a_day_no_named_month_has_is_refused_naming_both_fields() {
        for (input, day, months) in [
            ("0 0 31 2 *", "31", "2"),
            ("0 0 30 2 *", "30", "2"),
            ("0 0 30,31 feb *", "30,31", "feb"),
            ("0 0 31 4 *", "31", "4"),
            ("0 0 31 6 *", "31", "6"),
            ("0 0 31 9 *", "31", "9"),
            ("0 0 31 11 *", "31", "11"),
            ("0 0 31 2,4,6,9,11 *", "31", "2,4,6,9,11"),
        ] {
            let error = Schedule::parse(input).unwrap_err();
            assert_eq!(error, ScheduleError::NoSuchDay(input.into(), day.into(), months.into()), "{input}");
            assert!(error.to_string().contains(&format!("never runs: no month in {months:?} has a day {day:?}")));
        }
        // 29 February (leap years), a month that has the day, the last day,
        // or a weekday that runs on its own: accepted.
        for input in ["0 0 29 2 *", "0 0 30,31 2,3 *", "0 0 31 1-12 *", "0 0 L 2 *", "0 0 31 2 1", "0 0 29 2 1#5"] {
            assert!(Schedule::parse(input).is_ok(), "{input}");
        }
    }

    #[test]
    fn the_bounded_search_stops_at_its_horizon() {
        let after = date(2025, 3, 1).at(0, 0, 0, 0).to_zoned(TimeZone::UTC).unwrap().timestamp();
        let year = Duration::from_secs(366 * 86_400);
        let leap_day = Schedule::parse("0 0 29 2 *").unwrap();
        // The next 29 February is in 2028: not within a year, within four.
        assert_eq!(leap_day.first_run_within(after, &TimeZone::UTC, year).unwrap(), None);
        let found = leap_day.first_run_within(after, &TimeZone::UTC, year * 4).unwrap();
        assert_eq!(found, Some("2028-02-29T00:00:00Z".parse().unwrap()));
        // No weekday nearest a 31 February, ever: refused at the horizon.
        let never = Schedule::parse("0 0 31W 2 *").unwrap();
        assert_eq!(never.first_run_within(after, &TimeZone::UTC, year * 10).unwrap(), None);
    }

    #[test]
    fn the_bounded_search_reads_no_year_past_its_last_and_otherwise_agrees_with_croners_own() {
        let after = date(2025, 3, 1).at(0, 0, 0, 0).to_zoned(TimeZone::UTC).unwrap();
        // The bound itself, not only the answer filtered after it: croner's
        // own search finds 29 February 2028, the one cut to 2025-2027 nothing.
        let leap_day = Schedule::parse("0 0 29 2 *").unwrap();
        assert_eq!(leap_day.cron.find_next_occurrence(&after, false).unwrap().year(), 2028);
        let bounded = leap_day.within_years(2025..=2027).expect("the schedule runs in every year");
        assert!(bounded.find_next_occurrence(&after, false).is_err(), "searched past 2027");
        assert!(leap_day.within_years(2028..=2028).unwrap().find_next_occurrence(&after, false).is_ok());
        // A year field a hand edit wrote (seven fields) is kept, not widened.
        let in_2030 = Schedule::from_normalized("0 0 0 1 1 * 2030").unwrap();
        assert!(in_2030.within_years(2025..=2029).is_none());
        // Within its bound, the answer is croner's own, in zones with DST too.
        let after = after.timestamp();
        for text in ["0 9 * * 1-5", "0 0 29 2 *", "0 0 L 2 *", "30 2 * * *", "0 0 * 2 1#5", "*/10 * * * * *"]
            .into_iter()
            .chain(["0 0 0 1 1 * 2030", "0 0 0 1 1 * 2020"])
        {
            let schedule = Schedule::from_normalized(text).unwrap();
            for name in ["UTC", "Europe/Berlin", "America/New_York", "Pacific/Auckland"] {
                let zone = zone(name);
                let own = schedule.next_after(after, &zone).ok();
                for days in [1, 300, 1_400, 3_660] {
                    let ahead = Duration::from_secs(days * 86_400);
                    let end = after.checked_add(jiff::SignedDuration::try_from(ahead).unwrap()).unwrap();
                    let expected = own.filter(|run| *run <= end);
                    let found = schedule.first_run_within(after, &zone, ahead).unwrap();
                    assert_eq!(found, expected, "{text} in {name}, {days} days");
                }
            }
        }
    }

    #[test]
    fn unknown_time_zones_are_refused_with_examples() {
        assert!(time_zone("Europe/Berlin").is_ok());
        assert!(time_zone("UTC").is_ok());
        let error = time_zone("Mars/Olympus_Mons").unwrap_err();
        assert!(error.contains("not an IANA time zone name"), "{error}");
    }
}
