//! `notifications/progress` for a call that runs long: while it runs, every
//! interval tells a client that sent a `progressToken` how many seconds it
//! has been running (no total: a tool's work is not known in advance). The
//! specification has each value above the last: they are the seconds to
//! the millisecond, and a tick that would not raise it sends nothing.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::time::{Instant, MissedTickBehavior, interval_at};

/// Where progress goes: the client's token, its peer, and how often.
pub type ProgressTarget = (ProgressToken, Peer<RoleServer>, Duration);

/// The progress values of one call: its seconds so far, each above the last.
struct Elapsed {
    started: Instant,
    last: Option<f64>,
}

impl Elapsed {
    fn new(started: Instant) -> Self {
        Self { started, last: None }
    }

    /// The seconds from the start to `now` (to the millisecond), if above the last value given.
    fn next(&mut self, now: Instant) -> Option<f64> {
        let millis = now.saturating_duration_since(self.started).as_millis();
        let seconds = u32::try_from(millis).map_or(f64::MAX, f64::from) / 1000.0;
        if self.last.is_some_and(|last| seconds <= last) {
            return None;
        }
        self.last = Some(seconds);
        Some(seconds)
    }
}

/// Awaits `call`, sending progress to `target` (if any) every interval
/// until it ends; a notification that cannot be sent is skipped.
pub async fn with_progress<T>(call: impl Future<Output = T>, target: Option<ProgressTarget>) -> T {
    let Some((token, peer, every)) = target else { return call.await };
    let started = Instant::now();
    let mut elapsed = Elapsed::new(started);
    let mut ticks = interval_at(started + every, every);
    // Ticks missed while a notification was being sent are not sent in a burst.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(call);
    loop {
        tokio::select! {
            output = &mut call => return output,
            _ = ticks.tick() => {
                let Some(seconds) = elapsed.next(Instant::now()) else { continue };
                let progress = ProgressNotificationParam::new(token.clone(), seconds)
                    .with_message(format!("still running after {seconds:.1} s"));
                if let Err(error) = peer.notify_progress(progress).await {
                    tracing::debug!(error = %error, "a progress notification was not sent");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_rise_within_a_second_and_never_repeat() {
        let started = Instant::now();
        let mut elapsed = Elapsed::new(started);
        let at = |millis| started + Duration::from_millis(millis);
        assert_eq!(elapsed.next(at(200)), Some(0.2));
        assert_eq!(elapsed.next(at(400)), Some(0.4), "intervals under a second still rise");
        assert_eq!(elapsed.next(at(400)), None, "a tick that would not raise the value sends nothing");
        assert_eq!(elapsed.next(at(1_500)), Some(1.5));
    }
}
