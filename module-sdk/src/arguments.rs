//! A call's arguments read in place from the body `POST /execute` received:
//! a light tree whose strings point into the request body, which the
//! compiled `input_schema` checks as it checks a `serde_json::Value`, and
//! from which the handler's argument type is read as `serde_json` reads it
//! from a `Value`.
//!
//! It is the fast path of the common call, not a second set of rules: a
//! document it does not take (one with a duplicate member name, an object of
//! more than [`MAX_MEMBERS`] members, a member named like serde_json's
//! private types) is read into a `serde_json` tree as before, and arguments
//! that fail the schema or the handler's type (or hold a map whose keys are
//! not text) get their message, or their reading, from that tree too.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use jsonschema::json::{Array, Json, Node, NodeIdentity, Object};
use jsonschema::types::JsonType;
use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Members one object may have to be read in place; a larger one takes the
/// `serde_json` tree, whose lookups are hashed (here they are a scan).
pub(crate) const MAX_MEMBERS: usize = 32;

/// One JSON value of the arguments, its strings borrowed from the body
/// unless they held escapes.
#[derive(Debug, PartialEq)]
pub(crate) enum InPlaceValue<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<InPlaceValue<'a>>),
    /// Members in the order they were sent, names unique.
    Object(Vec<(Cow<'a, str>, InPlaceValue<'a>)>),
}

/// A call's arguments, a JSON object, read in place from its text (its
/// strings borrowed unless they held escapes), for a server that stands in
/// front of modules to check them without a tree
/// ([`ArgumentValidator::check_in_place`](crate::service::ArgumentValidator::check_in_place)).
/// What an in-place reading refuses to hold (a duplicate member name, an
/// object of more than 32 members, serde_json's private names) is not one.
#[derive(Debug, PartialEq)]
pub struct InPlaceObject<'a>(pub(crate) InPlaceValue<'a>);

impl<'a> InPlaceObject<'a> {
    /// The JSON object `text` read in place; `None` when it is not an
    /// object or holds what an in-place reading refuses (then read the tree).
    pub fn read(text: &'a str) -> Option<Self> {
        match serde_json::from_str(text) {
            Ok(object @ InPlaceValue::Object(_)) => Some(Self(object)),
            _ => None,
        }
    }

    /// Its members as the `serde_json` tree reading its text gives.
    pub fn to_tree(&self) -> Map<String, Value> {
        self.0.to_tree()
    }

    /// `None` when it nests deeper than `max_depth` (the object itself is
    /// depth 1); otherwise whether its text says exactly what was read:
    /// every number an integer that `serde_json` holds exactly (a fraction,
    /// an exponent or an integer past 64 bits is read as the nearest `f64`,
    /// which a reader of exact numbers would not see).
    pub fn exactness_within(&self, max_depth: usize) -> Option<bool> {
        self.0.exactness_within(max_depth)
    }
}

