//! `MAX_BLOCKING_CALLS`: how much of a module's [`Context::blocking`](crate::Context::blocking)
//! work runs at once. Such work runs on after its call's timeout or its
//! caller leaving (a thread cannot be stopped from outside), so without a
//! bound, calls that end sooner than their work would pile work up past
//! tokio's blocking threads without limit.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::error::ToolError;

/// The default of `MAX_BLOCKING_CALLS`: well under tokio's 512 blocking
/// threads, which the runtime's own file and name lookups use too.
pub const DEFAULT_MAX_BLOCKING_CALLS: usize = 64;

/// The most `MAX_BLOCKING_CALLS` may be: tokio runs at most 512 blocking
/// threads, and its own file, name lookup and stdio work needs some of them.
pub(crate) const MAX_BLOCKING_CALLS_CEILING: usize = 448;

/// One permit per piece of blocking work running; the work holds its own,
/// so it is given back when the work ends, not when its call does.
pub(crate) struct BlockingLimit {
    permits: Arc<Semaphore>,
    max: usize,
}

impl Default for BlockingLimit {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BLOCKING_CALLS)
    }
}

impl BlockingLimit {
    /// At most `max` pieces of work at once (at most tokio's largest count of permits).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.min(Semaphore::MAX_PERMITS);
        Self { permits: Arc::new(Semaphore::new(max)), max }
    }

    /// A permit, waited for while at least half of `timeout` (the tool's)
    /// is left before `deadline` (the call's): work started later would
    /// mostly run after its call was answered `timeout`, crowding out calls
    /// that could still succeed. Past that, an `unavailable` error naming
    /// `MAX_BLOCKING_CALLS`.
    pub(crate) async fn permit(&self, deadline: Instant, timeout: Duration) -> Result<OwnedSemaphorePermit, ToolError> {
        let last_start = deadline.checked_sub(timeout / 2).unwrap_or_else(Instant::now);
        match tokio::time::timeout_at(last_start, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // `Ok(Err(_))`: the semaphore is never closed.
            Ok(Err(_)) | Err(_) => Err(ToolError::unavailable(format!(
                "the module is already running as much blocking work as it allows ({} at once, MAX_BLOCKING_CALLS), \
                 for so much of this tool's timeout of {} s that less than half of it was left to run this call's \
                 work, so it never started; try again later",
                self.max,
                timeout.as_secs_f64()
            ))),
        }
    }
}
