//! The on-disk form of a stored file: one file per document holding its
//! metadata and its content together, so that the two are always written,
//! renamed and deleted as one and can never disagree.
//!
//! ```text
//! file_manager record 1\n
//! {"file_id": "...", "name": "...", ..., "size_bytes": N, "sha256": "..."}\n
//! <N bytes of content>
//! ```
//!
//! The header's size and checksum are verified on every read, so a record
//! damaged by something outside this module (a disk error, a hand edit) is
//! reported instead of served.

use std::io::{BufRead, Read};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first line of every record; its number is the format's version.
const MAGIC: &[u8] = b"file_manager record 1\n";

/// The longest header accepted, so a bad file cannot make a reader buffer
/// without bound.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// What a stored file is, as shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileInfo {
    /// The file's id; pass it to `read_document` or `delete_file`.
    pub file_id: String,
    /// The file's name (ASCII letters, digits, space, `.`, `-` and `_` only).
    pub name: String,
    /// How the file was made.
    pub kind: FileKind,
    /// The file's media type, e.g. `text/markdown` or `application/octet-stream`.
    pub media_type: String,
    /// The content's size in bytes.
    pub size_bytes: u64,
    /// The SHA-256 digest of the content, in hex.
    pub sha256: String,
    /// When the file was stored (RFC 3339, UTC).
    pub created_at: String,
}

/// How a file was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Written with `create_document`.
    Document,
    /// Sent with `upload_file`.
    Upload,
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file does not start with the record marker.
    #[error("not a file_manager record")]
    NotARecord,
    /// The header line is missing, too long or not the expected JSON.
    #[error("the record's header is damaged: {0}")]
    BadHeader(String),
    /// The content is not as long as the header says.
    #[error("the record holds {found} content bytes, its header says {expected}")]
    SizeMismatch {
        /// Size from the header.
        expected: u64,
        /// Size found.
        found: u64,
    },
    /// The content's digest differs from the header's.
    #[error("the record's content does not match its checksum")]
    ChecksumMismatch,
    /// Reading failed.
    #[error("reading the record failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The hex SHA-256 digest of `content`.
pub fn sha256_hex(content: &[u8]) -> String {
    format!("{:x}", Sha256::digest(content))
}

/// The record of `info` and `content`.
pub fn encode(info: &FileInfo, content: &[u8]) -> Vec<u8> {
    let header = serde_json::to_vec(info).expect("file metadata always serializes");
    let mut record = Vec::with_capacity(MAGIC.len() + header.len() + 1 + content.len());
    record.extend_from_slice(MAGIC);
    record.extend_from_slice(&header);
    record.push(b'\n');
    record.extend_from_slice(content);
    record
}

/// Reads the marker and header of a record, leaving `reader` at the content.
pub fn read_header(reader: &mut impl BufRead) -> Result<FileInfo, RecordError> {
    let mut magic = [0; MAGIC.len()];
    reader.read_exact(&mut magic).map_err(|_| RecordError::NotARecord)?;
    if magic != MAGIC {
        return Err(RecordError::NotARecord);
    }
    let mut header = Vec::new();
    let limit = u64::try_from(MAX_HEADER_BYTES).unwrap_or(u64::MAX);
    reader.take(limit).read_until(b'\n', &mut header)?;
    if header.pop() != Some(b'\n') {
        return Err(RecordError::BadHeader(format!("no header line within {MAX_HEADER_BYTES} bytes")));
    }
    serde_json::from_slice(&header).map_err(|e| RecordError::BadHeader(e.to_string()))
}

/// Reads the content of the record whose header [`read_header`] gave as
/// `info`, verifying its size and checksum; it holds at most
/// `info.size_bytes` bytes, so the caller bounds it by checking that first.
pub fn read_content(reader: &mut impl BufRead, info: &FileInfo) -> Result<Vec<u8>, RecordError> {
    let mut content = Vec::with_capacity(usize::try_from(info.size_bytes).unwrap_or(0).min(64 * 1024 * 1024));
    // One byte past the stated size is enough to tell that there is more.
    reader.take(info.size_bytes.saturating_add(1)).read_to_end(&mut content)?;
    let found = content.len() as u64;
    if found != info.size_bytes {
        return Err(RecordError::SizeMismatch { expected: info.size_bytes, found });
    }
    if sha256_hex(&content) != info.sha256 {
        return Err(RecordError::ChecksumMismatch);
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole record, as the store reads one.
    fn read(reader: &mut impl BufRead) -> Result<(FileInfo, Vec<u8>), RecordError> {
        let info = read_header(reader)?;
        let content = read_content(reader, &info)?;
        Ok((info, content))
    }

    fn info(content: &[u8]) -> FileInfo {
        FileInfo {
            file_id: "0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6f".into(),
            name: "notes.md".into(),
            kind: FileKind::Document,
            media_type: "text/markdown".into(),
            size_bytes: content.len() as u64,
            sha256: sha256_hex(content),
            created_at: "2024-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn records_round_trip_with_any_content() {
        for content in [&b""[..], b"# Title\n\nText\n", b"\0\xff\n{binary}\n"] {
            let record = encode(&info(content), content);
            let (read_info, read_content) = read(&mut &record[..]).unwrap();
            assert_eq!((read_info, read_content.as_slice()), (info(content), content));
            assert_eq!(read_header(&mut &record[..]).unwrap(), info(content));
        }
    }

    #[test]
    fn damage_is_detected() {
        let content = b"hello world";
        let record = encode(&info(content), content);
        let cut = &record[..record.len() - 1];
        assert!(matches!(read(&mut &cut[..]), Err(RecordError::SizeMismatch { expected: 11, found: 10 })));
        let mut longer = record.clone();
        longer.push(b'!');
        assert!(matches!(read(&mut &longer[..]), Err(RecordError::SizeMismatch { .. })));
        let mut flipped = record.clone();
        *flipped.last_mut().unwrap() = b'D';
        assert!(matches!(read(&mut &flipped[..]), Err(RecordError::ChecksumMismatch)));
        assert!(matches!(read(&mut &b"plain file"[..]), Err(RecordError::NotARecord)));
        let endless_header = [MAGIC, &vec![b'x'; MAX_HEADER_BYTES * 2]].concat();
        assert!(matches!(read_header(&mut &endless_header[..]), Err(RecordError::BadHeader(_))));
        let cut_in_header = &record[..MAGIC.len() + 5];
        assert!(matches!(read_header(&mut &cut_in_header[..]), Err(RecordError::BadHeader(_))));
    }
}
