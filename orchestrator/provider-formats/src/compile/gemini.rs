//! Gemini's `parameters`, an OpenAPI 3.0 subset: references inlined
//! (recursion cut), one `type` per node with `nullable` for null, `enum` of
//! strings only, `const` as a one-value `enum`, safe property names, and
//! every keyword outside the subset dropped, its meaning moved into the
//! description.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Value, json};

use super::combine::{ValueSet, common_types, common_values};
use super::keywords::Keywords;
use super::node::Node;
use super::notes;
use super::prepare::prepared;
use super::prepared::Prepared;
use super::walk::{MAX_INLINED_NODES, MAX_NESTING, def_name, omitted};
use crate::names::gemini_safe_names;

/// The keywords Gemini's `Schema` takes.
pub const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "anyOf",
];

/// The only `format`s Gemini takes (on strings).
pub const GEMINI_FORMATS: &[&str] = &["enum", "date-time"];

/// The value types a Gemini node may have.
pub const GEMINI_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// What a node whose merged `enum`s, `const`s and `type` leave no value to
/// take says in its description (Gemini has no keyword for "no value"), in
/// parentheses; the tool stays listed, as the property may be optional.
const NO_VALUE_FITS: &str = "no value fits: the schema's parts allow no value in common";

/// The keywords that constrain values of one kind only (JSON Schema
/// ignores them on a value of another kind), by the types they belong to.
const KIND_KEYWORDS: &[(&[&str], &[&str])] = &[
    (
        &["object"],
        &[
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "patternProperties",
            "propertyNames",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
            "unevaluatedProperties",
        ],
    ),
    (
        &["array"],
        &[
            "items",
            "prefixItems",
            "additionalItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
            "minContains",
            "maxContains",
            "unevaluatedItems",
        ],
    ),
    (&["string"], &["minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"]),
    (&["number", "integer"], &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
];

/// `schema` as Gemini `parameters`.
pub fn gemini(schema: &Value) -> Value {
    with_gemini(schema, |tree| Node::from(tree).to_value().into_owned())
}

/// [`gemini`]'s schema as a tree that borrows from `schema` (to be written out as text), given to `f`.
pub(crate) fn with_gemini<R>(schema: &Value, f: impl FnOnce(&Prepared<'_>) -> R) -> R {
    let mut prepared = prepared(schema);
    // The definitions are taken out (the other keywords keep their order) and the rest is moved, not copied.
    let defs = match &mut prepared {
        Prepared::Object(root) => root.iter().position(|(keyword, _)| keyword == "$defs").map(|at| root.remove(at).1),
        _ => None,
    };
    let defs = defs.as_ref().map(Node::from).filter(|defs| defs.is_object());
    let prepared: Prepared<'_> = prepared;
    let inlined = Inliner { defs, stack: Vec::new(), depth: 0, nodes: 0 }.inline(prepared);
    let mut left = MAX_INLINED_NODES;
    f(&Prepared::Object(convert(inlined, &mut left).into_entries().collect()))
}

/// A node's keywords as the conversion rewrites them.
type Object<'a> = Keywords<'a, Prepared<'a>>;

/// A node made anew.
fn made<'a>(value: Value) -> Prepared<'a> {
    Prepared::Value(Cow::Owned(value))
}

/// The state of one inlining: the definitions, those being inlined, how
/// deep it is and how many nodes it has made.
struct Inliner<'d> {
    defs: Option<Node<'d>>,
    stack: Vec<String>,
    depth: usize,
    nodes: usize,
}

impl<'d> Inliner<'d> {
    /// `node` with every reference replaced by its definition; a reference
    /// to a definition already being inlined (or past [`MAX_NESTING`] levels
    /// or [`MAX_INLINED_NODES`] nodes) becomes a plain object that says so.
    /// The node is moved into the result, a definition copied (its values borrowed).
    fn inline(&mut self, node: Prepared<'d>) -> Prepared<'d> {
        if self.depth >= MAX_NESTING {
            return made(Value::Object(omitted()));
        }
        self.nodes += 1;
        let map = match node.into_object() {
            Ok(map) => map,
            Err(other) => return other,
        };
        if let Some(name) = Node::Entries(&map).get("$ref").and_then(Node::as_str).and_then(def_name) {
            let Some(def) = self.defs.and_then(|defs| defs.get(&name)) else { return made(json!({})) };
            if self.stack.contains(&name) || self.nodes >= MAX_INLINED_NODES {
                let about = def.get("description").and_then(Node::as_str).map_or(String::new(), |d| format!("{d} "));
                return made(
                    json!({"type": "object", "description": format!("{about}(a nested `{name}`; its fields as above)")}),
                );
            }
            self.stack.push(name);
            self.depth += 1;
            let out = self.inline(def.to_prepared());
            self.depth -= 1;
            self.stack.pop();
            return out;
        }
        self.depth += 1;
        let mut out = Vec::with_capacity(map.len());
        for (keyword, value) in map {
            if keyword == "$defs" {
                continue;
            }
            let value = match &*keyword {
                "properties" => match value.into_object() {
                    Ok(children) => {
                        Prepared::Object(children.into_iter().map(|(name, child)| (name, self.inline(child))).collect())
                    }
                    Err(other) => other,
                },
                "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value.into_items() {
                    Ok(items) => Prepared::Array(items.into_iter().map(|item| self.inline(item)).collect()),
                    Err(other) => other,
                },
                "items" | "additionalProperties" if Node::from(&value).is_object() => self.inline(value),
                _ => value,
            };
            out.push((keyword, value));
        }
        self.depth -= 1;
        Prepared::Object(out)
    }
}
/// The keywords an untyped ("any value") Gemini node keeps.
pub const GEMINI_UNTYPED_KEYWORDS: &[&str] = &["title", "description", "nullable"];

/// A node Gemini reads as "any value": a schema without `type` (not
/// `type: object`, which would refuse strings and numbers), its other
/// keywords said in the description.
fn any_value(mut base: Object<'_>) -> Object<'_> {
    base.remove("type");
    notes::move_to_description(&mut base, |keyword, _| GEMINI_UNTYPED_KEYWORDS.contains(&keyword));
    notes::append(&mut base, &["any JSON value".to_owned()]);
    base
}

/// The keywords of `node` when it is an object.
fn object_of(node: Prepared<'_>) -> Option<Object<'_>> {
    node.into_object().ok().map(Keywords::from_entries)
}

/// The string `keyword` of `map`.
fn str_of<'x>(map: &'x Object<'_>, keyword: &str) -> Option<&'x str> {
    map.entry(keyword).and_then(|node| Node::from(node).as_str())
}

/// One inlined node in Gemini's subset; `left` is how many more nodes the
/// conversion may make (unions copy their other keywords into each branch),
/// past which nodes are left out, saying so.
fn convert<'a>(node: Prepared<'a>, left: &mut usize) -> Object<'a> {
    let Some(rest) = left.checked_sub(1) else { return omitted_object() };
    *left = rest;
    let Some(mut map) = object_of(node) else {
        return any_value(Object::empty());
    };
    const_into_enum(&mut map);
    if let Some(parts) = map.remove("allOf")
        && let Ok(parts) = parts.into_items()
    {
        let mut unmerged = Vec::new();
        for part in parts.into_iter().filter_map(object_of) {
            merge_all_of(&mut map, part, &mut unmerged);
        }
        notes::append(&mut map, &unmerged);
    }
    let mut nullable = map.remove("nullable").is_some_and(|n| Node::from(&n).value() == Some(&Value::Bool(true)));
    let mut branches: Vec<Prepared<'a>> =
        ["anyOf", "oneOf"].iter().filter_map(|k| map.remove(k)).filter_map(|v| v.into_items().ok()).flatten().collect();
    let before = branches.len();
    branches.retain(|b| Node::from(b).get("type").and_then(Node::as_str) != Some("null"));
    nullable |= branches.len() < before;
    match branches.len() {
        0 => {}
        1 => {
            // The branch holds as well as the node's own keywords.
            let map = with_branch(map, branches.remove(0));
            return finish(convert(Prepared::Object(map.into_entries().collect()), left), nullable);
        }
        _ => return finish(distribute(map, branches, left), nullable),
    }
    let types: Vec<String> = match map.remove("type").as_ref().map(Node::from).and_then(Node::value) {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    if !keep_values_of_types(&mut map, &types, nullable) {
        notes::append(&mut map, &[NO_VALUE_FITS.to_owned()]);
    }
    let before = types.len();
    let types: Vec<String> = types.into_iter().filter(|t| t != "null").collect();
    nullable |= types.len() < before;
    if let Some(Prepared::Value(values)) = map.entry_mut("enum")
        && values.as_array().is_some_and(|values| values.contains(&Value::Null))
        && let Value::Array(values) = values.to_mut()
    {
        values.retain(|v| !v.is_null());
        nullable = true;
    }
    let string_enum = match map.entry("enum").map(Node::from).and_then(Node::value) {
        Some(Value::Array(values)) => !values.is_empty() && values.iter().all(Value::is_string),
        _ => false,
    };
    let kind = if string_enum {
        "string".to_owned()
    } else {
        match types.as_slice() {
            [one] => one.clone(),
            [] => match inferred_type(&map) {
                Some(t) => t.to_owned(),
                None => return finish(any_value(keep_only(map)), nullable),
            },
            several => {
                let branches = several.iter().map(|t| made(json!({ "type": t }))).collect();
                return finish(distribute(map, branches, left), nullable);
            }
        }
    };
    map.insert("type".into(), made(kind.clone().into()));
    drop_other_kinds(&mut map, &kind);
    if kind != "string" || !string_enum {
        let values = map.remove("enum");
        let phrase = values.as_ref().and_then(|v| notes::phrase("enum", &Node::from(v).to_value()));
        notes::append(&mut map, phrase.as_slice());
    }
    if kind == "object" {
        convert_object(&mut map, left);
    }
    if kind == "array" {
        convert_array(&mut map, left);
    }
    finish(keep_only(map), nullable)
}

/// Makes a `const` of `map` a one-value `enum`, intersected with the `enum`
/// beside it when there is one, so that merging nodes intersects both alike.
fn const_into_enum(map: &mut Object<'_>) {
    let Some(value) = map.remove("const") else { return };
    let value = Node::from(&value).to_value().into_owned();
    let values = match map.entry("enum").map(Node::from).and_then(Node::value) {
        Some(Value::Array(values)) => {
            let listed = ValueSet::new(values.iter());
            if listed.contains(&value) { vec![value] } else { Vec::new() }
        }
        _ => vec![value],
    };
    map.insert("enum".into(), made(Value::Array(values)));
}

/// Drops the `enum` values of `map` that none of the JSON types `types`
/// takes, nor `null` when the node is `nullable` (none when `types` is
/// empty or names a type JSON Schema does not have); false, and the `enum`
/// removed, when no value is left.
fn keep_values_of_types(map: &mut Object<'_>, types: &[String], nullable: bool) -> bool {
    let known = !types.is_empty() && types.iter().all(|t| t == "null" || GEMINI_TYPES.contains(&t.as_str()));
    let fits = |value: &Value| of_types(value, types) || (nullable && value.is_null());
    let Some(Prepared::Value(values)) = map.entry_mut("enum") else { return true };
    let Value::Array(list) = &**values else { return true };
    if known && !list.iter().all(fits) {
        let kept = list.iter().filter(|value| fits(value)).cloned().collect();
        *values = Cow::Owned(Value::Array(kept));
    }
    if values.as_array().is_some_and(Vec::is_empty) {
        map.remove("enum");
        return false;
    }
    true
}

/// Whether one of the JSON types `types` takes `value` (an integer is a
/// number; a number without a fraction is an integer).
fn of_types(value: &Value, types: &[String]) -> bool {
    types.iter().any(|t| match (t.as_str(), value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    })
}

/// Removes the keywords of `map` that belong to kinds other than `kind`:
/// they say nothing of a `kind` value, and a branch of a split type array
/// or union, which starts with a copy of the whole node, would otherwise
/// carry the other branches' subschemas unconverted.
fn drop_other_kinds(map: &mut Object<'_>, kind: &str) {
    for (_, keywords) in KIND_KEYWORDS.iter().filter(|(kinds, _)| !kinds.contains(&kind)) {
        for keyword in *keywords {
            map.remove(keyword);
        }
    }
}

/// What stands for a node past the conversion's budget.
fn omitted_object<'a>() -> Object<'a> {
    object_of(made(Value::Object(omitted()))).unwrap_or_else(Object::empty)
}

/// A union of `branches`, each with the node's other keywords laid under
/// it (`A and (B or C)` is `(A and B) or (A and C)`, see [`with_branch`]);
/// the description stays on the union.
fn distribute<'a>(mut map: Object<'a>, branches: Vec<Prepared<'a>>, left: &mut usize) -> Object<'a> {
    let mut union = Object::empty();
    if let Some(description) = map.remove("description") {
        union.insert("description".into(), description);
    }
    let converted = branches
        .into_iter()
        .map(|branch| {
            let merged = with_branch(map.clone(), branch);
            Prepared::Object(convert(Prepared::Object(merged.into_entries().collect()), left).into_entries().collect())
        })
        .collect();
    union.insert("anyOf".into(), Prepared::Array(converted));
    union
}

/// The node `map` and one branch of its union, which both hold: the branch
/// merged in as an `allOf` part is ([`merge_all_of`]), so the node's own
/// properties and `required` stay beside the branch's (a `true` branch adds nothing).
fn with_branch<'a>(mut map: Object<'a>, branch: Prepared<'a>) -> Object<'a> {
    let mut unmerged = Vec::new();
    if let Some(branch) = object_of(branch) {
        merge_all_of(&mut map, branch, &mut unmerged);
    }
    notes::append(&mut map, &unmerged);
    map
}

/// The type a node without `type` has, judged by its other keywords.
fn inferred_type(map: &Object<'_>) -> Option<&'static str> {
    if map.contains_key("properties") || map.contains_key("additionalProperties") {
        Some("object")
    } else if map.contains_key("items") || map.contains_key("prefixItems") {
        Some("array")
    } else if let Some(Value::Array(values)) = map.entry("enum").map(Node::from).and_then(Node::value) {
        values.first().map(|first| match first {
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            _ => "string",
        })
    } else {
        None
    }
}

/// Lower bounds, of which an `allOf` keeps the greatest.
const LOWER_BOUNDS: &[&str] = &["minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"];
/// Upper bounds, of which an `allOf` keeps the least.
const UPPER_BOUNDS: &[&str] = &["maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"];

/// Lays an `allOf` part over a node: properties and `required` are joined
/// (a property both declare becomes an `allOf` of its two schemas, merged
/// in turn when converted), bounds kept at the stricter, `enum`s (and
/// `const`s, as one-value `enum`s) intersected, `type`s narrowed to those both take, other keywords kept
/// where the node has none; where it has another value, what the part's
/// asks is added to `unmerged` (phrases for the description). The part's
/// own `allOf` parts are laid over in turn.
fn merge_all_of<'a>(map: &mut Object<'a>, mut part: Object<'a>, unmerged: &mut Vec<String>) {
    let nested = part.remove("allOf").and_then(|parts| parts.into_items().ok());
    const_into_enum(&mut part);
    for (keyword, value) in part.into_entries() {
        let Some(mine) = map.entry_mut(&keyword) else {
            map.insert(keyword, value);
            continue;
        };
        let theirs = Node::from(&value);
        match (&*keyword, Node::from(&*mine).value(), theirs.value()) {
            ("properties", _, _) if Node::from(&*mine).is_object() && theirs.is_object() => {
                let mine_entries =
                    std::mem::replace(mine, Prepared::Array(Vec::new())).into_object().unwrap_or_default();
                let mut joined = Keywords::from_entries(mine_entries);
                for (name, property) in object_of(value).unwrap_or_else(Object::empty).into_entries() {
                    match joined.entry_mut(&name) {
                        Some(both) => both_hold(both, property),
                        None => joined.insert(name, property),
                    }
                }
                *mine = Prepared::Object(joined.into_entries().collect());
            }
            (_, Some(old), Some(new)) if old == new => {}
            ("type", Some(old), Some(new)) => {
                if let Some(both) = common_types(old, new) {
                    *mine = made(both);
                }
            }
            ("required", Some(Value::Array(old)), Some(Value::Array(new))) => {
                let listed = ValueSet::new(old.iter());
                let joined = old.iter().chain(new.iter().filter(|name| !listed.contains(name))).cloned().collect();
                *mine = made(Value::Array(joined));
            }
            ("enum", Some(old), Some(new)) if old.is_array() && new.is_array() => {
                if let Some(both) = common_values(old, new) {
                    *mine = made(both);
                }
            }
            (k, Some(Value::Number(old)), Some(Value::Number(new)))
                if LOWER_BOUNDS.contains(&k) || UPPER_BOUNDS.contains(&k) =>
            {
                let greater = new.as_f64() > old.as_f64();
                if greater == LOWER_BOUNDS.contains(&k) {
                    *mine = value;
                }
            }
            (k, _, _) => {
                // Subtrees (an inlined `items`, say) are compared written out.
                let theirs = theirs.to_value();
                if Node::from(&*mine).to_value() != theirs {
                    unmerged.extend(notes::phrase(k, &theirs));
                }
            }
        }
    }
    for part in nested.into_iter().flatten().filter_map(object_of) {
        merge_all_of(map, part, unmerged);
    }
}

/// Makes the property schema `mine` one that holds where it and `theirs`
/// both do: an `allOf` of the two (one list however many parts declare the
/// property, so that no part nests deeper than the schema did).
fn both_hold<'a>(mine: &mut Prepared<'a>, theirs: Prepared<'a>) {
    if let Prepared::Object(entries) = mine
        && let [(keyword, Prepared::Array(parts))] = entries.as_mut_slice()
        && keyword == "allOf"
    {
        parts.push(theirs);
        return;
    }
    let first = std::mem::replace(mine, Prepared::Array(Vec::new()));
    *mine = Prepared::Object(vec![("allOf".into(), Prepared::Array(vec![first, theirs]))]);
}

/// Properties converted under safe names, `required` renamed to match, a
/// map's value type described in words. The properties are those of every
/// `allOf` part and union branch merged into the node, joined in merge
/// order, and their safe names are worked out over that whole set, as
/// [`gemini_property_names`](crate::names::gemini_property_names) works them
/// out when a call is mapped back.
fn convert_object(map: &mut Object<'_>, left: &mut usize) {
    let mut renames = Vec::new();
    if let Some(properties) = map.entry_mut("properties")
        && Node::from(&*properties).is_object()
    {
        let properties = std::mem::replace(properties, Prepared::Array(Vec::new())).into_object().unwrap_or_default();
        let safe_names: Vec<String> =
            gemini_safe_names(properties.iter().map(|(name, _)| &**name)).into_iter().map(|(_, safe)| safe).collect();
        let mut converted = Object::empty();
        for ((name, property), safe) in properties.into_iter().zip(safe_names) {
            converted.insert(safe.clone().into(), Prepared::Object(convert(property, left).into_entries().collect()));
            renames.push((name, safe));
        }
        map.insert("properties".into(), Prepared::Object(converted.into_entries().collect()));
    }
    if let Some(required) = map.remove("required")
        && let Some(Value::Array(required)) = Node::from(&required).value()
    {
        let present: HashSet<&str> = required.iter().filter_map(Value::as_str).collect();
        let required: Vec<Value> = renames
            .iter()
            .filter(|(name, _)| present.contains(&**name))
            .map(|(_, safe)| Value::String(safe.clone()))
            .collect();
        if !required.is_empty() {
            map.insert("required".into(), made(Value::Array(required)));
        }
    }
    if let Some(values) = map.remove("additionalProperties")
        && Node::from(&values).value() != Some(&Value::Bool(false))
    {
        let of = match Node::from(&values).get("type").and_then(Node::as_str) {
            Some(t) => format!("{t} values"),
            None => "values of any type".to_owned(),
        };
        notes::append(map, &[format!("takes further entries with {of}")]);
    }
}

/// Items converted; a tuple's items as a union of its positions; an array
/// without items gets "any value" items.
fn convert_array(map: &mut Object<'_>, left: &mut usize) {
    let prefix = map.remove("prefixItems").map(Prepared::into_items);
    let items = match (prefix, map.remove("items").map(Prepared::into_items)) {
        (Some(Ok(mut positions)), _) if !positions.is_empty() => {
            notes::append(map, &[format!("exactly {} items, in order", positions.len())]);
            if positions.len() == 1 {
                positions.swap_remove(0)
            } else {
                Prepared::Object(vec![("anyOf".into(), Prepared::Array(positions))])
            }
        }
        (_, Some(Ok(positions))) if !positions.is_empty() => {
            Prepared::Object(vec![("anyOf".into(), Prepared::Array(positions))])
        }
        (_, Some(Err(item))) if Node::from(&item).is_object() => item,
        _ => made(json!({})),
    };
    map.insert("items".into(), Prepared::Object(convert(items, left).into_entries().collect()));
}

/// `map` with only Gemini's keywords left, the rest moved into the
/// description; `format` only where Gemini takes it.
fn keep_only(mut map: Object<'_>) -> Object<'_> {
    let is_string = str_of(&map, "type") == Some("string");
    notes::move_to_description(&mut map, |keyword, value| match keyword {
        "format" => is_string && value.as_str().is_some_and(|f| GEMINI_FORMATS.contains(&f)),
        _ => GEMINI_KEYWORDS.contains(&keyword),
    });
    map
}

/// Marks the node nullable when a null was folded away.
fn finish(mut map: Object<'_>, nullable: bool) -> Object<'_> {
    if nullable {
        map.insert("nullable".into(), made(Value::Bool(true)));
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_inlined_and_nulls_fold_into_nullable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0, "exclusiveMaximum": 100},
                "mode": {"anyOf": [{"$ref": "#/$defs/Mode"}, {"type": "null"}], "description": "How."},
                "kind": {"const": "circle"},
                "size": {"enum": [1, 2, 3]},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                "max-results": {"type": "integer", "default": 5}
            },
            "required": ["kind", "max-results"],
            "$defs": {"Mode": {"type": "string", "enum": ["car", "train"]}}
        });
        assert_eq!(
            gemini(&schema),
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 0, "description": "(less than 100)", "nullable": true},
                    "mode": {"type": "string", "enum": ["car", "train"], "description": "How.", "nullable": true},
                    "kind": {"enum": ["circle"], "type": "string"},
                    "size": {"type": "integer", "description": "(one of 1, 2, 3)"},
                    "tags": {"type": "object", "description": "(takes further entries with string values)"},
                    "max_results": {"type": "integer", "description": "(default: 5)"}
                },
                "required": ["kind", "max_results"]
            })
        );
    }

    #[test]
    fn recursion_is_cut_and_unions_keep_one_type_per_branch() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tree": {"$ref": "#/$defs/Tree"},
                "either": {"type": ["string", "integer"]},
                "shape": {"oneOf": [
                    {"type": "object", "properties": {"r": {"type": "number"}}},
                    {"type": "object", "properties": {"side": {"type": "number"}}}
                ]},
                "anything": true
            },
            "$defs": {"Tree": {"type": "object", "description": "A tree.", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
            }}}
        });
        let out = gemini(&schema);
        let kids = &out["properties"]["tree"]["properties"]["kids"]["items"];
        assert_eq!(kids, &json!({"type": "object", "description": "A tree. (a nested `Tree`; its fields as above)"}));
        assert_eq!(out["properties"]["either"], json!({"anyOf": [{"type": "string"}, {"type": "integer"}]}));
        assert_eq!(out["properties"]["shape"]["anyOf"][1]["properties"]["side"], json!({"type": "number"}));
        assert_eq!(out["properties"]["anything"], json!({"description": "(any JSON value)"}));
        let any = gemini(&json!({"type": "object", "properties": {"v": {"description": "A value.", "minLength": 2}}}));
        assert_eq!(any["properties"]["v"], json!({"description": "A value. (at least 2 characters) (any JSON value)"}));
    }

    /// What Gemini's rules (`rules::check`) find wrong with `schema` as Gemini `parameters`.
    fn gemini_violations(schema: &Value) -> Vec<crate::rules::Violation> {
        let definition = json!({"name": "m__t", "description": "d", "parameters": gemini(schema)});
        crate::rules::check(crate::Provider::Gemini, &definition)
    }

    #[test]
    fn each_branch_of_a_split_type_keeps_only_its_own_kinds_keywords() {
        let schema = json!({"type": "object", "properties": {"urls": {
            "type": ["string", "array"], "minLength": 1, "maxItems": 3,
            "items": {"type": ["string", "null"], "format": "uri"}
        }}});
        assert_eq!(gemini_violations(&schema), []);
        assert_eq!(
            gemini(&schema)["properties"]["urls"],
            json!({"anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "maxItems": 3, "items": {"type": "string", "description": "(format: uri)", "nullable": true}}
            ]})
        );
        // A union's branches too: the string branch does not carry the object's properties.
        let union = json!({"type": "object", "properties": {"v": {
            "properties": {"a": {"type": ["integer", "null"], "exclusiveMinimum": 0}}, "anyOf": [{"type": "string"}, {"type": "object"}]
        }}});
        assert_eq!(gemini_violations(&union), []);
        assert_eq!(gemini(&union)["properties"]["v"]["anyOf"][0], json!({"type": "string"}));
    }

    #[test]
    fn constraints_gemini_cannot_take_are_said_in_the_description() {
        let property = |node: Value| {
            let schema = json!({"type": "object", "properties": {"v": node}});
            assert_eq!(gemini_violations(&schema), []);
            gemini(&schema)["properties"]["v"].clone()
        };
        assert_eq!(
            property(json!({"type": "string", "not": {"enum": ["root"]}})),
            json!({"type": "string", "description": "(matching the JSON Schema {\"not\":{\"enum\":[\"root\"]}})"})
        );
        let conditional = property(json!({"type": "object", "properties": {"card": {"type": "string"}},
            "dependentRequired": {"card": ["cvv"]}, "propertyNames": {"maxLength": 3}}));
        assert_eq!(
            conditional["description"],
            "(matching the JSON Schema {\"propertyNames\":{\"maxLength\":3}}; \
             matching the JSON Schema {\"dependentRequired\":{\"card\":[\"cvv\"]}})"
        );
        // A long one is cut.
        let long = property(json!({"type": "string", "not": {"enum": ["x".repeat(10_000)]}}));
        let text = long["description"].as_str().unwrap();
        assert!(text.len() < 300 && text.ends_with("...)"), "{text}");
    }

    #[test]
    fn an_all_of_keeps_every_part_and_const_narrows_enum() {
        let property = |node: Value| {
            let schema = json!({"type": "object", "properties": {"v": node}});
            assert_eq!(gemini_violations(&schema), []);
            gemini(&schema)["properties"]["v"].clone()
        };
        assert_eq!(
            property(json!({"type": "string", "allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "^.{3,8}$"}]})),
            json!({"type": "string", "pattern": "^[a-z]+$", "description": "(matching the regular expression \"^.{3,8}$\")"})
        );
        assert_eq!(
            property(json!({"allOf": [
                {"type": "string", "minLength": 2, "enum": ["a", "bb", "ccc"]},
                {"minLength": 4, "maxLength": 9, "enum": ["bb", "ccc", "dd"]},
                {"maxLength": 6}
            ]})),
            json!({"type": "string", "minLength": 4, "enum": ["bb", "ccc"], "maxLength": 6})
        );
        let same_items =
            json!({"allOf": [{"$ref": "#/$defs/Tags"}, {"$ref": "#/$defs/Tags"}, {"items": {"maxLength": 9}}]});
        let schema = json!({"type": "object", "properties": {"v": same_items},
            "$defs": {"Tags": {"type": "array", "items": {"type": "string"}}}});
        assert_eq!(
            gemini(&schema)["properties"]["v"],
            json!({"type": "array", "items": {"type": "string"},
                   "description": "(matching the JSON Schema {\"items\":{\"maxLength\":9}})"})
        );
        assert_eq!(property(json!({"enum": ["a", "b"], "const": "a"})), json!({"enum": ["a"], "type": "string"}));
    }

    #[test]
    fn merged_enums_and_consts_keep_only_the_values_every_part_and_the_type_allow() {
        let property = |node: Value| {
            let schema = json!({"type": "object", "properties": {"v": node}});
            assert_eq!(gemini_violations(&schema), []);
            gemini(&schema)["properties"]["v"].clone()
        };
        // A union branch's enum with its node's, as an `allOf` part's.
        assert_eq!(
            property(json!({"enum": ["a", "b", "c"], "anyOf": [{"enum": ["b", "c", "d"]}, {"type": "null"}]})),
            json!({"enum": ["b", "c"], "type": "string", "nullable": true})
        );
        // A `const` is a one-value enum, intersected too (not put in place of the other's).
        assert_eq!(
            property(json!({"enum": ["a", "b"], "allOf": [{"const": "b"}]})),
            json!({"enum": ["b"], "type": "string"})
        );
        assert_eq!(property(json!({"const": "a", "enum": ["a", "b"]})), json!({"enum": ["a"], "type": "string"}));
        // The type narrowed to integer keeps only the integers.
        assert_eq!(
            property(
                json!({"enum": [1, 2.5, "x", 3.0, null], "allOf": [{"type": ["integer", "string"]}, {"type": "number"}]})
            ),
            json!({"type": "integer", "description": "(one of 1, 3.0)"})
        );
        // No value fits: the node says so (the tool stays; the module refuses any value sent there).
        assert_eq!(
            property(json!({"type": "string", "enum": ["a"], "allOf": [{"const": "b"}]})),
            json!({"type": "string", "description": format!("({NO_VALUE_FITS})")})
        );
        assert_eq!(
            property(json!({"enum": ["a", "b"], "oneOf": [{"type": "integer"}, {"enum": ["b"]}]})),
            json!({"anyOf": [
                {"type": "integer", "description": format!("({NO_VALUE_FITS})")},
                {"enum": ["b"], "type": "string"}
            ]})
        );
    }

    #[test]
    fn a_property_several_all_of_parts_declare_holds_every_parts_schema() {
        let schema = json!({"type": "object", "allOf": [
            {"properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"enum": ["a", "b", "c"]},
                "s": {"type": "string", "pattern": "^a"},
                "k": {"type": "integer", "allOf": [{"minimum": 0}]}
            }},
            {"properties": {
                "n": {"type": "integer", "minimum": 3, "maximum": 20},
                "mode": {"enum": ["b", "c", "d"]},
                "s": {"type": "string", "pattern": "z$"},
                "k": {"maximum": 9}
            }, "required": ["n"]},
            {"properties": {"n": {"maximum": 8}}}
        ]});
        assert_eq!(gemini_violations(&schema), []);
        let out = gemini(&schema);
        assert_eq!(out["properties"]["n"], json!({"type": "integer", "minimum": 3, "maximum": 8}));
        assert_eq!(out["properties"]["mode"], json!({"type": "string", "enum": ["b", "c"]}));
        assert_eq!(
            out["properties"]["s"],
            json!({"type": "string", "pattern": "^a", "description": "(matching the regular expression \"z$\")"})
        );
        assert_eq!(out["properties"]["k"], json!({"type": "integer", "minimum": 0, "maximum": 9}));
        assert_eq!(out["required"], json!(["n"]));
    }

    #[test]
    fn a_one_branch_union_keeps_the_nodes_own_properties_and_the_branchs() {
        let schema = json!({"type": "object", "properties": {"v": {
            "type": "object",
            "properties": {"n": {"type": "integer", "maximum": 5}, "a": {"type": "string"}},
            "required": ["a"],
            "anyOf": [
                {"properties": {"n": {"type": "integer", "minimum": 2}, "b": {"type": "string"}}, "required": ["b"]},
                {"type": "null"}
            ]
        }}});
        assert_eq!(gemini_violations(&schema), []);
        assert_eq!(
            gemini(&schema)["properties"]["v"],
            json!({"type": "object", "nullable": true, "required": ["a", "b"], "properties": {
                "n": {"type": "integer", "maximum": 5, "minimum": 2},
                "a": {"type": "string"},
                "b": {"type": "string"}
            }})
        );
    }

    #[test]
    fn each_branch_of_a_union_keeps_the_nodes_own_properties_and_required() {
        let schema = json!({"type": "object", "properties": {"v": {
            "type": "object",
            "properties": {"kind": {"type": "string"}, "n": {"type": "integer", "maximum": 10}},
            "required": ["kind"],
            "oneOf": [
                {"properties": {"x": {"type": "string"}, "n": {"minimum": 2}}, "required": ["x"]},
                {"properties": {"y": {"type": "number"}}}
            ]
        }}});
        assert_eq!(gemini_violations(&schema), []);
        assert_eq!(
            gemini(&schema)["properties"]["v"],
            json!({"anyOf": [
                {"type": "object", "required": ["kind", "x"], "properties": {
                    "kind": {"type": "string"},
                    "n": {"type": "integer", "maximum": 10, "minimum": 2},
                    "x": {"type": "string"}
                }},
                {"type": "object", "required": ["kind"], "properties": {
                    "kind": {"type": "string"},
                    "n": {"type": "integer", "maximum": 10},
                    "y": {"type": "number"}
                }}
            ]})
        );
        // A branch's type narrows the node's, bounds and enums as an `allOf`'s do (the enum to that type's values).
        let narrowed = json!({"type": "object", "properties": {"v": {
            "type": ["integer", "string"], "enum": [1, 2, "a", "b"],
            "anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "enum": ["b", "c"]}]
        }}});
        assert_eq!(gemini_violations(&narrowed), []);
        assert_eq!(
            gemini(&narrowed)["properties"]["v"],
            json!({"anyOf": [
                {"type": "integer", "minimum": 0, "description": "(one of 1, 2)"},
                {"type": "string", "enum": ["b"]}
            ]})
        );
    }
}
