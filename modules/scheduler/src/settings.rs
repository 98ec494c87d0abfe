//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by
//! `Module::serve`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ipnet::IpNet;
use module_sdk::{PathSetting, PathSettingError, PathUse};

use crate::delivery::RetryPolicy;
use crate::store::Limits;

/// `SCHEDULER_DB`, for its errors.
pub const SCHEDULER_DB: PathSetting =
    PathSetting { name: "SCHEDULER_DB", what: "the database", usage: PathUse::Create };

/// Settings of the scheduler module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the scheduler module: reminders and recurring tasks delivered to a webhook.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// The SQLite database file holding every user's tasks; it and its
    /// directory are created when missing.
    #[arg(long, env = "SCHEDULER_DB", default_value = "./data/scheduler.db")]
    pub scheduler_db: PathBuf,

    /// The agent's webhook: every task that comes due is POSTed here. Unset,
    /// the module serves its tools but fires nothing: due tasks wait, and
    /// fire once it is started with a delivery URL.
    #[arg(long, env = "DELIVERY_URL", value_parser = parse_delivery_url)]
    pub delivery_url: Option<String>,

    /// The key that signs every delivery (HMAC-SHA256); required with `DELIVERY_URL`.
    #[arg(long, env = "DELIVERY_SECRET", hide_env_values = true)]
    pub delivery_secret: Option<String>,

    /// The time zone of schedules that name none, and of reminders' times (an IANA name).
    #[arg(long, env = "SCHEDULER_DEFAULT_TIMEZONE", default_value = "UTC")]
    pub default_timezone: String,

    /// Most attempts to deliver one run before it is marked failed.
    #[arg(long, env = "DELIVERY_MAX_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub delivery_max_attempts: u32,

    /// Wait before the first retry, in milliseconds; it doubles with each attempt (with jitter).
    #[arg(long, env = "DELIVERY_RETRY_BASE_MS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub delivery_retry_base_ms: u64,

    /// Longest wait between two attempts, in milliseconds.
    #[arg(long, env = "DELIVERY_RETRY_MAX_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub delivery_retry_max_ms: u64,

    /// Longest one delivery request (or one `api_call` request) may take, in seconds.
    #[arg(long, env = "DELIVERY_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub delivery_timeout_seconds: u64,

    /// How long a process owns the runs it claimed, in seconds: a run whose
    /// process died is fired again by another once this has passed. The
    /// process delivering a run renews its lease at least three times a
    /// lease; keep it well above the busy timeout.
    #[arg(long, env = "SCHEDULER_LEASE_SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub lease_seconds: u64,

    /// Most runs claimed and delivered at once.
    #[arg(long, env = "SCHEDULER_BATCH", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,

    /// Longest the firing loop sleeps between looks at the database, in
    /// milliseconds (it also wakes when a task is added and when the next
    /// run is due).
    #[arg(long, env = "SCHEDULER_POLL_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub poll_ms: u64,

    /// Most active tasks of all users together.
    #[arg(long, env = "SCHEDULER_MAX_TASKS", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tasks: u64,

    /// Most active tasks one user may have.
    #[arg(long, env = "SCHEDULER_USER_MAX_TASKS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_max_tasks: u64,

    /// Most finished (done, cancelled, failed) tasks kept per user; the
    /// oldest beyond it are deleted.
    #[arg(long, env = "SCHEDULER_USER_MAX_FINISHED", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_max_finished: u64,

    /// Most finished tasks kept of all users together (user ids are
    /// open-ended); the oldest beyond it are deleted, whoever's they are.
    #[arg(long, env = "SCHEDULER_MAX_FINISHED", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_finished: u64,

    /// Most bytes of tasks (as JSON) one `list_tasks` answer carries; the
    /// newest tasks that fit are shown.
    #[arg(long, env = "SCHEDULER_LIST_MAX_BYTES", default_value_t = 1_048_576, value_parser = clap::value_parser!(u64).range(65_536..=4_194_304))]
    pub list_max_bytes: u64,

    /// Shortest time between two runs of a recurring task, in seconds.
    #[arg(long, env = "SCHEDULER_MIN_INTERVAL_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_interval_seconds: u64,

    /// Largest `execution_data` (or reminder message), in bytes of JSON.
    #[arg(long, env = "SCHEDULER_MAX_DATA_BYTES", default_value_t = 16 * 1024, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub max_data_bytes: u64,

    /// Furthest ahead a reminder may be set, in days.
    #[arg(long, env = "SCHEDULER_MAX_AHEAD_DAYS", default_value_t = 3660, value_parser = clap::value_parser!(u64).range(1..=36_600))]
    pub max_ahead_days: u64,

    /// Most bytes of an `api_call` response kept and delivered.
    #[arg(long, env = "API_CALL_MAX_BYTES", default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    pub api_call_max_bytes: u64,

    /// Networks an `api_call` may reach although they are loopback, private
    /// or otherwise internal: comma-separated CIDRs or addresses, e.g.
    /// `127.0.0.1` or `10.20.0.0/16`. Empty (the default) allows public addresses only.
    #[arg(long, env = "FETCH_ALLOW_NETWORKS", default_value = "", hide_default_value = true, value_parser = parse_networks)]
    pub fetch_allow_networks: Networks,

    /// How long a database statement waits for a lock held by another
    /// connection or process, in milliseconds.
    #[arg(long, env = "SCHEDULER_BUSY_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    pub busy_timeout_ms: u64,
}

