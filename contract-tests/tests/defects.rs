//! Proof that every check can fail: a module written with plain axum (no
//! SDK) passes the whole suite as it is, at both levels, and each of its
//! deliberate defects is reported by exactly the checks that must catch it:
//! as failures at the full level, as failures or warnings at the base level.

#[path = "fixtures/plain_module.rs"]
mod plain_module;

use std::collections::BTreeSet;

use contract_tests::{Budgets, Check, Level, ModuleReport, Status, SuiteOptions, check_module};
use plain_module::{Defect, TOKEN, serve};

/// Each defect, and the checks that must fail because of it (no others).
/// `manifest.orchestrator_accepts` is among them wherever the orchestrator's
/// own manifest check refuses the manifest.
const CASES: &[(Defect, &[&str])] = &[
    (Defect::HealthBody, &["health.status_ok"]),
    (Defect::OpenApiMissingRoute, &["openapi.document"]),
    (Defect::NoTokenAccepted, &["auth.missing_token"]),
    (Defect::AnyTokenAccepted, &["auth.wrong_token"]),
    (Defect::ManifestMissing, &["manifest.available"]),
    (Defect::DescriptionNotString, &["manifest.base_fields", "manifest.orchestrator_accepts"]),
    (Defect::ContractVersion, &["manifest.extension_fields"]),
    (Defect::ModuleNameCase, &["manifest.module_name_valid", "manifest.orchestrator_accepts"]),
    (Defect::NoTools, &["manifest.has_tools", "manifest.orchestrator_accepts"]),
    // The contract's default `guest` applies: nothing fails (a note says so).
    (Defect::PermissionMissing, &[]),
    (Defect::ParametersMissing, &["manifest.tool_base_fields"]),
    (Defect::VersionNotSemver, &["manifest.extension_fields"]),
    (Defect::RiskLevelUnknown, &["manifest.tool_extension_fields"]),
    (Defect::TimeoutNotNumber, &["manifest.tool_extension_fields", "manifest.orchestrator_accepts"]),
    (Defect::ParameterRequiredNotBoolean, &["manifest.parameter_fields", "manifest.orchestrator_accepts"]),
    (Defect::ToolNameCase, &["manifest.tool_names_valid", "manifest.orchestrator_accepts"]),
    (Defect::ToolNameOtherPrefix, &["manifest.tool_names_prefixed", "manifest.orchestrator_accepts"]),
    (Defect::DuplicateTool, &["manifest.tool_names_unique", "manifest.orchestrator_accepts"]),
    (Defect::UnknownPermission, &["manifest.permissions_valid"]),
    (Defect::EmptyParameterDescription, &["manifest.descriptions_nonempty"]),
    (Defect::InputSchemaInvalid, &["schema.input_metaschema"]),
    (Defect::OutputSchemaInvalid, &["schema.output_metaschema"]),
    (Defect::InputRootNullable, &["schema.input_root_object", "manifest.orchestrator_accepts"]),
    (Defect::RemoteReference, &["schema.references_local"]),
    (Defect::SchemaOverBudget, &["schema.input_budget", "manifest.orchestrator_accepts"]),
    (Defect::ExtraParameter, &["parameters.names", "manifest.orchestrator_accepts"]),
    (Defect::RequiredMismatch, &["parameters.required", "manifest.orchestrator_accepts"]),
    (Defect::TypeMismatch, &["parameters.types"]),
    (Defect::EnumMismatch, &["parameters.enums"]),
    (Defect::ProviderNameTooLong, &["providers.tool_names"]),
    (Defect::DescriptionTooLong, &["providers.description_length"]),
    // The orchestrator's converters repair whatever a valid schema holds, so
    // only a schema that is not valid JSON Schema fails to convert.
    (Defect::UnknownPropertyType, &["schema.input_metaschema", "parameters.types", "providers.convertible"]),
    (Defect::RefusesValidArguments, &["execute.valid_arguments"]),
    (Defect::ResultWithoutError, &["execute.result_shape"]),
    (Defect::ResultBreaksOutputSchema, &["execute.output_schema"]),
    (Defect::AcceptsMissingRequired, &["execute.missing_required"]),
    (Defect::AcceptsWrongType, &["execute.wrong_type"]),
    (Defect::AcceptsWrongEnum, &["execute.wrong_enum"]),
    (Defect::AcceptsNonObjectArguments, &["execute.arguments_not_object"]),
    (Defect::UnknownToolNotFound, &["execute.unknown_tool"]),
    // Checked by nothing else: `parameters` are compared only with an input_schema.
    (Defect::DuplicateBaseParameter, &["manifest.orchestrator_accepts"]),
    (Defect::NonJsonPlainText, &["execute.non_json_body"]),
    (Defect::NonJsonServerError, &["execute.non_json_body", "http.no_server_errors"]),
    (Defect::MissingToolNameResult, &["execute.missing_tool_name"]),
    (Defect::NoBodyLimit, &["execute.body_too_large"]),
];

