//! A 2025-11-25 session with a call running is not idle: rmcp ends a
//! session after its keep-alive (`MCP_SESSION_IDLE_SECONDS`) without an
//! event, and a call to a slow tool sends none (no progress without a
//! `progressToken`), so the session, and the call with it, ended mid-call.
//! [`KeptAlive`] touches the session (opens and closes an empty channel
//! of it: two events, nothing sent) every half of that while the answer
//! stream of one of its requests is open. A client holding its `GET`
//! stream open, waiting for notifications (`list_changed`), sends none
//! either: that stream keeps its session alive the same way.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::transport::streamable_http_server::session::local::LocalSessionHandle;
use tokio::sync::oneshot;
use tokio::time::{Instant, interval_at};

/// An answer stream of a session, or its `GET` stream, keeping the session from idling while it is open.
pub struct KeptAlive<S> {
    stream: S,
    /// Dropped when the stream ends or is dropped: the touching stops.
    touching: Option<oneshot::Sender<()>>,
}

impl<S> KeptAlive<S> {
    /// `stream`, touching `session` (if any) every `every` (if any) until it ends or is dropped.
    pub fn new(stream: S, session: Option<LocalSessionHandle>, every: Option<Duration>) -> Self {
        let touching = session.zip(every).map(|(session, every)| {
            let (touching, stopped) = oneshot::channel();
            tokio::spawn(touch(session, every, stopped));
            touching
        });
        Self { stream, touching }
    }
}

impl<S: Stream + Unpin> Stream for KeptAlive<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = ready!(self.stream.poll_next_unpin(cx));
        if item.is_none() {
            drop(self.touching.take());
        }
        Poll::Ready(item)
    }
}

/// Touches `session` every `every` until `stopped` resolves (its sender dropped) or the session ends.
async fn touch(session: LocalSessionHandle, every: Duration, mut stopped: oneshot::Receiver<()>) {
    let mut ticks = interval_at(Instant::now() + every, every);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = ticks.tick() => {
                let Ok(channel) = session.establish_request_wise_channel().await else { return };
                if let Some(id) = channel.http_request_id
                    && session.close_request_wise_channel(id).await.is_err()
                {
                    return;
                }
            }
        }
    }
}
