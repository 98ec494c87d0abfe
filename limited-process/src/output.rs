//! Reading a pipe to its end while keeping only the first bytes.

use tokio::io::{AsyncRead, AsyncReadExt};

/// What was kept of one output stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes written, at most the cap.
    pub bytes: Vec<u8>,
    /// Whether more was written than kept (the rest was read and discarded).
    pub cut: bool,
    /// How many bytes were written in all.
    pub total_bytes: u64,
}

/// Reads `pipe` to its end, keeping at most `cap` bytes: the writer is
/// never blocked on a full pipe, and memory stays bounded. When `stop`
/// resolves first (a descendant that outlived the program holds the pipe
/// open), what was read is kept and marked cut.
pub(crate) async fn read_capped(
    mut pipe: impl AsyncRead + Unpin,
    cap: usize,
    stop: impl Future<Output = ()>,
) -> Captured {
    let mut captured = Captured::default();
    let mut chunk = vec![0_u8; 64 * 1024];
    let mut stop = std::pin::pin!(stop);
    loop {
        let read = tokio::select! {
            // A writer that never pauses must not keep the stop from being seen.
            biased;
            () = &mut stop => {
                captured.cut = true;
                break;
            }
            read = pipe.read(&mut chunk) => read,
        };
        let read = match read {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        captured.total_bytes += read as u64;
        let room = cap.saturating_sub(captured.bytes.len());
        captured.bytes.extend_from_slice(&chunk[..read.min(room)]);
        captured.cut |= read > room;
    }
    captured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_head_and_counts_the_rest() {
        let data = vec![b'x'; 200_000];
        let captured = read_capped(&data[..], 1000, std::future::pending()).await;
        assert_eq!(captured.bytes.len(), 1000);
        assert!(captured.cut);
        assert_eq!(captured.total_bytes, 200_000);
        let small = read_capped(&b"hello"[..], 5, std::future::pending()).await;
        assert_eq!((small.bytes.as_slice(), small.cut), (&b"hello"[..], false));
    }

    #[tokio::test]
    async fn a_stop_keeps_what_was_read_from_a_pipe_still_open() {
        let (mut writer, reader) = tokio::io::duplex(1024);
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"result").await.unwrap();
        let stop = tokio::time::sleep(std::time::Duration::from_millis(50));
        let captured = read_capped(reader, 100, stop).await;
        assert_eq!((captured.bytes.as_slice(), captured.cut), (&b"result"[..], true));
        drop(writer);
    }
}
