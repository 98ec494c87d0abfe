//! `input_schema` and `output_schema`: valid draft 2020-12 schemas, an
//! object at the root of the arguments, only local references, and input
//! schemas within the budgets an orchestrator checks at discovery (each
//! schema's, and the manifest's patterns and text together); output
//! schemas within the same budgets, since every result is checked against
//! them (advice only: the contract does not state it).

use module_sdk::contract::{DEFAULT_MAX_MANIFEST_SCHEMA_BYTES, ManifestPatterns, SchemaBudget, SchemaBudgetError};
use std::collections::HashMap;

use module_sdk::schema::{is_object_schema, unresolved_references};
use module_sdk::service::{MAX_PATTERN_COMPILED_BYTES, check_pattern};
use serde_json::Value;

use super::ToolView;
use crate::check::{Check, Findings};
use crate::client::shorten;

/// The `$schema` of draft 2020-12.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Runs the schema checks over every tool.
pub fn check_schemas(tools: &[ToolView<'_>], findings: &mut Findings) {
    let some_input = tools.iter().any(|tool| tool.input_schema().is_some());
    if some_input {
        findings.ran(Check::InputMetaschema);
        findings.ran(Check::InputRootObject);
        findings.ran(Check::InputBudget);
    }
    if tools.iter().any(|tool| tool.output_schema().is_some()) {
        findings.ran(Check::OutputMetaschema);
        findings.ran(Check::OutputBudget);
    }
    if tools.iter().any(|tool| tool.input_schema().is_some() || tool.output_schema().is_some()) {
        findings.ran(Check::ReferencesLocal);
    }
    let budget = SchemaBudget::default();
    // Counted across the manifest, as an orchestrator does at discovery.
    let mut patterns = ManifestPatterns::default();
    let mut input_bytes = 0usize;
    let mut compiled = HashMap::new();
    for tool in tools {
        let label = tool.label();
        // Before the metaschema: a schema over budget is not worth compiling;
        // its checks are left out, the other schema's kept.
        let input = format!("{label} input_schema");
        let within = |s| budget.check_sharing(s, &mut patterns);
        let input_schema = within_budget(tool.input_schema(), within, Check::InputBudget, &input, findings);
        // Within the budget, so the cost is known.
        let cost = input_schema.and_then(|schema| budget.check(schema).ok()).unwrap_or(0);
        input_bytes = input_bytes.saturating_add(cost);
        // The results are not checked against one over budget either (execute.output_schema notes so);
        // CONTRACT.md does not bound output schemas, so it is advice, not a failure.
        let output = format!("{label} output_schema");
        let output_schema =
            within_budget(tool.output_schema(), |s| budget.check(s), Check::OutputBudget, &output, findings);
        for (check, key, schema) in [
            (Check::InputMetaschema, "input_schema", input_schema),
            (Check::OutputMetaschema, "output_schema", output_schema),
        ] {
            let Some(schema) = schema else { continue };
            for problem in schema_problems(schema) {
                findings.fail(check, format!("{label} {key}: {problem}"));
            }
            for reference in unresolved_references(schema) {
                findings.fail(
                    Check::ReferencesLocal,
                    format!(
                        "{label} {key}: $ref {reference:?} is not a local reference that resolves inside the schema"
                    ),
                );
            }
        }
        if let Some(schema) = input_schema
            && !is_object_schema(schema)
        {
            let found = schema.get("type").map_or_else(|| "no `type`".to_owned(), |t| format!("\"type\": {t}"));
            findings.fail(
                Check::InputRootObject,
                format!("{label} input_schema: the root has {found}, expected \"type\": \"object\""),
            );
        }
        if let Some((pattern, reason)) = input_schema.and_then(|s| uncompilable_pattern(s, &budget, &mut compiled)) {
            // Not a contract break (CONTRACT.md says nothing of it): a warning, as a note.
            findings.note(
                Check::InputMetaschema,
                format!(
                    "warning: an orchestrator cannot check {label}'s arguments: its input_schema pattern {:?} does \
                     not compile for the linear-time regex engine within {MAX_PATTERN_COMPILED_BYTES} bytes \
                     (lookaround and backreferences are not supported: {}), so the tool gets its arguments \
                     unchecked; a module built with the SDK refuses to start with it",
                    shorten(pattern),
                    shorten(&reason)
                ),
            );
        }
        if some_input && tool.field("input_schema").is_none() {
            findings.note(Check::InputMetaschema, format!("{label} has no input_schema; its parameters stand for it"));
        }
    }
    if input_bytes > DEFAULT_MAX_MANIFEST_SCHEMA_BYTES {
        findings.fail(
            Check::InputBudget,
            format!(
                "the tools' input_schemas take more than {DEFAULT_MAX_MANIFEST_SCHEMA_BYTES} bytes together once \
                 references are inlined (budget MAX_MANIFEST_SCHEMA_BYTES); an orchestrator refuses the whole manifest"
            ),
        );
    }
    let no_input = "no tool has an input_schema (an extension); their parameters stand for it";
    findings.skip(Check::InputMetaschema, no_input);
    findings.skip(Check::InputRootObject, no_input);
    findings.skip(Check::InputBudget, no_input);
    findings.skip(Check::OutputMetaschema, "no tool has an output_schema (an extension)");
    findings.skip(Check::OutputBudget, "no tool has an output_schema (an extension)");
    findings.skip(Check::ReferencesLocal, "no tool has an input_schema or output_schema (extensions)");
}

/// `schema` when `cost` (its budget check) passes; `None` otherwise, with
/// `check` failed (at its own level) for `what`, naming the budget exceeded.
fn within_budget<'a, T>(
    schema: Option<&'a Value>,
    cost: impl FnOnce(&'a Value) -> Result<T, SchemaBudgetError>,
    check: Check,
    what: &str,
    findings: &mut Findings,
) -> Option<&'a Value> {
    let schema = schema?;
    match cost(schema) {
        Ok(_) => Some(schema),
        Err(over) => {
            findings.fail(check, format!("{what}: {over}"));
            None
        }
    }
}

