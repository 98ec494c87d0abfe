//! A fast check of a call's arguments against the most common tool schema,
//! one object of scalar properties (strings, numbers, booleans, null), read
//! straight from the call's JSON text without building a tree.
//!
//! It only ever answers "certainly valid". Whatever it cannot prove (a
//! keyword it does not know, a key that is not a property, a key twice, a
//! nested value, an integer written as `7.0`, a bound it cannot compare
//! exactly) goes the full way: the
//! arguments read into a `Value` and checked by jsonschema, which also words
//! every refusal. So it changes no answer, only what a valid call costs; a
//! property test checks that it never admits what jsonschema refuses.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::{Number, Value};

/// The most properties a flat schema may have (one bit each).
const MAX_PROPERTIES: usize = 64;

/// Keywords that only annotate a schema: they never make a value invalid.
const ANNOTATIONS: &[&str] =
    &["$schema", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"];

/// Formats schemars writes for Rust's number types; jsonschema knows none of
/// them, so they constrain nothing (the bounds that matter are `minimum` and
/// `maximum`, written next to them and checked here).
const NUMBER_FORMATS: &[&str] =
    &["int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32", "uint64", "uint", "float", "double"];

/// A tool's `input_schema` when it is flat: the properties it names and
/// which of them are required. Keys that are not properties are never
/// admitted, whatever `additionalProperties` says (their values would have
/// to be read whole, as jsonschema's tree reads them).
#[derive(Debug)]
pub(crate) struct FlatSchema {
    properties: Vec<FlatProperty>,
    /// One bit per property, set for the required ones.
    required: u64,
}

/// One scalar property of a [`FlatSchema`].
#[derive(Debug)]
struct FlatProperty {
    name: String,
    types: Types,
    minimum: Option<Number>,
    maximum: Option<Number>,
}

/// The JSON types a property allows, one bit each.
#[derive(Debug, Clone, Copy, Default)]
struct Types(u8);

impl Types {
    const STRING: u8 = 1;
    const BOOLEAN: u8 = 2;
    const INTEGER: u8 = 4;
    const NUMBER: u8 = 8;
    const NULL: u8 = 16;

    /// The bit of a type named in a schema; `None` for objects and arrays.
    fn bit(name: &str) -> Option<u8> {
        Some(match name {
            "string" => Self::STRING,
            "boolean" => Self::BOOLEAN,
            "integer" => Self::INTEGER,
            "number" => Self::NUMBER,
            "null" => Self::NULL,
            _ => return None,
        })
    }

    fn allows(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

impl FlatSchema {
    /// The flat form of `schema`, or `None` when it says anything this check
    /// does not understand exactly.
    pub(crate) fn compile(schema: &Value) -> Option<Self> {
        let root = schema.as_object()?;
        let mut properties = Vec::new();
        let mut required = 0u64;
        for (keyword, value) in root {
            match keyword.as_str() {
                "type" | "required" => {}
                "properties" => {
                    let named = value.as_object()?;
                    if named.len() > MAX_PROPERTIES {
                        return None;
                    }
                    properties = named
                        .iter()
                        .map(|(name, schema)| FlatProperty::compile(name, schema))
                        .collect::<Option<_>>()?;
                }
                "additionalProperties" if value.is_boolean() => {}
                annotation if ANNOTATIONS.contains(&annotation) => {}
                _ => return None,
            }
        }
        if root.get("type")? != "object" {
            return None;
        }
        for name in root.get("required").map_or(Some(&[][..]), |names| names.as_array().map(Vec::as_slice))? {
            let index = properties.iter().position(|property| Some(property.name.as_str()) == name.as_str())?;
            required |= 1 << index;
        }
        Some(Self { properties, required })
    }

    /// Whether `text`, the JSON of a call's arguments, certainly fits the
    /// schema: `false` also when it only cannot tell.
    pub(crate) fn admits(&self, text: &str) -> bool {
        let mut reader = serde_json::Deserializer::from_str(text);
        ArgumentsCheck(self).deserialize(&mut reader).is_ok() && reader.end().is_ok()
    }
}

impl FlatProperty {
    fn compile(name: &str, schema: &Value) -> Option<Self> {
        let schema = schema.as_object()?;
        let mut types = Types::default();
        let (mut minimum, mut maximum) = (None, None);
        for (keyword, value) in schema {
            match keyword.as_str() {
                "type" => {
                    let names = match value {
                        Value::String(name) => vec![name.as_str()],
                        Value::Array(names) => names.iter().map(Value::as_str).collect::<Option<_>>()?,
                        _ => return None,
                    };
                    for name in names {
                        types.0 |= Types::bit(name)?;
                    }
                }
                "format" if NUMBER_FORMATS.contains(&value.as_str()?) => {}
                "minimum" => minimum = Some(value.as_number()?.clone()),
                "maximum" => maximum = Some(value.as_number()?.clone()),
                annotation if ANNOTATIONS.contains(&annotation) => {}
                _ => return None,
            }
        }
        (types.0 != 0).then(|| Self { name: name.to_owned(), types, minimum, maximum })
    }

    /// Whether the number `value` is certainly within the bounds.
    fn bounds_admit(&self, value: Scalar) -> bool {
        let above = |bound: &Number| compare(value, bound).is_some_and(|order| order.is_ge());
        let below = |bound: &Number| compare(value, bound).is_some_and(|order| order.is_le());
        self.minimum.as_ref().is_none_or(above) && self.maximum.as_ref().is_none_or(below)
    }

    /// Whether `value` certainly fits this property.
    fn admits(&self, value: Scalar) -> bool {
        let typed = match value {
            Scalar::Null => self.types.allows(Types::NULL),
            Scalar::Bool => self.types.allows(Types::BOOLEAN),
            Scalar::String => self.types.allows(Types::STRING),
            Scalar::Integer(_) => self.types.allows(Types::INTEGER) || self.types.allows(Types::NUMBER),
            // `7.0` is an integer to jsonschema: left to it.
            Scalar::Float(_) => self.types.allows(Types::NUMBER),
        };
        let is_number = matches!(value, Scalar::Integer(_) | Scalar::Float(_));
        typed && (!is_number || self.bounds_admit(value))
    }
}

/// A scalar value as read, numbers kept exact.
#[derive(Debug, Clone, Copy)]
enum Scalar {
    Null,
    Bool,
    String,
    Integer(i128),
    Float(f64),
}

/// The largest integer every `f64` around it represents exactly.
const EXACT_IN_F64: i128 = 1 << 53;

/// How `value` compares with `bound`, when that is certain.
fn compare(value: Scalar, bound: &Number) -> Option<std::cmp::Ordering> {
    let bound_integer = bound.as_i64().map(i128::from).or_else(|| bound.as_u64().map(i128::from));
    match (value, bound_integer) {
        (Scalar::Integer(value), Some(bound)) => Some(value.cmp(&bound)),
        (Scalar::Integer(value), None) if value.abs() <= EXACT_IN_F64 => (value as f64).partial_cmp(&bound.as_f64()?),
        (Scalar::Float(value), Some(bound)) if bound.abs() <= EXACT_IN_F64 => value.partial_cmp(&(bound as f64)),
        (Scalar::Float(value), None) => value.partial_cmp(&bound.as_f64()?),
        _ => None,
    }
}

/// Reads a call's arguments object against a [`FlatSchema`], failing at
/// the first thing it cannot admit.
struct ArgumentsCheck<'s>(&'s FlatSchema);

impl<'de> DeserializeSeed<'de> for ArgumentsCheck<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ArgumentsCheck<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of arguments")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let schema = self.0;
        let mut seen = 0u64;
        while let Some(index) = map.next_key_seed(PropertyIndex(schema))? {
            let Some(index) = index else {
                return Err(A::Error::custom("a key that is not a property"));
            };
            if seen & (1 << index) != 0 {
                return Err(A::Error::custom("a key twice"));
            }
            seen |= 1 << index;
            let value = map.next_value_seed(ScalarRead)?;
            if !schema.properties[index].admits(value) {
                return Err(A::Error::custom("a value the property may refuse"));
            }
        }
        if seen & schema.required != schema.required {
            return Err(A::Error::custom("a required property is missing"));
        }
        Ok(())
    }
}

