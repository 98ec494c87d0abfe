//! The catalogue of checks, each with a stable name, and what a run found
//! for each of them.

use std::collections::BTreeMap;

use serde::Serialize;

/// How much of the contract a run holds a module to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// What existing orchestrators of the format rely on: the base fields,
    /// names, permissions, parameters, a `200` ToolResult for every
    /// well-formed call, no `5xx`. What only the full level asks is a warning.
    Base,
    /// Base plus every extension of the contract (schemas, `error_kind`,
    /// `{"error": ...}` bodies, `401` answers, OpenAPI).
    #[default]
    Full,
    /// Not a level a run is held to: that of a check of what the contract
    /// does not state (a budget an orchestrator applies), whose problems
    /// are warnings at every level.
    #[value(skip)]
    Advisory,
}

impl Level {
    /// The name used on the command line and in reports: `base` or `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Base => "base",
            Level::Full => "full",
            Level::Advisory => "advisory",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Declares [`Check`] with its stable name, its [`Level`] and what it
/// verifies, in the order checks are reported.
macro_rules! checks {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $level:ident, $what:literal;)*) => {
        /// One check of the suite; its [`name`](Check::name) never changes, so
        /// CI and users can refer to a failure by it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Check {
            $($(#[$doc])* $variant,)*
        }

        impl Check {
            /// Every check, in report order.
            pub const ALL: &'static [Check] = &[$(Check::$variant,)*];

            /// The stable name, e.g. `manifest.tool_names_prefixed`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Check::$variant => $name,)*
                }
            }

            /// The lowest level whose runs fail when this check fails: a
            /// `full` check fails only `full` runs and warns at `base`.
            pub fn level(self) -> Level {
                match self {
                    $(Check::$variant => Level::$level,)*
                }
            }

            /// What a module must do to pass, in one sentence.
            pub fn requirement(self) -> &'static str {
                match self {
                    $(Check::$variant => $what,)*
                }
            }

            /// The check with this stable name.
            pub fn from_name(name: &str) -> Option<Check> {
                Self::ALL.iter().copied().find(|check| check.name() == name)
            }
        }
    };
}

