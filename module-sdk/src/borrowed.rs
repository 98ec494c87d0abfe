//! A call's arguments as a tree borrowed from the request body, for
//! validation without building a `serde_json::Value`: strings and keys point
//! into the body (copied only when they hold escapes), objects are short
//! vectors of members instead of hashed maps.
//!
//! The tree is read only when it means exactly what the `Value` of the same
//! text means, and is refused otherwise, so that the caller can fall back to
//! the `Value` path: an object with a key twice (a `Value` keeps the last), an
//! object wider than [`MAX_MEMBERS`] (looked up by scanning) or nesting
//! deeper than [`MAX_DEPTH`] (well inside serde_json's own limit of 128, which
//! counts the envelope the arguments sit in) are refused. Numbers are
//! `serde_json::Number`s made as a `Value` makes them.
//!
//! [`BorrowedJson`] is the tree as a representation jsonschema validates
//! (`jsonschema::options_for`), with the semantics of its `serde_json` one.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use jsonschema::json::{Array, Json, Node, NodeIdentity, Object};
use jsonschema::{Draft, JsonType, Validator};
use serde::Deserializer;
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// The deepest nesting of arrays and objects read, the arguments' own object counted.
pub(crate) const MAX_DEPTH: usize = 64;

/// The most members an object may have to be read (its lookups scan them).
pub(crate) const MAX_MEMBERS: usize = 64;

/// Objects up to this wide are checked for repeated keys by comparing every
/// pair; wider ones with a hash set.
const PAIRWISE_CHECK_MEMBERS: usize = 8;

/// A JSON value whose strings borrow from the text it was read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Borrowed<'a> {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as a `Value` holds it.
    Number(Number),
    /// A string, borrowed unless it held escapes.
    String(Cow<'a, str>),
    /// An array.
    Array(Vec<Borrowed<'a>>),
    /// An object's members in the order sent, no key twice.
    Object(Vec<(Cow<'a, str>, Borrowed<'a>)>),
}

impl<'a> Borrowed<'a> {
    /// The object `text` holds, or `None` when it is not one, or not one
    /// this tree reads (see the module's documentation).
    pub(crate) fn object(text: &'a str) -> Option<Self> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let tree = Depth(1).deserialize(&mut deserializer).ok()?;
        deserializer.end().ok()?;
        matches!(tree, Self::Object(_)).then_some(tree)
    }

    /// The same value as a `serde_json::Value`, as parsing its text gives it.
    pub(crate) fn to_json_value(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(boolean) => Value::Bool(*boolean),
            Self::Number(number) => Value::Number(number.clone()),
            Self::String(string) => Value::String(string.clone().into_owned()),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_json_value).collect()),
            Self::Object(members) => Value::Object(
                members.iter().map(|(name, value)| (name.clone().into_owned(), value.to_json_value())).collect(),
            ),
        }
    }
}

/// Reads a [`Borrowed`] at nesting depth `.0`.
#[derive(Clone, Copy)]
struct Depth(usize);

impl<'de> DeserializeSeed<'de> for Depth {
    type Value = Borrowed<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Depth {
    type Value = Borrowed<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(Borrowed::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(Borrowed::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(Borrowed::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        // As a `Value` reads it: a number with no JSON form is `null`.
        Ok(Number::from_f64(value).map_or(Borrowed::Null, Borrowed::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Borrowed::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Borrowed::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let inner = self.inner()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_MEMBERS));
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Borrowed::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let inner = self.inner()?;
        let mut members: Vec<(Cow<'de, str>, Borrowed<'de>)> = Vec::new();
        while let Some(Key(name)) = map.next_key()? {
            if members.len() == MAX_MEMBERS {
                return Err(A::Error::custom("an object wider than the borrowed tree reads"));
            }
            if members.len() < PAIRWISE_CHECK_MEMBERS && members.iter().any(|(known, _)| *known == name) {
                return Err(A::Error::custom("a key given twice"));
            }
            members.push((name, map.next_value_seed(inner)?));
        }
        if members.len() > PAIRWISE_CHECK_MEMBERS {
            let mut names = HashSet::with_capacity(members.len());
            if !members.iter().all(|(name, _)| names.insert(name.as_ref())) {
                return Err(A::Error::custom("a key given twice"));
            }
        }
        Ok(Borrowed::Object(members))
    }
}

impl Depth {
    /// The depth of what an array or object at this depth holds, or an
    /// error when the array or object itself is past [`MAX_DEPTH`].
    fn inner<E: serde::de::Error>(self) -> Result<Self, E> {
        if self.0 > MAX_DEPTH {
            return Err(E::custom("nesting deeper than the borrowed tree reads"));
        }
        Ok(Self(self.0 + 1))
    }
}

/// An object key, borrowed unless it held escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(Key(Cow::Owned(value)))
    }
}

/// [`Borrowed`] as a JSON representation jsonschema validates.
pub(crate) struct BorrowedJson;

/// `schema` compiled as draft 2020-12 for [`Borrowed`] instances, as
/// `ArgumentValidator` compiles it for `Value`s.
pub(crate) fn validator_for(schema: &Value) -> Result<Validator<BorrowedJson>, String> {
    jsonschema::options_for::<BorrowedJson>().with_draft(Draft::Draft202012).build(schema).map_err(|e| e.to_string())
}

impl Json for BorrowedJson {
    type Node<'a> = &'a Borrowed<'a>;
    type PreparedKey = String;
    type StringBuffer = Borrowed<'static>;

