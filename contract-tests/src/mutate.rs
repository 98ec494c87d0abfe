//! Invalid arguments made by breaking valid ones in one place: a required
//! field dropped, a value of the wrong JSON type, a value outside an enum.
//! Each mutation is kept only when the schema really rejects it.

use jsonschema::Validator;
use module_sdk::schema::parameters_of;
use serde_json::{Map, Value, json};

use crate::check::Check;
use crate::checks::json_type;
use crate::schema_types::{accepts, value_types};

/// At most this many mutations of each kind per tool.
const PER_KIND: usize = 3;

/// A value no enumeration of a real tool allows.
pub const NOT_A_CHOICE: &str = "contract_tests_not_a_choice";

/// Values of every JSON type, tried in order as a wrong-typed replacement.
fn wrong_values() -> [Value; 5] {
    [json!(12345), json!("contract tests: wrong type"), json!(true), json!([1, 2]), json!({"contract_tests": 1})]
}

/// Invalid arguments derived from `base` (valid for `schema`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// The check this mutation exercises.
    pub check: Check,
    /// What was changed, for messages.
    pub change: String,
    /// The arguments to send.
    pub arguments: Value,
}

/// Every mutation of `base` that `validator` rejects.
pub fn mutations(schema: &Value, base: &Map<String, Value>, validator: &Validator) -> Vec<Mutation> {
    let mut found = Vec::new();
    let mut keep = |check: Check, change: String, arguments: Map<String, Value>| {
        let arguments = Value::Object(arguments);
        let count = found.iter().filter(|m: &&Mutation| m.check == check).count();
        if count < PER_KIND && !validator.is_valid(&arguments) {
            found.push(Mutation { check, change, arguments });
        }
    };

    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    for name in required.filter(|name| base.contains_key(*name)) {
        let mut arguments = base.clone();
        arguments.remove(name);
        keep(Check::MissingRequired, format!("required `{name}` left out"), arguments);
    }

    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten().filter(|(name, _)| base.contains_key(*name)) {
        let Some(types) = value_types(schema, property) else { continue };
        if let Some(wrong) = wrong_values().into_iter().find(|v| !accepts(&types, json_type(v))) {
            let change = format!("`{name}` set to {} {wrong}", json_type(&wrong));
            let mut arguments = base.clone();
            arguments.insert(name.clone(), wrong);
            keep(Check::WrongType, change, arguments);
        }
    }

    for parameter in parameters_of(schema) {
        if parameter.allowed.is_some() && base.contains_key(&parameter.name) {
            let mut arguments = base.clone();
            arguments.insert(parameter.name.clone(), json!(NOT_A_CHOICE));
            keep(Check::WrongEnum, format!("`{}` set to {NOT_A_CHOICE:?}", parameter.name), arguments);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_mutation_is_rejected_by_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": ["integer", "null"]},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "anything": {}
        }, "required": ["query", "mode"]});
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let base = json!({"query": "x", "limit": 1, "mode": "a", "anything": 1});
        let found = mutations(&schema, base.as_object().unwrap(), &validator);
        let summary: Vec<(&str, &str)> = found.iter().map(|m| (m.check.name(), m.change.as_str())).collect();
        assert_eq!(
            summary,
            vec![
                ("execute.missing_required", "required `query` left out"),
                ("execute.missing_required", "required `mode` left out"),
                ("execute.wrong_type", "`query` set to integer 12345"),
                ("execute.wrong_type", "`limit` set to string \"contract tests: wrong type\""),
                ("execute.wrong_type", "`mode` set to integer 12345"),
                ("execute.wrong_enum", "`mode` set to \"contract_tests_not_a_choice\""),
            ]
        );
        assert!(found.iter().all(|m| !validator.is_valid(&m.arguments)));
    }
}
