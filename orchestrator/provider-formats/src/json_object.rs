//! A JSON object written as text field by field, for definitions whose
//! compiled schema is written straight from its tree (no `Value` built for
//! the definition around it). The bytes are those `serde_json::to_string`
//! writes for the same object.

use super::compile::write_str;

/// An object being written into `out`: `{` written, `}` by [`Self::end`].
pub(crate) struct ObjectText<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> ObjectText<'o> {
    /// Starts an object at the end of `out`.
    pub(crate) fn start(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, empty: true }
    }

    /// Writes `key` and has `value` write its value.
    pub(crate) fn field(mut self, key: &str, value: impl FnOnce(&mut Vec<u8>)) -> Self {
        if !std::mem::replace(&mut self.empty, false) {
            self.out.push(b',');
        }
        write_str(key, self.out);
        self.out.push(b':');
        value(self.out);
        self
    }

    /// Writes `key: text`, `text` as a JSON string.
    pub(crate) fn string(self, key: &str, text: &str) -> Self {
        self.field(key, |out| write_str(text, out))
    }

    /// Writes `key: flag`.
    pub(crate) fn boolean(self, key: &str, flag: bool) -> Self {
        self.field(key, |out| out.extend_from_slice(if flag { b"true" } else { b"false" }))
    }

    /// Ends the object.
    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

/// The text of one object written by `fields`.
pub(crate) fn object_text(fields: impl FnOnce(ObjectText<'_>) -> ObjectText<'_>) -> String {
    let mut out = Vec::with_capacity(1024);
    fields(ObjectText::start(&mut out)).end();
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_read_as_serde_json_writes_them() {
        let text = object_text(|object| {
            object
                .string("a\"", "x\n\u{1}")
                .boolean("b", false)
                .field("c", |out| object_text(|inner| inner.boolean("d", true)).bytes().for_each(|byte| out.push(byte)))
        });
        let value = json!({"a\"": "x\n\u{1}", "b": false, "c": {"d": true}});
        assert_eq!(text, serde_json::to_string(&value).unwrap());
        assert_eq!(object_text(|object| object), "{}");
    }
}
