//! Constraints a provider cannot take as keywords, moved into the node's
//! description in words a model follows ("at most 20", "default: 5").

use std::borrow::Cow;
use std::io::Write;

use serde_json::{Map, Value};

use super::keywords::Keywords;
use super::node::Node;
use super::prepared::Prepared;

/// Integer and floating-point `format`s: the type and range say all they mean.
const NUMERIC_FORMATS: &[&str] = &[
    "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32", "uint64", "uint128", "float",
    "double",
];

/// The keywords that constrain a value but have no phrase of their own
/// (subschemas, conditions, dependencies): [`phrase`] quotes them as JSON.
const QUOTED_CONSTRAINTS: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
];

/// The most bytes of JSON a quoted constraint shows (cut with `...` past it).
pub const MAX_QUOTED_BYTES: usize = 200;

/// A phrase saying what `keyword: value` asks of a value, or `None` when
/// dropping the keyword loses nothing a model needs (an annotation such as
/// `title` or `$comment`, or an unknown keyword, which JSON Schema reads as
/// one). A constraint without words of its own is quoted as compact JSON,
/// at most `MAX_QUOTED_BYTES` of it.
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
        k if QUOTED_CONSTRAINTS.contains(&k) => format!("matching the JSON Schema {}", quoted(k, value)),
        _ => return None,
    })
}

/// `{"keyword": value}` as compact JSON, cut to [`MAX_QUOTED_BYTES`] (at a
/// character boundary) with `...` when longer; written only that far.
fn quoted(keyword: &str, value: &Value) -> String {
    let mut out = Capped(Vec::with_capacity(MAX_QUOTED_BYTES));
    let mut write = || -> std::io::Result<()> {
        out.write_all(b"{")?;
        serde_json::to_writer(&mut out, keyword)?;
        out.write_all(b":")?;
        serde_json::to_writer(&mut out, value)?;
        out.write_all(b"}")
    };
    let whole = write().is_ok();
    let text = match std::str::from_utf8(&out.0) {
        Ok(text) => text,
        Err(cut) => std::str::from_utf8(&out.0[..cut.valid_up_to()]).unwrap_or_default(),
    };
    if whole { text.to_owned() } else { format!("{text}...") }
}

/// A writer that takes [`MAX_QUOTED_BYTES`] and refuses the rest.
struct Capped(Vec<u8>);

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = MAX_QUOTED_BYTES - self.0.len();
        if room == 0 && !buf.is_empty() {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let taken = buf.len().min(room);
        self.0.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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

    #[test]
    fn constraints_without_words_are_quoted_and_cut() {
        assert_eq!(phrase("not", &json!({"const": 1})).unwrap(), "matching the JSON Schema {\"not\":{\"const\":1}}");
        // Cut within a character: the text stays whole characters.
        let long = phrase("not", &json!({"enum": ["é".repeat(MAX_QUOTED_BYTES)]})).unwrap();
        let quoted = long.strip_prefix("matching the JSON Schema ").unwrap();
        assert!(quoted.ends_with("...") && quoted.len() <= MAX_QUOTED_BYTES + 3, "{quoted}");
        assert_eq!(phrase("title", &json!("Name")), None);
        assert_eq!(phrase("x-vendor", &json!({"a": 1})), None);
    }
}
