//! The stdio transport: one JSON-RPC message a line, each line within the
//! body limit, and every line that cannot be read answered. rmcp's own
//! line transport drops a line over its limit, or that is not UTF-8, not
//! JSON or nests too deep for serde_json, without a word, so the client
//! would wait forever for its request;
//! here each such line gets a JSON-RPC error naming what is wrong (with
//! no `id`, which could not be read: MCP's form of JSON-RPC's `"id": null`),
//! and the lines after it are read on (by [`LineReader`], which the
//! orchestrator's client of stdio servers shares, as it shares the
//! [`LineWriter`] that answers). A line that is a message is read by rmcp's
//! codec, as rmcp's transport reads it.

use futures::SinkExt;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, JsonRpcError, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Decoder;

use super::line_reader::{Line, LineReader};
use super::line_writer::LineWriter;
use super::message_head::{has_long_id, long_id_message};
use crate::json_depth::{nests_too_deep, too_deep_message};

/// A transport reading one message a line from `R` and writing answers to `W`.
pub(crate) struct StdioLines<R, W> {
    lines: LineReader<R>,
    decoder: JsonRpcMessageCodec<ClientJsonRpcMessage>,
    write: LineWriter<RoleServer, W>,
    /// The answer to the last line that could not be read, written before
    /// the next line is read (so a client that writes bad lines without
    /// reading waits in its pipe). Kept here, not in `receive`, which rmcp
    /// drops whenever something else is ready first.
    refusal: Option<Refusal>,
}

/// Where the answer to an unreadable line stands.
enum Refusal {
    Unwritten(Box<JsonRpcError>),
    /// Handed to the writer, to be flushed.
    Unflushed,
}

