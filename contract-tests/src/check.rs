//! The catalogue of checks, each with a stable name, and what a run found
//! for each of them.

use std::collections::BTreeMap;

use serde::Serialize;

/// Declares [`Check`] with its stable name and what it verifies, in the
/// order checks are reported.
macro_rules! checks {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $what:literal;)*) => {
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
    HealthOk = "health.status_ok", "GET /health answers 200 {\"status\":\"ok\"} without a token";
    /// `GET /openapi.json`.
    OpenApiDocument = "openapi.document", "GET /openapi.json answers an OpenAPI 3.1 document listing the four routes";
    /// No token on a protected route.
    AuthMissingToken = "auth.missing_token", "with a service token set, /manifest and /execute without a token get 401 with a JSON error";
    /// A wrong token on a protected route.
    AuthWrongToken = "auth.wrong_token", "with a service token set, /manifest and /execute with a wrong token get 401 with a JSON error";
    /// `GET /manifest` answers.
    ManifestAvailable = "manifest.available", "GET /manifest answers 200 with a JSON object";
    /// Module-level base fields.
    ManifestBaseFields = "manifest.base_fields", "the manifest has module_name (string), description (string) and tools (array of objects)";
    /// Module-level extensions.
    ManifestExtensionFields = "manifest.extension_fields", "manifest extensions, when present, have their JSON types (version string, contract_version \"1\")";
    /// The module name pattern.
    ModuleNameValid = "manifest.module_name_valid", "module_name matches ^[a-z][a-z0-9_]{0,39}$";
    /// At least one tool.
    HasTools = "manifest.has_tools", "the manifest lists at least one tool";
    /// Tool-level base fields.
    ToolBaseFields = "manifest.tool_base_fields", "every tool has name (string), description (string), parameters (array) and required_permission (string)";
    /// Tool-level extensions.
    ToolExtensionFields = "manifest.tool_extension_fields", "tool extensions, when present, have their JSON types (schemas objects, annotations booleans, requires_approval boolean, timeout_seconds positive number)";
    /// Parameter fields.
    ParameterFields = "manifest.parameter_fields", "every parameter has name, type (a contract type), description (string), required (boolean) and enum (array of strings or null)";
    /// Tool name pattern.
    ToolNamesValid = "manifest.tool_names_valid", "every tool name is `<module>.<tool>` with exactly one dot and <tool> matching ^[a-z][a-z0-9_]{0,39}$";
    /// Tool name prefix.
    ToolNamesPrefixed = "manifest.tool_names_prefixed", "every tool name starts with the manifest's module_name and a dot";
    /// Tool name uniqueness.
    ToolNamesUnique = "manifest.tool_names_unique", "no two tools share a name";
    /// Permission strings.
    PermissionsValid = "manifest.permissions_valid", "every required_permission is one of guest, user, admin, owner";
    /// Descriptions.
    DescriptionsNonEmpty = "manifest.descriptions_nonempty", "the module, every tool and every parameter has a non-empty description";
    /// Input schemas against the metaschema.
    InputMetaschema = "schema.input_metaschema", "every input_schema is a valid draft 2020-12 JSON Schema";
    /// Output schemas against the metaschema.
    OutputMetaschema = "schema.output_metaschema", "every output_schema is a valid draft 2020-12 JSON Schema";
    /// Input schema root.
    InputRootObject = "schema.input_root_object", "every input_schema has \"type\": \"object\" at its root";
    /// Self-contained schemas.
    ReferencesLocal = "schema.references_local", "schemas use only local references (#/...) that resolve inside them";
    /// Parameter names.
    ParameterNames = "parameters.names", "parameters lists exactly the top-level properties of input_schema";
    /// Parameter required flags.
    ParameterRequired = "parameters.required", "a parameter is required exactly when input_schema lists it in `required`";
    /// Parameter types.
    ParameterTypes = "parameters.types", "each parameter's type is one the property may take in input_schema";
    /// Parameter enumerations.
    ParameterEnums = "parameters.enums", "each parameter's enum equals the property's allowed values in input_schema";
    /// Provider-safe names.
    ProviderNames = "providers.tool_names", "every tool's provider-safe name <module>__<tool> is accepted by OpenAI, Anthropic, Bedrock and Gemini";
    /// Description lengths.
    ProviderDescriptions = "providers.description_length", "every tool description fits OpenAI's 1,024 characters";
    /// Conversion for every provider.
    ProviderConvertible = "providers.convertible", "every tool, converted by the orchestrator for each provider, passes that provider's rules";
    /// Valid arguments.
    ValidArguments = "execute.valid_arguments", "arguments generated from input_schema get 200 and are not refused as invalid_arguments or unknown_tool";
    /// ToolResult shape.
    ResultShape = "execute.result_shape", "every ToolResult has tool_name (echoed), success, result and error with their JSON types, and a known error_kind when it has one";
    /// Output conformance.
    OutputSchema = "execute.output_schema", "a successful result conforms to the tool's output_schema";
    /// Missing required field.
    MissingRequired = "execute.missing_required", "arguments without a required field get success:false, error_kind invalid_arguments";
    /// Wrong type.
    WrongType = "execute.wrong_type", "an argument of the wrong JSON type gets success:false, error_kind invalid_arguments";
    /// Wrong enum value.
    WrongEnum = "execute.wrong_enum", "an enum argument outside its allowed values gets success:false, error_kind invalid_arguments";
    /// Non-object arguments.
    ArgumentsNotObject = "execute.arguments_not_object", "`arguments` that is not an object gets 400/422 with a JSON error, or success:false with invalid_arguments";
    /// Unknown tool.
    UnknownTool = "execute.unknown_tool", "a call to a tool the module does not have gets success:false, error_kind unknown_tool";
    /// Non-JSON body.
    NonJsonBody = "execute.non_json_body", "a body that is not JSON gets a 4xx with a JSON {\"error\": string}";
    /// No 5xx, no dropped connection.
    NoServerErrors = "http.no_server_errors", "no request of the whole run got a 5xx, a dropped connection or no answer in time";
}

