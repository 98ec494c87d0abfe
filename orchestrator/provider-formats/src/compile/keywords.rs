//! A schema node's keywords as a pass rewrites them, borrowed from the
//! source document until the pass writes them out: a rewrite that only
//! drops, merges and reorders keywords copies nothing it does not keep.
//!
//! The order rules are serde_json's `Map` (with `preserve_order`), so that
//! a pass ported from one gives byte-identical output: `insert` replaces a
//! keyword in place or appends it, `remove` moves the last keyword into the
//! removed one's place (`swap_remove`).

use std::borrow::Cow;

use either::Either;
use serde_json::{Map, Value};

/// The members of `node` when it is an object, each borrowed or owned as
/// `node` is, in order; any other node as it is.
pub(super) fn members<'a>(
    node: Cow<'a, Value>,
) -> Result<impl Iterator<Item = (Cow<'a, str>, Cow<'a, Value>)>, Cow<'a, Value>> {
    match node {
        Cow::Borrowed(Value::Object(map)) => {
            Ok(Either::Left(map.iter().map(|(name, value)| (Cow::Borrowed(name.as_str()), Cow::Borrowed(value)))))
        }
        Cow::Owned(Value::Object(map)) => {
            Ok(Either::Right(map.into_iter().map(|(name, value)| (Cow::Owned(name), Cow::Owned(value)))))
        }
        other => Err(other),
    }
}

/// The items of `node` when it is a list, each borrowed or owned as `node`
/// is, in order; any other node as it is.
pub(super) fn items<'a>(node: Cow<'a, Value>) -> Result<impl Iterator<Item = Cow<'a, Value>>, Cow<'a, Value>> {
    match node {
        Cow::Borrowed(Value::Array(items)) => Ok(Either::Left(items.iter().map(Cow::Borrowed))),
        Cow::Owned(Value::Array(items)) => Ok(Either::Right(items.into_iter().map(Cow::Owned))),
        other => Err(other),
    }
}

/// One node's keywords and values, in order; each value borrowed or owned
/// (`Cow<Value>`), or a prepared subtree.
#[derive(Debug)]
pub(super) struct Keywords<'a, V = Cow<'a, Value>>(Vec<(Cow<'a, str>, V)>);

impl Default for Keywords<'_> {
    fn default() -> Self {
        Self::empty()
    }
}

impl<'a> Keywords<'a> {
    /// The keywords of `node` when it is an object; otherwise the node itself, owned.
    pub(super) fn of(node: Cow<'a, Value>) -> Result<Self, Value> {
        members(node).map(|members| Self(members.collect())).map_err(Cow::into_owned)
    }

    /// The keywords of `map`, borrowed.
    pub(super) fn borrowed(map: &'a Map<String, Value>) -> Self {
        Self(map.iter().map(|(keyword, value)| (Cow::Borrowed(keyword.as_str()), Cow::Borrowed(value))).collect())
    }

    /// The value of `keyword`.
    pub(super) fn get(&self, keyword: &str) -> Option<&Value> {
        self.entry(keyword).map(|value| &**value)
    }
}

impl<'a, V> Keywords<'a, V> {
    /// No keywords.
    pub(super) fn empty() -> Self {
        Self(Vec::new())
    }

    /// The keywords `entries`, in order (no keyword twice).
    pub(super) fn from_entries(entries: Vec<(Cow<'a, str>, V)>) -> Self {
        Self(entries)
    }

    /// The value of `keyword`, as it is held.
    pub(super) fn entry(&self, keyword: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == keyword).map(|(_, value)| value)
    }

    /// The value of `keyword`, to change it.
    pub(super) fn entry_mut(&mut self, keyword: &str) -> Option<&mut V> {
        self.0.iter_mut().find(|(k, _)| k == keyword).map(|(_, value)| value)
    }

    /// Whether `keyword` is present.
    pub(super) fn contains_key(&self, keyword: &str) -> bool {
        self.0.iter().any(|(k, _)| k == keyword)
    }

    /// Whether there are no keywords.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes `keyword`, the last keyword taking its place (as `Map::remove`).
    pub(super) fn remove(&mut self, keyword: &str) -> Option<V> {
        let index = self.0.iter().position(|(k, _)| k == keyword)?;
        Some(self.0.swap_remove(index).1)
    }

    /// Sets `keyword` in place when present, else appends it (as `Map::insert`).
    pub(super) fn insert(&mut self, keyword: Cow<'a, str>, value: V) {
        match self.entry_mut(&keyword) {
            Some(old) => *old = value,
            None => self.0.push((keyword, value)),
        }
    }

    /// The keywords in order, to be written out.
    pub(super) fn into_entries(self) -> impl Iterator<Item = (Cow<'a, str>, V)> {
        self.0.into_iter()
    }

    /// The keywords in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(keyword, value)| (&**keyword, value))
    }
}

impl<V: Clone> Clone for Keywords<'_, V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The same edits on a `Map` and on `Keywords` leave the same order.
    #[test]
    fn edits_keep_the_order_a_map_would() {
        let source = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5});
        let Value::Object(mut map) = source.clone() else { unreachable!() };
        let mut keywords = Keywords::of(Cow::Borrowed(&source)).unwrap();
        map.remove("b");
        assert_eq!(keywords.remove("b").as_deref(), Some(&json!(2)));
        map.insert("c".into(), json!(30));
        keywords.insert("c".into(), Cow::Owned(json!(30)));
        map.insert("f".into(), json!(6));
        keywords.insert("f".into(), Cow::Owned(json!(6)));
        map.remove("a");
        keywords.remove("a");
        assert_eq!(keywords.remove("missing"), None);
        assert!(keywords.contains_key("f") && !keywords.contains_key("a") && keywords.get("c") == Some(&json!(30)));
        let written: Vec<(String, Value)> =
            keywords.into_entries().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let expected: Vec<(String, Value)> = map.into_iter().collect();
        assert_eq!(written, expected);
        assert_eq!(Keywords::of(Cow::Owned(json!(true))).unwrap_err(), json!(true));
        assert!(Keywords::default().is_empty());
    }
}
