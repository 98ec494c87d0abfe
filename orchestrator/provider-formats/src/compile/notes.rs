//! Constraints a provider cannot take as keywords, moved into the node's
//! description in words a model follows ("at most 20", "default: 5").

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::keywords::Keywords;
use super::node::Node;
use super::prepared::Prepared;

/// Integer and floating-point `format`s: the type and range say all they mean.
const NUMERIC_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64", "uint128", "float",
    "double",
];

/// A phrase saying what `keyword: value` asks of a value, or `None` when
/// dropping the keyword loses nothing a model needs.
pub fn phrase(keyword: &str, value: &Value) -> Option<String> {
    let n = || value.to_string();
    Some(match keyword {
        "minimum" => format!("at least {}", n()),
        "maximum" => format!("at most {}", n()),
        "exclusiveMinimum" => format!("greater than {}", n()),
        "exclusiveMaximum" => format!("less than {}", n()),
        "multipleOf" => format!("a multiple of {}", n()),
        "minLength" => format!("at least {} characters", n()),
        "maxLength" => format!("at most {} characters", n()),
        "pattern" => format!("matching the regular expression {}", n()),
        "minItems" => format!("at least {} items", n()),
        "maxItems" => format!("at most {} items", n()),
        "uniqueItems" if value == &Value::Bool(true) => "no duplicate items".to_owned(),
        "minProperties" => format!("at least {} entries", n()),
        "maxProperties" => format!("at most {} entries", n()),
        "format" => match value.as_str() {
            Some(format) if NUMERIC_FORMATS.contains(&format) => return None,
            Some(format) => format!("format: {format}"),
            None => return None,
        },
        "default" => format!("default: {}", n()),
        "const" => format!("always {}", n()),
        "enum" => format!("one of {}", list(value)),
        "examples" => format!("for example {}", list(value)),
        "deprecated" if value == &Value::Bool(true) => "deprecated".to_owned(),
        "contentEncoding" => format!("encoded as {}", value.as_str()?),
        "contentMediaType" => format!("of media type {}", value.as_str()?),
        _ => return None,
    })
}

/// The items of a JSON array written as `a, b, c` (a non-array as itself).
fn list(value: &Value) -> String {
    match value {
        Value::Array(items) => items.iter().map(Value::to_string).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A schema node's keywords as [`append`] and [`move_to_description`] edit
/// them: a `Value` object, or a prepared node's [`Keywords`].
pub(crate) trait Described {
    /// The node's description, when it is a string.
    fn description(&self) -> Option<&str>;
    /// Sets the node's description (in place, or appended).
    fn set_description(&mut self, text: String);
    /// The keywords `keep` refuses, in order.
    fn refused(&self, keep: impl Fn(&str, Node<'_>) -> bool) -> Vec<String>;
    /// Removes `keyword` (the last keyword taking its place, as `Map::remove`), giving its value.
    fn take(&mut self, keyword: &str) -> Option<Cow<'_, Value>>;
}

impl Described for Map<String, Value> {
    fn description(&self) -> Option<&str> {
        self.get("description").and_then(Value::as_str)
    }

    fn set_description(&mut self, text: String) {
        self.insert("description".into(), Value::String(text));
    }

    fn refused(&self, keep: impl Fn(&str, Node<'_>) -> bool) -> Vec<String> {
        self.iter().filter(|(k, v)| !keep(k, Node::Value(v))).map(|(k, _)| k.clone()).collect()
    }

    fn take(&mut self, keyword: &str) -> Option<Cow<'_, Value>> {
        self.remove(keyword).map(Cow::Owned)
    }
}

impl<'a> Described for Keywords<'a, Prepared<'a>> {
    fn description(&self) -> Option<&str> {
        self.entry("description").and_then(|node| Node::from(node).as_str())
    }

    fn set_description(&mut self, text: String) {
        self.insert("description".into(), Prepared::Value(Cow::Owned(Value::String(text))));
    }

    fn refused(&self, keep: impl Fn(&str, Node<'_>) -> bool) -> Vec<String> {
        self.iter().filter(|(k, v)| !keep(k, Node::from(*v))).map(|(k, _)| k.to_owned()).collect()
    }

    fn take(&mut self, keyword: &str) -> Option<Cow<'_, Value>> {
        self.remove(keyword).map(|node| Cow::Owned(Node::from(&node).to_value().into_owned()))
    }
}

/// Adds `phrases` to the end of the node's description, in parentheses.
pub fn append(node: &mut impl Described, phrases: &[String]) {
    if let Some(text) = described(node.description(), phrases) {
        node.set_description(text);
    }
}

/// The description `existing` with `phrases` added at its end, in
/// parentheses; `None` when there are no phrases (the description stays).
pub(super) fn described(existing: Option<&str>, phrases: &[String]) -> Option<String> {
    if phrases.is_empty() {
        return None;
    }
    let notes = format!("({})", phrases.join("; "));
    Some(match existing.map(str::trim) {
        Some(existing) if !existing.is_empty() => format!("{existing} {notes}"),
        _ => notes,
    })
}

/// Removes every keyword of `node` that `keep` refuses, writing the meaning
/// of each into the description.
pub fn move_to_description(node: &mut impl Described, keep: impl Fn(&str, Node<'_>) -> bool) {
    let dropped = node.refused(keep);
    let phrases: Vec<String> =
        dropped.iter().filter_map(|keyword| node.take(keyword).and_then(|value| phrase(keyword, &value))).collect();
    append(node, &phrases);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dropped_limits_are_written_into_the_description() {
        let mut node =
            json!({"type": "integer", "description": "How many.", "maximum": 20, "default": 5, "format": "uint8"});
        let node = node.as_object_mut().unwrap();
        move_to_description(node, |k, _| k == "type" || k == "description");
        assert_eq!(json!(node), json!({"type": "integer", "description": "How many. (at most 20; default: 5)"}));
    }

    #[test]
    fn a_node_without_description_gets_one_only_when_there_is_something_to_say() {
        let mut node = json!({"type": "string", "format": "uri", "maxLength": 9});
        move_to_description(node.as_object_mut().unwrap(), |k, _| k == "type");
        assert_eq!(node["description"], "(format: uri; at most 9 characters)");
        let mut quiet = json!({"type": "integer", "format": "int32", "$comment": "x"});
        move_to_description(quiet.as_object_mut().unwrap(), |k, _| k == "type");
        assert_eq!(quiet, json!({"type": "integer"}));
    }

    #[test]
    fn enumerations_and_patterns_read_as_lists_and_quoted_text() {
        assert_eq!(phrase("enum", &json!([1, 2])).unwrap(), "one of 1, 2");
        assert_eq!(phrase("pattern", &json!("^a+$")).unwrap(), "matching the regular expression \"^a+$\"");
        assert_eq!(phrase("uniqueItems", &json!(false)), None);
    }
}
