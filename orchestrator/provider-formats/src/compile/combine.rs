//! One node made of two that must both hold: a `$ref`'s target and the
//! referring node's other keywords, or a one-item `allOf` and the node that
//! holds it. What both sides constrain is combined so that the node accepts
//! exactly what both did: `properties` and `required` joined (a property on
//! both sides becomes an `allOf` of its two schemas), `enum` and `type`
//! intersected, `allOf` lists joined. Two values of another assertion that
//! differ, or keywords that read each other (`additionalProperties` reads
//! `properties`) on both sides, are kept apart as an `allOf` of the two,
//! which strict compilers refuse: never a silently wider or narrower node.
//! Annotations (`description`, `default`, unknown keywords) of the referring
//! node win, as they always did.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use super::keywords::Keywords;

/// Keywords that constrain a value: two that differ cannot replace each other.
const ASSERTIONS: &[&str] = &[
    "$ref",
    "additionalProperties",
    "anyOf",
    "const",
    "contains",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "else",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "if",
    "items",
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
    "uniqueItems",
];

/// Keywords whose meaning depends on each other within one node: when both
/// sides hold one of a group, the group is combined only as [`combinable`] says.
const GROUPS: &[&[&str]] = &[
    &["properties", "patternProperties", "additionalProperties", "unevaluatedProperties"],
    &["prefixItems", "items", "unevaluatedItems"],
    &["contains", "minContains", "maxContains"],
    &["if", "then", "else"],
];

/// The node that holds what both `base` and `over` hold (see the module docs).
pub(super) fn combined<'a>(mut base: Keywords<'a>, mut over: Keywords<'a>) -> Keywords<'a> {
    let mut apart = (Keywords::empty(), Keywords::empty());
    for group in GROUPS {
        if !combinable(group, &base, &over) {
            for keyword in *group {
                if let Some(value) = base.remove(keyword) {
                    apart.0.insert(Cow::Borrowed(keyword), value);
                }
                if let Some(value) = over.remove(keyword) {
                    apart.1.insert(Cow::Borrowed(keyword), value);
                }
            }
        }
    }
    for (keyword, value) in over.into_entries() {
        let Some(mine) = base.get(&keyword) else {
            base.insert(keyword, value);
            continue;
        };
        if *mine == *value {
            continue;
        }
        let joined = match &*keyword {
            "properties" => joined_properties(mine, &value),
            "required" | "allOf" => joined_lists(mine, &value, keyword == "required"),
            "enum" => common_values(mine, &value),
            "type" => common_types(mine, &value),
            keyword if ASSERTIONS.contains(&keyword) => None,
            _ => {
                base.insert(keyword, value);
                continue;
            }
        };
        match joined {
            Some(joined) => base.insert(keyword, Cow::Owned(joined)),
            None => {
                if let Some(mine) = base.remove(&keyword) {
                    apart.0.insert(keyword.clone(), mine);
                }
                apart.1.insert(keyword, value);
            }
        }
    }
    if !apart.0.is_empty() || !apart.1.is_empty() {
        let parts = [apart.0, apart.1].map(|part| {
            let map: Map<String, Value> =
                part.into_entries().map(|(keyword, value)| (keyword.into_owned(), value.into_owned())).collect();
            Value::Object(map)
        });
        let mut all = match base.remove("allOf").map(Cow::into_owned) {
            Some(Value::Array(all)) => all,
            Some(other) => vec![serde_json::json!({ "allOf": other })],
            None => Vec::new(),
        };
        all.extend(parts);
        base.insert("allOf".into(), Cow::Owned(Value::Array(all)));
    }
    base
}

/// Whether the `group` keywords of both sides can be combined keyword by
/// keyword: one side holds none of them, or they are the same on both but
/// for `properties`, joined when nothing else of the group reads them.
fn combinable(group: &[&str], base: &Keywords<'_>, over: &Keywords<'_>) -> bool {
    let holds = |side: &Keywords<'_>| group.iter().any(|keyword| side.contains_key(keyword));
    if !holds(base) || !holds(over) {
        return true;
    }
    group.iter().all(|keyword| match *keyword {
        "properties" => group[1..].iter().all(|other| !base.contains_key(other) && !over.contains_key(other)),
        keyword => base.get(keyword) == over.get(keyword),
    })
}

/// Both `properties` maps in one: a name on both sides gets an `allOf` of its two schemas.
fn joined_properties(mine: &Value, theirs: &Value) -> Option<Value> {
    let (Value::Object(mine), Value::Object(theirs)) = (mine, theirs) else { return None };
    let mut joined = mine.clone();
    for (name, schema) in theirs {
        match joined.get_mut(name) {
            Some(old) if old == schema => {}
            Some(old) => *old = serde_json::json!({ "allOf": [old.take(), schema] }),
            None => {
                joined.insert(name.clone(), schema.clone());
            }
        }
    }
    Some(Value::Object(joined))
}

/// Both lists in one, in order (`unique`: each value once).
fn joined_lists(mine: &Value, theirs: &Value, unique: bool) -> Option<Value> {
    let (Value::Array(mine), Value::Array(theirs)) = (mine, theirs) else { return None };
    let mut joined = mine.clone();
    let listed = ValueSet::new(mine);
    joined.extend(theirs.iter().filter(|value| !unique || !listed.contains(value)).cloned());
    Some(Value::Array(joined))
}

