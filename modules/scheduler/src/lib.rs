//! The scheduler module: reminders and recurring tasks that fire on time,
//! survive restarts, and reach the agent through its webhook.
//!
//! Tasks live in one SQLite database (`SCHEDULER_DB`); a firing loop claims
//! the runs that are due, delivers each as a signed JSON event to
//! `DELIVERY_URL`, and acknowledges it with the task's next run.
//!
//! The library holds everything so that the benchmark (`benches/firing.rs`)
//! measures the same code the binary serves.

pub mod delivery;
pub mod firing;
pub mod row;
pub mod schedule;
pub mod settings;
pub mod store;
pub mod task;
pub mod tools;

use std::sync::Arc;

use guarded_http::{AddressPolicy, ClientLimits, GuardedClient};
use module_sdk::Module;
use tokio::sync::Notify;

use crate::delivery::Webhook;
use crate::firing::Firing;
use crate::settings::{SCHEDULER_DB, Settings};
use crate::store::Store;
use crate::tools::Scheduler;

/// Most redirects an `api_call` follows.
const API_CALL_MAX_REDIRECTS: u8 = 5;

/// The module and, when a delivery URL is set, its firing loop (to spawn
/// before serving).
pub fn module(settings: &Settings) -> Result<(Module, Option<Firing>), String> {
    let database = settings.database_path().map_err(|e| e.to_string())?;
    let open = || {
        Store::open(&database, settings.limits(), settings.busy_timeout())
            .map(Arc::new)
            .map_err(|e| SCHEDULER_DB.unusable(&settings.scheduler_db, &database, e).to_string())
    };
    let store = open()?;
    schedule::time_zone(&settings.default_timezone).map_err(|e| format!("SCHEDULER_DEFAULT_TIMEZONE: {e}"))?;
    let timeout = std::time::Duration::from_secs(settings.delivery_timeout_seconds);
    let limits = ClientLimits { total: timeout, connect: timeout, max_redirects: API_CALL_MAX_REDIRECTS };
    let policy = AddressPolicy::new(settings.fetch_allow_networks.0.clone());
    let client = GuardedClient::new(policy, limits, concat!("scheduler-module/", env!("CARGO_PKG_VERSION")))
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    let wake = Arc::new(Notify::new());
    let firing = match (&settings.delivery_url, &settings.delivery_secret) {
        (None, _) => None,
        (Some(_), None) => {
            return Err("DELIVERY_URL is set but DELIVERY_SECRET is not; set the key that signs deliveries".into());
        }
        (Some(url), Some(secret)) => {
            let webhook = Webhook::new(url.clone(), secret, settings.retry_policy(), timeout)
                .map_err(|e| format!("cannot build the webhook client: {e}"))?;
            Some(Firing {
                // A store of its own: a write of the loop waiting for
                // another process's lock (up to the busy timeout) holds its
                // connection, not the ones the tools read and write through.
                store: open()?,
                webhook,
                client: client.clone(),
                api_call_max_bytes: usize::try_from(settings.api_call_max_bytes).unwrap_or(usize::MAX),
                worker: uuid::Uuid::new_v4().to_string(),
                lease: std::time::Duration::from_secs(settings.lease_seconds),
                batch: settings.batch,
                poll: std::time::Duration::from_millis(settings.poll_ms),
                wake: wake.clone(),
            })
        }
    };
    let scheduler = Scheduler { store, default_zone: settings.default_timezone.trim().to_owned(), client, wake };
    let module = Module::new(
        "scheduler",
        "Reminders and recurring tasks: remind the user later, run a prompt or an HTTP request on a schedule, list and cancel them, tell the time.",
    )
    .version(env!("CARGO_PKG_VERSION"))
    .sdk_flags(settings.sdk)
    .state(scheduler)
    .tool(tools::add_reminder)
    .tool(tools::add_recurring_task)
    .tool(tools::list_tasks)
    .tool(tools::cancel_task)
    .tool(tools::get_current_time);
    Ok((module, firing))
}
