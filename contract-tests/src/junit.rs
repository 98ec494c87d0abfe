//! The JUnit XML form of a run (`--report junit`): one test suite per
//! module, one test case per check, for CI systems that show JUnit results.
//! A check that warned is a passed test case whose standard output holds
//! the warnings; each suite has the run's `level` as a property.
//!
//! What a module sent (its URL and name, reasons, problems, warnings) is
//! written with control characters escaped as in the text report (`\u{1b}`),
//! so the document stays valid XML 1.0 and shows what was sent rather than
//! quick-junit's silent stripping of such characters.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use crate::check::Status;
use crate::report::{RunReport, printable};

/// The run as a JUnit XML document.
pub fn to_junit(run: &RunReport) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("contract-tests");
    for module in &run.modules {
        let mut suite = TestSuite::new(printable(&module.url));
        suite.add_property(("level", module.level.as_str()));
        for result in &module.results {
            let mut status = match result.status {
                Status::Passed | Status::Warned => TestCaseStatus::success(),
                Status::Failed => TestCaseStatus::non_success(NonSuccessKind::Failure),
                Status::Skipped => TestCaseStatus::skipped(),
            };
            status.set_message(printable(&result.reason));
            if !result.problems.is_empty() {
                let problems: Vec<_> = result.problems.iter().map(|p| printable(p)).collect();
                status.set_description(problems.join("\n"));
            }
            let mut case = TestCase::new(result.check.name(), status);
            if !result.warnings.is_empty() {
                let lines: Vec<String> = result.warnings.iter().map(|w| format!("warning: {}", printable(w))).collect();
                case.set_system_out(lines.join("\n"));
            }
            case.set_classname(printable(module.module_name.as_deref().unwrap_or(&module.url)));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{Check, CheckResult, Level};
    use crate::suite::ModuleReport;

    /// Whether `c` is a `Char` of XML 1.0 (section 2.2).
    fn xml_char(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
    }

    #[test]
    fn what_a_module_sent_is_escaped_into_valid_xml() {
        let hostile = "m\u{1}\u{1b}[2K\u{fffe}";
        let result = CheckResult {
            check: Check::ALL[0],
            level: Level::Base,
            status: Status::Failed,
            reason: format!("reason {hostile}"),
            problems: vec![format!("first {hostile}"), "second\rline".into()],
            warnings: vec![format!("warned {hostile}")],
            notes: Vec::new(),
        };
        let module = ModuleReport {
            url: format!("http://127.0.0.1:1/{hostile}"),
            module_name: Some(hostile.into()),
            level: Level::Base,
            results: vec![result],
        };
        let xml = to_junit(&RunReport::new(vec![module])).unwrap();
        assert!(xml.chars().all(xml_char), "only XML 1.0 characters: {xml:?}");

        let shown = r"m\u{1}\u{1b}[2K\u{fffe}";
        let parsed = Report::deserialize_from_str(&xml).unwrap();
        let suite = &parsed.test_suites[0];
        assert_eq!(suite.name.as_str(), format!("http://127.0.0.1:1/{shown}"));
        let case = &suite.test_cases[0];
        assert_eq!(case.classname.as_ref().map(|c| c.as_str()), Some(shown));
        let TestCaseStatus::NonSuccess { message, description, .. } = &case.status else {
            panic!("a failure: {:?}", case.status)
        };
        assert_eq!(message.as_ref().map(|m| m.as_str()), Some(format!("reason {shown}").as_str()));
        let expected = format!("first {shown}\nsecond\\rline");
        assert_eq!(description.as_ref().map(|d| d.as_str()), Some(expected.as_str()));
        assert_eq!(case.system_out.as_ref().map(|o| o.as_str()), Some(format!("warning: warned {shown}").as_str()));
    }
}
