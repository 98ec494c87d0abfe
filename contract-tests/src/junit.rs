//! The JUnit XML form of a run (`--report junit`): one test suite per
//! module, one test case per check, for CI systems that show JUnit results.
//! A check that warned is a passed test case whose standard output holds
//! the warnings; each suite has the run's `level` as a property.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::check::Status;
use crate::report::RunReport;

/// The run as a JUnit XML document.
pub fn to_junit(run: &RunReport) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("contract-tests");
    for module in &run.modules {
        let mut suite = TestSuite::new(module.url.clone());
        suite.add_property(("level", module.level.as_str()));
        for result in &module.results {
            let mut status = match result.status {
                Status::Passed | Status::Warned => TestCaseStatus::success(),
                Status::Failed => TestCaseStatus::non_success(NonSuccessKind::Failure),
                Status::Skipped => TestCaseStatus::skipped(),
            };
            status.set_message(result.reason.clone());
            if !result.problems.is_empty() {
                status.set_description(result.problems.join("\n"));
            }
            let mut case = TestCase::new(result.check.name(), status);
            if !result.warnings.is_empty() {
                let lines: Vec<String> = result.warnings.iter().map(|w| format!("warning: {w}")).collect();
                case.set_system_out(lines.join("\n"));
            }
            case.set_classname(module.module_name.clone().unwrap_or_else(|| module.url.clone()));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string()
}