/// Reads a key as the index of the property it names (`None` for others),
/// without copying it.
struct PropertyIndex<'s>(&'s FlatSchema);

impl<'de> DeserializeSeed<'de> for PropertyIndex<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for PropertyIndex<'_> {
    type Value = Option<usize>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a property name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.properties.iter().position(|property| property.name == key))
    }
}

/// Reads one value as a [`Scalar`]; objects and arrays fail.
struct ScalarRead;

impl<'de> DeserializeSeed<'de> for ScalarRead {
    type Value = Scalar;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Scalar, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for ScalarRead {
    type Value = Scalar;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string, number, boolean or null")
    }

    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool)
    }

    fn visit_str<E>(self, _: &str) -> Result<Scalar, E> {
        Ok(Scalar::String)
    }

    fn visit_i64<E>(self, value: i64) -> Result<Scalar, E> {
        Ok(Scalar::Integer(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Scalar, E> {
        Ok(Scalar::Integer(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float(value))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use schemars::JsonSchema;
    use serde_json::json;

    use super::*;
    use crate::schema::arguments_schema_for;
    use crate::validate::ArgumentValidator;

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Flat {
        /// A text.
        text: String,
        count: u32,
        small: i8,
        ratio: f64,
        flag: Option<bool>,
        #[serde(default)]
        note: String,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Nested {
        inner: Flat,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Listed {
        items: Vec<String>,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Constrained {
        #[schemars(length(max = 3))]
        word: String,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    enum Choice {
        A,
        B,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Chosen {
        choice: Choice,
        letter: char,
    }

    #[test]
    fn derived_structs_of_scalars_are_flat_and_others_are_not() {
        assert!(FlatSchema::compile(&arguments_schema_for::<Flat>()).is_some());
        for schema in [
            arguments_schema_for::<Nested>(),
            arguments_schema_for::<Listed>(),
            arguments_schema_for::<Constrained>(),
            arguments_schema_for::<Chosen>(),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            json!({"type": "object", "properties": {"a": true}}),
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            json!({"properties": {"a": {"type": "string"}}}),
        ] {
            assert!(FlatSchema::compile(&schema).is_none(), "{schema}");
        }
    }

    #[test]
    fn a_map_of_anything_admits_only_no_arguments() {
        let flat = FlatSchema::compile(&arguments_schema_for::<serde_json::Map<String, Value>>()).unwrap();
        assert!(flat.admits("{}"));
        assert!(!flat.admits(r#"{"a":1}"#));
    }

    #[test]
    fn only_arguments_that_certainly_fit_are_admitted() {
        let flat = FlatSchema::compile(&arguments_schema_for::<Flat>()).unwrap();
        let base = r#""text":"a \"quoted\" \u00e9","count":7,"small":-128,"ratio":0.5"#;
        for admitted in [
            format!("{{{base}}}"),
            format!(r#"{{{base},"flag":null,"note":"n"}}"#),
            format!(r#"{{"fl\u0061g":true, {base}}}"#),
            r#"{"text":"","count":4294967295,"small":127,"ratio":1}"#.to_owned(),
        ] {
            assert!(flat.admits(&admitted), "{admitted}");
        }
        for refused in [
            format!(r#"{{{base},"other":1}}"#),
            format!(r#"{{{base},"count":8}}"#),
            format!(r#"{{{base},"flag":"yes"}}"#),
            format!(r#"{{{base},"note":["n"]}}"#),
            format!(r#"{{{base},"note":{{}}}}"#),
            r#"{"text":"a","count":7.0,"small":1,"ratio":0.5}"#.to_owned(),
            r#"{"text":"a","count":-1,"small":1,"ratio":0.5}"#.to_owned(),
            r#"{"text":"a","count":1,"small":128,"ratio":0.5}"#.to_owned(),
            r#"{"text":"a","count":1,"small":1}"#.to_owned(),
            format!("[{base}]"),
            format!("{{{base}}} trailing"),
            "null".to_owned(),
        ] {
            assert!(!flat.admits(&refused), "{refused}");
        }
    }

    /// A schema in the flat form: properties `p0`..`p3`, some required, open or closed.
    fn flat_schemas() -> impl Strategy<Value = Value> {
        let type_names = prop::sample::subsequence(vec!["string", "boolean", "integer", "number", "null"], 1..=3);
        let bound = prop_oneof![
            Just(None),
            (-3i64..=3).prop_map(|n| Some(json!(n))),
            Just(Some(json!(0.5))),
            Just(Some(json!(u64::MAX))),
            Just(Some(json!(9007199254740993u64))),
        ];
        let property = (type_names, bound.clone(), bound, any::<bool>()).prop_map(|(types, minimum, maximum, one)| {
            let mut schema = serde_json::Map::new();
            schema.insert("type".into(), if one { json!(types[0]) } else { json!(types) });
            if let Some(minimum) = minimum {
                schema.insert("minimum".into(), minimum);
            }
            if let Some(maximum) = maximum {
                schema.insert("maximum".into(), maximum);
            }
            Value::Object(schema)
        });
        let properties = prop::collection::vec(property, 0..=4);
        let required = prop::collection::vec(any::<bool>(), 4);
        let closed = prop::option::of(any::<bool>());
        (properties, required, closed).prop_map(|(properties, required, closed)| {
            let names: Vec<String> = (0..properties.len()).map(|i| format!("p{i}")).collect();
            let required: Vec<&String> = names.iter().zip(required).filter(|(_, r)| *r).map(|(n, _)| n).collect();
            let properties: serde_json::Map<String, Value> = names.iter().cloned().zip(properties).collect();
            let mut schema = json!({"type": "object", "properties": properties, "required": required});
            if let Some(closed) = closed {
                schema["additionalProperties"] = json!(!closed);
            }
            schema
        })
    }

    /// The JSON text of one value of any kind, numbers near every edge.
    fn values() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_owned()),
            any::<bool>().prop_map(|b| b.to_string()),
            (-5i64..=5).prop_map(|n| n.to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            prop::sample::select(vec![
                "0.5",
                "-0.5",
                "7.0",
                "-0",
                "1e3",
                "1e400",
                "18446744073709551616",
                "9007199254740993",
                "-9223372036854775809",
                "3.0000000000000001",
            ])
            .prop_map(str::to_owned),
            "[a-z\"\\\\é]{0,4}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            Just("[]".to_owned()),
            Just(r#"{"a":1}"#.to_owned()),
        ]
    }

    /// The text of an arguments object: keys among `p0`..`p4`, possibly
    /// repeated, some written with escapes.
    fn arguments() -> impl Strategy<Value = String> {
        let key = (0..5usize, any::<bool>())
            .prop_map(|(i, escaped)| if escaped { format!("\"\\u0070{i}\"") } else { format!("\"p{i}\"") });
        prop::collection::vec((key, values()), 0..6).prop_map(|members| {
            let members: Vec<String> = members.into_iter().map(|(key, value)| format!("{key}:{value}")).collect();
            format!("{{{}}}", members.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// The fast check may say "not sure" to valid arguments, never "valid" to invalid ones.
        #[test]
        fn nothing_jsonschema_refuses_is_admitted(schema in flat_schemas(), text in arguments()) {
            let flat = FlatSchema::compile(&schema).expect("the generated schemas are flat");
            if flat.admits(&text) {
                let tree: Value = serde_json::from_str(&text).unwrap();
                let validator = ArgumentValidator::new(&schema).unwrap();
                prop_assert!(validator.check(&tree).is_ok(), "admitted {text} against {schema}");
            }
        }
    }
}