/// The members of an unreadable line that say which request it is; any
/// other member is skipped without nesting into it.
#[derive(Deserialize)]
struct RequestHead {
    id: Option<RequestId>,
    method: Option<IgnoredAny>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StdioLines<R, W> {
    /// Messages from `read`, answers to `write`; a message over
    /// `max_message_bytes` (its newline not counted) is refused unread.
    pub(crate) fn new(read: R, write: W, max_message_bytes: usize) -> Self {
        Self {
            lines: LineReader::new(read, max_message_bytes),
            decoder: JsonRpcMessageCodec::default(),
            write: LineWriter::new(write, "standard output is closed"),
            refusal: None,
        }
    }

    /// The message on the whole line in `line` (`None` for a blank line or
    /// a notification rmcp ignores), or the answer to a line that is none.
    fn read_message(&mut self) -> Result<Option<ClientJsonRpcMessage>, Box<JsonRpcError>> {
        let text = self.lines.line.strip_suffix(b"\n").unwrap_or(&self.lines.line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            self.lines.line.clear();
            return Ok(None);
        }
        if std::str::from_utf8(text).is_err() {
            return Err(refusal(
                None,
                ErrorData::parse_error("the line is not valid UTF-8; a message is UTF-8 JSON", None),
            ));
        }
        if nests_too_deep(text) {
            let message = too_deep_message();
            return Err(match request_id(text) {
                Some(id) => refusal(Some(id), ErrorData::invalid_request(message, None)),
                None => refusal(None, ErrorData::parse_error(message, None)),
            });
        }
        // rmcp logs the id of every request it answers with an error: a long one is refused unread.
        if has_long_id(text) {
            return Err(refusal(None, ErrorData::invalid_request(long_id_message(), None)));
        }
        // rmcp's codec below reads it alike, but consumes the line: parsed
        // here first, the line is still there to find the id of one that fails.
        if let Ok(message) = serde_json::from_slice(text) {
            self.lines.line.clear();
            return Ok(Some(message));
        }
        let id = request_id(text);
        // A byte order mark, or a notification rmcp ignores (`Ok(None)`).
        match self.decoder.decode(&mut self.lines.line) {
            Ok(message) => Ok(message),
            Err(JsonRpcMessageCodecError::Serde(error)) if error.is_syntax() || error.is_eof() => {
                Err(refusal(None, ErrorData::parse_error(format!("the line is not valid JSON: {error}"), None)))
            }
            // JSON, but not a message: rmcp's transport answers this alike, without the reason.
            // (The codec's other errors are of reading, which a line already read cannot have.)
            Err(error) => {
                let reason = match error {
                    JsonRpcMessageCodecError::Serde(error) => error.to_string(),
                    other => other.to_string(),
                };
                let message = format!("the line is not a JSON-RPC message of MCP: {reason}");
                Err(refusal(id, ErrorData::invalid_request(message, None)))
            }
        }
    }

    /// Writes the answer to the last unreadable line, if any; an error when
    /// standard output is closed or failed.
    async fn write_refusal(&mut self) -> std::io::Result<()> {
        let Some(refusal) = &mut self.refusal else { return Ok(()) };
        let mut framed = self.write.lock().await?;
        if let Refusal::Unwritten(answer) = refusal {
            framed.feed(JsonRpcMessage::Error(JsonRpcError::clone(answer))).await?;
            *refusal = Refusal::Unflushed;
        }
        framed.flush().await?;
        self.refusal = None;
        Ok(())
    }
}

/// The answer to an unreadable line: `error`, for the request `id` when it
/// could be told.
fn refusal(id: Option<RequestId>, error: ErrorData) -> Box<JsonRpcError> {
    Box::new(JsonRpcError::new(id, error))
}

/// The id of the request on `text`, a line that is JSON (nesting at any
/// depth; only `id` itself is read into) but maybe not a message; `None`
/// when it is not a request or its id cannot be read.
fn request_id(text: &[u8]) -> Option<RequestId> {
    let head: RequestHead = serde_json::from_slice(text).ok()?;
    head.method.and(head.id)
}

impl<R, W> Transport<RoleServer> for StdioLines<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Err(error) = self.write_refusal().await {
                tracing::debug!(%error, "could not answer a line that is not a message");
                return None;
            }
            let answer = match self.lines.read_line().await {
                Line::End => return None,
                Line::Whole => match self.read_message() {
                    Ok(Some(message)) => return Some(message),
                    Ok(None) => continue,
                    Err(answer) => answer,
                },
                Line::TooLong(_) => refusal(
                    None,
                    ErrorData::parse_error(
                        format!(
                            "the line is longer than MAX_BODY_BYTES ({} bytes), the longest message this module reads; it was skipped unread",
                            self.lines.max_message_bytes()
                        ),
                        None,
                    ),
                ),
            };
            self.lines.line.clear();
            tracing::debug!(?answer, "answering a line that is not a message");
            self.refusal = Some(Refusal::Unwritten(answer));
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_last_line_without_its_newline_is_read() {
        for (last, answers) in [(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.to_owned(), 0), ("x".repeat(1001), 1)] {
            let (server, client) = tokio::io::duplex(64 * 1024);
            let (from_client, mut to_server) = tokio::io::split(client);
            let (read, write) = tokio::io::split(server);
            let mut transport = StdioLines::new(read, write, 1000);
            to_server.write_all(last.as_bytes()).await.unwrap();
            to_server.shutdown().await.unwrap();
            if answers == 0 {
                let Some(rmcp::model::JsonRpcMessage::Request(request)) = transport.receive().await else {
                    panic!("the last line was not read as a request")
                };
                assert_eq!(request.id, RequestId::Number(7));
            }
            assert!(transport.receive().await.is_none(), "then the input ends");
            drop(transport);
            drop(to_server);
            let mut lines = tokio::io::BufReader::new(from_client).lines();
            let mut written = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                written.push(line);
            }
            assert_eq!(written.len(), answers, "{written:?}");
            assert!(written.iter().all(|line| line.contains("MAX_BODY_BYTES")), "{written:?}");
        }
    }

    #[tokio::test]
    async fn a_long_line_is_skipped_as_it_comes_and_answered_once() {
        let (server, client) = tokio::io::duplex(64 * 1024);
        let (from_client, mut to_server) = tokio::io::split(client);
        let (read, write) = tokio::io::split(server);
        let mut transport = StdioLines::new(read, write, 1000);
        let writing = tokio::spawn(async move {
            to_server.write_all(&vec![b'x'; 5 * 1024 * 1024]).await.unwrap();
            // Exactly at the limit, then one byte over it.
            let list = |cursor: String| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": cursor}});
            let at_limit = list("p".repeat(1000 - list(String::new()).to_string().len())).to_string();
            assert_eq!(at_limit.len(), 1000);
            let over = at_limit.replace("\"id\":1", "\"id\":12");
            let lines = format!("\n{at_limit}\n{over}\n{}\n", json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
            to_server.write_all(lines.as_bytes()).await.unwrap();
            to_server
        });
        let id = |message: Option<ClientJsonRpcMessage>| match message {
            Some(rmcp::model::JsonRpcMessage::Request(request)) => request.id,
            other => panic!("not a request: {other:?}"),
        };
        assert_eq!(id(transport.receive().await), RequestId::Number(1));
        assert!(
            transport.lines.line.capacity() < 64 * 1024,
            "{} bytes held for a line",
            transport.lines.line.capacity()
        );
        assert_eq!(id(transport.receive().await), RequestId::Number(3));
        drop(writing.await.unwrap());
        drop(transport);
        let mut answers = tokio::io::BufReader::new(from_client).lines();
        let mut refusals = Vec::new();
        while let Some(line) = answers.next_line().await.unwrap() {
            refusals.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        assert_eq!(refusals.len(), 2, "one answer per long line: {refusals:?}");
        for refusal in refusals {
            assert_eq!(refusal["error"]["code"], -32700, "{refusal}");
            assert!(refusal["error"]["message"].as_str().unwrap().contains("MAX_BODY_BYTES (1000 bytes)"), "{refusal}");
        }
    }
}