/// The values of `mine` that `theirs` also lists (`None` unless both are lists).
pub(super) fn common_values(mine: &Value, theirs: &Value) -> Option<Value> {
    let (Value::Array(mine), Value::Array(theirs)) = (mine, theirs) else { return None };
    let listed = ValueSet::new(theirs);
    Some(Value::Array(mine.iter().filter(|value| listed.contains(value)).cloned().collect()))
}

/// JSON values to test membership in, in time linear in the lists (a
/// module's `enum` or `required` may list 100 000 values, and comparing two
/// such lists pairwise took minutes). `Value` is not `Hash`: each value is
/// keyed by its text with object keys sorted, so it matches as `==` does.
pub(crate) struct ValueSet(HashSet<String>);

impl ValueSet {
    /// The set of `values`.
    pub(crate) fn new<'a>(values: impl IntoIterator<Item = &'a Value>) -> Self {
        Self(values.into_iter().map(canonical_text).collect())
    }

    /// Whether `value` is in the set.
    pub(crate) fn contains(&self, value: &Value) -> bool {
        self.0.contains(&canonical_text(value))
    }
}

/// `value` as compact JSON with every object's keys in sorted order.
fn canonical_text(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_unstable_by_key(|(name, _)| *name);
                out.push('{');
                for (i, (name, value)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(name.as_str()).to_string());
                    out.push(':');
                    write(value, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            // `-0.0 == 0.0` for `Value` as for `f64`: one text for both.
            Value::Number(number) if number.as_f64() == Some(0.0) && number.is_f64() => out.push_str("0.0"),
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The types both `type`s allow (an integer is a number), one string when
/// one; `None` when they share none, or either is not a type or list of
/// types.
pub(super) fn common_types(mine: &Value, theirs: &Value) -> Option<Value> {
    let names = |value: &Value| -> Option<Vec<String>> {
        match value {
            Value::String(name) => Some(vec![name.clone()]),
            Value::Array(names) => names.iter().map(|name| name.as_str().map(str::to_owned)).collect(),
            _ => None,
        }
    };
    let (mine, theirs) = (names(mine)?, names(theirs)?);
    let allows = |names: &[String], name: &str| names.iter().any(|n| n == name || (n == "number" && name == "integer"));
    let mut common: Vec<String> = Vec::new();
    for name in mine.iter().chain(&theirs) {
        if allows(&mine, name) && allows(&theirs, name) && !common.contains(name) {
            common.push(name.clone());
        }
    }
    match common.len() {
        0 => None,
        1 => common.pop().map(Value::String),
        _ => Some(Value::Array(common.into_iter().map(Value::String).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_set_matches_as_json_values_compare() {
        let listed = ValueSet::new(&[json!(0.0), json!({"a": 1, "b": [1, 2]}), json!(1)]);
        let zero: Value = serde_json::from_str("-0").unwrap();
        assert_eq!(zero, json!(0.0));
        assert!(listed.contains(&zero), "-0 is 0.0");
        let reordered: Value = serde_json::from_str(r#"{"b": [1, 2], "a": 1}"#).unwrap();
        assert!(listed.contains(&reordered), "keys in another order");
        assert!(!listed.contains(&json!({"a": 1, "b": [2, 1]})), "items in another order");
        assert!(!listed.contains(&json!("1")));
    }

    fn combine(base: Value, over: Value) -> Value {
        let keywords = combined(Keywords::of(Cow::Owned(base)).unwrap(), Keywords::of(Cow::Owned(over)).unwrap());
        Value::Object(keywords.into_entries().map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
    }

    #[test]
    fn properties_and_required_are_joined_enums_and_types_intersected() {
        let out = combine(
            json!({"type": ["integer", "string"], "properties": {"a": {"type": "string"}, "b": {}},
                "required": ["a"], "enum": [1, 2, "x"], "description": "Base."}),
            json!({"type": ["number", "null"], "properties": {"b": {"minimum": 0}, "c": {}},
                "required": ["c", "a"], "enum": [2, 3], "description": "Mine."}),
        );
        assert_eq!(
            out,
            json!({"type": "integer", "properties": {"a": {"type": "string"}, "b": {"allOf": [{}, {"minimum": 0}]},
                "c": {}}, "required": ["a", "c"], "enum": [2], "description": "Mine."})
        );
    }

    #[test]
    fn what_cannot_be_combined_stays_apart_as_an_all_of() {
        let out = combine(
            json!({"properties": {"a": {}}, "additionalProperties": false, "minimum": 1, "type": "string"}),
            json!({"properties": {"b": {}}, "minimum": 2, "type": "integer", "allOf": [{"maxLength": 3}]}),
        );
        assert_eq!(
            out,
            json!({"allOf": [{"maxLength": 3},
                {"properties": {"a": {}}, "additionalProperties": false, "minimum": 1, "type": "string"},
                {"properties": {"b": {}}, "minimum": 2, "type": "integer"}]})
        );
        // The same group on both sides, equal: combined as it is.
        let same = json!({"items": {"type": "string"}, "maxItems": 2});
        assert_eq!(combine(same.clone(), json!({"items": {"type": "string"}})), same);
    }
}
