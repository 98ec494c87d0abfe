//! The opaque page cursor of `list_notes`: where the previous page ended
//! (a note's creation time and its sequence number), as 22 characters of
//! URL-safe base64. Every string of that shape decodes to some position,
//! so a cursor that passes the schema's pattern is never refused.

use base64::Engine;
use base64::alphabet::URL_SAFE;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};

/// The JSON Schema pattern every cursor matches.
pub const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]{22}$";

/// URL-safe base64 without padding; trailing bits are ignored on decoding.
const CURSOR_BASE64: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// A position in a user's notes, newest first: the page continues with the
/// notes strictly older than it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The last listed note's creation time, in microseconds since 1970.
    pub created_at_micros: i64,
    /// The last listed note's sequence number.
    pub seq: i64,
}

/// A cursor that is not one this module gave out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cursor is not one list_notes gave; pass next_cursor from the previous page unchanged, or none for the first page"
)]
pub struct CursorError;

impl Cursor {
    /// The cursor's text.
    pub fn encode(self) -> String {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.created_at_micros.to_be_bytes());
        bytes[8..].copy_from_slice(&self.seq.to_be_bytes());
        CURSOR_BASE64.encode(bytes)
    }

    /// The cursor written as `text`.
    pub fn decode(text: &str) -> Result<Self, CursorError> {
        if text.len() != 22 {
            return Err(CursorError);
        }
        let bytes = CURSOR_BASE64.decode(text).map_err(|_| CursorError)?;
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| CursorError)?;
        let (time, seq) = bytes.split_at(8);
        Ok(Self {
            created_at_micros: i64::from_be_bytes(time.try_into().map_err(|_| CursorError)?),
            seq: i64::from_be_bytes(seq.try_into().map_err(|_| CursorError)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_match_the_pattern() {
        let cursor = Cursor { created_at_micros: 1_779_000_000_123_456, seq: 42 };
        let text = cursor.encode();
        assert_eq!(text.len(), 22);
        assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{text}");
        assert_eq!(Cursor::decode(&text), Ok(cursor));
    }

    #[test]
    fn any_string_of_the_pattern_decodes_and_others_do_not() {
        assert!(Cursor::decode("zzzzzzzzzzzzzzzzzzzzzz").is_ok());
        assert!(Cursor::decode("______________________").is_ok());
        for bad in ["", "example", "zzzzzzzzzzzzzzzzzzzzz=", "zzzzzzzzzzzzzzzzzzzzzzz", "zzzzzzzzzzzzzzzzzzzzz\0"] {
            assert_eq!(Cursor::decode(bad), Err(CursorError), "{bad:?}");
        }
    }
}
