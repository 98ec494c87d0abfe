//! `POST /execute`, driven by each tool's own schema: generated valid
//! calls, mutated invalid ones, an unknown tool, non-object arguments, a
//! body that is not JSON, one without `tool_name` and one over the
//! module's body limit.

use std::time::Duration;

use jsonschema::Validator;
use module_sdk::contract::ErrorKind;
use module_sdk::contract::{SchemaBudget, ToolParameter};
use module_sdk::schema::schema_from_parameters;
use module_sdk::service::linear_time_options;
use serde_json::{Value, json};

use super::{ToolView, json_type};
use crate::check::{Check, Findings, Level};
use crate::client::{Auth, Failure, ModuleClient, REQUEST_TIMEOUT, Reply, shorten};
use crate::generate::valid_arguments;
use crate::mutate::mutations;
use crate::suite::SuiteOptions;

/// Added to a tool's own `timeout_seconds` before a call counts as hung.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// The outcome of a call that succeeded.
const SUCCESS: &str = "success";

/// The statuses with which a module may refuse a malformed call or invalid
/// arguments instead of answering a ToolResult (FastAPI answers 422
/// `{"detail": [...]}`); the body's shape is checked at the full level only.
const REFUSALS: [u16; 2] = [400, 422];

/// The longest `timeout_seconds` of a tool believed; a longer one is lowered to it.
const MAX_TOOL_TIMEOUT_SECONDS: f64 = 600.0;

/// How long a call to a tool without `timeout_seconds` may take.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs every `/execute` check against the module.
pub async fn check_execute(
    client: &ModuleClient,
    module_name: Option<&str>,
    tools: &[ToolView<'_>],
    options: &SuiteOptions,
    findings: &mut Findings,
) {
    let caller = Caller { client, options };
    let max_tools = options.budgets.max_tools;
    if tools.len() > max_tools {
        findings.fail(
            Check::ValidArguments,
            format!(
                "{} of the {} tools not called: only the first {max_tools} are (--max-tools)",
                tools.len() - max_tools,
                tools.len()
            ),
        );
    }
    let called = &tools[..tools.len().min(max_tools)];
    for (index, tool) in called.iter().enumerate() {
        if client.out_of_time() {
            findings.fail(
                Check::ValidArguments,
                format!(
                    "{} of the {} tools not called: the run's time ran out (--max-run-seconds)",
                    called.len() - index,
                    tools.len()
                ),
            );
            break;
        }
        caller.exercise(tool, findings).await;
    }
    let module_name = module_name.unwrap_or("module");
    caller.unknown_tool(module_name, findings).await;
    caller.non_json_body(findings).await;
    caller.missing_tool_name(findings).await;
    caller.body_too_large(module_name, findings).await;
    for (check, reason) in [
        (Check::ValidArguments, "no tool could be called"),
        (Check::OutputSchema, "no call succeeded, or no tool has an output_schema"),
        (Check::MissingRequired, "no tool has a required argument"),
        (Check::WrongType, "no argument has a type to get wrong"),
        (Check::WrongEnum, "no tool has an enum argument"),
        (Check::ArgumentsNotObject, "no tool could be called"),
    ] {
        findings.skip(check, reason);
    }
}

/// What a tool's calls need.
struct Subject<'a> {
    label: String,
    name: &'a str,
    timeout: Duration,
    output: Option<Validator>,
}

struct Caller<'a> {
    client: &'a ModuleClient,
    options: &'a SuiteOptions,
}