impl<'a> InPlaceValue<'a> {
    /// See [`InPlaceObject::exactness_within`].
    fn exactness_within(&self, max_depth: usize) -> Option<bool> {
        let inner: &mut dyn Iterator<Item = &InPlaceValue<'a>> = match self {
            Self::Number(number) => return Some(!number.is_f64()),
            Self::Null | Self::Bool(_) | Self::String(_) => return Some(true),
            Self::Array(items) => &mut items.iter(),
            Self::Object(members) => &mut members.iter().map(|(_, value)| value),
        };
        let depth = max_depth.checked_sub(1)?;
        // Every value is walked: a deeper one after an inexact number still says `None`.
        let mut exact = true;
        for value in inner {
            exact &= value.exactness_within(depth)?;
        }
        Some(exact)
    }

    /// An object's members as the `serde_json` tree reading its text gives
    /// (names are unique, so no member is lost); empty for anything else.
    pub(crate) fn to_tree(&self) -> Map<String, Value> {
        match self.to_value() {
            Value::Object(tree) => tree,
            _ => Map::new(),
        }
    }

    /// Whether this is `expected` under JSON Schema's equality (numbers
    /// compare by value: `1` is `1.0`), as jsonschema compares two trees.
    fn equals(&self, expected: &Value) -> bool {
        match (self, expected) {
            (Self::Null, Value::Null) => true,
            (Self::Bool(left), Value::Bool(right)) => left == right,
            (Self::Number(left), Value::Number(right)) => jsonschema::json::cmp::equal_numbers(left, right),
            (Self::String(left), Value::String(right)) => left == right,
            (Self::Array(left), Value::Array(right)) => {
                left.len() == right.len() && left.iter().zip(right).all(|(left, right)| left.equals(right))
            }
            (Self::Object(left), Value::Object(right)) => {
                left.len() == right.len()
                    && left.iter().all(|(name, left)| right.get(name.as_ref()).is_some_and(|right| left.equals(right)))
            }
            _ => false,
        }
    }

    /// The same document as a `serde_json` tree.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Self::Null => Value::Null,
            Self::Bool(boolean) => Value::Bool(*boolean),
            Self::Number(number) => Value::Number(number.clone()),
            Self::String(string) => Value::String(string.as_ref().to_owned()),
            Self::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            Self::Object(members) => Value::Object(
                members.iter().map(|(name, value)| (name.as_ref().to_owned(), value.to_value())).collect::<Map<_, _>>(),
            ),
        }
    }
}

