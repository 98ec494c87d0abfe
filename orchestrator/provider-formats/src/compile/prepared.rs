//! What [`prepare`](super::prepare) makes: a schema tree that borrows every
//! part of the source document it keeps unchanged, written out as JSON text
//! (no `Value` tree built, hashed and dropped on the way) or made a `Value`
//! for the passes that rewrite it further.

use std::borrow::Cow;

use serde_json::Value;

use super::keywords::{items, members};

/// A prepared schema node.
#[derive(Debug, Clone)]
pub(crate) enum Prepared<'a> {
    /// A value kept as it is (borrowed from the document) or made anew.
    Value(Cow<'a, Value>),
    /// An object, its keywords in order (no keyword twice).
    Object(Entries<'a>),
    /// A list.
    Array(Vec<Prepared<'a>>),
}

impl<'a> Prepared<'a> {
    /// The node as a `Value`.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Self::Value(value) => value.into_owned(),
            Self::Object(entries) => Value::Object(
                entries.into_iter().map(|(keyword, node)| (keyword.into_owned(), node.into_value())).collect(),
            ),
            Self::Array(items) => Value::Array(items.into_iter().map(Self::into_value).collect()),
        }
    }

    /// Appends the node's JSON text to `out`: the bytes `serde_json::to_string` writes for [`Self::into_value`].
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::Value(value) => write_value(value, out),
            Self::Object(entries) => {
                out.push(b'{');
                for (index, (keyword, node)) in entries.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    write_str(keyword, out);
                    out.push(b':');
                    node.write(out);
                }
                out.push(b'}');
            }
            Self::Array(items) => {
                out.push(b'[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    item.write(out);
                }
                out.push(b']');
            }
        }
    }

    /// The items of a list node (a kept list's, borrowed as they are); a node of any other kind as it is.
    pub(crate) fn into_items(self) -> Result<Vec<Prepared<'a>>, Self> {
        match self {
            Self::Array(items) => Ok(items),
            Self::Value(value) => match items(value) {
                Ok(items) => Ok(items.map(Self::Value).collect()),
                Err(other) => Err(Self::Value(other)),
            },
            other => Err(other),
        }
    }

    /// The keywords of an object node (a kept object value's, borrowed as
    /// they are); a node of any other kind as it is.
    pub(crate) fn into_object(self) -> Result<Vec<(Cow<'a, str>, Prepared<'a>)>, Self> {
        match self {
            Self::Object(entries) => Ok(entries),
            Self::Value(value) => match members(value) {
                Ok(members) => Ok(members.map(|(keyword, value)| (keyword, Self::Value(value))).collect()),
                Err(other) => Err(Self::Value(other)),
            },
            other => Err(other),
        }
    }
}

/// An object node's keywords, in order (no keyword twice).
pub(crate) type Entries<'a> = Vec<(Cow<'a, str>, Prepared<'a>)>;

/// The node of `keyword` in `entries`, to change it.
pub(crate) fn entry_mut<'x, 'a>(entries: &'x mut Entries<'a>, keyword: &str) -> Option<&'x mut Prepared<'a>> {
    entries.iter_mut().find(|(k, _)| k == keyword).map(|(_, node)| node)
}

/// Sets `keyword` in `entries`: in place when present, else appended (as `Map::insert`).
pub(crate) fn set<'a>(entries: &mut Entries<'a>, keyword: impl Into<Cow<'a, str>>, node: Prepared<'a>) {
    let keyword = keyword.into();
    match entry_mut(entries, &keyword) {
        Some(old) => *old = node,
        None => entries.push((keyword, node)),
    }
}

/// Appends `value`'s compact JSON text to `out` (the bytes `serde_json` writes).
fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::String(text) => write_str(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
        // Writing a number, a boolean or null to a `Vec` cannot fail.
        other => {
            let _ = serde_json::to_writer(out, other);
        }
    }
}

/// Whether no byte of `bytes` is one JSON escapes (a control character, a
/// quote or a backslash); eight bytes at a time (the "has a byte less than
/// n" and "has a zero byte" word tests, exact for whether any byte matches).
fn is_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let has_zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGH != 0;
    let escapes = |word: u64| {
        word.wrapping_sub(ONES * 0x20) & !word & HIGH != 0
            || has_zero(word ^ (ONES * u64::from(b'"')))
            || has_zero(word ^ (ONES * u64::from(b'\\')))
    };
    let chunks = bytes.chunks_exact(8);
    let tail = chunks.remainder();
    let words_plain = chunks.into_iter().all(|chunk| {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        !escapes(u64::from_ne_bytes(word))
    });
    words_plain && tail.iter().all(|&byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
}

/// Appends `text` as a JSON string to `out`: as it is between quotes when
/// nothing in it needs escaping (no control character, quote or backslash:
/// the only bytes `serde_json` escapes), else as `serde_json` escapes it.
pub(crate) fn write_str(text: &str, out: &mut Vec<u8>) {
    if is_plain(text.as_bytes()) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string to a `Vec` cannot fail.
        let _ = serde_json::to_writer(out, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_value_agree_escapes_included() {
        let kept = json!({"b": [1, 2.5, null], "a": "quote \" and \\ and \u{1}"});
        let node = Prepared::Object(vec![
            ("z\"\n".into(), Prepared::Value(Cow::Borrowed(&kept))),
            ("list".into(), Prepared::Array(vec![Prepared::Value(Cow::Owned(json!(true))), Prepared::Array(vec![])])),
            ("empty".into(), Prepared::Object(vec![])),
        ]);
        let mut text = Vec::new();
        node.write(&mut text);
        let value = node.into_value();
        assert_eq!(String::from_utf8(text).unwrap(), serde_json::to_string(&value).unwrap());
        let entries = Prepared::Value(Cow::Borrowed(&kept)).into_object().unwrap();
        assert_eq!(Prepared::Object(entries).into_value(), kept);
        assert!(Prepared::Value(Cow::Owned(json!(1))).into_object().is_err());
    }

    #[test]
    fn strings_and_values_are_written_as_serde_json_writes_them() {
        let long = "a plain text of more than eight bytes, ünï \u{7f}";
        for sample in
            ["", "plain ünï \u{7f}", "tab\there", "\\", "q\"", "\u{1f}", "\u{0}x", long, "12345678\"", "1234567\n9"]
        {
            let mut text = Vec::new();
            write_str(sample, &mut text);
            assert_eq!(text, serde_json::to_vec(sample).unwrap(), "{sample:?}");
        }
        let value = json!({"a": [1, -2.5, 1e300, null, true, "x\"y"], "b": {"": {}}, "c": []});
        let mut text = Vec::new();
        write_value(&value, &mut text);
        assert_eq!(text, serde_json::to_vec(&value).unwrap());
    }

    proptest::proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in "[a-z \"\\\\\\x00-\\x1f\\x7f-\\u{3ff}]{0,40}") {
            let mut written = Vec::new();
            write_str(&text, &mut written);
            proptest::prop_assert_eq!(written, serde_json::to_vec(&text).unwrap());
        }
    }
}