checks! {
    /// `GET /health`.
    HealthOk = "health.status_ok", Base, "GET /health answers 200 {\"status\":\"ok\"} without a token";
    /// `GET /openapi.json`.
    OpenApiDocument = "openapi.document", Full, "GET /openapi.json answers an OpenAPI 3.1 document listing the four routes";
    /// No token on a protected route.
    AuthMissingToken = "auth.missing_token", Base, "with a service token set, /manifest and /execute without a token are refused: 401 or 403 (base), 401 with a JSON {\"error\": string} (full)";
    /// A wrong token on a protected route.
    AuthWrongToken = "auth.wrong_token", Base, "with a service token set, /manifest and /execute with a wrong token are refused: 401 or 403 (base), 401 with a JSON {\"error\": string} (full)";
    /// `GET /manifest` answers.
    ManifestAvailable = "manifest.available", Base, "GET /manifest answers 200 with a JSON object";
    /// Module-level base fields.
    ManifestBaseFields = "manifest.base_fields", Base, "the manifest has module_name (string), description (string) and tools (array of objects)";
    /// Module-level extensions.
    ManifestExtensionFields = "manifest.extension_fields", Full, "manifest extensions, when present, have their JSON types (version a semver string, contract_version \"1\")";
    /// The module name pattern.
    ModuleNameValid = "manifest.module_name_valid", Base, "module_name matches ^[a-z][a-z0-9_]{0,39}$";
    /// At least one tool.
    HasTools = "manifest.has_tools", Base, "the manifest lists at least one tool";
    /// Tool-level base fields.
    ToolBaseFields = "manifest.tool_base_fields", Base, "every tool has name (string), description (string) and parameters (array), and required_permission is a string when present (missing, the contract's default guest applies)";
    /// Tool-level extensions.
    ToolExtensionFields = "manifest.tool_extension_fields", Full, "tool extensions, when present, have their JSON types (schemas objects, annotations booleans, requires_approval boolean, timeout_seconds positive number, risk_level low, medium or high)";
    /// Parameter fields.
    ParameterFields = "manifest.parameter_fields", Base, "every parameter has name, type (a contract type), description (string), required (boolean) and enum (array of strings or null)";
    /// Tool name pattern.
    ToolNamesValid = "manifest.tool_names_valid", Base, "every tool name is `<module>.<tool>` with exactly one dot and <tool> matching ^[a-z][a-z0-9_]{0,39}$";
    /// Tool name prefix.
    ToolNamesPrefixed = "manifest.tool_names_prefixed", Base, "every tool name starts with the manifest's module_name and a dot";
    /// Tool name uniqueness.
    ToolNamesUnique = "manifest.tool_names_unique", Base, "no two tools share a name";
    /// Permission strings.
    PermissionsValid = "manifest.permissions_valid", Base, "every required_permission is one of guest, user, admin, owner";
    /// Descriptions.
    DescriptionsNonEmpty = "manifest.descriptions_nonempty", Base, "the module, every tool and every parameter has a non-empty description";
    /// The orchestrator's own manifest check.
    OrchestratorAccepts = "manifest.orchestrator_accepts", Base, "the orchestrator's manifest check (module_sdk::contract::check_manifest_within, default schema budgets) accepts the manifest; an orchestrator refuses the whole manifest otherwise";
    /// Input schemas against the metaschema.
    InputMetaschema = "schema.input_metaschema", Full, "every input_schema is a valid draft 2020-12 JSON Schema";
    /// Output schemas against the metaschema.
    OutputMetaschema = "schema.output_metaschema", Full, "every output_schema is a valid draft 2020-12 JSON Schema";
    /// Output schema budgets (not a rule of the contract).
    OutputBudget = "schema.output_budget", Advisory, "every output_schema stays within the default schema budgets an orchestrator checks results against (nesting, nodes once references are inlined, bytes, patterns); over them, an orchestrator leaves the tool's results unchecked";
    /// Input schema root.
    InputRootObject = "schema.input_root_object", Full, "every input_schema has \"type\": \"object\" at its root";
    /// Self-contained schemas.
    ReferencesLocal = "schema.references_local", Full, "schemas use only local references (#/...) that resolve inside them";
    /// Input schema budgets.
    InputBudget = "schema.input_budget", Full, "every input_schema stays within the default schema budgets an orchestrator checks at discovery (nesting, nodes once references are inlined, bytes; patterns and bytes of all the tools together)";
    /// Parameter names.
    ParameterNames = "parameters.names", Full, "parameters lists exactly the top-level properties of input_schema";
    /// Parameter required flags.
    ParameterRequired = "parameters.required", Full, "a parameter is required exactly when input_schema lists it in `required`";
    /// Parameter types.
    ParameterTypes = "parameters.types", Full, "each parameter's type is one the property may take in input_schema";
    /// Parameter enumerations.
    ParameterEnums = "parameters.enums", Full, "each parameter's enum equals the property's allowed values in input_schema";
    /// Provider-safe names.
    ProviderNames = "providers.tool_names", Base, "every tool's provider-safe name <module>__<tool> is accepted by OpenAI, Anthropic, Bedrock and Gemini";
    /// Description lengths.
    ProviderDescriptions = "providers.description_length", Base, "every tool description fits OpenAI's 1,024 characters";
    /// Conversion for every provider.
    ProviderConvertible = "providers.convertible", Base, "every tool, converted by the orchestrator for each provider, passes that provider's rules: from parameters (base), from input_schema (full)";
    /// Valid arguments.
    ValidArguments = "execute.valid_arguments", Base, "arguments generated from input_schema (or, without one, from parameters) get a 200 ToolResult and are not refused as invalid_arguments or unknown_tool";
    /// ToolResult shape.
    ResultShape = "execute.result_shape", Base, "every ToolResult has tool_name (echoed), success, result and error with their JSON types (base), and, when success is false, a known error_kind (full)";
    /// Output conformance.
    OutputSchema = "execute.output_schema", Full, "a successful result conforms to the tool's output_schema";
    /// Missing required field.
    MissingRequired = "execute.missing_required", Base, "arguments without a required field are refused: success:false or 400/422 (base), success:false with error_kind invalid_arguments (full)";
    /// Wrong type.
    WrongType = "execute.wrong_type", Base, "an argument of the wrong JSON type is refused: success:false or 400/422 (base), success:false with error_kind invalid_arguments (full)";
    /// Wrong enum value.
    WrongEnum = "execute.wrong_enum", Base, "an enum argument outside its allowed values is refused: success:false or 400/422 (base), success:false with error_kind invalid_arguments (full)";
    /// Non-object arguments.
    ArgumentsNotObject = "execute.arguments_not_object", Base, "`arguments` that is not an object is refused: success:false or 400/422 (base), with error_kind invalid_arguments or a JSON {\"error\": string} (full)";
    /// Unknown tool.
    UnknownTool = "execute.unknown_tool", Base, "a call to a tool the module does not have gets 200 with success:false (base) and error_kind unknown_tool (full)";
    /// Non-JSON body.
    NonJsonBody = "execute.non_json_body", Base, "a body that is not JSON gets a 4xx (base) with a JSON {\"error\": string} (full)";
    /// A body that is not a ToolCall.
    MissingToolName = "execute.missing_tool_name", Base, "a JSON body without tool_name gets a 4xx (base): 400 or 422 with a JSON {\"error\": string} (full)";
    /// A body over the module's limit.
    BodyTooLarge = "execute.body_too_large", Full, "a body over the module's limit (--module-max-body-bytes, by default the contract's 2 MiB) gets 413";
    /// No 5xx, no dropped connection.
    NoServerErrors = "http.no_server_errors", Base, "no request of the whole run got a 5xx, a dropped connection or no answer in time";
}

