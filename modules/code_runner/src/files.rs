//! The files a run left in its working directory, as the lister inside the
//! sandbox reported them; its report is the code's to tamper with, so the
//! caps are applied again here and a report that does not parse is dropped.

use limited_process::Captured;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sandbox::FileCaps;

/// One file left in the working directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OutputFile {
    /// Its path relative to the working directory.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its text, when it is UTF-8 and small enough (`CODE_FILE_CONTENT_MAX_BYTES`,
    /// and `CODE_FILES_MAX_CONTENT_BYTES` for all files of an answer together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// The lister's report.
#[derive(Debug, Default, Deserialize)]
struct Listing {
    files: Vec<OutputFile>,
    #[serde(default)]
    truncated: bool,
}

/// The files of `report` within `caps`, and whether any were left out.
pub fn files_of(report: &Captured, caps: FileCaps) -> (Vec<OutputFile>, bool) {
    if report.total_bytes == 0 {
        return (Vec::new(), false);
    }
    let Some(listing) = (!report.cut).then(|| serde_json::from_slice::<Listing>(&report.bytes).ok()).flatten() else {
        return (Vec::new(), true);
    };
    let mut truncated = listing.truncated;
    let mut text_left = caps.max_content_bytes;
    let mut files = listing.files;
    if files.len() as u64 > caps.max_count {
        files.truncate(usize::try_from(caps.max_count).unwrap_or(usize::MAX));
        truncated = true;
    }
    for file in &mut files {
        let fits = file
            .content
            .as_ref()
            .map(|text| text.len() as u64)
            .filter(|&len| len <= caps.content_max_bytes && len <= text_left);
        match fits {
            Some(len) => text_left -= len,
            None => file.content = None,
        }
    }
    (files, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: FileCaps = FileCaps { max_count: 2, content_max_bytes: 5, max_content_bytes: 8 };

    fn report(text: &str) -> Captured {
        Captured { bytes: text.as_bytes().to_vec(), cut: false, total_bytes: text.len() as u64 }
    }

    #[test]
    fn caps_apply_again_and_garbage_is_dropped() {
        assert_eq!(files_of(&Captured::default(), CAPS), (Vec::new(), false));
        assert_eq!(files_of(&report("not json"), CAPS), (Vec::new(), true));
        let listed = r#"{"files": [{"name": "a", "size": 5, "content": "hello"}, {"name": "b", "size": 5, "content": "world"},
            {"name": "c", "size": 1}], "truncated": false}"#;
        let (files, truncated) = files_of(&report(listed), CAPS);
        assert!(truncated, "three files, two allowed");
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].content.as_deref(), Some("hello"));
        assert_eq!(files[1].content, None, "over the text left for the answer");
    }
}
