//! Scripts running at once: at most `SKILLS_MAX_CONCURRENT_RUNS`, across
//! every tool and every reload. The per-script limits (`SKILL_*`) bound
//! one script; this bounds how many of them, and of their output buffers
//! in the module, exist together.

use std::sync::Arc;
use std::time::Duration;

use module_sdk::ToolError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The module's script slots, shared by every tool set it serves.
#[derive(Debug, Clone)]
pub struct RunSlots {
    slots: Arc<Semaphore>,
    max: usize,
}

impl RunSlots {
    /// `max` slots (`SKILLS_MAX_CONCURRENT_RUNS`).
    pub fn new(max: usize) -> Self {
        Self { slots: Arc::new(Semaphore::new(max)), max }
    }

    /// A slot, held until dropped, for a script that must end by
    /// `deadline` (`timeout` is the tool's). The wait stops while at least
    /// half of `timeout` is left before `deadline`: a script started later
    /// would be killed moments after it began, perhaps with its work
    /// half-done; the call is then `unavailable`, naming the setting.
    pub async fn take(&self, deadline: Instant, timeout: Duration) -> Result<OwnedSemaphorePermit, ToolError> {
        let last_start = deadline.checked_sub(timeout / 2).unwrap_or_else(Instant::now);
        match tokio::time::timeout_at(last_start, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            // Elapsed; the semaphore is never closed.
            Err(_) | Ok(Err(_)) => Err(ToolError::unavailable(format!(
                "the module ran {} scripts at once, its limit (SKILLS_MAX_CONCURRENT_RUNS), for so much of this \
                 tool's timeout of {} s that less than half of it was left to run the script, so this call's script \
                 never started; try again later",
                self.max,
                timeout.as_secs_f64()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_a_slot_until_its_deadline_then_names_the_setting() {
        let slots = RunSlots::new(1);
        let second = Duration::from_secs(1);
        let held = slots.take(Instant::now() + second, second).await.unwrap();
        let refused = slots.take(Instant::now() + Duration::from_millis(50), second).await.unwrap_err();
        assert!(
            refused.to_string().contains("ran 1 scripts at once, its limit (SKILLS_MAX_CONCURRENT_RUNS)"),
            "{refused}"
        );
        drop(held);
        let _again = slots.take(Instant::now() + second, second).await.unwrap();
    }

    /// A slot freed when less than half the tool's timeout is left is not
    /// taken: the script would be killed soon after it started.
    #[tokio::test(start_paused = true)]
    async fn a_slot_freed_too_late_to_run_the_script_is_not_taken() {
        let slots = RunSlots::new(1);
        let timeout = Duration::from_secs(10);
        let held = slots.take(Instant::now() + timeout, timeout).await.unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(7)).await;
            drop(held);
        });
        let started = Instant::now();
        let refused = slots.take(Instant::now() + timeout, timeout).await.unwrap_err();
        assert!(refused.to_string().contains("SKILLS_MAX_CONCURRENT_RUNS"), "{refused}");
        assert!(started.elapsed() < Duration::from_secs(7), "the wait ends when half the timeout is left");
    }
}
