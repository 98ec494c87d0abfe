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

/// Whether serde_json's `error` reading the JSON text `bytes` is its refusal
/// to nest past [`MAX_JSON_DEPTH`]: the error is at an array or object that
/// opens level `MAX_JSON_DEPTH + 1`, where serde_json stops for its
/// recursion limit. Its error has no code for that, and its wording may
/// change; its position (line and column, from 1, in bytes) is part of its
/// API. Scans the text up to the error, so only for a body that failed.
///
/// Another error at such a bracket (a misplaced `[` after a value, at that
/// very level) reads as this one too; the body does nest that deep.
pub(crate) fn is_too_deep(bytes: &[u8], error: &serde_json::Error) -> bool {
    let Some(offset) = error_offset(bytes, error) else { return false };
    Openings::new(&bytes[..=offset]).last() == Some((offset, MAX_JSON_DEPTH + 1))
}

/// Whether the JSON text `bytes` nests past [`MAX_JSON_DEPTH`]: arrays and
/// objects counted in one pass, strings skipped, nothing allocated. A text
/// that is not JSON is scanned all the same; the answer matters only for
/// one that would parse.
pub(crate) fn nests_too_deep(bytes: &[u8]) -> bool {
    Openings::new(bytes).any(|(_, depth)| depth > MAX_JSON_DEPTH)
}

/// The offset in `bytes` of the byte serde_json's `error` points at; `None`
/// for an error without a position.
fn error_offset(bytes: &[u8], error: &serde_json::Error) -> Option<usize> {
    let line_start = match error.line().checked_sub(2) {
        None => 0,
        Some(newlines) => bytes.iter().enumerate().filter(|(_, byte)| **byte == b'\n').nth(newlines)?.0 + 1,
    };
    let offset = line_start + error.column().checked_sub(1)?;
    (offset < bytes.len()).then_some(offset)
}

/// The arrays and objects a JSON text opens, outside strings: each as its
/// offset and the level it opens (the outermost is 1); a closing bracket
/// steps back a level.
struct Openings<'a> {
    bytes: &'a [u8],
    next: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

impl<'a> Openings<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, next: 0, depth: 0, in_string: false, escaped: false }
    }
}

impl Iterator for Openings<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(&byte) = self.bytes.get(self.next) {
            let offset = self.next;
            self.next += 1;
            if self.in_string {
                match byte {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    return Some((offset, self.depth));
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
        None
    }
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
            let too_deep = parsed.as_ref().err().is_some_and(|error| is_too_deep(text.as_bytes(), error));
            assert_eq!(too_deep, parsed.is_err(), "{levels} levels");
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

    #[test]
    fn the_refusal_is_found_by_where_it_is_on_any_line() {
        // Pretty-printed: the 128th level on a line of its own, after strings with brackets and escapes.
        let open = "[\n".repeat(MAX_JSON_DEPTH - 1);
        let text = format!("{{\"a\": \"[{{\\\"\",\n \"b\": {open}  [1]}}");
        let error = serde_json::from_str::<serde_json::Value>(&text).unwrap_err();
        assert!(is_too_deep(text.as_bytes(), &error), "{error}");
    }

    #[test]
    fn another_error_is_not_taken_for_the_refusal() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for text in [
            // Before the deep value, and after it (serde_json skips an unknown field without a limit).
            format!(r#"{{"tool_name": 5, "arguments": {{"a": {deep}}}}}"#),
            format!(r#"{{"extra": {deep}, "tool_name": 5}}"#),
            format!(r#"{{"extra": {deep}, "tool_name": "t",, }}"#),
            // At the end of a shallow object.
            r#"{"arguments": {}}"#.to_owned(),
        ] {
            let error = serde_json::from_str::<crate::contract::ToolCall>(&text).unwrap_err();
            assert!(!is_too_deep(text.as_bytes(), &error), "{text}: {error}");
        }
        let deep_arguments = format!(r#"{{"tool_name": "t", "arguments": {{"a": {deep}}}}}"#);
        let error = serde_json::from_str::<crate::contract::ToolCall>(&deep_arguments).unwrap_err();
        assert!(is_too_deep(deep_arguments.as_bytes(), &error), "{error}");
    }
}
