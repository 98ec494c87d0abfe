//! A stdio MCP server's standard error, read to its end and logged: each
//! line an event naming the module, cut at [`MAX_ERROR_CHARS`] characters,
//! its control characters replaced (so it cannot pass for the
//! orchestrator's own log lines, or flood its output), at most
//! [`MAX_STDERR_LINES_PER_SECOND`] a second; the lines dropped over that
//! are counted in an event when the next second's first line comes, or
//! when the stream ends. The reading ends with the connection (after
//! `DRAIN` to read what is left), also when the pipe stays open: a
//! grandchild that left the process group (`setsid`) may hold it.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::results::{MAX_ERROR_CHARS, shortened};

/// The most lines of one server's standard error logged in a second.
pub const MAX_STDERR_LINES_PER_SECOND: u32 = 20;

/// The most bytes of a line kept (enough for [`MAX_ERROR_CHARS`] characters
/// of UTF-8); the rest of it is read and skipped.
const MAX_LINE_BYTES: usize = MAX_ERROR_CHARS * 4;

/// How long a server's standard error is still read once its connection is dropped.
const DRAIN: Duration = Duration::from_secs(1);

/// The reading of a stdio server's standard error: once dropped (with its
/// connection) it goes on for `DRAIN` at most, then ends.
#[derive(Debug)]
pub struct StderrReader {
    _stop: oneshot::Sender<()>,
}

impl StderrReader {
    /// Logs the lines of `stderr`, the standard error of `module`'s server,
    /// until it ends or `DRAIN` after the reader is dropped.
    pub fn spawn(module: String, stderr: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(log_lines(module, stderr, stopped));
        Self { _stop: stop }
    }
}

/// Logs the lines of `stderr`, the standard error of `module`'s server,
/// until it ends or `DRAIN` after `stopped` resolves (its sender dropped).
async fn log_lines(module: String, stderr: impl AsyncRead + Unpin, stopped: oneshot::Receiver<()>) {
    let mut read = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut pace = Pace::new(Instant::now());
    let drained = async {
        let _ = stopped.await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::pin!(drained);
    loop {
        let available = tokio::select! {
            filled = read.fill_buf() => match filled {
                Ok([]) | Err(_) => break,
                Ok(available) => available,
            },
            () = &mut drained => {
                tracing::info!(module, "no longer reading the MCP server's standard error: its session ended, a process it started still holds it open");
                break;
            }
        };
        let newline = available.iter().position(|byte| *byte == b'\n');
        let taken = newline.map_or(available.len(), |at| at + 1);
        let kept = (taken - usize::from(newline.is_some())).min(MAX_LINE_BYTES - line.len());
        line.extend_from_slice(&available[..kept]);
        read.consume(taken);
        if newline.is_some() {
            pace.log(&module, &line, Instant::now());
            line.clear();
        }
    }
    if !line.is_empty() {
        pace.log(&module, &line, Instant::now());
    }
    pace.report_dropped(&module);
}

/// The lines logged in the current second, and those dropped.
struct Pace {
    second_from: Instant,
    logged: u32,
    dropped: u64,
}

impl Pace {
    fn new(now: Instant) -> Self {
        Self { second_from: now, logged: 0, dropped: 0 }
    }

    /// Logs `line` of `module`'s server, read at `now`, or counts it dropped.
    fn log(&mut self, module: &str, line: &[u8], now: Instant) {
        if now.duration_since(self.second_from) >= Duration::from_secs(1) {
            self.report_dropped(module);
            *self = Self::new(now);
        }
        if self.logged >= MAX_STDERR_LINES_PER_SECOND {
            self.dropped += 1;
            return;
        }
        self.logged += 1;
        let text = String::from_utf8_lossy(line);
        let text: String = shortened(text.trim_end_matches('\r'))
            .chars()
            .map(|c| if c.is_control() { char::REPLACEMENT_CHARACTER } else { c })
            .collect();
        tracing::info!(module, stderr = text, "the MCP server wrote on its standard error");
    }

    /// Logs how many lines were dropped since the last report, if any.
    fn report_dropped(&mut self, module: &str) {
        if self.dropped > 0 {
            tracing::warn!(
                module,
                dropped = self.dropped,
                "lines of the MCP server's standard error were not logged: more than {MAX_STDERR_LINES_PER_SECOND} a second"
            );
            self.dropped = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_reading_ends_after_the_drain_though_the_pipe_stays_open() {
        let (_writer, stderr) = tokio::io::duplex(64);
        let (stop, stopped) = oneshot::channel();
        let reading = tokio::spawn(log_lines("m".to_owned(), stderr, stopped));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!reading.is_finished(), "read while its connection lives");
        drop(stop);
        tokio::time::timeout(Duration::from_secs(10), reading).await.expect("still reading after the drain").unwrap();
    }

    #[test]
    fn lines_over_the_pace_are_counted_not_logged() {
        let start = Instant::now();
        let mut pace = Pace::new(start);
        for _ in 0..MAX_STDERR_LINES_PER_SECOND + 5 {
            pace.log("m", b"line", start);
        }
        assert_eq!((pace.logged, pace.dropped), (MAX_STDERR_LINES_PER_SECOND, 5));
        pace.log("m", b"line", start + Duration::from_secs(1));
        assert_eq!((pace.logged, pace.dropped), (1, 0), "a new second, the count reported");
    }
}