impl<'de: 'a, 'a> de::Deserialize<'de> for InPlaceValue<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Builds an [`InPlaceValue`], borrowing strings where the text allows.
struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = InPlaceValue<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(InPlaceValue::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(InPlaceValue::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok(InPlaceValue::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        // As `serde_json::Value` reads it: a number it cannot hold is null.
        Ok(Number::from_f64(value).map_or(InPlaceValue::Null, InPlaceValue::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(InPlaceValue::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(InPlaceValue::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(InPlaceValue::String(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(InPlaceValue::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<InPlaceValue<'de>>()? {
            items.push(item);
        }
        Ok(InPlaceValue::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members: Vec<(Cow<'de, str>, InPlaceValue<'de>)> = Vec::new();
        while let Some(name) = map.next_key_seed(NameSeed)? {
            if members.len() == MAX_MEMBERS {
                return Err(de::Error::custom("more members than are read in place"));
            }
            // A `serde_json::Value` keeps the last of two members of one
            // name; a struct refuses them. The tree settles which applies.
            if members.iter().any(|(seen, _)| *seen == name) {
                return Err(de::Error::custom("a duplicate member name"));
            }
            // `serde_json::Value` reads an object whose first member has
            // such a name as a value of its own (with `raw_value`, the
            // member's text parsed): only the tree reads it so.
            if name.starts_with(SERDE_JSON_PRIVATE) {
                return Err(de::Error::custom("a serde_json private name"));
            }
            members.push((name, map.next_value::<InPlaceValue<'de>>()?));
        }
        Ok(InPlaceValue::Object(members))
    }
}

/// How the names of serde_json's private types begin (`RawValue`'s and,
/// with `arbitrary_precision`, `Number`'s).
const SERDE_JSON_PRIVATE: &str = "$serde_json::private::";

/// Reads a member name, borrowed where the text allows.
struct NameSeed;

impl<'de> DeserializeSeed<'de> for NameSeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameSeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(value))
    }
}

/// The [`Json`] representation of [`InPlaceValue`], for
/// `jsonschema::options_for::<InPlace>()`.
pub(crate) struct InPlace;

impl Json for InPlace {
    type Node<'a> = &'a InPlaceValue<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = ();

    // A lookup is a scan of at most `MAX_MEMBERS` names: one pass over the
    // members always costs less than the lookups it replaces.
    const KEYS_PER_LOOKUP: usize = MAX_MEMBERS;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(_: &mut (), string: &str, f: impl FnOnce(Self::Node<'_>) -> T) -> T {
        f(&InPlaceValue::String(Cow::Borrowed(string)))
    }
}

impl<'a> Node<'a, InPlace> for &'a InPlaceValue<'a> {
    type Object = &'a [(Cow<'a, str>, InPlaceValue<'a>)];
    type Array = &'a [InPlaceValue<'a>];
    type Number = &'a Number;

    fn as_object(&self) -> Option<Self::Object> {
        match self {
            InPlaceValue::Object(members) => Some(members),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<Self::Array> {
        match self {
            InPlaceValue::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self {
            InPlaceValue::String(string) => Some(Cow::Borrowed(string.as_ref())),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self {
            InPlaceValue::Number(number) => Some(number),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self {
            InPlaceValue::Bool(boolean) => Some(*boolean),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, InPlaceValue::Null)
    }

    fn json_type(&self) -> JsonType {
        match self {
            InPlaceValue::Null => JsonType::Null,
            InPlaceValue::Bool(_) => JsonType::Boolean,
            InPlaceValue::Number(_) => JsonType::Number,
            InPlaceValue::String(_) => JsonType::String,
            InPlaceValue::Array(_) => JsonType::Array,
            InPlaceValue::Object(_) => JsonType::Object,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(InPlaceValue::to_value(self))
    }

    // Compared in place (`enum`, `const`), not through a tree built for it.
    fn equals_value(&self, expected: &Value) -> bool {
        self.equals(expected)
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(std::ptr::from_ref::<InPlaceValue<'a>>(*self) as usize))
    }
}

/// The members of an object, names and values.
type Members<'a> = std::iter::Map<
    std::slice::Iter<'a, (Cow<'a, str>, InPlaceValue<'a>)>,
    fn(&'a (Cow<'a, str>, InPlaceValue<'a>)) -> (&'a str, &'a InPlaceValue<'a>),
>;

impl<'a> Object<'a, InPlace> for &'a [(Cow<'a, str>, InPlaceValue<'a>)] {
    type Node = &'a InPlaceValue<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn get(&self, key: &Box<str>) -> Option<&'a InPlaceValue<'a>> {
        self.iter().find(|(name, _)| name.as_ref() == key.as_ref()).map(|(_, value)| value)
    }

    fn members(&self) -> Members<'a> {
        self.iter().map(|(name, value)| (name.as_ref(), value))
    }
}

impl<'a> Array<'a, InPlace> for &'a [InPlaceValue<'a>] {
    type Node = &'a InPlaceValue<'a>;
    type ElementsIter = std::slice::Iter<'a, InPlaceValue<'a>>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn elements(&self) -> Self::ElementsIter {
        self.iter()
    }
}

/// Reads a type from an [`InPlaceValue`] as `serde_json::from_value` reads
/// it from the same document's tree: each `deserialize_*` accepts the
/// shapes `serde_json::Value`'s does, enums included. Map keys are read as
/// text or unit variants only, so a map keyed by numbers is refused here
/// and read from the tree. Its errors are never shown (a call it refuses is
/// read from the tree), so they carry no position.
pub(crate) struct InPlaceDeserializer<'a, E> {
    value: &'a InPlaceValue<'a>,
    error: PhantomData<E>,
}

impl<'a> InPlaceValue<'a> {
    /// `T` read from this value, as `serde_json::from_value` would read it.
    pub(crate) fn deserialize_into<T: de::Deserialize<'a>>(&'a self) -> Result<T, de::value::Error> {
        T::deserialize(self.into_deserializer())
    }
}

impl<'a, E: de::Error> IntoDeserializer<'a, E> for &'a InPlaceValue<'a> {
    type Deserializer = InPlaceDeserializer<'a, E>;

    fn into_deserializer(self) -> Self::Deserializer {
        InPlaceDeserializer { value: self, error: PhantomData }
    }
}

impl<'a, E: de::Error> InPlaceDeserializer<'a, E> {
    /// The error for a value of the wrong shape.
    fn unexpected(&self, expected: &dyn de::Expected) -> E {
        let unexpected = match self.value {
            InPlaceValue::Null => de::Unexpected::Unit,
            InPlaceValue::Bool(boolean) => de::Unexpected::Bool(*boolean),
            InPlaceValue::Number(_) => de::Unexpected::Other("number"),
            InPlaceValue::String(string) => de::Unexpected::Str(string),
            InPlaceValue::Array(_) => de::Unexpected::Seq,
            InPlaceValue::Object(_) => de::Unexpected::Map,
        };
        E::invalid_type(unexpected, expected)
    }

    fn visit_array<V: Visitor<'a>>(items: &'a [InPlaceValue<'a>], visitor: V) -> Result<V::Value, E> {
        let mut seq = SeqDeserializer::new(items.iter());
        let value = visitor.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(value)
    }

    fn visit_object<V: Visitor<'a>>(
        members: &'a [(Cow<'a, str>, InPlaceValue<'a>)],
        visitor: V,
    ) -> Result<V::Value, E> {
        let mut map = MapDeserializer::new(members.iter().map(|(name, value)| (Key(name), value)));
        let value = visitor.visit_map(&mut map)?;
        map.end()?;
        Ok(value)
    }
}

/// A member name as a map's key.
struct Key<'a>(&'a Cow<'a, str>);

impl<'a, E: de::Error> IntoDeserializer<'a, E> for Key<'a> {
    type Deserializer = KeyDeserializer<'a, E>;

    fn into_deserializer(self) -> Self::Deserializer {
        KeyDeserializer { name: self.0, error: PhantomData }
    }
}

/// Reads a map's key as text, or as an enum's unit variant. A key of
/// another kind (a number, a boolean: `serde_json` parses those out of the
/// name) is refused, and the map read from the tree.
struct KeyDeserializer<'a, E> {
    name: &'a str,
    error: PhantomData<E>,
}

/// `deserialize_*` methods that refuse: their kind is left to the tree.
macro_rules! refused_keys {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, _visitor: V) -> Result<V::Value, E> {
                Err(E::custom("a map key of this kind is read from the tree"))
            }
        )*
    };
}

impl<'a, E: de::Error> Deserializer<'a> for KeyDeserializer<'a, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_str(self.name)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        visitor.visit_enum(Variant { name: self.name, value: None, error: PhantomData })
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(self, _name: &'static str, _visitor: V) -> Result<V::Value, E> {
        Err(E::custom("a map key of this kind is read from the tree"))
    }

    refused_keys! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64 deserialize_bool deserialize_option
    }

    serde::forward_to_deserialize_any! {
        <W: Visitor<'a>> char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

/// The `deserialize_*` of numbers: a number read as `deserialize_any` reads
/// it (the visitor converts), anything else refused, as `Value` does.
macro_rules! in_place_numbers {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
                match self.value {
                    InPlaceValue::Number(_) => self.deserialize_any(visitor),
                    _ => Err(self.unexpected(&visitor)),
                }
            }
        )*
    };
}

