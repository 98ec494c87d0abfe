//! Argument validation against a tool's `input_schema`, with messages that
//! name the JSON path and what was expected, so a model can correct itself.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{Draft, PatternOptions, ValidationError, Validator};
use serde_json::Value;

use crate::arguments::{InPlace, InPlaceObject, InPlaceValue};

/// How many problems one error message lists at most.
const MAX_REPORTED: usize = 5;

/// Arguments of at most this many JSON values (the object itself, every
/// field and item) get every problem counted; larger ones only their first,
/// because the schema crate gathers all problems at once, at hundreds of
/// bytes each, before any of them can be read.
const MAX_VALUES_FOR_ALL_PROBLEMS: usize = 1_024;

/// How large one `pattern` (or `patternProperties` name) may compile, in
/// bytes of the regex engine's automaton (the README's `MAX_SCHEMA_PATTERNS`
/// row): `\w{1,64}` fits, `[^x]{4000}` does not.
pub const MAX_PATTERN_COMPILED_BYTES: usize = 256 * 1024;

/// How much memory one pattern's lazy DFA may keep per thread; past it the
/// engine clears it or falls back to a slower linear-time search.
const PATTERN_DFA_BYTES: usize = 64 * 1024;

/// Patterns are compiled for the `regex` crate's linear-time engine, not
/// the backtracking one the schema crate uses by default: matching costs
/// time proportional to the text, whatever the pattern, and lookaround and
/// backreferences, which need backtracking, do not compile.
fn pattern_options() -> PatternOptions<jsonschema::Regex> {
    PatternOptions::regex().size_limit(MAX_PATTERN_COMPILED_BYTES).dfa_size_limit(PATTERN_DFA_BYTES)
}

/// Draft 2020-12 options whose patterns compile as [`ArgumentValidator`]
/// compiles them (linear-time, within [`MAX_PATTERN_COMPILED_BYTES`]): for
/// any validator of a schema someone else sent.
pub fn linear_time_options<'i>() -> jsonschema::ValidationOptions<'i> {
    jsonschema::options().with_draft(Draft::Draft202012).with_pattern_options(pattern_options())
}

/// Whether `pattern` compiles as [`ArgumentValidator`] compiles a schema's
/// patterns: the reason when it does not.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let schema = serde_json::json!({ "pattern": pattern });
    linear_time_options().build(&schema).map(drop).map_err(|e| e.to_string())
}

/// A compiled `input_schema`, ready to check arguments, as a tree or read
/// in place ([`InPlaceObject`], as a module's `POST /execute` reads them):
/// compiled once for each.
pub struct ArgumentValidator {
    validator: Validator,
    in_place: Validator<InPlace>,
}

impl ArgumentValidator {
    /// Compiles `schema` as draft 2020-12, once for trees and once for
    /// arguments read in place; no reference leaves the document (the crate
    /// is built without network or file resolution). Its patterns are
    /// compiled for a linear-time engine (the `regex` crate's, within a fixed size).
    pub fn new(schema: &Value) -> Result<Self, String> {
        let validator = linear_time_options().build(schema).map_err(|e| e.to_string())?;
        let options =
            jsonschema::options_for::<InPlace>().with_draft(Draft::Draft202012).with_pattern_options(pattern_options());
        let in_place = options.build(schema).map_err(|e| e.to_string())?;
        Ok(Self { validator, in_place })
    }

    /// `Ok` when `arguments` fit the schema; otherwise one message listing
    /// the problems, each as `arguments.<path>: <what was wrong>`.
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        let first = match self.validator.validate(arguments) {
            Ok(()) => return Ok(()),
            Err(error) => describe(&error),
        };
        if !has_at_most_values(arguments, MAX_VALUES_FOR_ALL_PROBLEMS) {
            return Err(format!(
                "{first}; only the first problem is reported for arguments of more than \
                 {MAX_VALUES_FOR_ALL_PROBLEMS} values"
            ));
        }
        let mut problems: Vec<String> = self.validator.iter_errors(arguments).map(|error| describe(&error)).collect();
        problems.dedup();
        let extra = problems.len().saturating_sub(MAX_REPORTED);
        problems.truncate(MAX_REPORTED);
        if extra > 0 {
            problems.push(format!("and {extra} more problem(s)"));
        }
        Err(problems.join("; "))
    }

    /// Whether `arguments`, read in place, fit the schema.
    pub(crate) fn accepts_in_place(&self, arguments: &InPlaceValue<'_>) -> bool {
        self.in_place.is_valid(arguments)
    }

    /// [`Self::check`] for arguments read in place: checked without a
    /// tree, which is built only for the message of arguments that do not fit.
    pub fn check_in_place(&self, arguments: &InPlaceObject<'_>) -> Result<(), String> {
        if self.accepts_in_place(&arguments.0) { Ok(()) } else { self.check(&arguments.0.to_value()) }
    }
}

