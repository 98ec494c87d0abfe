//! The body of a module's answer, which drives the connection it comes
//! over while it is read and gives the connection back to the pool once it
//! is read whole.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::connection::{ConnectionPool, ModuleConnection};

/// A module's answer body. Dropped before its end, it closes its connection
/// (HTTP/1.1 cannot skip the rest of an answer); read to its end, it puts
/// the connection back in the pool.
pub struct AnswerBody {
    body: Incoming,
    /// `None` once the answer is read whole and the connection given back.
    connection: Option<ModuleConnection>,
    pool: Arc<ConnectionPool>,
}

impl AnswerBody {
    /// `body`, arriving over `connection`, which goes back to `pool` after it.
    pub(super) fn new(body: Incoming, connection: ModuleConnection, pool: Arc<ConnectionPool>) -> Self {
        Self { body, connection: Some(connection), pool }
    }
}

impl std::fmt::Debug for AnswerBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerBody").field("body", &self.body).finish_non_exhaustive()
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if let Some(connection) = &mut this.connection {
            // Reads the next piece into the body; wakes this reader when there is more.
            connection.drive(cx);
        }
        let frame = ready!(Pin::new(&mut this.body).poll_frame(cx));
        if frame.is_none()
            && let Some(connection) = this.connection.take()
        {
            this.pool.put(connection);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
