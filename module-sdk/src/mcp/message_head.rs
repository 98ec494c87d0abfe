//! What a JSON-RPC message too long to hold is: its top-level `id` and
//! whether it has a `method` (a request or notification, not an answer),
//! read as its bytes go by, in constant memory. Only strings, escapes and
//! nesting are followed; the members of the top-level object are read
//! until one of them is another value, so a nested `id` is not taken.
//! A member's name is compared as serde reads it, its escapes decoded.

use std::fmt;

use rmcp::model::RequestId;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The longest `id` kept, as JSON (a number, or a string with its quotes
/// and escapes); a longer one is not read, and a request with one is
/// refused ([`long_id_message`]), since every log line about the request
/// would carry it.
pub const MAX_ID_BYTES: usize = 128;

/// Whether the JSON-RPC message `message` has a top-level `id` longer than
/// [`MAX_ID_BYTES`] as JSON. The message is read as serde reads it (a
/// name's escapes decoded, every `id` of the object weighed); one serde
/// cannot read is scanned as [`HeadScan`] does.
pub fn has_long_id(message: &[u8]) -> bool {
    match serde_json::from_slice::<LongId>(message) {
        Ok(LongId(long)) => long,
        Err(_) => {
            let mut scan = HeadScan::default();
            scan.feed(message);
            scan.finish().long_id
        }
    }
}

/// Whether any top-level `id` of an object is longer than [`MAX_ID_BYTES`]
/// as JSON (with a name given twice, a reader may keep either).
struct LongId(bool);

impl<'de> serde::Deserialize<'de> for LongId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LongIdVisitor)
    }
}

/// Reads the members of the object [`LongId`] weighs.
struct LongIdVisitor;

