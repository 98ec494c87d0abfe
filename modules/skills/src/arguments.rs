//! A tool's arguments: one per placeholder, typed explicitly or by name,
//! and the JSON Schema the manifest shows and calls are validated against.

use serde_json::{Map, Value, json};

/// The type of one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgType {
    /// Any text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`, passed as that word.
    Boolean,
    /// One of the listed words.
    Enum(Vec<String>),
}

impl ArgType {
    /// The explicit `type` of an `[tools.args]` table (`values` for `enum`).
    pub fn explicit(name: &str, values: Option<Vec<String>>) -> Result<Self, String> {
        match (name, values) {
            ("enum", Some(values)) if !values.is_empty() => Ok(Self::Enum(values)),
            ("enum", _) => Err("`type = \"enum\"` needs a non-empty `values` list".to_owned()),
            (_, Some(_)) => Err("`values` is only for `type = \"enum\"`".to_owned()),
            ("string", None) => Ok(Self::String),
            ("integer", None) => Ok(Self::Integer),
            ("number", None) => Ok(Self::Number),
            ("boolean", None) => Ok(Self::Boolean),
            (other, None) => Err(format!("unknown `type = \"{other}\"`; use string, integer, number, boolean or enum")),
        }
    }

    /// The type a placeholder's name suggests: counts are integers,
    /// switches booleans, everything else text.
    pub fn inferred(name: &str) -> Self {
        let name = name.to_ascii_lowercase();
        let integer = ["limit", "count", "offset", "page", "size", "top", "n"].contains(&name.as_str())
            || name.starts_with("max_")
            || name.starts_with("min_")
            || name.starts_with("num_")
            || name.ends_with("_count")
            || name.ends_with("_limit");
        let boolean = ["enabled", "verbose", "dry_run", "force", "quiet", "recursive", "all"].contains(&name.as_str())
            || name.starts_with("is_")
            || name.starts_with("include_");
        if integer {
            Self::Integer
        } else if boolean {
            Self::Boolean
        } else {
            Self::String
        }
    }
}

/// One argument of a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    /// The placeholder's name, the property's name.
    pub name: String,
    /// Its type.
    pub kind: ArgType,
    /// What it means, for the model.
    pub description: String,
    /// Whether a call must give it.
    pub required: bool,
    /// The most bytes a text value may have (its word's share of the
    /// kernel's per-argument limit).
    pub max_bytes: usize,
    /// Whether a value may start an argv word with `-`: an enum (the skill
    /// lists its values), an argument with `allow_leading_dash = true`, or
    /// one that never starts a word before `--`.
    pub may_start_with_dash: bool,
}

/// The JSON Schema of the arguments object.
pub fn input_schema(arguments: &[Argument]) -> Value {
    let mut properties = Map::new();
    for argument in arguments {
        let mut property = match &argument.kind {
            ArgType::String => json!({
                "type": "string",
                "maxLength": argument.max_bytes,
            }),
            ArgType::Integer => json!({"type": "integer"}),
            ArgType::Number => json!({"type": "number"}),
            ArgType::Boolean => json!({"type": "boolean"}),
            ArgType::Enum(values) => json!({"type": "string", "enum": values}),
        };
        let no_dash = if argument.may_start_with_dash { "" } else { ", not starting with `-`" };
        let description = match argument.kind {
            ArgType::String => format!(
                "{} (one command-line argument: no NUL characters{no_dash}, at most {} bytes in UTF-8)",
                argument.description, argument.max_bytes
            ),
            ArgType::Integer | ArgType::Number if !argument.may_start_with_dash => {
                // Refused by the schema, before any run.
                property["minimum"] = json!(0);
                format!("{} (not negative: a leading `-` would read as an option)", argument.description)
            }
            _ => argument.description.clone(),
        };
        property["description"] = json!(description);
        properties.insert(argument.name.clone(), property);
    }
    let required: Vec<&str> = arguments.iter().filter(|a| a.required).map(|a| a.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A validated argument's value as the text of its command-line word. An
/// `integer` argument may come as a whole number with a fraction part
/// (`5.0`: JSON Schema counts it as an integer), written without it, as a
/// script parsing an integer expects.
pub fn as_word(value: &Value, integer: bool) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) if integer && number.is_f64() => match number.as_f64() {
            Some(whole) if whole.is_finite() && whole.fract() == 0.0 => format!("{whole:.0}"),
            _ => number.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_inferred_from_names() {
        assert_eq!(ArgType::inferred("limit"), ArgType::Integer);
        assert_eq!(ArgType::inferred("max_results"), ArgType::Integer);
        assert_eq!(ArgType::inferred("dry_run"), ArgType::Boolean);
        assert_eq!(ArgType::inferred("verbose"), ArgType::Boolean);
        assert_eq!(ArgType::inferred("name"), ArgType::String);
        assert_eq!(ArgType::inferred("limitless"), ArgType::String);
    }

    #[test]
    fn explicit_types_are_checked() {
        assert_eq!(ArgType::explicit("enum", Some(vec!["a".into()])), Ok(ArgType::Enum(vec!["a".into()])));
        assert!(ArgType::explicit("enum", None).unwrap_err().contains("values"));
        assert!(ArgType::explicit("float", None).unwrap_err().contains("float"));
        assert!(ArgType::explicit("string", Some(vec![])).is_err());
    }

    #[test]
    fn the_schema_lists_types_limits_and_required() {
        let argument = |name: &str, kind, required| Argument {
            name: name.into(),
            kind,
            description: format!("The {name}."),
            required,
            max_bytes: 100,
            may_start_with_dash: !matches!(name, "q" | "count"),
        };
        let schema = input_schema(&[
            argument("q", ArgType::String, true),
            argument("n", ArgType::Integer, false),
            argument("mode", ArgType::Enum(vec!["a".into(), "b".into()]), false),
            argument("count", ArgType::Integer, false),
        ]);
        assert!(schema["properties"]["q"]["description"].as_str().unwrap().contains("not starting with `-`"));
        assert_eq!(schema["properties"]["count"]["minimum"], 0, "a negative count would read as an option");
        assert_eq!(schema["required"], json!(["q"]));
        assert_eq!(schema["properties"]["q"]["maxLength"], 100);
        assert!(schema["properties"]["q"]["description"].as_str().unwrap().starts_with("The q. (one"));
        assert_eq!(schema["properties"]["n"], json!({"type": "integer", "description": "The n."}));
        assert_eq!(schema["properties"]["mode"]["enum"], json!(["a", "b"]));
        assert_eq!(as_word(&json!("x y"), false), "x y");
        assert_eq!((as_word(&json!(5), true), as_word(&json!(true), false)), ("5".to_owned(), "true".to_owned()));
        // A whole number with a fraction part: without it for an integer argument only.
        assert_eq!((as_word(&json!(5.0), true), as_word(&json!(5.0), false)), ("5".to_owned(), "5.0".to_owned()));
        assert_eq!(as_word(&json!(-1e20), true), "-100000000000000000000");
    }
}