/// How a check ended for one module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The module does what the check requires.
    Passed,
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
    /// Passed, failed or skipped.
    pub status: Status,
    /// What was required (passed), why it was skipped, or the first problem.
    pub reason: String,
    /// Every problem found, each naming the tool or route concerned.
    pub problems: Vec<String>,
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
    Ran { problems: Vec<String>, notes: Vec<String> },
    Skipped(String),
}

impl Findings {
    /// Records that `check` ran (it passes unless a problem is recorded).
    pub fn ran(&mut self, check: Check) {
        self.ran_entry(check);
    }

    /// Records a problem: `check` fails.
    pub fn fail(&mut self, check: Check, problem: impl Into<String>) {
        if let Entry::Ran { problems, .. } = self.ran_entry(check) {
            problems.push(problem.into());
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

    /// One result per check of [`Check::ALL`], in order; a check nothing
    /// was recorded for is skipped with `unrecorded` as its reason.
    pub fn into_results(mut self, unrecorded: &str) -> Vec<CheckResult> {
        Check::ALL
            .iter()
            .map(|&check| match self.entries.remove(&check) {
                Some(Entry::Ran { problems, notes }) if problems.is_empty() => CheckResult {
                    check,
                    status: Status::Passed,
                    reason: check.requirement().to_owned(),
                    problems,
                    notes,
                },
                Some(Entry::Ran { problems, notes }) => {
                    CheckResult { check, status: Status::Failed, reason: problems[0].clone(), problems, notes }
                }
                Some(Entry::Skipped(reason)) => skipped(check, reason),
                None => skipped(check, unrecorded.to_owned()),
            })
            .collect()
    }
}

fn skipped(check: Check, reason: String) -> CheckResult {
    CheckResult { check, status: Status::Skipped, reason, problems: Vec::new(), notes: Vec::new() }
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
        let missing: Vec<&str> =
            Check::ALL.iter().map(|c| c.name()).filter(|name| !readme.contains(&format!("| `{name}` |"))).collect();
        assert!(missing.is_empty(), "add these checks to the README's contract tests table: {missing:?}");
    }

    #[test]
    fn findings_pass_fail_skip_and_default() {
        let mut findings = Findings::default();
        findings.ran(Check::HealthOk);
        findings.fail(Check::HasTools, "no tools");
        findings.skip(Check::AuthWrongToken, "no --token");
        findings.skip(Check::OpenApiDocument, "first");
        findings.fail(Check::OpenApiDocument, "ran after all");
        let results = findings.into_results("not run");
        let by = |check| results.iter().find(|r| r.check == check).unwrap();
        assert_eq!(results.len(), Check::ALL.len());
        assert_eq!(by(Check::HealthOk).status, Status::Passed);
        assert_eq!(by(Check::HasTools).status, Status::Failed);
        assert_eq!(by(Check::HasTools).reason, "no tools");
        assert_eq!(by(Check::AuthWrongToken).reason, "no --token");
        assert_eq!(by(Check::OpenApiDocument).status, Status::Failed);
        assert_eq!(by(Check::NoServerErrors).reason, "not run");
    }
}