/// How a check ended for one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The module does what the check requires.
    Passed,
    /// The module does what the run's level requires, not what the full
    /// contract does; `warnings` say where. Never fails a run.
    Warned,
    /// The module broke the requirement; `problems` say where.
    Failed,
    /// The check did not apply or could not run; `reason` says why.
    Skipped,
}

/// The outcome of one check against one module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckResult {
    /// The check's stable name.
    #[serde(serialize_with = "serialize_check")]
    pub check: Check,
    /// The check's own level (see [`Check::level`]).
    pub level: Level,
    /// Passed, warned, failed or skipped.
    pub status: Status,
    /// What was required (passed), why it was skipped, or the first problem
    /// (failed) or warning (warned).
    pub reason: String,
    /// Every problem the run's level counts, each naming the tool or route concerned.
    pub problems: Vec<String>,
    /// Every problem only a higher level counts (at `base`: what `full` asks).
    pub warnings: Vec<String>,
    /// Remarks on a pass, e.g. a tool whose calls could not be generated.
    pub notes: Vec<String>,
}

fn serialize_check<S: serde::Serializer>(check: &Check, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(check.name())
}

/// What a run has found so far, check by check.
#[derive(Debug, Default)]
pub struct Findings {
    entries: BTreeMap<Check, Entry>,
}

#[derive(Debug)]
enum Entry {
    Ran { problems: Vec<(Level, String)>, notes: Vec<String> },
    Skipped(String),
}

impl Findings {
    /// Records that `check` ran (it passes unless a problem is recorded).
    pub fn ran(&mut self, check: Check) {
        self.ran_entry(check);
    }

    /// Records a problem at the check's own level: `check` fails every run
    /// at that level or above, and warns below it.
    pub fn fail(&mut self, check: Check, problem: impl Into<String>) {
        self.fail_at(check, check.level(), problem);
    }

    /// Records a problem that only runs at `level` or above count, e.g. a
    /// missing `error_kind` (an extension) found by a base check: the
    /// problem's level is the higher of `level` and the check's own.
    pub fn fail_at(&mut self, check: Check, level: Level, problem: impl Into<String>) {
        if let Entry::Ran { problems, .. } = self.ran_entry(check) {
            problems.push((level.max(check.level()), problem.into()));
        }
    }

