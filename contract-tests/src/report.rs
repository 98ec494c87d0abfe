//! The outcome of a run over one or more modules, as human lines and as a
//! JSON document.

use serde::Serialize;

use crate::check::{CheckResult, Status};
use crate::suite::ModuleReport;

/// At most this many extra problems are printed under a failed check.
const MAX_EXTRA_LINES: usize = 10;

/// Every module's report, in the order the URLs were given.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Whether no check of any module failed (passed, warned or skipped).
    pub passed: bool,
    /// One report per module.
    pub modules: Vec<ModuleReport>,
}

impl RunReport {
    /// A report over `modules`.
    pub fn new(modules: Vec<ModuleReport>) -> Self {
        Self { passed: modules.iter().all(ModuleReport::passed), modules }
    }

    /// The JSON document written by `--report json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }

    /// The human form: a header per module, then one line per check (with
    /// indented lines for further problems and notes), then a summary.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for module in &self.modules {
            let name = module.module_name.as_deref().unwrap_or("manifest unreadable");
            out.push_str(&format!("{} ({name}), level {}\n", module.url, module.level));
            for result in &module.results {
                push_result(&mut out, result);
            }
            let count = |status| module.results.iter().filter(|r| r.status == status).count();
            out.push_str(&format!(
                "{}: {} passed, {} warned, {} failed, {} skipped\n\n",
                module.url,
                count(Status::Passed),
                count(Status::Warned),
                count(Status::Failed),
                count(Status::Skipped)
            ));
        }
        out
    }
}

fn push_result(out: &mut String, result: &CheckResult) {
    let label = match result.status {
        Status::Passed => "PASS",
        Status::Warned => "WARN",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
    };
    out.push_str(&format!("  {label} {}: {}\n", result.check.name(), result.reason));
    // The reason is the first problem or, when none counts, the first warning.
    let warnings = result.warnings.iter().map(|warning| format!("warning: {warning}"));
    let mut extra: Vec<String> = result.problems.iter().cloned().chain(warnings).skip(1).collect();
    let hidden = extra.len().saturating_sub(MAX_EXTRA_LINES);
    extra.truncate(MAX_EXTRA_LINES);
    for line in extra {
        out.push_str(&format!("         {line}\n"));
    }
    if hidden > 0 {
        out.push_str(&format!("         and {hidden} more (see --report json)\n"));
    }
    for note in &result.notes {
        out.push_str(&format!("         note: {note}\n"));
    }
}