impl Caller<'_> {
    async fn exercise(&self, tool: &ToolView<'_>, findings: &mut Findings) {
        let label = tool.label();
        let Some(name) = tool.name() else { return };
        if self.options.read_only && tool.is_destructive() {
            findings.note(
                Check::ValidArguments,
                format!("{label} not called: it is destructive and --read-only was given"),
            );
            return;
        }
        let Some(schema) = behaviour_schema(tool) else {
            findings.note(
                Check::ValidArguments,
                format!("{label} not called: neither input_schema nor parameters can be read"),
            );
            return;
        };
        if let Some(over) = tool.input_schema().and_then(|schema| SchemaBudget::default().check(schema).err()) {
            // Nothing is generated from it. schema.input_budget fails it at the
            // full level; below, that check only warns, so the call not made
            // fails here: a module whose every tool is over budget must not pass.
            let problem = format!(
                "{label} not called: its input_schema is over the schema budgets ({over}; see schema.input_budget)"
            );
            if self.options.level < Check::InputBudget.level() {
                findings.fail(Check::ValidArguments, problem);
            } else {
                findings.note(Check::ValidArguments, problem);
            }
            return;
        }
        let Ok(validator) = jsonschema::draft202012::new(&schema) else {
            findings.note(
                Check::ValidArguments,
                format!("{label} not called: its input_schema does not compile (see schema.input_metaschema)"),
            );
            return;
        };
        let timeout = tool.timeout_seconds().map_or(DEFAULT_CALL_TIMEOUT, |s| {
            Duration::from_secs_f64(s.min(MAX_TOOL_TIMEOUT_SECONDS)) + TIMEOUT_MARGIN
        });
        let output = tool.output_schema().and_then(|schema| {
            output_validator(schema)
                .map_err(|why| {
                    findings.note(Check::OutputSchema, format!("{label}'s results are not checked: {why}"));
                })
                .ok()
        });
        let subject = Subject { label, name, timeout, output };

        let samples = match valid_arguments(&schema, &validator, &self.options.sample_url) {
            Ok(samples) => samples,
            Err(over) => {
                findings.fail(Check::ValidArguments, format!("{} not called: {over}", subject.label));
                return;
            }
        };
        if samples.is_empty() {
            findings.note(
                Check::ValidArguments,
                format!("{} not called: no arguments valid against its input_schema could be generated", subject.label),
            );
            return;
        }
        let mut outcomes = Vec::new();
        for arguments in &samples {
            outcomes.extend(self.valid_call(&subject, arguments, findings).await);
        }
        if !outcomes.is_empty() && !outcomes.iter().any(|outcome| outcome == SUCCESS) {
            outcomes.sort();
            outcomes.dedup();
            let kinds = outcomes.join(", ");
            findings.note(
                Check::ValidArguments,
                format!("{}: no call succeeded ({kinds}), so its output was not checked", subject.label),
            );
        }
        let base = samples.iter().filter_map(Value::as_object).max_by_key(|args| args.len());
        for mutation in base.map(|base| mutations(&schema, base, &validator)).unwrap_or_default() {
            let what = format!("{} with {}", subject.label, mutation.change);
            let reply = self.call(&subject, &mutation.arguments).await;
            self.expect_failure(mutation.check, &what, subject.name, reply, ErrorKind::InvalidArguments, findings);
        }
        self.non_object_arguments(&subject, findings).await;
    }

    async fn call(&self, subject: &Subject<'_>, arguments: &Value) -> Result<Reply, Failure> {
        let body = json!({"tool_name": subject.name, "arguments": arguments, "user_id": self.options.user_id});
        self.client.post("/execute", body.to_string().into_bytes(), Auth::Configured, subject.timeout).await
    }

    /// Calls with valid `arguments`; the outcome ([`SUCCESS`] or the
    /// error kind) when the module answered with a ToolResult.
    async fn valid_call(&self, subject: &Subject<'_>, arguments: &Value, findings: &mut Findings) -> Option<String> {
        findings.ran(Check::ValidArguments);
        let what = format!("{} with {}", subject.label, shorten(&arguments.to_string()));
        let result = self.tool_result(
            Check::ValidArguments,
            &what,
            subject.name,
            self.call(subject, arguments).await,
            findings,
        )?;
        let kind = result.get("error_kind").and_then(Value::as_str);
        if result.get("success") == Some(&Value::Bool(true)) {
            if let Some(output) = &subject.output {
                findings.ran(Check::OutputSchema);
                let payload = result.get("result").unwrap_or(&Value::Null);
                // The first problem only: all of them are gathered at once, however many a large result has.
                if let Err(error) = output.validate(payload) {
                    let at = error.instance_path().to_string();
                    findings.fail(
                        Check::OutputSchema,
                        format!("{what}: result at {at:?}: {}", shorten(&error.to_string())),
                    );
                }
            }
            return Some(SUCCESS.to_owned());
        }
        if let Some(kind) =
            kind.filter(|kind| [ErrorKind::InvalidArguments.as_str(), ErrorKind::UnknownTool.as_str()].contains(kind))
        {
            let error = result.get("error").and_then(Value::as_str).unwrap_or_default();
            findings.fail(Check::ValidArguments, format!("{what}: refused as {kind}: {}", shorten(error)));
        }
        Some(kind.unwrap_or("failure without error_kind").to_owned())
    }

    /// `arguments: [1]` gets 400/422 (with a JSON error at full), or a
    /// ToolResult with `success: false` (and `invalid_arguments` at full).
    async fn non_object_arguments(&self, subject: &Subject<'_>, findings: &mut Findings) {
        let check = Check::ArgumentsNotObject;
        findings.ran(check);
        let what = format!("{} with \"arguments\": [1]", subject.label);
        match self.call(subject, &json!([1])).await {
            Ok(reply) if REFUSALS.contains(&reply.status) => {
                if let Some(problem) = reply.error_body_problem() {
                    findings.fail_at(check, Level::Full, format!("{what}: {} but {problem}", reply.status));
                }
            }
            reply => self.expect_failure(check, &what, subject.name, reply, ErrorKind::InvalidArguments, findings),
        }
    }

    async fn unknown_tool(&self, module_name: &str, findings: &mut Findings) {
        findings.ran(Check::UnknownTool);
        let name = format!("{module_name}.contract_tests_no_such_tool");
        let subject = Subject { label: name.clone(), name: &name, timeout: REQUEST_TIMEOUT, output: None };
        let reply = self.call(&subject, &json!({})).await;
        self.expect_failure(
            Check::UnknownTool,
            &format!("call to {name}"),
            &name,
            reply,
            ErrorKind::UnknownTool,
            findings,
        );
    }

    async fn non_json_body(&self, findings: &mut Findings) {
        let check = Check::NonJsonBody;
        findings.ran(check);
        let what = "POST /execute with a body that is not JSON";
        match self
            .client
            .post("/execute", b"{\"tool_name\": this is not JSON".to_vec(), Auth::Configured, REQUEST_TIMEOUT)
            .await
        {
            Err(failure) => findings.fail(check, format!("{what}: {failure}")),
            Ok(reply) if !(400..500).contains(&reply.status) => {
                findings.fail(check, format!("{what}: expected a 4xx, got {}", reply.status));
            }
            Ok(reply) => {
                if let Some(problem) = reply.error_body_problem() {
                    findings.fail_at(check, Level::Full, format!("{what}: {} but {problem}", reply.status));
                }
            }
        }
    }

    /// A JSON body that is not a ToolCall, for want of `tool_name`: a 4xx
    /// (base), 400 or 422 with `{"error": string}` (full).
    async fn missing_tool_name(&self, findings: &mut Findings) {
        let check = Check::MissingToolName;
        findings.ran(check);
        let what = "POST /execute with a body without tool_name";
        let body = br#"{"arguments": {}}"#.to_vec();
        match self.client.post("/execute", body, Auth::Configured, REQUEST_TIMEOUT).await {
            Err(failure) => findings.fail(check, format!("{what}: {failure}")),
            Ok(reply) if !(400..500).contains(&reply.status) => {
                findings.fail(check, format!("{what}: expected a 4xx, got {}", reply.status));
            }
            Ok(reply) if !REFUSALS.contains(&reply.status) => {
                findings.fail_at(check, Level::Full, format!("{what}: expected 400 or 422, got {}", reply.status));
            }
            Ok(reply) => {
                if let Some(problem) = reply.error_body_problem() {
                    findings.fail_at(check, Level::Full, format!("{what}: {} but {problem}", reply.status));
                }
            }
        }
    }

    /// A ToolCall (to a tool no module has) one byte over the module's
    /// body limit: `413`. A module that answers before reading the body and
    /// closes the connection breaks off the sending, and the client never
    /// sees its answer: that is taken as the refusal, with a note.
    async fn body_too_large(&self, module_name: &str, findings: &mut Findings) {
        let check = Check::BodyTooLarge;
        findings.ran(check);
        let limit = self.options.budgets.module_max_body_bytes;
        let size = limit.saturating_add(1);
        let what = format!("POST /execute with a body of {size} bytes (--module-max-body-bytes {limit})");
        let call = json!({"tool_name": format!("{module_name}.contract_tests_no_such_tool"), "arguments": {}});
        let mut body = serde_json::to_vec(&call).unwrap_or_default();
        // The padding goes inside the object, so that the body stays JSON.
        body.pop();
        body.extend_from_slice(br#", "padding": ""#);
        let padding = size.saturating_sub(body.len() + 2);
        body.resize(body.len() + padding, b' ');
        body.extend_from_slice(br#""}"#);
        match self.client.post_over_limit("/execute", body, Auth::Configured, REQUEST_TIMEOUT).await {
            Err(failure @ Failure::ClosedWhileSending(_)) => findings.note(
                check,
                format!(
                    "{what}: {failure}; taken as a refusal of the body unread, whose answer (413?) could not be read"
                ),
            ),
            Err(failure) => findings.fail(check, format!("{what}: {failure}")),
            Ok(reply) if reply.status != 413 => {
                findings.fail(check, format!("{what}: expected 413, got {}", reply.status));
            }
            Ok(_) => {}
        }
    }

    /// A call that must give `success: false` (base) with `kind` (full).
    /// Invalid arguments may also be refused with 400/422 at base.
    fn expect_failure(
        &self,
        check: Check,
        what: &str,
        tool_name: &str,
        reply: Result<Reply, Failure>,
        kind: ErrorKind,
        findings: &mut Findings,
    ) {
        findings.ran(check);
        let expected = format!("expected success: false with error_kind \"{kind}\"");
        if let Ok(refusal) = &reply
            && kind == ErrorKind::InvalidArguments
            && REFUSALS.contains(&refusal.status)
        {
            let body = refusal.body.as_ref().map_or_else(|text| text.clone(), Value::to_string);
            findings.fail_at(
                check,
                Level::Full,
                format!("{what}: {expected}, got {} {}", refusal.status, shorten(&body)),
            );
            return;
        }
        let Some(result) = self.tool_result(check, what, tool_name, reply, findings) else { return };
        let success = result.get("success");
        let got = result.get("error_kind").and_then(Value::as_str);
        let got_kind = got.map_or_else(|| "no error_kind".to_owned(), |k| format!("error_kind {k:?}"));
        let got_success = success.map_or_else(|| "no success".to_owned(), |s| format!("success: {s}"));
        let problem = format!("{what}: {expected}, got {got_success}, {got_kind}");
        if success != Some(&Value::Bool(false)) {
            findings.fail(check, problem);
        } else if got != Some(kind.as_str()) {
            findings.fail_at(check, Level::Full, problem);
        }
    }

    /// The ToolResult of a `200`, its shape checked; `None` (with `check`
    /// failed) when the call did not get one.
    fn tool_result(
        &self,
        check: Check,
        what: &str,
        tool_name: &str,
        reply: Result<Reply, Failure>,
        findings: &mut Findings,
    ) -> Option<Value> {
        let reply = match reply {
            Ok(reply) if reply.status == 200 => reply,
            Ok(reply) => {
                let body = reply.body.map_or_else(|text| text, |json| json.to_string());
                findings.fail(check, format!("{what}: expected 200, got {}: {}", reply.status, shorten(&body)));
                return None;
            }
            Err(failure) => {
                findings.fail(check, format!("{what}: {failure}"));
                return None;
            }
        };
        findings.ran(Check::ResultShape);
        match reply.body {
            Ok(result) => {
                for (level, problem) in result_shape_problems(&result, tool_name) {
                    findings.fail_at(Check::ResultShape, level, format!("{what}: {problem}"));
                }
                Some(result)
            }
            Err(text) => {
                findings.fail(Check::ResultShape, format!("{what}: the body is not JSON: {}", shorten(&text)));
                None
            }
        }
    }
}

/// The validator of a tool's results: `schema` within the schema budgets
/// (a few definitions that each refer twice to the next cost a result
/// exponential time) and its patterns compiled for a linear-time engine;
/// why not otherwise.
fn output_validator(schema: &Value) -> Result<Validator, String> {
    if let Err(over) = SchemaBudget::default().check(schema) {
        return Err(format!("its output_schema is over the schema budgets ({over}; see schema.output_metaschema)"));
    }
    linear_time_options().build(schema).map_err(|error| {
        format!(
            "its output_schema does not compile with its patterns for a linear-time regex engine (no lookaround or \
             backreferences): {}",
            shorten(&error.to_string())
        )
    })
}

/// The schema the calls are generated from: `input_schema`, or one built
/// from `parameters` for a module that sends only the base fields.
fn behaviour_schema(tool: &ToolView<'_>) -> Option<Value> {
    if let Some(schema) = tool.input_schema() {
        return Some(schema.clone());
    }
    let parameters: Vec<ToolParameter> = serde_json::from_value(tool.entry.get("parameters")?.clone()).ok()?;
    Some(schema_from_parameters(&parameters))
}

/// What is wrong with the shape of a ToolResult answering a call to
/// `tool_name`, each with the level that requires it (`error_kind` is an
/// extension).
pub fn result_shape_problems(result: &Value, tool_name: &str) -> Vec<(Level, String)> {
    let Some(fields) = result.as_object() else {
        return vec![(Level::Base, format!("the ToolResult is {}, not an object", json_type(result)))];
    };
    let mut problems = Vec::new();
    match fields.get("tool_name") {
        Some(Value::String(echoed)) if echoed == tool_name => {}
        Some(Value::String(echoed)) => {
            problems.push(format!("tool_name is {echoed:?}, expected the call's {tool_name:?}"))
        }
        other => problems.push(format!("tool_name must be a string, got {}", other.map_or("nothing", json_type))),
    }
    let success = match fields.get("success") {
        Some(Value::Bool(success)) => Some(*success),
        other => {
            problems.push(format!("success must be a boolean, got {}", other.map_or("nothing", json_type)));
            None
        }
    };
    let present = |key: &str| fields.get(key);
    if present("result").is_none() {
        problems.push("the `result` key is missing (null on failure)".to_owned());
    }
    if present("error").is_none() {
        problems.push("the `error` key is missing (null on success)".to_owned());
    }
    let error = present("error").unwrap_or(&Value::Null);
    let kind = present("error_kind").unwrap_or(&Value::Null);
    let mut problems: Vec<(Level, String)> = problems.into_iter().map(|problem| (Level::Base, problem)).collect();
    match success {
        Some(true) => {
            if !error.is_null() {
                problems.push((Level::Base, format!("success is true but error is {}", shorten(&error.to_string()))));
            }
            if !kind.is_null() {
                problems.push((Level::Full, format!("success is true but error_kind is {kind}")));
            }
        }
        Some(false) => {
            if present("result").is_some_and(|r| !r.is_null()) {
                problems.push((Level::Base, "success is false but result is not null".to_owned()));
            }
            if error.as_str().is_none_or(|e| e.trim().is_empty()) {
                problems.push((Level::Base, format!("success is false but error is not a message: {error}")));
            }
            if kind.is_null() {
                problems.push((Level::Full, "success is false but there is no error_kind".to_owned()));
            } else if !is_known_error_kind(kind) {
                problems.push((Level::Full, format!("error_kind {kind} is not one of the contract's kinds")));
            }
        }
        None => {}
    }
    problems
}

/// Whether `kind` is the name of one of the contract's error kinds.
fn is_known_error_kind(kind: &Value) -> bool {
    let parsed: Option<ErrorKind> = serde_json::from_value(kind.clone()).ok();
    parsed.is_some_and(|parsed| Some(parsed.as_str()) == kind.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_schemas_over_budget_or_with_backtracking_patterns_are_not_used() {
        let defs: serde_json::Map<String, Value> = (0..40)
            .map(|i| {
                let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
                (format!("d{i}"), json!({"anyOf": [next, next]}))
            })
            .chain([("d40".to_owned(), json!({"type": "string"}))])
            .collect();
        let over = output_validator(&json!({"$ref": "#/$defs/d0", "$defs": defs})).err().unwrap();
        assert!(over.contains("over the schema budgets") && over.contains("MAX_SCHEMA_NODES"), "{over}");
        let lookaround = output_validator(&json!({"type": "string", "pattern": "^(?=a)a$"})).err().unwrap();
        assert!(lookaround.contains("linear-time"), "{lookaround}");
        let ok = output_validator(&json!({"type": "string", "pattern": "^a+$"})).unwrap();
        assert!(ok.is_valid(&json!("aaa")) && !ok.is_valid(&json!(1)));
    }

    #[test]
    fn result_shapes_are_checked_field_by_field() {
        let ok = json!({"tool_name": "m.t", "success": true, "result": {"x": 1}, "error": null});
        assert!(result_shape_problems(&ok, "m.t").is_empty());
        let base_only = json!({"tool_name": "m.t", "success": false, "result": null, "error": "no"});
        assert_eq!(
            result_shape_problems(&base_only, "m.t"),
            [(Level::Full, "success is false but there is no error_kind".to_owned())]
        );
        let failed =
            json!({"tool_name": "m.t", "success": false, "result": null, "error": "no", "error_kind": "not_found"});
        assert!(result_shape_problems(&failed, "m.t").is_empty());
        let bad = json!({"tool_name": "m.other", "success": "yes", "error": null});
        let problems = result_shape_problems(&bad, "m.t");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[1].1.contains("success must be a boolean, got string"));
        assert!(problems.iter().all(|(level, _)| *level == Level::Base));
        let wrong_kind = json!({"tool_name": "m.t", "success": false, "result": 1, "error": "", "error_kind": "quota"});
        let levels: Vec<Level> = result_shape_problems(&wrong_kind, "m.t").into_iter().map(|(l, _)| l).collect();
        assert_eq!(levels, [Level::Base, Level::Base, Level::Full]);
        assert!(result_shape_problems(&json!([1]), "m.t")[0].1.contains("array"));
    }
}