impl Settings {
    /// The limits these settings give.
    pub fn limits(&self) -> Limits {
        Limits {
            max_tasks: self.max_tasks,
            user_max_tasks: self.user_max_tasks,
            user_max_finished: self.user_max_finished,
            max_finished: self.max_finished,
            list_max_bytes: self.list_max_bytes,
            min_interval: Duration::from_secs(self.min_interval_seconds),
            max_data_bytes: self.max_data_bytes,
            max_ahead: Duration::from_secs(self.max_ahead_days * 86_400),
        }
    }

    /// How failed deliveries are retried.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.delivery_max_attempts,
            base: Duration::from_millis(self.delivery_retry_base_ms),
            max: Duration::from_millis(self.delivery_retry_max_ms),
        }
    }

    /// How long a statement waits for a lock.
    pub fn busy_timeout(&self) -> Duration {
        Duration::from_millis(self.busy_timeout_ms)
    }

    /// The database file as an absolute path (a relative `SCHEDULER_DB`
    /// is taken from the working directory), so that an error names the
    /// place it really is.
    pub fn database_path(&self) -> Result<PathBuf, PathSettingError> {
        SCHEDULER_DB.absolute(&self.scheduler_db)
    }
}

/// A list of networks, written comma-separated (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Networks(pub Vec<IpNet>);

fn parse_networks(text: &str) -> Result<Networks, String> {
    guarded_http::parse_networks(text).map(Networks)
}

/// An absolute http(s) URL.
fn parse_delivery_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text.trim())
        .map_err(|e| format!("not a URL ({e}); expected e.g. http://agent:8080/events"))?;
    match url.scheme() {
        "http" | "https" => Ok(url.into()),
        other => Err(format!("scheme `{other}` is not supported; use http or https")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let settings = Settings::try_parse_from(["scheduler"]).unwrap();
        assert_eq!(settings.scheduler_db, PathBuf::from("./data/scheduler.db"));
        assert_eq!(settings.limits().min_interval, Duration::from_secs(60));
        assert_eq!(settings.limits().max_tasks, 100_000);
        assert!(Settings::try_parse_from(["scheduler", "--max-tasks", "0"]).is_err());
        assert_eq!(settings.limits().max_finished, 100_000);
        assert!(Settings::try_parse_from(["scheduler", "--max-finished", "0"]).is_err());
        assert!(settings.fetch_allow_networks.0.is_empty());
        assert!(Settings::try_parse_from(["scheduler", "--user-max-tasks", "0"]).is_err());
        assert!(Settings::try_parse_from(["scheduler", "--delivery-url", "ftp://x/"]).is_err());
        assert!(Settings::try_parse_from(["scheduler", "--fetch-allow-networks", "everything"]).is_err());
        assert!(Settings::try_parse_from(["scheduler", "--scheduler-db", ""]).is_err(), "an empty path is refused");
    }
}