/// The first of `schema`'s patterns that the linear-time engine an
/// orchestrator validates arguments with cannot compile, and why; each
/// pattern is compiled once, its outcome kept in `compiled` across the
/// manifest. `schema` is within `budget`, so it has few patterns.
fn uncompilable_pattern<'a>(
    schema: &'a Value,
    budget: &SchemaBudget,
    compiled: &mut HashMap<&'a str, Result<(), String>>,
) -> Option<(&'a str, String)> {
    let own = budget.check_sharing(schema, &mut ManifestPatterns::default()).unwrap_or_default();
    own.into_iter().find_map(|pattern| {
        let outcome = compiled.entry(pattern).or_insert_with(|| check_pattern(pattern));
        outcome.clone().err().map(|reason| (pattern, reason))
    })
}

/// Why `schema` is not a usable draft 2020-12 schema: metaschema errors, a
/// foreign `$schema`, or (when every reference is local) a compile error.
pub fn schema_problems(schema: &Value) -> Vec<String> {
    let mut problems: Vec<String> = jsonschema::draft202012::meta::validator()
        .iter_errors(schema)
        .map(|error| {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "the root".to_owned() } else { at };
            format!("at {at}: {error}")
        })
        .collect();
    match schema.get("$schema") {
        None => {}
        Some(Value::String(uri)) if uri.trim_end_matches('#') == DRAFT_2020_12 => {}
        Some(other) => problems.push(format!("`$schema` is {other}, expected {DRAFT_2020_12:?}")),
    }
    if problems.is_empty()
        && unresolved_references(schema).is_empty()
        && let Err(error) = jsonschema::draft202012::new(schema)
    {
        problems.push(format!("does not compile: {error}"));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_over_budget_is_reported_with_the_tool_name() {
        let defs: serde_json::Map<String, Value> = (0..2_000)
            .map(|i| {
                (
                    format!("D{i}"),
                    json!({"type": "object", "properties": {"next": {"$ref": format!("#/$defs/D{}", i + 1)}}}),
                )
            })
            .collect();
        let manifest = json!({"module_name": "evil", "description": "E.", "tools": [{
            "name": "evil.deep", "description": "D.", "parameters": [], "required_permission": "guest",
            "input_schema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}
        }]});
        let mut findings = Findings::default();
        check_schemas(&super::super::tools_of(&manifest), &mut findings);
        let failed: Vec<String> = findings
            .into_results(crate::Level::Full, "")
            .into_iter()
            .filter(|r| r.check == Check::InputBudget)
            .flat_map(|r| r.problems)
            .collect();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("evil.deep") && failed[0].contains("MAX_SCHEMA_DEPTH"), "{failed:?}");
    }

    /// `d0` .. `d{count - 1}`, each a union of two references to the next, `d{count}` a string.
    fn doubling_unions(count: usize) -> Value {
        let mut defs: serde_json::Map<String, Value> = (0..count)
            .map(|i| {
                let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
                (format!("d{i}"), json!({"anyOf": [next, next]}))
            })
            .collect();
        defs.insert(format!("d{count}"), json!({"type": "string"}));
        json!({"$ref": "#/$defs/d0", "$defs": defs})
    }

    /// The results of `check_schemas` over one tool with `output_schema`, by check.
    fn output_problems(output_schema: Value) -> Vec<(Check, String)> {
        problems(
            "evil",
            vec![json!({
                "name": "evil.answer", "description": "A.", "parameters": [], "required_permission": "guest",
                "output_schema": output_schema
            })],
        )
    }

    #[test]
    fn an_output_schema_over_budget_only_warns_naming_the_budget() {
        assert_eq!(output_problems(doubling_unions(3)), []);
        // The contract does not bound output schemas: a warning at every level, never a failure.
        for level in [crate::Level::Base, crate::Level::Full] {
            let results = output_results(doubling_unions(40), level);
            assert!(results.iter().all(|r| r.status != crate::Status::Failed), "{results:?}");
            let budget = results.iter().find(|r| r.check == Check::OutputBudget).unwrap();
            assert_eq!(budget.status, crate::Status::Warned, "{budget:?}");
            assert_eq!(budget.warnings.len(), 1, "{budget:?}");
            let warning = &budget.warnings[0];
            assert!(warning.starts_with("evil.answer output_schema: ") && warning.contains("MAX_SCHEMA_NODES"));
            let metaschema = results.iter().find(|r| r.check == Check::OutputMetaschema).unwrap();
            assert_eq!(metaschema.status, crate::Status::Passed, "{metaschema:?}");
        }
    }

    /// Every check's result for one tool with `output_schema`, at `level`.
    fn output_results(output_schema: Value, level: crate::Level) -> Vec<crate::CheckResult> {
        let manifest = json!({"module_name": "evil", "description": "E.", "tools": [{
            "name": "evil.answer", "description": "A.", "parameters": [], "required_permission": "guest",
            "output_schema": output_schema
        }]});
        let mut findings = Findings::default();
        check_schemas(&super::super::tools_of(&manifest), &mut findings);
        findings.into_results(level, "")
    }

    #[test]
    fn an_input_schema_over_budget_leaves_the_output_schema_checked() {
        let mut input_schema = doubling_unions(40);
        input_schema["type"] = json!("object");
        let manifest = json!({"module_name": "evil", "description": "E.", "tools": [{
            "name": "evil.both", "description": "B.", "parameters": [], "required_permission": "guest",
            "input_schema": input_schema,
            "output_schema": {"type": "text", "properties": {"x": {"$ref": "https://example.com/x.json"}}}
        }]});
        let mut findings = Findings::default();
        check_schemas(&super::super::tools_of(&manifest), &mut findings);
        let failed: Vec<(Check, String)> = findings
            .into_results(crate::Level::Full, "")
            .into_iter()
            .flat_map(|r| r.problems.into_iter().map(move |p| (r.check, p)))
            .collect();
        let has = |check: Check, start: &str| failed.iter().any(|(c, p)| *c == check && p.starts_with(start));
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert!(has(Check::InputBudget, "evil.both input_schema: "), "{failed:?}");
        assert!(has(Check::OutputMetaschema, "evil.both output_schema: at /type"), "{failed:?}");
        assert!(
            has(Check::ReferencesLocal, "evil.both output_schema: $ref \"https://example.com/x.json\""),
            "{failed:?}"
        );
    }

    /// The problems `check_schemas` finds with `tools`'s input_schemas, all checks.
    fn input_problems(tools: Vec<Value>) -> Vec<(Check, String)> {
        problems("wide", tools)
    }

    /// The problems `check_schemas` finds with `tools` of module `module_name`, by check.
    fn problems(module_name: &str, tools: Vec<Value>) -> Vec<(Check, String)> {
        let manifest = json!({"module_name": module_name, "description": "M.", "tools": tools});
        let mut findings = Findings::default();
        check_schemas(&super::super::tools_of(&manifest), &mut findings);
        findings
            .into_results(crate::Level::Full, "")
            .into_iter()
            .flat_map(|r| r.problems.into_iter().map(move |p| (r.check, p)))
            .collect()
    }

    /// Tool `wide.t{i}` with `input_schema`.
    fn wide_tool(i: usize, input_schema: Value) -> Value {
        json!({"name": format!("wide.t{i}"), "description": "T.", "parameters": [], "required_permission": "guest",
            "input_schema": input_schema})
    }

    #[test]
    fn patterns_and_text_are_counted_across_the_manifest() {
        let with_pattern = |i: usize, pattern: String| {
            wide_tool(i, json!({"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}))
        };
        // One pattern each: 64 fit, the 65th is over; one shared by all counts once per schema.
        let distinct: Vec<Value> = (0..65).map(|i| with_pattern(i, format!("^{i}$"))).collect();
        let problems = input_problems(distinct);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, Check::InputBudget);
        assert!(problems[0].1.starts_with("wide.t64 input_schema: ") && problems[0].1.contains("MAX_SCHEMA_PATTERNS"));
        assert_eq!(input_problems((0..64).map(|i| with_pattern(i, "^a$".to_owned())).collect()), []);
        // 17 schemas, each ~1 MB once its definition is inlined 9 times (within MAX_SCHEMA_BYTES), 17 MB together.
        let described = json!({"type": "string", "description": "x".repeat(100_000)});
        let properties: serde_json::Map<String, Value> =
            (0..9).map(|p| (format!("p{p}"), json!({"$ref": "#/$defs/d"}))).collect();
        let large = json!({"type": "object", "properties": properties, "$defs": {"d": described}});
        let problems = input_problems((0..17).map(|i| wide_tool(i, large.clone())).collect());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].1.contains("(budget MAX_MANIFEST_SCHEMA_BYTES)"), "{problems:?}");
        assert_eq!(input_problems((0..16).map(|i| wide_tool(i, large.clone())).collect()), []);
    }

    #[test]
    fn tools_whose_patterns_the_orchestrator_cannot_compile_are_warned_of_not_failed() {
        let with_pattern = |i: usize, pattern: &str| {
            wide_tool(i, json!({"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}))
        };
        let tools = vec![
            with_pattern(0, "^[a-z]+@(?=[a-z])[a-z.]+$"),
            with_pattern(1, "^[a-z]+$"),
            with_pattern(2, "^(a)\\1$"),
            with_pattern(3, "^[a-z]+@(?=[a-z])[a-z.]+$"),
        ];
        let manifest = json!({"module_name": "wide", "description": "W.", "tools": tools});
        let mut findings = Findings::default();
        check_schemas(&super::super::tools_of(&manifest), &mut findings);
        let results = findings.into_results(crate::Level::Full, "");
        assert!(results.iter().all(|r| r.problems.is_empty()), "{results:?}");
        let notes = &results.iter().find(|r| r.check == Check::InputMetaschema).unwrap().notes;
        let warned: Vec<&str> = ["wide.t0", "wide.t2", "wide.t3"]
            .into_iter()
            .filter(|tool| {
                notes.iter().any(|n| n.starts_with(&format!("warning: an orchestrator cannot check {tool}'s")))
            })
            .collect();
        assert_eq!((warned.len(), notes.len()), (3, 3), "{notes:?}");
        assert!(
            notes[0].contains("\"^[a-z]+@(?=[a-z])[a-z.]+$\"") && notes[0].contains("the SDK refuses"),
            "{notes:?}"
        );
    }

    #[test]
    fn schemas_are_checked_against_the_metaschema() {
        assert!(schema_problems(&json!({"type": "object", "properties": {"a": {"type": "string"}}})).is_empty());
        let bad = schema_problems(&json!({"type": "object", "properties": {"a": {"type": "text"}}}));
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].starts_with("at /properties/a/type"), "{bad:?}");
        let foreign = schema_problems(&json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}));
        assert!(foreign[0].contains("draft-07"), "{foreign:?}");
        let bad_regex = schema_problems(&json!({"type": "string", "pattern": "(unclosed"}));
        assert!(bad_regex.iter().any(|p| p.contains("compile") || p.contains("regex")), "{bad_regex:?}");
    }
}