    // A lookup scans the members: one pass over them costs no more.
    const KEYS_PER_LOOKUP: usize = MAX_MEMBERS;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>(buffer: &mut Borrowed<'static>, string: &str, f: impl FnOnce(Self::Node<'_>) -> T) -> T {
        *buffer = Borrowed::String(Cow::Owned(string.to_owned()));
        f(buffer)
    }
}

impl<'a> Node<'a, BorrowedJson> for &'a Borrowed<'a> {
    type Object = &'a [(Cow<'a, str>, Borrowed<'a>)];
    type Array = &'a [Borrowed<'a>];
    type Number = &'a Number;

    fn as_object(&self) -> Option<Self::Object> {
        match self {
            Borrowed::Object(members) => Some(members),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<Self::Array> {
        match self {
            Borrowed::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self {
            Borrowed::String(string) => Some(Cow::Borrowed(string.as_ref())),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self {
            Borrowed::Number(number) => Some(number),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self {
            Borrowed::Bool(boolean) => Some(*boolean),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Borrowed::Null)
    }

    fn json_type(&self) -> JsonType {
        match self {
            Borrowed::Null => JsonType::Null,
            Borrowed::Bool(_) => JsonType::Boolean,
            Borrowed::Number(_) => JsonType::Number,
            Borrowed::String(_) => JsonType::String,
            Borrowed::Array(_) => JsonType::Array,
            Borrowed::Object(_) => JsonType::Object,
        }
    }

    fn equals_value(&self, expected: &Value) -> bool {
        match (self, expected) {
            // The common `enum` of strings, compared without building a `Value`.
            (Borrowed::String(string), Value::String(expected)) => string == expected,
            (Borrowed::String(_), _) => false,
            _ => jsonschema::json::cmp::equal(&self.to_json_value(), expected),
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.to_json_value())
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(std::ptr::from_ref::<Borrowed<'a>>(*self) as usize))
    }
}

impl<'a> Object<'a, BorrowedJson> for &'a [(Cow<'a, str>, Borrowed<'a>)] {
    type Node = &'a Borrowed<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn get(&self, key: &String) -> Option<&'a Borrowed<'a>> {
        self.iter().find(|(name, _)| name == key).map(|(_, value)| value)
    }

    fn members(&self) -> Members<'a> {
        Members(self.iter())
    }
}

/// The members of a [`Borrowed`] object, as jsonschema walks them.
pub(crate) struct Members<'a>(std::slice::Iter<'a, (Cow<'a, str>, Borrowed<'a>)>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a Borrowed<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(name, value)| (name.as_ref(), value))
    }
}

impl<'a> Array<'a, BorrowedJson> for &'a [Borrowed<'a>] {
    type Node = &'a Borrowed<'a>;
    type ElementsIter = std::slice::Iter<'a, Borrowed<'a>>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn elements(&self) -> Self::ElementsIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validate::ArgumentValidator;

    /// What a `Value` makes of `text`, when it is an object.
    fn as_value(text: &str) -> Option<Value> {
        serde_json::from_str::<Value>(text).ok().filter(Value::is_object)
    }

    #[test]
    fn the_tree_reads_what_a_value_reads() {
        let texts = [
            r#"{}"#,
            r#"{"text":"hello","count":7,"ok":true,"none":null}"#,
            r#" { "a" : [ 1 , -2 , 3.5 , -0 , -0.0 , 1e3 , 1E-3 ] } "#,
            r#"{"big":18446744073709551615,"bigger":18446744073709551616,"small":-9223372036854775808,"tiny":-9223372036854775809}"#,
            r#"{"float":1e300,"long":123456789012345678901234567890.5}"#,
            r#"{"esc":"a\"b\\c\/d\n\u00e9\ud83e\udd80","k\u00e9y":"x"}"#,
            r#"{"nested":{"a":[{"b":[[],{}]}]},"order":{"z":1,"a":2,"m":3}}"#,
            "{\"raw\":\"tab\there\"}",
            r#"{"a":1,}"#,
            r#"{"a":1e400}"#,
            r#"{"a":01}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1} {"#,
            r#"[1,2]"#,
            r#""text""#,
            r#"null"#,
            r#""#,
        ];
        for text in texts {
            assert_eq!(Borrowed::object(text).map(|tree| tree.to_json_value()), as_value(text), "{text}");
        }
    }

