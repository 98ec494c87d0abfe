//! `notifications/progress` for a call that runs long: while it runs, every
//! interval tells a client that sent a `progressToken` how many seconds it
//! has been running (no total: a tool's work is not known in advance).

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::time::{Instant, interval_at};

/// Where progress goes: the client's token, its peer, and how often.
pub type ProgressTarget = (ProgressToken, Peer<RoleServer>, Duration);

/// Awaits `call`, sending progress to `target` (if any) every interval
/// until it ends; a notification that cannot be sent is skipped.
pub async fn with_progress<T>(call: impl Future<Output = T>, target: Option<ProgressTarget>) -> T {
    let Some((token, peer, every)) = target else { return call.await };
    let started = Instant::now();
    let mut ticks = interval_at(started + every, every);
    tokio::pin!(call);
    loop {
        tokio::select! {
            output = &mut call => return output,
            _ = ticks.tick() => {
                let seconds = started.elapsed().as_secs_f64().floor();
                let progress = ProgressNotificationParam::new(token.clone(), seconds)
                    .with_message(format!("still running after {seconds} s"));
                if let Err(error) = peer.notify_progress(progress).await {
                    tracing::debug!(error = %error, "a progress notification was not sent");
                }
            }
        }
    }
}