impl<'de> Visitor<'de> for LongIdVisitor {
    type Value = LongId;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON-RPC message (an object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<LongId, A::Error> {
        let mut long = false;
        while let Some(name) = members.next_key::<String>()? {
            match name == "id" {
                true => long |= members.next_value::<&'de RawValue>()?.get().len() > MAX_ID_BYTES,
                false => {
                    members.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(LongId(long))
    }
}

/// What the sender of a message [`has_long_id`] is told.
pub fn long_id_message() -> String {
    format!(
        "the JSON-RPC `id` is longer than {MAX_ID_BYTES} bytes as JSON (MAX_ID_BYTES, fixed); the request was not read: send a shorter id"
    )
}

/// The longest member name told apart as JSON: `method`, each letter
/// written as a `\uXXXX` escape. A longer name is none of those told apart.
const MAX_KEY_BYTES: usize = 6 * "method".len();

/// What the scan found of a message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageHead {
    /// The first top-level `id`, when it is a number or a string of at most
    /// [`MAX_ID_BYTES`] as JSON.
    pub id: Option<RequestId>,
    /// Whether the top-level object has a `method`.
    pub has_method: bool,
    /// Whether the first top-level `id` is longer than [`MAX_ID_BYTES`] as
    /// JSON (`id` is then `None`).
    pub long_id: bool,
}

/// Where the scan stands in the top-level object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum At {
    /// Before the message's first byte that is not white space.
    #[default]
    Start,
    /// Before a member's name (or the closing brace).
    BeforeKey,
    /// In a member's name (a string).
    Key,
    /// After a name, before its colon.
    AfterKey,
    /// After the colon; `id` says whether the member is `id`.
    BeforeValue { id: bool },
    /// In a member's value that is a number, literal or string.
    Value { id: bool },
    /// After a member's value (or inside one that is an array or object).
    AfterValue,
    /// The top-level value ended, or is not an object: nothing more is read.
    Done,
}

/// The scan of one message, fed its bytes in order.
#[derive(Debug, Clone, Default)]
pub struct HeadScan {
    at: At,
    /// Arrays and objects open inside the top-level object.
    nested: usize,
    in_string: bool,
    escaped: bool,
    /// The current member's name, up to one byte past [`MAX_KEY_BYTES`].
    key: Vec<u8>,
    /// The current `id` value as JSON, up to one byte past [`MAX_ID_BYTES`].
    value: Vec<u8>,
    head: MessageHead,
}

impl HeadScan {
    /// Reads the next `bytes` of the message.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.at == At::Done {
                return;
            }
            self.step(byte);
        }
    }

    /// What was found; the scan starts over for the next message.
    pub fn finish(&mut self) -> MessageHead {
        // A number ending the text, the object unclosed: read as far as it went.
        if let At::Value { id: true } = self.at
            && !self.in_string
        {
            self.take_id();
        }
        std::mem::take(self).head
    }

    fn step(&mut self, byte: u8) {
        if self.in_string {
            let closing = !self.escaped && byte == b'"';
            self.escaped = !self.escaped && byte == b'\\';
            if self.nested > 0 {
                self.in_string = !closing;
                return;
            }
            match self.at {
                At::Key if closing => {
                    self.in_string = false;
                    self.at = At::AfterKey;
                }
                At::Key => keep(&mut self.key, byte, MAX_KEY_BYTES),
                At::Value { id } => {
                    if id {
                        keep(&mut self.value, byte, MAX_ID_BYTES);
                    }
                    if closing {
                        self.in_string = false;
                        if id {
                            self.take_id();
                        }
                        self.at = At::AfterValue;
                    }
                }
                _ => self.in_string = !closing,
            }
            return;
        }
        if self.nested > 0 {
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.nested += 1,
                b'}' | b']' => self.nested -= 1,
                _ => {}
            }
            return;
        }
        let space = matches!(byte, b' ' | b'\t' | b'\r' | b'\n');
        match self.at {
            At::Start if space => {}
            At::Start if byte == b'{' => self.at = At::BeforeKey,
            At::BeforeKey if byte == b'"' => {
                self.in_string = true;
                self.key.clear();
                self.at = At::Key;
            }
            At::AfterKey if byte == b':' => {
                let name = self.key_name();
                let (method, id) = (name.as_deref() == Some("method"), name.as_deref() == Some("id"));
                self.head.has_method |= method;
                self.at = At::BeforeValue { id };
            }
            At::BeforeValue { .. } if space => {}
            At::BeforeValue { .. } if matches!(byte, b'{' | b'[') => {
                self.nested = 1;
                self.at = At::AfterValue;
            }
            At::BeforeValue { id } => {
                self.value.clear();
                self.in_string = byte == b'"';
                if id {
                    keep(&mut self.value, byte, MAX_ID_BYTES);
                }
                self.at = At::Value { id };
            }
            At::Value { id } if space || matches!(byte, b',' | b'}') => {
                if id {
                    self.take_id();
                }
                self.at = At::AfterValue;
                self.after_value(byte);
            }
            At::Value { id: true } => keep(&mut self.value, byte, MAX_ID_BYTES),
            At::Value { id: false } => {}
            At::AfterValue => self.after_value(byte),
            At::BeforeKey | At::AfterKey if space => {}
            At::BeforeKey if byte == b'}' => self.at = At::Done,
            // Not JSON-RPC's shape (or not JSON): nothing more can be told.
            _ => self.at = At::Done,
        }
    }

    /// The byte after a member's value: the next member, or the end.
    fn after_value(&mut self, byte: u8) {
        match byte {
            b',' => self.at = At::BeforeKey,
            b'}' => self.at = At::Done,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => self.at = At::Done,
        }
    }

    /// The current member's name with its escapes decoded, when it is at
    /// most [`MAX_KEY_BYTES`] as JSON (and can be read).
    fn key_name(&self) -> Option<std::borrow::Cow<'_, str>> {
        if self.key.len() > MAX_KEY_BYTES {
            return None;
        }
        match self.key.contains(&b'\\') {
            false => std::str::from_utf8(&self.key).ok().map(Into::into),
            true => {
                let quoted = [b"\"", self.key.as_slice(), b"\""].concat();
                serde_json::from_slice::<String>(&quoted).ok().map(Into::into)
            }
        }
    }

    /// Reads the `id` value kept, the first one only.
    fn take_id(&mut self) {
        if self.head.id.is_some() || self.head.long_id {
            return;
        }
        match self.value.len() <= MAX_ID_BYTES {
            true => self.head.id = serde_json::from_slice(&self.value).ok(),
            false => self.head.long_id = true,
        }
    }
}

