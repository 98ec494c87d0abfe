//! What a tool's `input_schema` may cost: its JSON text, how deep its
//! subschemas nest and how many there are once every local reference is
//! inlined (what provider conversions do). A handful of definitions that
//! each refer twice to the next is small as text and a million nodes when
//! inlined; a long chain of definitions nests as deep as it is long. Both
//! are measured here without recursion, and the walk stops as soon as a
//! budget is exceeded, so checking costs at most the budget.

use std::io;

use serde_json::Value;

/// The default [`SchemaBudget::max_depth`].
pub const DEFAULT_MAX_SCHEMA_DEPTH: usize = 32;
/// The default [`SchemaBudget::max_nodes`].
pub const DEFAULT_MAX_SCHEMA_NODES: usize = 10_000;
/// The default [`SchemaBudget::max_bytes`], 256 KiB.
pub const DEFAULT_MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// Keywords whose value is one subschema.
const SINGLE: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is a list of subschemas (`items` too, in its old tuple form).
const LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
const MAPS: &[&str] = &["properties", "$defs", "definitions", "patternProperties", "dependentSchemas"];

/// The most one `input_schema` may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaBudget {
    /// `MAX_SCHEMA_DEPTH`: levels of nested subschemas, the root being 1 and
    /// every followed reference counting as a level.
    pub max_depth: usize,
    /// `MAX_SCHEMA_NODES`: subschemas once every local reference is inlined
    /// (a recursive reference is followed once).
    pub max_nodes: usize,
    /// `MAX_SCHEMA_BYTES`: the schema's JSON text.
    pub max_bytes: usize,
}

impl Default for SchemaBudget {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_SCHEMA_DEPTH,
            max_nodes: DEFAULT_MAX_SCHEMA_NODES,
            max_bytes: DEFAULT_MAX_SCHEMA_BYTES,
        }
    }
}

/// Which budget a schema exceeds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaBudgetError {
    /// Its subschemas nest too deep once references are followed.
    #[error("its subschemas nest deeper than {max} levels once references are followed (budget MAX_SCHEMA_DEPTH)")]
    TooDeep {
        /// The budget.
        max: usize,
    },
    /// It has too many subschemas once references are inlined.
    #[error("it has more than {max} subschemas once references are inlined (budget MAX_SCHEMA_NODES)")]
    TooManyNodes {
        /// The budget.
        max: usize,
    },
    /// Its JSON text is too long.
    #[error("its JSON text is longer than {max} bytes (budget MAX_SCHEMA_BYTES)")]
    TooLarge {
        /// The budget.
        max: usize,
    },
}

impl SchemaBudget {
    /// Whether `schema` stays within this budget; the first budget it
    /// exceeds otherwise.
    pub fn check(&self, schema: &Value) -> Result<(), SchemaBudgetError> {
        self.check_inlined(schema)?;
        let mut counter = Counter { left: self.max_bytes };
        serde_json::to_writer(&mut counter, schema).map_err(|_| SchemaBudgetError::TooLarge { max: self.max_bytes })
    }

    /// Walks `schema` as if every local reference were inlined, counting
    /// nodes and levels, and stops at the first budget exceeded.
    fn check_inlined(&self, root: &Value) -> Result<(), SchemaBudgetError> {
        // The references being followed above a node: (target, parent link).
        let mut chains: Vec<(&Value, Option<usize>)> = Vec::new();
        let mut pending: Vec<(&Value, usize, Option<usize>)> = vec![(root, 1, None)];
        let mut nodes = 0usize;
        while let Some((node, depth, chain)) = pending.pop() {
            nodes += 1;
            if nodes > self.max_nodes {
                return Err(SchemaBudgetError::TooManyNodes { max: self.max_nodes });
            }
            if depth > self.max_depth {
                return Err(SchemaBudgetError::TooDeep { max: self.max_depth });
            }
            let Value::Object(map) = node else { continue };
            let target = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'));
            if let Some(target) = target.and_then(|pointer| root.pointer(pointer))
                && !on_chain(&chains, chain, target)
            {
                chains.push((target, chain));
                pending.push((target, depth + 1, Some(chains.len() - 1)));
            }
            for (keyword, value) in map {
                let keyword = keyword.as_str();
                match value {
                    Value::Array(items) if LISTS.contains(&keyword) => {
                        pending.extend(items.iter().map(|item| (item, depth + 1, chain)));
                    }
                    Value::Object(children) if MAPS.contains(&keyword) => {
                        pending.extend(children.values().map(|child| (child, depth + 1, chain)));
                    }
                    Value::Object(_) | Value::Bool(_) if SINGLE.contains(&keyword) => {
                        pending.push((value, depth + 1, chain));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// Whether `target` is already being followed in the chain that ends at `link`.
fn on_chain(chains: &[(&Value, Option<usize>)], mut link: Option<usize>, target: &Value) -> bool {
    while let Some(index) = link {
        let (followed, parent) = chains[index];
        if std::ptr::eq(followed, target) {
            return true;
        }
        link = parent;
    }
    false
}

/// A writer that only counts, and fails once more than `left` bytes come.
struct Counter {
    left: usize,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.left = self.left.checked_sub(buf.len()).ok_or_else(|| io::Error::other("over the byte budget"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `$defs` `D0`..`D{n-1}`, each an object whose property refers to the
    /// next (`fan_out` times), the root referring to `D0`.
    pub(crate) fn chain(length: usize, fan_out: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..length {
            let properties: serde_json::Map<String, Value> = (0..fan_out)
                .map(|k| {
                    let next = if i + 1 < length {
                        json!({"$ref": format!("#/$defs/D{}", i + 1)})
                    } else {
                        json!({"type": "string"})
                    };
                    (format!("p{k}"), next)
                })
                .collect();
            defs.insert(format!("D{i}"), json!({"type": "object", "properties": properties}));
        }
        json!({"type": "object", "properties": {"start": {"$ref": "#/$defs/D0"}}, "$defs": defs})
    }

    #[test]
    fn ordinary_and_recursive_schemas_pass() {
        let tree = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Tree"}, "self": {"$ref": "#"}},
            "$defs": {"Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}
        });
        assert_eq!(SchemaBudget::default().check(&tree), Ok(()));
        assert_eq!(SchemaBudget::default().check(&chain(5, 2)), Ok(()));
    }

    #[test]
    fn long_chains_doubling_graphs_and_long_texts_are_over_budget() {
        let budget = SchemaBudget::default();
        assert_eq!(budget.check(&chain(2_000, 1)), Err(SchemaBudgetError::TooDeep { max: DEFAULT_MAX_SCHEMA_DEPTH }));
        assert_eq!(budget.check(&chain(20_000, 1)), Err(SchemaBudgetError::TooDeep { max: DEFAULT_MAX_SCHEMA_DEPTH }));
        let wide = SchemaBudget { max_depth: 1_000, ..budget };
        assert_eq!(wide.check(&chain(20, 2)), Err(SchemaBudgetError::TooManyNodes { max: DEFAULT_MAX_SCHEMA_NODES }));
        let long = json!({"type": "object", "description": "x".repeat(DEFAULT_MAX_SCHEMA_BYTES)});
        assert_eq!(budget.check(&long), Err(SchemaBudgetError::TooLarge { max: DEFAULT_MAX_SCHEMA_BYTES }));
    }
}
