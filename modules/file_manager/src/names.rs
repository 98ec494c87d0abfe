//! Display names of stored files, made safe.
//!
//! Names are only ever shown, never used as paths (a file's path is its
//! id), but they still reach people and programs: a name keeps only ASCII
//! letters, digits, space, `.`, `-` and `_`, so right-to-left overrides,
//! zero-width characters, look-alike letters and control characters cannot
//! disguise one file as another. Leading dots and dashes (hidden files,
//! command-line options) and trailing dots and spaces are removed.

/// Longest stored name, in characters.
pub const MAX_NAME_CHARS: usize = 100;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name contains NUL or another control character.
    #[error("the name contains a control character (such as NUL or a line break); use plain text")]
    ControlCharacter,
    /// A file name contains a path separator.
    #[error("the file name `{0}` is a path; give only the file's own name, e.g. `report.pdf`")]
    Path(String),
    /// Nothing usable is left after sanitizing.
    #[error("the name `{0}` has no letters or digits that can be kept; use ASCII letters, digits, `.`, `-` or `_`")]
    Empty(String),
}

/// A document title made into a file name with `extension` (no dot); an
/// unusable title becomes `untitled`.
pub fn document_name(title: &str, extension: &str) -> Result<String, NameError> {
    let stem = sanitize(title)?;
    let stem = stem.strip_suffix(&format!(".{extension}")).unwrap_or(&stem);
    let stem = if stem.is_empty() { "untitled" } else { stem };
    Ok(format!("{stem}.{extension}"))
}

/// An uploaded file's name, which must be a bare name, not a path.
pub fn upload_name(filename: &str) -> Result<String, NameError> {
    if filename.contains(['/', '\\']) {
        return Err(NameError::Path(filename.chars().take(MAX_NAME_CHARS).collect()));
    }
    let name = sanitize(filename)?;
    if name.is_empty() || !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return Err(NameError::Empty(filename.chars().take(MAX_NAME_CHARS).collect()));
    }
    Ok(name)
}

/// The safe form of `text`: ASCII letters, digits, space, `.`, `-`, `_`.
fn sanitize(text: &str) -> Result<String, NameError> {
    if text.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter);
    }
    let mut safe = String::with_capacity(text.len().min(MAX_NAME_CHARS));
    for c in text.chars() {
        let kept = if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') { c } else { '_' };
        // One replacement for a run of unsafe characters; no double spaces.
        let repeats = matches!((safe.chars().last(), kept), (Some('_'), '_') | (Some(' '), ' '));
        if !repeats {
            safe.push(kept);
        }
    }
    let trimmed = safe.trim_start_matches(['.', '-', ' ', '_']).trim_end_matches(['.', ' ']);
    Ok(trimmed.chars().take(MAX_NAME_CHARS).collect::<String>().trim_end_matches(['.', ' ']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_get_safe_names_with_their_extension() {
        assert_eq!(document_name("Quarterly report", "md").unwrap(), "Quarterly report.md");
        assert_eq!(document_name("notes.md", "md").unwrap(), "notes.md");
        assert_eq!(document_name("Q1/Q2: plan?", "txt").unwrap(), "Q1_Q2_ plan_.txt");
        assert_eq!(document_name("Résumé", "txt").unwrap(), "R_sum_.txt");
        assert_eq!(document_name("../../etc/passwd", "txt").unwrap(), "etc_passwd.txt");
        assert_eq!(document_name("日本語", "md").unwrap(), "untitled.md");
        assert_eq!(document_name("   ", "csv").unwrap(), "untitled.csv");
        assert_eq!(document_name(&"x".repeat(500), "md").unwrap().len(), MAX_NAME_CHARS + 3);
    }

    #[test]
    fn unicode_tricks_are_flattened() {
        // A right-to-left override would show "photo\u{202E}gpj.exe" as "photoexe.jpg".
        assert_eq!(upload_name("photo\u{202E}gpj.exe").unwrap(), "photo_gpj.exe");
        assert_eq!(upload_name("pay\u{200B}pal.pdf").unwrap(), "pay_pal.pdf");
        assert_eq!(upload_name("ｅｖｉｌ.txt").unwrap(), "txt");
        assert_eq!(upload_name("inv\u{0430}ice.pdf").unwrap(), "inv_ice.pdf", "a Cyrillic look-alike is not kept");
    }

    #[test]
    fn paths_control_characters_and_dot_names_are_refused() {
        for path in ["../x.txt", "/etc/passwd", "a/b", "C:\\Windows\\x", "..\\x"] {
            assert!(matches!(upload_name(path), Err(NameError::Path(_))), "{path}");
        }
        for name in ["a\0b.txt", "line\nbreak", "tab\there", "bell\u{7}"] {
            assert_eq!(upload_name(name), Err(NameError::ControlCharacter), "{name:?}");
            assert_eq!(document_name(name, "md"), Err(NameError::ControlCharacter), "{name:?}");
        }
        for name in ["..", ".", "...", "", "___", "-", "\u{202E}"] {
            assert!(matches!(upload_name(name), Err(NameError::Empty(_))), "{name:?}");
        }
        assert_eq!(upload_name(".bashrc").unwrap(), "bashrc");
        assert_eq!(upload_name("-rf .txt. . ").unwrap(), "rf .txt");
    }
}