/// Appends `byte` to `kept` while it holds at most `max` bytes (one more
/// marks it too long).
fn keep(kept: &mut Vec<u8>, byte: u8, max: usize) {
    if kept.len() <= max {
        kept.push(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> MessageHead {
        let mut scan = HeadScan::default();
        // Byte by byte and all at once read alike.
        for byte in text.as_bytes() {
            scan.feed(std::slice::from_ref(byte));
        }
        let one_by_one = scan.finish();
        scan.feed(text.as_bytes());
        assert_eq!(scan.finish(), one_by_one, "{text}");
        one_by_one
    }

    fn id(text: &str) -> Option<RequestId> {
        head(text).id
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Some(RequestId::Number(7)));
        let after = r#"{"result":{"id":1,"a":[{"id":2}],"s":"\"id\":3 }"},"id" : -12 }"#;
        assert_eq!(id(after), Some(RequestId::Number(-12)));
        assert_eq!(id(r#" {"id":"a\"b","result":1}"#), Some(RequestId::String("a\"b".into())));
        assert_eq!(id(r#"{"result":[1,2],"id":5"#), Some(RequestId::Number(5)), "cut off after the id");
        assert_eq!(id(r#"{"id":1,"id":2}"#), Some(RequestId::Number(1)), "the first one");
    }

    #[test]
    fn no_id_is_made_up() {
        for text in [
            r#"{"result":{"id":1}}"#,
            r#"{"result":"\"id\":1"}"#,
            r#"{"error":{},"id":null}"#,
            r#"{"id":{"n":1}}"#,
            r#"{"id":1.5}"#,
            r#"[{"id":1}]"#,
            r#"{"result":{"#,
            r#"{"id":"#,
            "not json \"id\":1",
            "",
        ] {
            assert_eq!(id(text), None, "{text}");
        }
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES));
        assert_eq!(id(&long), None, "an id over MAX_ID_BYTES is not kept");
        let longest = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES - 2));
        assert!(id(&longest).is_some());
    }

    #[test]
    fn an_id_over_the_budget_is_told_apart_from_none() {
        let long = "x".repeat(MAX_ID_BYTES);
        assert!(has_long_id(format!(r#"{{"jsonrpc":"2.0","id":"{long}","method":"m"}}"#).as_bytes()));
        assert!(has_long_id(format!(r#"{{"method":"m","id":1{}}}"#, "0".repeat(MAX_ID_BYTES)).as_bytes()));
        let shortest_long = format!(r#"{{"id":"{}","id":1}}"#, "x".repeat(MAX_ID_BYTES - 1));
        assert_eq!((head(&shortest_long).long_id, id(&shortest_long)), (true, None), "the first id counts");
        for short in [
            format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES - 2)),
            format!(r#"{{"id":1,"params":{{"id":"{long}"}},"s":"{long}"}}"#),
            r#"{"method":"notifications/initialized"}"#.to_owned(),
        ] {
            assert!(!has_long_id(short.as_bytes()), "{short}");
        }
        assert!(long_id_message().contains("MAX_ID_BYTES"));
    }

    #[test]
    fn a_name_is_read_with_its_escapes_decoded() {
        let long = "a".repeat(200);
        for text in [
            format!(r#"{{"\u0069d":"{long}"}}"#),
            format!(r#"{{"jsonrpc":"2.0","\u0069\u0064":"{long}","method":"tools/call","params":{{"name":"nope"}}}}"#),
            format!(r#"{{"id":1,"\u0069d":"{long}","method":"m"}}"#),
        ] {
            assert!(has_long_id(text.as_bytes()), "{text}");
        }
        // Read by the scan alone (as a line too long to hold is).
        assert!(head(&format!(r#"{{"\u0069d":"{long}"}}"#)).long_id);
        assert_eq!(id(r#"{"\u0069\u0064":7}"#), Some(RequestId::Number(7)));
        assert!(head(r#"{"\u006d\u0065\u0074\u0068\u006f\u0064":"ping"}"#).has_method);
        assert!(head(r#"{"\u006dethod":"ping"}"#).has_method);
        assert!(!head(r#"{"\u006dethods":"ping"}"#).has_method);
        assert_eq!(id(r#"{"\"id":7}"#), None);
        assert!(!has_long_id(format!(r#"{{"\u0069dx":"{long}"}}"#).as_bytes()));
    }

    #[test]
    fn a_request_is_told_from_an_answer() {
        assert!(head(r#"{"id":1,"method":"ping"}"#).has_method);
        assert!(!head(r#"{"id":1,"result":{"method":"ping"}}"#).has_method);
        assert!(!head(r#"{"id":1,"methods":1}"#).has_method);
    }

    #[test]
    fn memory_stays_small_whatever_the_message() {
        let mut scan = HeadScan::default();
        let big = "x".repeat(1 << 20);
        scan.feed(format!(r#"{{"{big}":"{big}","id":3,"result":"{big}"}}"#).as_bytes());
        assert!(scan.key.capacity() <= 2 * MAX_KEY_BYTES && scan.value.capacity() < 1024);
        assert_eq!(scan.finish().id, Some(RequestId::Number(3)));
    }
}