    /// Records a remark shown with the check's outcome.
    pub fn note(&mut self, check: Check, note: impl Into<String>) {
        if let Entry::Ran { notes, .. } = self.ran_entry(check) {
            notes.push(note.into());
        }
    }

    /// Marks `check` skipped with `reason`, unless it already ran.
    pub fn skip(&mut self, check: Check, reason: impl Into<String>) {
        self.entries.entry(check).or_insert_with(|| Entry::Skipped(reason.into()));
    }

    fn ran_entry(&mut self, check: Check) -> &mut Entry {
        let entry = self.entries.entry(check).or_insert_with(|| Entry::Ran { problems: Vec::new(), notes: Vec::new() });
        if matches!(entry, Entry::Skipped(_)) {
            *entry = Entry::Ran { problems: Vec::new(), notes: Vec::new() };
        }
        entry
    }

    /// One result per check of [`Check::ALL`], in order, judged at `level`:
    /// problems of a higher level are warnings. A check nothing was
    /// recorded for is skipped with `unrecorded` as its reason.
    pub fn into_results(mut self, level: Level, unrecorded: &str) -> Vec<CheckResult> {
        Check::ALL
            .iter()
            .map(|&check| match self.entries.remove(&check) {
                Some(Entry::Ran { problems, notes }) => {
                    let (problems, warnings): (Vec<_>, Vec<_>) =
                        problems.into_iter().partition(|(problem_level, _)| *problem_level <= level);
                    let problems: Vec<String> = problems.into_iter().map(|(_, problem)| problem).collect();
                    let warnings: Vec<String> = warnings.into_iter().map(|(_, warning)| warning).collect();
                    let (status, reason) = match (problems.first(), warnings.first()) {
                        (Some(problem), _) => (Status::Failed, problem.clone()),
                        (None, Some(warning)) => (Status::Warned, warning.clone()),
                        (None, None) => (Status::Passed, check.requirement().to_owned()),
                    };
                    CheckResult { check, level: check.level(), status, reason, problems, warnings, notes }
                }
                Some(Entry::Skipped(reason)) => skipped(check, reason),
                None => skipped(check, unrecorded.to_owned()),
            })
            .collect()
    }
}

