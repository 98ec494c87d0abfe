//! A session's call ends with the `POST` that asked for it: rmcp answers a
//! request inside a 2025-11-25 session on a stream of its own, but runs the
//! request on the session's task, which goes on when that stream is dropped
//! (its client went away). Unlike the stateless path, which rmcp cancels
//! then, a session's call would run on to its timeout, holding one of the
//! module's `MAX_CONCURRENT_CALLS_PER_MODULE` slots, so one client posting
//! slow calls and closing the socket, again and again, could take them all.
//! [`CancelOnDrop`] sends the session the `notifications/cancelled` for the
//! request when its answer stream is dropped before it ended; so does the
//! stream a client resumed the answer on (`Last-Event-ID`), rmcp having
//! ended the first one normally when it moved the answer there.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::{Stream, StreamExt};
use rmcp::model::ServerJsonRpcMessage;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, RequestId,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionHandle;

use crate::mcp::call_ids::KeptCallId;

/// The answer stream of one request of a session: dropped before its end, the request is cancelled.
pub struct CancelOnDrop<S> {
    stream: S,
    /// The session and the request to cancel, until the stream has ended.
    pending: Option<(LocalSessionHandle, RequestId)>,
    /// The request's id kept for a resume, forgotten once it is answered or cancelled.
    kept: Option<KeptCallId>,
}

impl<S> CancelOnDrop<S> {
    /// `stream`, the answer to request `request` of the session `session`
    /// (nothing to cancel when either is unknown: a notification, an ended
    /// session), forgetting `kept` once the request is answered or cancelled.
    pub fn new(
        stream: S,
        session: Option<LocalSessionHandle>,
        request: Option<RequestId>,
        kept: Option<KeptCallId>,
    ) -> Self {
        Self { stream, pending: session.zip(request), kept }
    }
}

impl<S: Stream<Item = ServerSseMessage> + Unpin> Stream for CancelOnDrop<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = ready!(self.stream.poll_next_unpin(cx));
        match &item {
            // rmcp ends the stream once the answer is in it, or once the
            // answer was resumed on another stream: nothing left to cancel here.
            None => self.pending = None,
            Some(event) => {
                if let Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)) =
                    event.message.as_deref()
                    && let Some(kept) = self.kept.take()
                {
                    kept.forget();
                }
            }
        }
        Poll::Ready(item)
    }
}

impl<S> Drop for CancelOnDrop<S> {
    fn drop(&mut self) {
        let Some((session, request)) = self.pending.take() else { return };
        if let Some(kept) = self.kept.take() {
            kept.forget();
        }
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
