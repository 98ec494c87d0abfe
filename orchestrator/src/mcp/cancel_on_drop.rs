//! A session's call ends with the `POST` that asked for it: rmcp answers a
//! request inside a 2025-11-25 session on a stream of its own, but runs the
//! request on the session's task, which goes on when that stream is dropped
//! (its client went away). Unlike the stateless path, which rmcp cancels
//! then, a session's call would run on to its timeout, holding one of the
//! module's `MAX_CONCURRENT_CALLS_PER_MODULE` slots, so one client posting
//! slow calls and closing the socket, again and again, could take them all.
//! [`CancelOnDrop`] sends the session the `notifications/cancelled` for the
//! request when its answer stream is dropped before it ended.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::{Stream, StreamExt};
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, RequestId,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionHandle;

/// The answer stream of one request of a session: dropped before its end, the request is cancelled.
pub struct CancelOnDrop<S> {
    stream: S,
    /// The session and the request to cancel, until the stream has ended.
    pending: Option<(LocalSessionHandle, RequestId)>,
}

impl<S> CancelOnDrop<S> {
    /// `stream`, the answer to request `request` of the session `session`
    /// (nothing to cancel when either is unknown: a notification, an ended session).
    pub fn new(stream: S, session: Option<LocalSessionHandle>, request: Option<RequestId>) -> Self {
        Self { stream, pending: session.zip(request) }
    }
}

impl<S: Stream + Unpin> Stream for CancelOnDrop<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = ready!(self.stream.poll_next_unpin(cx));
        if item.is_none() {
            // rmcp ends the stream once the answer is in it: nothing left to cancel.
            self.pending = None;
        }
        Poll::Ready(item)
    }
}

impl<S> Drop for CancelOnDrop<S> {
    fn drop(&mut self) {
        let Some((session, request)) = self.pending.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let reason = "the client closed the request's stream before its answer".to_owned();
        let cancelled = CancelledNotification::new(CancelledNotificationParam::new(Some(request), Some(reason)));
        let message = ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(cancelled));
        runtime.spawn(async move {
            // An error means the session has ended, and its calls with it.
            let _ = session.push_message(message, None).await;
        });
    }
}
