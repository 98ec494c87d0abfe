//! Tags as they are stored and matched: trimmed, lower-cased, with inner
//! whitespace collapsed to one space, so `" Family  Dates "` and
//! `"family dates"` are the same tag.

/// Most tags on one note (also the most in a filter).
pub const MAX_TAGS: usize = 16;

/// Longest tag, in characters, after normalization.
pub const MAX_TAG_CHARS: usize = 64;

/// Why a list of tags is refused; messages are meant for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// A tag is empty once its whitespace is removed.
    #[error("tag {0} is empty once trimmed; a tag needs at least one visible character")]
    Empty(usize),
    /// A tag is longer than [`MAX_TAG_CHARS`].
    #[error("tag {index} has {chars} characters, more than the limit of {MAX_TAG_CHARS}")]
    TooLong {
        /// Its position in the list.
        index: usize,
        /// Its length once normalized.
        chars: usize,
    },
    /// More distinct tags than [`MAX_TAGS`].
    #[error("{0} distinct tags given, more than the limit of {MAX_TAGS} per note")]
    TooMany(usize),
}

/// One tag in its stored form.
pub fn normalize_tag(tag: &str) -> String {
    tag.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>().join(" ")
}

/// A list of tags in stored form: normalized, duplicates dropped, first
/// occurrence order kept, every limit checked.
pub fn normalize_tags(tags: &[String]) -> Result<Vec<String>, TagError> {
    let mut normalized: Vec<String> = Vec::with_capacity(tags.len());
    for (index, tag) in tags.iter().enumerate() {
        let tag = normalize_tag(tag);
        if tag.is_empty() {
            return Err(TagError::Empty(index));
        }
        let chars = tag.chars().count();
        if chars > MAX_TAG_CHARS {
            return Err(TagError::TooLong { index, chars });
        }
        if !normalized.contains(&tag) {
            normalized.push(tag);
        }
    }
    if normalized.len() > MAX_TAGS {
        return Err(TagError::TooMany(normalized.len()));
    }
    Ok(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Result<Vec<String>, TagError> {
        normalize_tags(&list.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn case_and_whitespace_fold_and_duplicates_go() {
        assert_eq!(tags(&[" Family \t Dates ", "family dates", "ÉTÉ"]).unwrap(), ["family dates", "été"]);
        assert_eq!(tags(&[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn limits_are_named() {
        assert_eq!(tags(&["ok", "  "]), Err(TagError::Empty(1)));
        let long = "x".repeat(MAX_TAG_CHARS + 1);
        assert!(tags(&[&long]).unwrap_err().to_string().contains("more than the limit of 64"));
        let many: Vec<String> = (0..=MAX_TAGS).map(|i| format!("t{i}")).collect();
        assert_eq!(normalize_tags(&many), Err(TagError::TooMany(MAX_TAGS + 1)));
    }
}