fn skipped(check: Check, reason: String) -> CheckResult {
    CheckResult {
        check,
        level: check.level(),
        status: Status::Skipped,
        reason,
        problems: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
        for name in &names {
            assert_eq!(Check::from_name(name).map(Check::name), Some(*name));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Check::ALL.len());
    }

    #[test]
    fn the_readme_lists_every_check() {
        let readme = include_str!("../../README.md");
        let missing: Vec<String> = Check::ALL
            .iter()
            .map(|c| format!("| `{}` | {} |", c.name(), c.level().as_str()))
            .filter(|row| !readme.contains(row.as_str()))
            .collect();
        assert!(missing.is_empty(), "add these rows (check, level) to the README's contract tests table: {missing:?}");
    }

    #[test]
    fn findings_pass_fail_skip_and_default() {
        let mut findings = Findings::default();
        findings.ran(Check::HealthOk);
        findings.fail(Check::HasTools, "no tools");
        findings.skip(Check::AuthWrongToken, "no --token");
        findings.skip(Check::OpenApiDocument, "first");
        findings.fail(Check::OpenApiDocument, "ran after all");
        let results = findings.into_results(Level::Full, "not run");
        let by = |check| results.iter().find(|r| r.check == check).unwrap();
        assert_eq!(results.len(), Check::ALL.len());
        assert_eq!(by(Check::HealthOk).status, Status::Passed);
        assert_eq!(by(Check::HasTools).status, Status::Failed);
        assert_eq!(by(Check::HasTools).reason, "no tools");
        assert_eq!(by(Check::AuthWrongToken).reason, "no --token");
        assert_eq!(by(Check::OpenApiDocument).status, Status::Failed);
        assert_eq!(by(Check::NoServerErrors).reason, "not run");
    }

    #[test]
    fn problems_above_the_run_level_are_warnings() {
        let record = || {
            let mut findings = Findings::default();
            findings.fail(Check::OpenApiDocument, "no /openapi.json");
            findings.fail_at(Check::UnknownTool, Level::Full, "no error_kind");
            findings.fail_at(Check::NonJsonBody, Level::Full, "body is not {\"error\": string}");
            findings.fail(Check::NonJsonBody, "got 500");
            findings.fail_at(Check::HasTools, Level::Base, "no tools");
            findings
        };
        let statuses = |level| -> Vec<(&str, Status, String, usize)> {
            let results = record().into_results(level, "not run");
            [Check::OpenApiDocument, Check::UnknownTool, Check::NonJsonBody, Check::HasTools]
                .into_iter()
                .map(|check| {
                    let result = results.iter().find(|r| r.check == check).unwrap();
                    (check.name(), result.status, result.reason.clone(), result.warnings.len())
                })
                .collect()
        };
        assert_eq!(
            statuses(Level::Base),
            vec![
                ("openapi.document", Status::Warned, "no /openapi.json".to_owned(), 1),
                ("execute.unknown_tool", Status::Warned, "no error_kind".to_owned(), 1),
                ("execute.non_json_body", Status::Failed, "got 500".to_owned(), 1),
                ("manifest.has_tools", Status::Failed, "no tools".to_owned(), 0),
            ]
        );
        assert_eq!(
            statuses(Level::Full),
            vec![
                ("openapi.document", Status::Failed, "no /openapi.json".to_owned(), 0),
                ("execute.unknown_tool", Status::Failed, "no error_kind".to_owned(), 0),
                ("execute.non_json_body", Status::Failed, "body is not {\"error\": string}".to_owned(), 0),
                ("manifest.has_tools", Status::Failed, "no tools".to_owned(), 0),
            ]
        );
    }

    /// Which checks a `base` run fails on is a decision of the contract
    /// (CONTRACT.md, "Conformance levels"), written down here so that
    /// changing a check's level is a visible change of this list.
    #[test]
    fn every_check_declares_its_level() {
        let base: Vec<&str> = Check::ALL.iter().filter(|c| c.level() == Level::Base).map(|c| c.name()).collect();
        assert_eq!(
            base,
            [
                "health.status_ok",
                "auth.missing_token",
                "auth.wrong_token",
                "manifest.available",
                "manifest.base_fields",
                "manifest.module_name_valid",
                "manifest.has_tools",
                "manifest.tool_base_fields",
                "manifest.parameter_fields",
                "manifest.tool_names_valid",
                "manifest.tool_names_prefixed",
                "manifest.tool_names_unique",
                "manifest.permissions_valid",
                "manifest.descriptions_nonempty",
                "manifest.orchestrator_accepts",
                "providers.tool_names",
                "providers.description_length",
                "providers.convertible",
                "execute.valid_arguments",
                "execute.result_shape",
                "execute.missing_required",
                "execute.wrong_type",
                "execute.wrong_enum",
                "execute.arguments_not_object",
                "execute.unknown_tool",
                "execute.non_json_body",
                "execute.missing_tool_name",
                "http.no_server_errors",
            ]
        );
        let full: Vec<&str> = Check::ALL.iter().filter(|c| c.level() == Level::Full).map(|c| c.name()).collect();
        assert_eq!(
            full,
            [
                "openapi.document",
                "manifest.extension_fields",
                "manifest.tool_extension_fields",
                "schema.input_metaschema",
                "schema.output_metaschema",
                "schema.input_root_object",
                "schema.references_local",
                "schema.input_budget",
                "parameters.names",
                "parameters.required",
                "parameters.types",
                "parameters.enums",
                "execute.output_schema",
                "execute.body_too_large",
            ]
        );
        let advisory: Vec<&str> =
            Check::ALL.iter().filter(|c| c.level() == Level::Advisory).map(|c| c.name()).collect();
        assert_eq!(advisory, ["schema.output_budget"]);
        assert!(Level::Base < Level::Full && Level::default() == Level::Full);
    }
}