/// Whether `value` holds at most `limit` JSON values, itself included;
/// counted without recursion, and stops as soon as the limit is passed.
fn has_at_most_values(value: &Value, limit: usize) -> bool {
    let mut pending = vec![value];
    let mut counted = 0;
    while let Some(next) = pending.pop() {
        counted += 1;
        let children = match next {
            Value::Array(items) => items.len(),
            Value::Object(fields) => fields.len(),
            _ => 0,
        };
        if counted + pending.len() + children > limit {
            return false;
        }
        match next {
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => pending.extend(fields.values()),
            _ => {}
        }
    }
    true
}

/// `arguments.items[2].name` for the instance path `/items/2/name`.
fn json_path(error: &ValidationError<'_>) -> String {
    let mut path = String::from("arguments");
    for segment in error.instance_path() {
        match segment {
            LocationSegment::Property(name) => {
                path.push('.');
                path.push_str(&name);
            }
            LocationSegment::Index(index) => path.push_str(&format!("[{index}]")),
        }
    }
    path
}

/// A short rendering of the offending value (long strings are cut).
fn shown(value: &Value) -> String {
    cut(value.to_string(), 60)
}

/// `text` cut after `limit` characters, with `...` when it was.
fn cut(text: String, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

/// The longest one problem's description may be: a path through long
/// field names, or a list of unexpected ones, is cut there.
const MAX_PROBLEM_CHARS: usize = 300;

/// One problem as `path: message`, at most [`MAX_PROBLEM_CHARS`] long.
fn describe(error: &ValidationError<'_>) -> String {
    cut(describe_in_full(error), MAX_PROBLEM_CHARS)
}

/// One problem as `path: message`, the offending value cut by [`shown`].
fn describe_in_full(error: &ValidationError<'_>) -> String {
    let path = json_path(error);
    let got = shown(error.instance());
    let message = match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            format!("expected {expected}, got {got}")
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
            return format!("{path}.{name}: required field is missing");
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("unexpected field(s) {}: not part of this tool's arguments", unexpected.join(", "))
        }
        ValidationErrorKind::Enum { options } => format!("expected one of {options}, got {got}"),
        ValidationErrorKind::Constant { expected_value } => {
            format!("expected {expected_value}, got {got}")
        }
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}, got {got}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}, got {got}"),
        ValidationErrorKind::MinLength { limit } => format!("must be at least {limit} characters long"),
        ValidationErrorKind::MaxLength { limit } => format!("must be at most {limit} characters long"),
        ValidationErrorKind::MinItems { limit } => format!("must have at least {limit} item(s)"),
        ValidationErrorKind::MaxItems { limit } => format!("must have at most {limit} item(s)"),
        // The crate's wording, with the value as `shown` renders it.
        _ => error.masked_with(got).to_string(),
    };
    format!("{path}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator() -> ArgumentValidator {
        ArgumentValidator::new(&json!({
            "type": "object",
            "properties": {
                "max_results": {"type": "integer", "minimum": 1},
                "items": {"type": "array", "items": {"type": "object",
                    "properties": {"name": {"type": "string"}}, "required": ["name"]}},
                "mode": {"enum": ["a", "b"]}
            },
            "required": ["max_results"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn messages_name_the_path_and_the_expectation() {
        let v = validator();
        assert_eq!(
            v.check(&json!({"max_results": "five"})).unwrap_err(),
            r#"arguments.max_results: expected integer, got "five""#
        );
        assert_eq!(v.check(&json!({})).unwrap_err(), "arguments.max_results: required field is missing");
        let nested = v.check(&json!({"max_results": 1, "items": [{"name": "x"}, {}]})).unwrap_err();
        assert_eq!(nested, "arguments.items[1].name: required field is missing");
        let extra = v.check(&json!({"max_results": 1, "zzz": 1})).unwrap_err();
        assert!(extra.contains("unexpected field(s) zzz"), "{extra}");
        let bad_enum = v.check(&json!({"max_results": 1, "mode": "c"})).unwrap_err();
        assert!(bad_enum.starts_with("arguments.mode: expected one of"), "{bad_enum}");
        assert!(v.check(&json!({"max_results": 0})).unwrap_err().contains("at least 1"));
        assert!(v.check(&json!({"max_results": 3})).is_ok());
    }

    #[test]
    fn long_values_are_cut_and_many_problems_summarised() {
        let v = validator();
        let long = "x".repeat(10_000);
        let message = v.check(&json!({"max_results": long})).unwrap_err();
        assert!(message.len() < 200, "{message}");
        let items: Vec<Value> = (0..20).map(|_| json!({})).collect();
        let message = v.check(&json!({"max_results": 1, "items": items})).unwrap_err();
        assert!(message.ends_with("and 15 more problem(s)"), "{message}");
    }

    #[test]
    fn messages_without_their_own_wording_do_not_echo_a_long_value() {
        let v = ArgumentValidator::new(&json!({
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}},
        }))
        .unwrap();
        let spaces = " ".repeat(1_000_000);
        let message = v.check(&json!({ "code": spaces })).unwrap_err();
        let shown_value = format!("\"{}...", " ".repeat(59));
        assert_eq!(message, format!(r#"arguments.code: {shown_value} does not match "^[a-z]+$""#));
    }

    #[test]
    fn a_problem_naming_long_fields_is_cut() {
        let long_name = "n".repeat(100_000);
        let message = validator().check(&json!({"max_results": 1, long_name: 1})).unwrap_err();
        assert!(message.starts_with("arguments: unexpected field(s) nnn"), "{message}");
        assert_eq!(message.chars().count(), MAX_PROBLEM_CHARS + 3, "{message}");
    }

    #[test]
    fn huge_invalid_arguments_report_their_first_problem_without_counting_the_rest() {
        let v = validator();
        let items: Vec<Value> = (0..200_000).map(|_| json!({})).collect();
        let message = v.check(&json!({"max_results": 1, "items": items})).unwrap_err();
        assert_eq!(
            message,
            "arguments.items[0].name: required field is missing; only the first problem is reported \
             for arguments of more than 1024 values"
        );
    }

    #[test]
    fn patterns_compile_for_a_linear_time_engine_within_their_size() {
        // Backtracking one string of 18 `a` and a `b` against this is
        // exponential; the linear-time engine refuses the lookaround.
        let backtracking = json!({"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string", "pattern": "^(?:(a|(?=a)a)*c|a*b)$"}}}});
        let error = ArgumentValidator::new(&backtracking).err().expect("lookaround refused");
        assert!(error.contains("(?=a)"), "{error}");
        assert!(check_pattern("^(a)\\1$").is_err());
        // Small in text, huge once compiled.
        assert!(check_pattern("[^x]{4000}y").is_err());
        for ordinary in
            ["^[a-z0-9_-]{1,64}$", "^\\w{1,64}$", "^\\d{4}-\\d{2}-\\d{2}$", "^https?://[^\\s]+$", "^\\p{L}+$"]
        {
            assert_eq!(check_pattern(ordinary), Ok(()), "{ordinary}");
        }
        let v = ArgumentValidator::new(&json!({"type": "object", "properties": {"code": {"pattern": "^[a-z]+$"}}}))
            .unwrap();
        assert!(v.check(&json!({"code": "abc"})).is_ok() && v.check(&json!({"code": "ABC"})).is_err());
    }

    #[test]
    fn values_are_counted_up_to_the_limit() {
        let nested = json!({"a": [1, 2, {"b": null}], "c": "x"});
        assert!(has_at_most_values(&nested, 7));
        assert!(!has_at_most_values(&nested, 6));
        assert!(has_at_most_values(&json!(1), 1));
    }
}
