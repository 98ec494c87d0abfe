//! A tool call as a module runs it: the [`ToolCall`] of the in-process
//! client and of MCP, or a `POST /execute` body read in place, its
//! arguments left as the text sent (deserialized straight into the tool's
//! argument type, as a hand-written handler reads them) next to a tree
//! borrowed from it for validation.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::borrowed::Borrowed;
use crate::contract::ToolCall;

/// One call to run.
pub(crate) struct Call<'a> {
    /// Full tool name, `module.tool`.
    pub(crate) tool_name: String,
    pub(crate) arguments: Arguments<'a>,
    /// The caller the orchestrator injected.
    pub(crate) user_id: Option<String>,
}

/// A call's arguments, a JSON object.
pub(crate) enum Arguments<'a> {
    /// Already a tree.
    Tree(Map<String, Value>),
    /// As sent in a request body: the object's text and its borrowed tree.
    Sent { text: &'a str, tree: Borrowed<'a> },
}

impl From<ToolCall> for Call<'_> {
    fn from(call: ToolCall) -> Self {
        Self { tool_name: call.tool_name, arguments: Arguments::Tree(call.arguments), user_id: call.user_id }
    }
}

impl<'a> Call<'a> {
    /// The call `body` holds, read in place; `None` unless it is a
    /// [`ToolCall`] whose arguments [`Borrowed`] reads (no key twice, not too
    /// wide or deep): the caller then reads the body as a [`ToolCall`], which
    /// also words what is wrong with it.
    pub(crate) fn read(body: &'a [u8]) -> Option<Self> {
        let envelope: Envelope<'a> = serde_json::from_slice(body).ok()?;
        let text = envelope.arguments.0.map_or("{}", RawValue::get);
        let tree = Borrowed::object(text)?;
        Some(Self {
            tool_name: envelope.tool_name,
            arguments: Arguments::Sent { text, tree },
            user_id: envelope.user_id,
        })
    }
}

/// A [`ToolCall`] with its arguments left as text.
#[derive(Deserialize)]
struct Envelope<'a> {
    tool_name: String,
    #[serde(default, borrow)]
    arguments: SentArguments<'a>,
    #[serde(default)]
    user_id: Option<String>,
}

/// The `arguments` member's text; `None` when the member is absent (an
/// explicit `null` is text, which the tree refuses, as a [`ToolCall`] does).
#[derive(Default)]
struct SentArguments<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for SentArguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(deserializer).map(|raw| Self(Some(raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arguments' text `body` is read with, or `None`.
    fn text_of(body: &str) -> Option<&str> {
        match Call::read(body.as_bytes())?.arguments {
            Arguments::Sent { text, .. } => Some(text),
            Arguments::Tree(_) => None,
        }
    }

    #[test]
    fn a_call_is_read_in_place_with_its_arguments_as_sent() {
        let call = Call::read(br#"{"tool_name":"m.t","arguments":{"a":[1,"x"]},"user_id":"u1","extra":[{}]}"#).unwrap();
        assert_eq!((call.tool_name.as_str(), call.user_id.as_deref()), ("m.t", Some("u1")));
        assert_eq!(text_of(r#"{"tool_name":"m.t","arguments" : {"a":[1,"x"]} }"#), Some(r#"{"a":[1,"x"]}"#));
        assert_eq!(text_of(r#"{"tool_name":"m.t"}"#), Some("{}"), "absent arguments read as {{}}, as a ToolCall's");
        let escaped = Call::read(br#"{"tool\u005fname":"m.\u0074","user_id":null}"#).unwrap();
        assert_eq!((escaped.tool_name.as_str(), escaped.user_id), ("m.t", None));
    }

    #[test]
    fn anything_a_tool_call_might_read_otherwise_is_left_to_it() {
        for body in [
            r#"{"tool_name":"m.t","arguments":null}"#,
            r#"{"tool_name":"m.t","arguments":[1]}"#,
            r#"{"tool_name":"m.t","arguments":"{}"}"#,
            r#"{"tool_name":"m.t","arguments":{"a":1,"a":2}}"#,
            r#"{"tool_name":"m.t","tool_name":"m.u"}"#,
            r#"{"tool_name":"m.t","arguments":{},"arguments":{}}"#,
            r#"{"arguments":{}}"#,
            r#"{"tool_name":5}"#,
            r#"{"tool_name":"m.t","user_id":5}"#,
            r#"{"tool_name":"m.t"} trailing"#,
            r#"{"tool_name":"m.t","arguments":{"a":1e400}}"#,
            r#"[]"#,
            "",
        ] {
            assert!(Call::read(body.as_bytes()).is_none(), "{body}");
        }
        let deep = format!(r#"{{"tool_name":"m.t","arguments":{{"a":{}1{}}}}}"#, "[".repeat(200), "]".repeat(200));
        assert!(Call::read(deep.as_bytes()).is_none());
        assert!(Call::read(b"{\"tool_name\":\"m.t\",\"arguments\":{\"a\":\"\xff\"}}").is_none(), "not UTF-8");
    }
}
