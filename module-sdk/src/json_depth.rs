//! The one nesting budget of a request's JSON: serde_json's fixed
//! recursion limit, which reads 127 arrays and objects inside one another
//! and refuses the 128th. A body past it is valid JSON
//! the module cannot read, so it is refused naming the limit, not called
//! invalid.

/// How deep arrays and objects may nest in a request body (serde_json's
/// fixed recursion limit of 128 refuses the 128th level; not a setting).
pub(crate) const MAX_JSON_DEPTH: usize = 127;

/// What a caller whose body nests too deep is told.
pub(crate) fn too_deep_message() -> String {
    format!(
        "the body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels, the most a module reads; send a flatter value"
    )
}

/// Whether serde_json refused a text for nesting past [`MAX_JSON_DEPTH`]
/// (its error has no code to match, only this wording).
pub(crate) fn is_too_deep(error: &serde_json::Error) -> bool {
    error.to_string().starts_with("recursion limit exceeded")
}

/// Whether the JSON text `bytes` nests past [`MAX_JSON_DEPTH`]: arrays and
/// objects counted in one pass, strings skipped, nothing allocated. A text
/// that is not JSON is scanned all the same; the answer matters only for
/// one that would parse.
pub(crate) fn nests_too_deep(bytes: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_JSON_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a": [[...]]}` with `levels` arrays and objects in all.
    fn nested(levels: usize) -> String {
        let inner = levels - 1;
        format!(r#"{{"a": {}1{}}}"#, "[".repeat(inner), "]".repeat(inner))
    }

    #[test]
    fn the_scan_agrees_with_serde_json_at_the_limit() {
        for levels in [1, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 10_000] {
            let text = nested(levels);
            let parsed = serde_json::from_str::<serde_json::Value>(&text);
            assert_eq!(nests_too_deep(text.as_bytes()), parsed.is_err(), "{levels} levels");
            assert_eq!(parsed.as_ref().err().is_some_and(is_too_deep), parsed.is_err(), "{levels} levels");
        }
        assert!(!nests_too_deep(nested(MAX_JSON_DEPTH).as_bytes()));
        assert!(nests_too_deep(nested(MAX_JSON_DEPTH + 1).as_bytes()));
    }

    #[test]
    fn brackets_in_strings_do_not_count() {
        let text = format!(r#"{{"a": "{}\"{}"}}"#, "[".repeat(500), "{".repeat(500));
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        assert!(!nests_too_deep(text.as_bytes()));
    }
}