impl<'a, E: de::Error> Deserializer<'a> for InPlaceDeserializer<'a, E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Null => visitor.visit_unit(),
            InPlaceValue::Bool(boolean) => visitor.visit_bool(*boolean),
            InPlaceValue::Number(number) => {
                if let Some(unsigned) = number.as_u64() {
                    visitor.visit_u64(unsigned)
                } else if let Some(signed) = number.as_i64() {
                    visitor.visit_i64(signed)
                } else {
                    visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN))
                }
            }
            InPlaceValue::String(string) => visitor.visit_str(string),
            InPlaceValue::Array(items) => Self::visit_array(items, visitor),
            InPlaceValue::Object(members) => Self::visit_object(members, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        let (name, value) = match self.value {
            InPlaceValue::String(name) => (name, None),
            InPlaceValue::Object(members) if members.len() == 1 => (&members[0].0, Some(&members[0].1)),
            _ => return Err(self.unexpected(&"a string or an object of one member")),
        };
        visitor.visit_enum(Variant { name, value, error: PhantomData })
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Bool(boolean) => visitor.visit_bool(*boolean),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        self.deserialize_str(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(self, name: &'static str, visitor: V) -> Result<V::Value, E> {
        // `serde_json`'s `RawValue` asks for itself so; only the tree has it.
        if name.starts_with(SERDE_JSON_PRIVATE) {
            return Err(E::custom("a serde_json private type is read from the tree"));
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Null => visitor.visit_unit(),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(self, _name: &'static str, visitor: V) -> Result<V::Value, E> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::String(string) => visitor.visit_str(string),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::String(string) => visitor.visit_str(string),
            InPlaceValue::Array(items) => Self::visit_array(items, visitor),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Array(items) => Self::visit_array(items, visitor),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, E> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, E> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Object(members) => Self::visit_object(members, visitor),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, E> {
        match self.value {
            InPlaceValue::Array(items) => Self::visit_array(items, visitor),
            InPlaceValue::Object(members) => Self::visit_object(members, visitor),
            _ => Err(self.unexpected(&visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_unit()
    }

    in_place_numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }
}

/// An enum's variant: its name, and its value unless it was sent as a bare
/// string; each kind of variant takes the values `Value`'s enums take.
struct Variant<'a, E> {
    name: &'a str,
    value: Option<&'a InPlaceValue<'a>>,
    error: PhantomData<E>,
}

impl<'a, E: de::Error> de::EnumAccess<'a> for Variant<'a, E> {
    type Error = E;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'a>>(self, seed: S) -> Result<(S::Value, Self), E> {
        let name: de::value::StrDeserializer<'_, E> = self.name.into_deserializer();
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'a, E: de::Error> de::VariantAccess<'a> for Variant<'a, E> {
    type Error = E;

    fn unit_variant(self) -> Result<(), E> {
        match self.value {
            Some(value) => de::Deserialize::deserialize(value.into_deserializer()),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'a>>(self, seed: S) -> Result<S::Value, E> {
        match self.value {
            Some(value) => seed.deserialize(value.into_deserializer()),
            None => Err(E::invalid_type(de::Unexpected::UnitVariant, &"newtype variant")),
        }
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, E> {
        match self.value {
            Some(InPlaceValue::Array(items)) if items.is_empty() => visitor.visit_unit(),
            Some(InPlaceValue::Array(items)) => InPlaceDeserializer::visit_array(items, visitor),
            Some(other) => Err(other.into_deserializer().unexpected(&"tuple variant")),
            None => Err(E::invalid_type(de::Unexpected::UnitVariant, &"tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'a>>(self, _fields: &'static [&'static str], visitor: V) -> Result<V::Value, E> {
        match self.value {
            Some(InPlaceValue::Object(members)) => InPlaceDeserializer::visit_object(members, visitor),
            Some(other) => Err(other.into_deserializer().unexpected(&"struct variant")),
            None => Err(E::invalid_type(de::Unexpected::UnitVariant, &"struct variant")),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::validate::ArgumentValidator;

    /// Any JSON value, small, its member names from a few that schemas and
    /// types below know (so that many documents fit them).
    pub(crate) fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0u64..300).prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            Just(json!(1.0)),
            "[ab\"\\\\é\n🦀]{0,4}".prop_map(Value::from),
            prop::sample::select(vec!["A", "B", "C", "X", "Y", "x"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (prop::sample::select(vec!["a", "b", "c", "x", "A", "B", "C", "1", "007", "+7", RAW_VALUE]), inner),
                    0..4
                )
                .prop_map(|members| Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    /// The name `serde_json::Value` reads as a `RawValue`'s.
    const RAW_VALUE: &str = "$serde_json::private::RawValue";

    /// Any JSON object, as arguments are.
    pub(crate) fn any_object() -> impl Strategy<Value = Value> {
        prop::collection::vec((prop::sample::select(vec!["a", "b", "c", "x"]), any_json()), 0..4)
            .prop_map(|members| Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    }

    fn read(text: &str) -> Option<InPlaceValue<'_>> {
        serde_json::from_str(text).ok()
    }

    /// `value` as text, read in place and read as a tree: what the two paths
    /// of a call would have (the tree need not be `value`: `serde_json`
    /// reads some names its own way). The in-place reading is refused only
    /// for a serde_json private name.
    fn both_readings(value: &Value) -> Result<Option<(String, Value)>, TestCaseError> {
        let text = value.to_string();
        let taken = read(&text).is_some();
        prop_assert!(taken || text.contains(RAW_VALUE), "{}", text);
        if !taken {
            return Ok(None);
        }
        let tree = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        Ok(Some((text, tree)))
    }

    /// Schemas over the members `a`, `b` and `c` that use most keywords.
    fn schemas() -> Vec<Value> {
        vec![
            json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1, "maxLength": 3},
                "b": {"type": "integer", "minimum": 0, "maximum": 255}}, "required": ["a"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"], "pattern": "^[ab]+$"},
                "b": {"enum": ["A", "B", 1.0, null]}, "c": {"const": [1, "x"]}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/node"},
                "uniqueItems": true, "maxItems": 3}}, "minProperties": 1, "maxProperties": 2,
                "$defs": {"node": {"anyOf": [{"type": "number", "multipleOf": 0.5}, {"type": "object",
                "properties": {"a": {"$ref": "#/$defs/node"}}, "additionalProperties": {"type": "boolean"}}]}}}),
            json!({"type": "object", "propertyNames": {"pattern": "^[a-c]$"}, "patternProperties": {"^[ab]$":
                {"oneOf": [{"type": "string"}, {"type": "array", "minItems": 1}]}}, "dependentRequired": {"a": ["b"]},
                "not": {"required": ["c"]}}),
            json!({"type": "object", "properties": {"a": {"type": "object"}}, "unevaluatedProperties": false,
                "allOf": [{"properties": {"b": true}}], "if": {"required": ["a"]}, "then": {"required": ["b"]}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "prefixItems": [{"type": "integer"}],
                "items": false, "contains": {"type": "integer"}}, "b": {"type": "string", "maxLength": 2}}}),
        ]
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Plain {
        a: Option<String>,
        b: Option<i64>,
        #[serde(default)]
        c: Vec<u8>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Closed {
        a: bool,
        #[serde(default)]
        b: Option<f64>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    enum Choice {
        A,
        B(i32),
        C { x: String },
        X(u8, Option<String>),
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Choices {
        a: Option<Choice>,
        #[serde(default)]
        b: Vec<Choice>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "a")]
    enum Tagged {
        X { b: Option<Value> },
        Y,
        A(HashMap<String, Value>),
    }

    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(untagged)]
    enum Loose {
        Number(u64),
        Text(String),
        List(Vec<Value>),
        Map(HashMap<String, Value>),
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Flat {
        a: Option<Value>,
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Nested {
        a: Option<(u8, String)>,
        b: Option<Box<Nested>>,
        c: Option<Loose>,
        x: Option<char>,
    }

    /// A number whose visitor also takes text, asked for as a `u64`: a
    /// `Value` refuses text there before the visitor sees it (and, as a map
    /// key, reads only digits as a number).
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Lenient(u64);

    impl<'de> Deserialize<'de> for Lenient {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visit;
            impl Visitor<'_> for Visit {
                type Value = Lenient;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a number, or its digits")
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Lenient, E> {
                    Ok(Lenient(v))
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Lenient, E> {
                    v.parse().map(Lenient).map_err(E::custom)
                }
                fn visit_bool<E: de::Error>(self, v: bool) -> Result<Lenient, E> {
                    Ok(Lenient(u64::from(v)))
                }
            }
            deserializer.deserialize_u64(Visit)
        }
    }

    /// Fields asked for by kind with visitors that take more than the kind.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Kinds {
        a: Option<Lenient>,
        b: Option<Choice>,
        #[serde(default, deserialize_with = "any_bool")]
        c: Option<String>,
    }

    /// A `bool` asked for, any text taken.
    fn any_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
        struct Visit;
        impl Visitor<'_> for Visit {
            type Value = Option<String>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Some(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(v.to_owned()))
            }
        }
        deserializer.deserialize_bool(Visit)
    }

    #[derive(Debug, PartialEq, Eq, Hash, Deserialize)]
    enum Name {
        A,
        B,
        X,
    }

    /// Maps whose keys are not text.
    #[derive(Debug, PartialEq, Deserialize)]
    struct Keyed {
        a: Option<HashMap<Name, Value>>,
        b: Option<BTreeMap<u8, Value>>,
        c: Option<HashMap<Lenient, Value>>,
    }

    #[derive(Debug, PartialEq, Deserialize)]
    struct Unit;

    #[derive(Debug, PartialEq, Deserialize)]
    struct Units {
        a: Option<Unit>,
        b: Option<()>,
        c: Option<serde_bytes_like::Bytes>,
    }

    /// A byte buffer read through `deserialize_byte_buf`, as `serde_bytes` does.
    mod serde_bytes_like {
        #[derive(Debug, PartialEq)]
        pub struct Bytes(pub Vec<u8>);

        impl<'de> serde::Deserialize<'de> for Bytes {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visit;
                impl<'de> serde::de::Visitor<'de> for Visit {
                    type Value = Bytes;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("bytes")
                    }
                    fn visit_str<E>(self, v: &str) -> Result<Bytes, E> {
                        Ok(Bytes(v.as_bytes().to_vec()))
                    }
                    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                        let mut bytes = Vec::new();
                        while let Some(byte) = seq.next_element()? {
                            bytes.push(byte);
                        }
                        Ok(Bytes(bytes))
                    }
                }
                deserializer.deserialize_byte_buf(Visit)
            }
        }
    }

    /// `T` read in place and from the tree agree: the same value, or both refused.
    fn read_alike<T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
        in_place: &InPlaceValue<'_>,
        tree: &Value,
    ) -> Result<(), TestCaseError> {
        let fast = in_place.deserialize_into::<T>().ok();
        let slow = serde_json::from_value::<T>(tree.clone()).ok();
        prop_assert_eq!(fast, slow, "{} as {}", tree, std::any::type_name::<T>());
        Ok(())
    }

    /// `T` read in place is `T` read from the tree, unless the in-place
    /// reading refused it (keys that are not text: the tree then reads them).
    fn read_alike_or_refused<T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
        in_place: &InPlaceValue<'_>,
        tree: &Value,
    ) -> Result<(), TestCaseError> {
        if let Ok(fast) = in_place.deserialize_into::<T>() {
            let slow = serde_json::from_value::<T>(tree.clone()).ok();
            prop_assert_eq!(Some(fast), slow, "{} as {}", tree, std::any::type_name::<T>());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn an_enum_reads_in_place_as_it_reads_the_tree(
            name in prop::sample::select(vec!["A", "B", "C", "X", "Y"]),
            value in prop::option::of(any_json()),
        ) {
            let variant = value.map_or_else(|| Value::from(name), |value| json!({ name: value }));
            let value = json!({"a": variant.clone(), "b": [variant]});
            let Some((text, value)) = both_readings(&value)? else { return Ok(()) };
            let in_place = read(&text).unwrap();
            read_alike::<Choices>(&in_place, &value)?;
            read_alike::<Kinds>(&in_place, &value)?;
        }

        #[test]
        fn an_object_read_in_place_is_the_tree_of_its_text(value in any_object(), pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) }.unwrap();
            let tree = serde_json::from_str::<Value>(&text);
            match read(&text) {
                Some(in_place) => prop_assert_eq!(Value::Object(in_place.to_tree()), tree.unwrap()),
                None => prop_assert!(text.contains(RAW_VALUE), "{}", text),
            }
        }

        #[test]
        fn a_schema_judges_arguments_in_place_as_it_judges_the_tree(value in any_object()) {
            let Some((text, value)) = both_readings(&value)? else { return Ok(()) };
            let in_place = read(&text).unwrap();
            for schema in schemas() {
                let validator = ArgumentValidator::new(&schema).unwrap();
                prop_assert_eq!(validator.accepts_in_place(&in_place), validator.check(&value).is_ok(), "{} against {}", value, schema);
            }
        }

        #[test]
        fn a_type_reads_arguments_in_place_as_it_reads_the_tree(value in any_object()) {
            let Some((text, value)) = both_readings(&value)? else { return Ok(()) };
            let in_place = read(&text).unwrap();
            read_alike::<Plain>(&in_place, &value)?;
            read_alike::<Closed>(&in_place, &value)?;
            read_alike::<Choices>(&in_place, &value)?;
            read_alike::<Tagged>(&in_place, &value)?;
            read_alike::<Loose>(&in_place, &value)?;
            read_alike::<Flat>(&in_place, &value)?;
            read_alike::<Nested>(&in_place, &value)?;
            read_alike::<Units>(&in_place, &value)?;
            read_alike::<Kinds>(&in_place, &value)?;
            read_alike::<Value>(&in_place, &value)?;
            read_alike::<BTreeMap<String, Vec<Value>>>(&in_place, &value)?;
            read_alike::<HashMap<String, Option<Choice>>>(&in_place, &value)?;
            read_alike_or_refused::<Keyed>(&in_place, &value)?;
        }
    }

    #[test]
    fn strings_with_escapes_and_numbers_of_every_kind_read_as_the_tree_reads_them() {
        let text =
            r#"{"a\nb": "x\"y\u00e9", "n": [0, -1, 18446744073709551615, -9223372036854775808, 1.5e300, 1e-400, 2.0]}"#;
        let tree: Value = serde_json::from_str(text).unwrap();
        assert_eq!(Value::Object(read(text).unwrap().to_tree()), tree);
        let unescaped = read(r#"{"a": "plain"}"#).unwrap();
        let InPlaceValue::Object(members) = &unescaped else { panic!("an object") };
        assert!(matches!(members[0].1, InPlaceValue::String(Cow::Borrowed("plain"))), "borrowed from the body");
    }

    #[test]
    fn duplicate_names_and_large_objects_are_left_to_the_tree() {
        assert!(read(r#"{"a": 1, "a": 2}"#).is_none());
        assert!(read(r#"{"b": {"a": 1, "a": 2}}"#).is_none());
        let at_limit: Map<String, Value> = (0..MAX_MEMBERS).map(|i| (format!("k{i}"), Value::from(i))).collect();
        assert!(read(&Value::Object(at_limit.clone()).to_string()).is_some());
        let mut over = at_limit;
        over.insert("one more".into(), Value::Null);
        assert!(read(&Value::Object(over).to_string()).is_none());
    }

    #[test]
    fn serde_json_private_types_are_left_to_the_tree() {
        #[derive(Deserialize)]
        struct WithRaw {
            #[allow(dead_code)]
            a: Box<serde_json::value::RawValue>,
        }
        let in_place = read(r#"{"a": [1, 2]}"#).unwrap();
        assert!(in_place.deserialize_into::<WithRaw>().is_err());
    }
}
