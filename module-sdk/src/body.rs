//! Reading an HTTP body whole up to a byte budget, whatever its framing:
//! a declared `Content-Length` over the budget is refused before reading,
//! and a chunked (or lying) body is cut off as soon as it passes the budget,
//! so what one body costs in memory is proportional to the budget. Used for
//! the requests a module reads and the answers the orchestrator reads.

use std::pin::pin;

use axum::body::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body;

/// Why a body could not be had; `E` is the body's own error.
#[derive(Debug, thiserror::Error)]
pub enum BodyError<E: std::error::Error + 'static> {
    /// The body is larger than the budget.
    #[error("the body is larger than {max} bytes ({setting})")]
    TooLarge {
        /// The budget, in bytes.
        max: usize,
        /// The setting that holds it.
        setting: &'static str,
    },
    /// The connection failed while reading.
    #[error(transparent)]
    Transport(E),
}

/// `body` whole, or [`BodyError::TooLarge`] once it passes `max` bytes (the
/// budget named `setting`). A body that comes in one piece is kept as it
/// came, without a copy.
pub async fn read_body<B>(body: B, max: usize, setting: &'static str) -> Result<Bytes, BodyError<B::Error>>
where
    B: Body<Data = Bytes>,
    B::Error: std::error::Error + 'static,
{
    let too_large = || BodyError::TooLarge { max, setting };
    let declared = body.size_hint().exact();
    if declared.is_some_and(|length| length > max as u64) {
        return Err(too_large());
    }
    let mut body = pin!(body);
    // The first piece as it came; later ones copied after it into `joined`.
    let mut first: Option<Bytes> = None;
    let mut joined = Vec::new();
    let mut length = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame.map_err(BodyError::Transport)?.into_data() else { continue };
        length += chunk.len();
        if length > max {
            return Err(too_large());
        }
        match first.take() {
            None if joined.is_empty() => first = Some(chunk),
            None => joined.extend_from_slice(&chunk),
            Some(previous) => {
                joined.reserve(first_reservation(declared, length));
                joined.extend_from_slice(&previous);
                joined.extend_from_slice(&chunk);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(joined)))
}

/// The most reserved for a body beyond twice what has arrived when the
/// second piece comes: a client may declare the whole budget and send two
/// bytes, so what it declared is believed only this far ahead of what it sent.
const RESERVE_AHEAD: usize = 64 * 1024;

/// What to reserve when the second piece of a body arrives, `received`
/// bytes in: what is declared (never more than the budget) as long as it is
/// within twice what arrived or [`RESERVE_AHEAD`]; past that the buffer grows
/// as the body comes.
fn first_reservation(declared: Option<u64>, received: usize) -> usize {
    let believed = received.saturating_mul(2).max(RESERVE_AHEAD);
    declared.map_or(received, |declared| usize::try_from(declared).unwrap_or(usize::MAX).min(believed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    fn chunked(
        pieces: &[&'static str],
    ) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, std::io::Error>>> {
        StreamBody::new(stream::iter(pieces.iter().map(|piece| Ok(Frame::data(Bytes::from_static(piece.as_bytes()))))))
    }

    #[test]
    fn a_declared_length_is_reserved_only_a_bounded_way_ahead_of_what_arrived() {
        let budget = 2 * 1024 * 1024;
        assert_eq!(first_reservation(Some(budget), 2), RESERVE_AHEAD);
        assert_eq!(first_reservation(Some(budget), 100_000), 200_000);
        assert_eq!(first_reservation(Some(300), 2), 300);
        assert_eq!(first_reservation(None, 10), 10);
    }

    #[tokio::test]
    async fn a_body_longer_than_the_first_reservation_is_read_whole() {
        let piece = "x".repeat(RESERVE_AHEAD);
        let pieces = [
            Ok::<_, std::io::Error>(Frame::data(Bytes::from("ab"))),
            Ok(Frame::data(Bytes::from(piece.clone()))),
            Ok(Frame::data(Bytes::from(piece))),
        ];
        let body = StreamBody::new(stream::iter(pieces));
        let read = read_body(body, 4 * RESERVE_AHEAD, "MAX").await.unwrap();
        assert_eq!(read.len(), 2 + 2 * RESERVE_AHEAD);
    }

    #[tokio::test]
    async fn pieces_are_joined_and_cut_off_past_the_budget() {
        assert_eq!(read_body(chunked(&["ab"]), 4, "MAX").await.unwrap(), "ab");
        assert_eq!(read_body(chunked(&["a", "", "b", "c"]), 4, "MAX").await.unwrap(), "abc");
        assert_eq!(read_body(chunked(&[]), 4, "MAX").await.unwrap(), "");
        let error = read_body(chunked(&["ab", "cd", "e"]), 4, "MAX").await.unwrap_err();
        assert_eq!(error.to_string(), "the body is larger than 4 bytes (MAX)");
        let declared = http_body_util::Full::new(Bytes::from_static(b"abcde"));
        assert!(matches!(read_body(declared, 4, "MAX").await, Err(BodyError::TooLarge { max: 4, .. })));
    }
}
