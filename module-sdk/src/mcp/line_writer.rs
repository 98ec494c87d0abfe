//! Writing one JSON-RPC message a line, for both ends of MCP over stdio
//! (the SDK's `--stdio` server, the orchestrator's client of stdio
//! servers): the write half of the transport [`LineReader`] reads for.
//!
//! [`LineReader`]: super::LineReader

use std::sync::Arc;

use futures::SinkExt;
use rmcp::service::{ServiceRole, TxJsonRpcMessage};
use rmcp::transport::async_rw::{JsonRpcMessageCodec, TransportWriter};
use tokio::io::AsyncWrite;
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};
use tokio_util::codec::FramedWrite;

/// Messages of `Role`'s side written to `W`, one a line, each whole under
/// one lock (two never interleave); once closed, every write is an error.
pub struct LineWriter<Role: ServiceRole, W> {
    framed: Arc<Mutex<Option<TransportWriter<Role, W>>>>,
    /// The message of the error of a write after [`Self::close`].
    closed: &'static str,
}

impl<Role: ServiceRole, W: AsyncWrite + Unpin> LineWriter<Role, W> {
    /// Messages to `write`; a write after [`Self::close`] fails as
    /// [`std::io::ErrorKind::NotConnected`] with the message `closed`.
    pub fn new(write: W, closed: &'static str) -> Self {
        Self { framed: Arc::new(Mutex::new(Some(FramedWrite::new(write, JsonRpcMessageCodec::default())))), closed }
    }

    /// The writer to itself until the guard is dropped (no send comes
    /// between the writes made with it); an error once closed.
    pub(crate) async fn lock(&self) -> std::io::Result<MappedMutexGuard<'_, TransportWriter<Role, W>>> {
        MutexGuard::try_map(self.framed.lock().await, Option::as_mut)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::NotConnected, self.closed))
    }

    /// Writes `item` and its newline, flushed; an error once closed or when
    /// `W` fails. Owns what it needs, as [`rmcp::transport::Transport::send`]
    /// asks.
    pub fn send(&self, item: TxJsonRpcMessage<Role>) -> impl Future<Output = std::io::Result<()>> + Send + 'static
    where
        W: Send + 'static,
    {
        let this = Self { framed: Arc::clone(&self.framed), closed: self.closed };
        async move { this.lock().await?.send(item).await.map_err(std::io::Error::from) }
    }

    /// Drops `W` once the write under way is done; every write after is an
    /// error.
    pub async fn close(&self) {
        drop(self.framed.lock().await.take());
    }
}

#[cfg(test)]
mod tests {
    use rmcp::RoleServer;
    use rmcp::model::{ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
    use serde_json::Value;
    use tokio::io::{AsyncBufReadExt, BufReader};

    use super::*;

    /// An error message for request `id`, `size` bytes of text long.
    fn message(id: i64, size: usize) -> ServerJsonRpcMessage {
        JsonRpcMessage::error(ErrorData::internal_error("x".repeat(size), None), Some(RequestId::Number(id)))
    }

    /// Every line the other end of `read` gets, to its end, as JSON.
    async fn lines(read: impl tokio::io::AsyncRead + Unpin) -> Vec<Value> {
        let mut lines = BufReader::new(read).lines();
        let mut read = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            read.push(serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line}")));
        }
        read
    }

    #[tokio::test]
    async fn concurrent_sends_arrive_as_whole_lines_and_a_send_after_close_fails() {
        // A pipe a few bytes wide: each message is written in many pieces.
        let (write, read) = tokio::io::duplex(7);
        let writer = Arc::new(LineWriter::<RoleServer, _>::new(write, "the test's output is closed"));
        let reading = tokio::spawn(lines(read));
        let sends: Vec<_> = (0..20).map(|id| tokio::spawn(writer.send(message(id, 500 + 37 * id as usize)))).collect();
        for send in sends {
            send.await.unwrap().unwrap();
        }
        writer.close().await;
        let error = writer.send(message(99, 1)).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotConnected);
        assert_eq!(error.to_string(), "the test's output is closed");
        assert!(writer.lock().await.is_err(), "a closed writer is not lent");
        let mut ids: Vec<i64> = reading.await.unwrap().iter().map(|line| line["id"].as_i64().unwrap()).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..20).collect::<Vec<_>>(), "each message once, whole, and none after close");
    }
}