fn options(read_only: bool, level: Level) -> SuiteOptions {
    SuiteOptions {
        token: Some(TOKEN.to_owned()),
        read_only,
        user_id: "defect-tests".to_owned(),
        sample_url: "http://127.0.0.1:9/page".to_owned(),
        level,
        budgets: Budgets::default(),
    }
}

async fn report_at(defect: Defect, read_only: bool, level: Level) -> ModuleReport {
    let module = serve(defect).await;
    check_module(&module.url, &options(read_only, level)).await.unwrap()
}

async fn report(defect: Defect, read_only: bool) -> ModuleReport {
    report_at(defect, read_only, Level::Full).await
}

#[tokio::test]
async fn the_plain_module_passes_every_check_at_both_levels() {
    for level in [Level::Base, Level::Full] {
        let report = report_at(Defect::None, false, level).await;
        assert_eq!(report.level, level);
        let not_passed: Vec<String> = report
            .results
            .iter()
            .filter(|r| r.status != Status::Passed)
            .map(|r| format!("{} {:?}: {}", r.check.name(), r.status, r.reason))
            .collect();
        assert!(not_passed.is_empty(), "at {level}: {not_passed:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_defect_is_reported_by_exactly_its_checks() {
    let mut mismatches = Vec::new();
    for (defect, expected) in CASES {
        let report = report(*defect, false).await;
        let failed: BTreeSet<&str> = report.failures().map(|r| r.check.name()).collect();
        let expected: BTreeSet<&str> = expected.iter().copied().collect();
        if failed != expected || report.warnings().next().is_some() {
            let details: Vec<String> =
                report.failures().map(|r| format!("{}: {:?}", r.check.name(), r.problems)).collect();
            mismatches
                .push(format!("{defect:?}: expected {expected:?}, failed {failed:?}\n  {}", details.join("\n  ")));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Defects whose full-level check only warns at base, so a base check fails
/// in its place (a tool over the schema budgets is never called).
const ALSO_AT_BASE: &[(Defect, &str)] = &[(Defect::SchemaOverBudget, "execute.valid_arguments")];

/// At base, a defect still shows under its checks, failed or warned, and
/// fails only what base requires: a check of the full level never fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_base_each_defect_fails_or_warns_exactly_its_checks() {
    let mut mismatches = Vec::new();
    for (defect, expected) in CASES {
        let report = report_at(*defect, false, Level::Base).await;
        let failed: BTreeSet<&str> = report.failures().map(|r| r.check.name()).collect();
        let warned: BTreeSet<&str> = report.warnings().map(|r| r.check.name()).collect();
        let shown: BTreeSet<&str> = failed.union(&warned).copied().collect();
        let also = ALSO_AT_BASE.iter().filter(|(d, _)| d == defect).map(|(_, check)| *check);
        let expected: BTreeSet<&str> = expected.iter().copied().chain(also).collect();
        let full_failed: Vec<&str> =
            report.failures().filter(|r| r.check.level() == Level::Full).map(|r| r.check.name()).collect();
        if shown != expected || !full_failed.is_empty() {
            mismatches.push(format!("{defect:?}: expected {expected:?}, failed {failed:?}, warned {warned:?}"));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Defects that existing orchestrators of the format cannot live with fail
/// at base too; defects in what only the full contract asks only warn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_base_what_orchestrators_rely_on_still_fails() {
    let cases = [
        (Defect::RefusesValidArguments, "execute.valid_arguments", Status::Failed),
        (Defect::SchemaOverBudget, "execute.valid_arguments", Status::Failed),
        (Defect::AcceptsMissingRequired, "execute.missing_required", Status::Failed),
        (Defect::UnknownPermission, "manifest.permissions_valid", Status::Failed),
        (Defect::DuplicateBaseParameter, "manifest.orchestrator_accepts", Status::Failed),
        (Defect::ExtraParameter, "manifest.orchestrator_accepts", Status::Failed),
        (Defect::TimeoutNotNumber, "manifest.orchestrator_accepts", Status::Failed),
        (Defect::NonJsonServerError, "http.no_server_errors", Status::Failed),
        (Defect::AnyTokenAccepted, "auth.wrong_token", Status::Failed),
        (Defect::UnknownToolNotFound, "execute.unknown_tool", Status::Warned),
        (Defect::NonJsonPlainText, "execute.non_json_body", Status::Warned),
        (Defect::MissingToolNameResult, "execute.missing_tool_name", Status::Failed),
        (Defect::NoBodyLimit, "execute.body_too_large", Status::Warned),
        (Defect::OpenApiMissingRoute, "openapi.document", Status::Warned),
        (Defect::InputSchemaInvalid, "schema.input_metaschema", Status::Warned),
    ];
    for (defect, check, status) in cases {
        let report = report_at(defect, false, Level::Base).await;
        let result = report.results.iter().find(|r| r.check.name() == check).unwrap();
        assert_eq!(result.status, status, "{defect:?}: {result:#?}");
        assert_eq!(report.passed(), status != Status::Failed, "{defect:?}");
    }
}

/// Defects in what the contract does not state (a budget an orchestrator
/// applies), and the checks that warn of them, at both levels.
const ADVICE: &[(Defect, &[&str])] = &[(Defect::OutputSchemaOverBudget, &["schema.output_budget"])];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_contract_does_not_state_only_warns() {
    for (defect, expected) in ADVICE {
        for level in [Level::Base, Level::Full] {
            let report = report_at(*defect, false, level).await;
            let failed: Vec<&str> = report.failures().map(|r| r.check.name()).collect();
            let warned: BTreeSet<&str> = report.warnings().map(|r| r.check.name()).collect();
            assert!(report.passed() && failed.is_empty(), "{defect:?} at {level}: failed {failed:?}");
            assert_eq!(warned, expected.iter().copied().collect(), "{defect:?} at {level}");
        }
    }
}

#[test]
fn every_check_has_a_defect_that_fails_it() {
    let covered: BTreeSet<&str> = CASES.iter().chain(ADVICE).flat_map(|(_, checks)| checks.iter().copied()).collect();
    let uncovered: Vec<&str> = Check::ALL.iter().map(|c| c.name()).filter(|name| !covered.contains(name)).collect();
    assert!(uncovered.is_empty(), "checks no defect proves: {uncovered:?}");
}

#[tokio::test]
async fn read_only_leaves_destructive_tools_alone() {
    let report = report(Defect::None, true).await;
    let valid = report.results.iter().find(|r| r.check == Check::ValidArguments).unwrap();
    assert_eq!(valid.status, Status::Passed);
    assert_eq!(valid.notes, vec!["fixture.remove not called: it is destructive and --read-only was given".to_owned()]);
}

#[tokio::test]
async fn problems_name_the_tool_and_what_was_wrong() {
    let report = report(Defect::AcceptsWrongType, false).await;
    let wrong_type = report.failures().next().unwrap();
    assert_eq!(
        wrong_type.reason,
        "fixture.lookup with `limit` set to string \"contract tests: wrong type\": expected success: false with error_kind \"invalid_arguments\", got success: true, no error_kind"
    );
}
