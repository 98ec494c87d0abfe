//! Reading one JSON-RPC message a line in bounded memory, for both ends of
//! MCP over stdio (the SDK's `--stdio` server, the orchestrator's client of
//! stdio servers): a line over the limit is skipped as its bytes come,
//! never held, while a [`HeadScan`] reads its `id` and whether it has a
//! `method`, so the one who sent it can be told.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio_util::bytes::BytesMut;

use super::message_head::{HeadScan, MessageHead};

/// Lines read from `R`, each at most a limit long.
pub struct LineReader<R> {
    read: BufReader<R>,
    /// The line being read; never more than `max_line_bytes`.
    pub(crate) line: BytesMut,
    /// The longest line read, its newline included.
    max_line_bytes: usize,
    /// Set once a line over the limit was met, until its newline: the rest
    /// of it is scanned and skipped as it comes.
    skipping: bool,
    /// The scan of the line being skipped.
    scan: HeadScan,
}

/// What reading a line found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line, its newline included, is in [`LineReader::line`].
    Whole,
    /// A line longer than the limit was skipped; what its scan found.
    TooLong(MessageHead),
    /// The input closed (or failed).
    End,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Lines from `read`; one over `max_message_bytes` (its newline not
    /// counted) is skipped unread.
    pub fn new(read: R, max_message_bytes: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: BytesMut::new(),
            max_line_bytes: max_message_bytes.saturating_add(1),
            skipping: false,
            scan: HeadScan::default(),
        }
    }

    /// The longest message read, its newline not counted.
    pub fn max_message_bytes(&self) -> usize {
        self.max_line_bytes - 1
    }

    /// The whole line read last ([`Line::Whole`]), for the caller to take
    /// or clear before the next is read.
    pub fn line(&mut self) -> &mut BytesMut {
        &mut self.line
    }

    /// Reads the next line into [`Self::line`], up to the limit. Cancel-safe:
    /// bytes are taken from the reader only as they are kept or scanned,
    /// with no wait in between, so a read dropped midway resumes where it
    /// stopped. The last line, without a newline, is read as if it had one.
    pub async fn read_line(&mut self) -> Line {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) if self.skipping => {
                    self.skipping = false;
                    return Line::TooLong(self.scan.finish());
                }
                Ok([]) if self.line.is_empty() => return Line::End,
                // Over the limit by its missing newline's byte, it is too long.
                Ok([]) if self.line.len() >= self.max_line_bytes => {
                    self.scan.feed(&self.line);
                    self.line.clear();
                    return Line::TooLong(self.scan.finish());
                }
                Ok([]) => {
                    self.line.extend_from_slice(b"\n");
                    return Line::Whole;
                }
                Ok(available) => available,
                Err(error) => {
                    tracing::warn!(%error, "could not read the stream of MCP messages");
                    return Line::End;
                }
            };
            let newline = available.iter().position(|byte| *byte == b'\n');
            let taken = newline.map_or(available.len(), |at| at + 1);
            if !self.skipping && self.line.len().saturating_add(taken) > self.max_line_bytes {
                self.scan.feed(&self.line);
                self.line.clear();
                self.skipping = true;
            }
            if self.skipping {
                self.scan.feed(&available[..taken]);
            } else {
                self.line.extend_from_slice(&available[..taken]);
            }
            self.read.consume(taken);
            if newline.is_some() {
                if std::mem::take(&mut self.skipping) {
                    return Line::TooLong(self.scan.finish());
                }
                return Line::Whole;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::RequestId;
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn a_long_line_is_skipped_in_bounded_memory_and_its_id_read() {
        let (read, mut write) = tokio::io::duplex(64 * 1024);
        let mut lines = LineReader::new(read, 1000);
        let writing = tokio::spawn(async move {
            let big = "x".repeat(5 * 1024 * 1024);
            let long = format!("{{\"jsonrpc\":\"2.0\",\"result\":{{\"id\":1,\"text\":\"{big}\"}},\"id\":12}}\n");
            write.write_all(long.as_bytes()).await.unwrap();
            write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n").await.unwrap();
            write.write_all(format!("{{\"method\":\"m\",\"params\":\"{big}\"}}").as_bytes()).await.unwrap();
        });
        let head = MessageHead { id: Some(RequestId::Number(12)), has_method: false, long_id: false };
        assert_eq!(lines.read_line().await, Line::TooLong(head));
        assert!(lines.line.capacity() < 64 * 1024, "{} bytes held for a line", lines.line.capacity());
        assert_eq!(lines.read_line().await, Line::Whole);
        assert_eq!(&lines.line()[..], b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n");
        lines.line().clear();
        let head = MessageHead { id: None, has_method: true, long_id: false };
        assert_eq!(lines.read_line().await, Line::TooLong(head), "the last line, without its newline");
        writing.await.unwrap();
        assert_eq!(lines.read_line().await, Line::End);
    }
}
