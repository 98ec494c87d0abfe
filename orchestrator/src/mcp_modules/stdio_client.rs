//! The client transport of a stdio MCP server: one message a line, as
//! rmcp's own line transport reads them, but a line over the limit (the
//! larger of `MAX_MANIFEST_BYTES` and `MAX_ANSWER_BYTES`) is not dropped
//! without a word, leaving its call to wait for its timeout: it is skipped
//! in bounded memory by the SDK's [`LineReader`], whose scan reads its
//! top-level `id`. An answer whose id was read fails its request with an
//! error [`is_too_long`] tells (the call then names the budget, as over
//! HTTP), the session kept; a request or notification of the server's own
//! is skipped with a warning; an answer whose id could not be read ends the
//! session, so no call waits for an answer that will not come.

use module_sdk::mcp::{Line, LineReader, LineWriter};
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_util::codec::Decoder;

/// The code of the error a request gets when its answer was too long to read.
const TOO_LONG_CODE: ErrorCode = ErrorCode(-32_001);

/// The `data` that tells that error from one the server sent.
fn too_long_data() -> Value {
    json!({"skipped_by": "orchestrator", "reason": "the answer is over the message limit"})
}

/// The error a request gets when its answer was longer than `max_bytes`.
pub fn too_long_error(max_bytes: usize) -> ErrorData {
    let message =
        format!("the answer is longer than {max_bytes} bytes, the longest message read; it was skipped unread");
    ErrorData::new(TOO_LONG_CODE, message, Some(too_long_data()))
}

/// Whether `error` is a request's answer skipped for its size: the session
/// is still usable. (A server could send the same error itself: its own call
/// would then fail as too large, nothing else.)
pub fn is_too_long(error: &ServiceError) -> bool {
    matches!(error, ServiceError::McpError(data) if data.code == TOO_LONG_CODE && data.data == Some(too_long_data()))
}

/// The client side of a session with the server of `module` on `R` and `W`.
pub struct StdioClient<R, W> {
    module: String,
    lines: LineReader<R>,
    decoder: JsonRpcMessageCodec<ServerJsonRpcMessage>,
    write: LineWriter<RoleClient, W>,
    /// Why the session was ended, when an answer's id could not be read.
    ended: watch::Sender<Option<String>>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StdioClient<R, W> {
    /// Messages of `module`'s server from `read` (none over
    /// `max_message_bytes` read), requests to `write`; the reason the
    /// session was ended, if it is, goes to `ended`.
    pub fn new(
        module: &str,
        read: R,
        write: W,
        max_message_bytes: usize,
        ended: watch::Sender<Option<String>>,
    ) -> Self {
        Self {
            module: module.to_owned(),
            lines: LineReader::new(read, max_message_bytes),
            decoder: JsonRpcMessageCodec::default(),
            write: LineWriter::new(write, "the session is closed"),
            ended,
        }
    }

    /// The message on the whole line read (`None` for a blank line, or one
    /// rmcp's transport would ignore: not JSON, not a message, or a
    /// notification it does not know).
    fn read_message(&mut self) -> Option<ServerJsonRpcMessage> {
        let line = self.lines.line();
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        if text.strip_suffix(b"\r").unwrap_or(text).is_empty() {
            line.clear();
            return None;
        }
        let decoded = self.decoder.decode(line);
        line.clear();
        decoded.unwrap_or_else(|error| {
            tracing::debug!(module = %self.module, %error, "ignoring a line from the MCP server that is not a message");
            None
        })
    }
}

impl<R, W> Transport<RoleClient> for StdioClient<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let head = match self.lines.read_line().await {
                Line::End => return None,
                Line::Whole => match self.read_message() {
                    Some(message) => return Some(message),
                    None => continue,
                },
                Line::TooLong(head) => head,
            };
            let max = self.lines.max_message_bytes();
            match head.id {
                _ if head.has_method => {
                    tracing::warn!(module = %self.module, max_bytes = max, id = ?head.id,
                        "skipped a request or notification of the MCP server over the message limit");
                }
                Some(id) => return Some(JsonRpcMessage::Error(JsonRpcError::new(Some(id), too_long_error(max)))),
                None => {
                    let reason = format!(
                        "the server sent a message longer than {max} bytes (the larger of MAX_MANIFEST_BYTES and MAX_ANSWER_BYTES) whose id could not be read, so the session was ended"
                    );
                    tracing::warn!(module = %self.module, "{reason}");
                    self.ended.send_replace(Some(reason));
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::RequestId;
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn an_answer_too_long_fails_its_request_and_one_without_an_id_ends_the_session() {
        let (read, mut server) = tokio::io::duplex(64 * 1024);
        let ended = watch::Sender::new(None);
        let mut client = StdioClient::new("m", read, tokio::io::sink(), 1000, ended.clone());
        let big = "x".repeat(100_000);
        let lines = format!(
            "{{\"jsonrpc\":\"2.0\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}},\"id\":4}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"{big}\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"result\":\"{big}\"}}\n"
        );
        let writing = tokio::spawn(async move { server.write_all(lines.as_bytes()).await });
        let Some(JsonRpcMessage::Error(skipped)) = client.receive().await else { panic!("no error for request 4") };
        assert_eq!(skipped.id, Some(RequestId::Number(4)));
        assert!(is_too_long(&ServiceError::McpError(skipped.error)));
        let Some(JsonRpcMessage::Response(next)) = client.receive().await else {
            panic!("the notification over the limit is skipped, the next answer read")
        };
        assert_eq!(next.id, RequestId::Number(5));
        assert!(ended.borrow().is_none());
        assert!(client.receive().await.is_none(), "an answer without an id ends the session");
        assert!(ended.borrow().as_deref().unwrap().contains("MAX_ANSWER_BYTES"));
        writing.await.unwrap().unwrap();
        let server_error = ServiceError::McpError(ErrorData::new(TOO_LONG_CODE, "mine", None));
        assert!(!is_too_long(&server_error), "the server's own error with that code is its own");
    }
}