    #[test]
    fn strings_borrow_unless_they_hold_escapes() {
        let tree = Borrowed::object(r#"{"plain":"abc","escaped":"a\nb"}"#).unwrap();
        let Borrowed::Object(members) = tree else { panic!("an object") };
        assert!(matches!(members[0], (Cow::Borrowed("plain"), Borrowed::String(Cow::Borrowed("abc")))));
        assert!(matches!(&members[1].1, Borrowed::String(Cow::Owned(text)) if text == "a\nb"));
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_width_and_depth() {
        assert!(Borrowed::object(r#"{"a":1,"a":2}"#).is_none());
        assert!(Borrowed::object(r#"{"a":{"b":1,"\u0062":2}}"#).is_none());
        let wide: Vec<String> = (0..20).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{},\"k3\":0}}", wide.join(","));
        assert!(Borrowed::object(&text).is_none());
        assert!(Borrowed::object(&format!("{{{}}}", wide.join(","))).is_some());
    }

    #[test]
    fn wide_objects_and_deep_nesting_are_left_to_the_value_path() {
        let members = |n: usize| (0..n).map(|i| format!("\"k{i}\":{i}")).collect::<Vec<_>>().join(",");
        assert!(Borrowed::object(&format!("{{{}}}", members(MAX_MEMBERS))).is_some());
        assert!(Borrowed::object(&format!("{{{}}}", members(MAX_MEMBERS + 1))).is_none());
        let nested = |depth: usize| format!("{{\"a\":{}1{}}}", "[".repeat(depth - 1), "]".repeat(depth - 1));
        assert!(Borrowed::object(&nested(MAX_DEPTH)).is_some());
        assert!(Borrowed::object(&nested(MAX_DEPTH + 1)).is_none());
        // Far past serde_json's own limit: refused, no stack overflow.
        assert!(Borrowed::object(&nested(100_000)).is_none());
        let long_array = format!("{{\"a\":[{}0]}}", "0,".repeat(10_000));
        assert_eq!(Borrowed::object(&long_array).map(|tree| tree.to_json_value()), as_value(&long_array));
    }

    #[test]
    fn validation_agrees_with_the_value_validator() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-zé]+$"},
                "count": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64},
                "ratio": {"type": "number", "exclusiveMaximum": 1.5, "multipleOf": 0.25},
                "mode": {"enum": ["a", "b", 3, null]},
                "fixed": {"const": {"x": [1, 2.0]}},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 3},
                "place": {"$ref": "#/$defs/place"},
                "either": {"anyOf": [{"type": "boolean"}, {"type": "string", "format": "date"}]},
                "map": {"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "integer"}}
            },
            "required": ["name"],
            "additionalProperties": false,
            "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
        });
        let borrowed = validator_for(&schema).unwrap();
        let by_value = ArgumentValidator::new(&schema).unwrap();
        let instances = [
            r#"{"name":"abé"}"#,
            r#"{"name":"a"}"#,
            r#"{"name":"abcdef"}"#,
            r#"{"name":"ab1"}"#,
            r#"{"name":"ab\u00e9"}"#,
            r#"{}"#,
            r#"{"name":"ab","count":3}"#,
            r#"{"name":"ab","count":3.0}"#,
            r#"{"name":"ab","count":-1}"#,
            r#"{"name":"ab","count":4294967296}"#,
            r#"{"name":"ab","count":1e2}"#,
            r#"{"name":"ab","ratio":0.75}"#,
            r#"{"name":"ab","ratio":1.5}"#,
            r#"{"name":"ab","ratio":0.3}"#,
            r#"{"name":"ab","mode":"a"}"#,
            r#"{"name":"ab","mode":3.0}"#,
            r#"{"name":"ab","mode":null}"#,
            r#"{"name":"ab","mode":"c"}"#,
            r#"{"name":"ab","fixed":{"x":[1.0,2]}}"#,
            r#"{"name":"ab","fixed":{"x":[1,3]}}"#,
            r#"{"name":"ab","tags":["a","b"]}"#,
            r#"{"name":"ab","tags":["a","a"]}"#,
            r#"{"name":"ab","tags":["a","b","c","d"]}"#,
            r#"{"name":"ab","place":{"city":"Oslo"}}"#,
            r#"{"name":"ab","place":{}}"#,
            r#"{"name":"ab","either":true}"#,
            r#"{"name":"ab","either":"not a date"}"#,
            r#"{"name":"ab","either":1}"#,
            r#"{"name":"ab","map":{"a":1,"bcd":2}}"#,
            r#"{"name":"ab","map":{"abcd":1}}"#,
            r#"{"name":"ab","map":{"a":"x"}}"#,
            r#"{"name":"ab","other":1}"#,
        ];
        for text in instances {
            let tree = Borrowed::object(text).unwrap();
            let value = serde_json::from_str::<Value>(text).unwrap();
            assert_eq!(borrowed.is_valid(&tree), by_value.check(&value).is_ok(), "{text}");
        }
    }
}
