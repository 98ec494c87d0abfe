//! The outcome of a run over one or more modules, as human lines and as a
//! JSON document. The human lines show what a module sent (its name, values
//! quoted in problems) with control characters escaped, so a module cannot
//! print lines of its own (a fake summary) or drive the terminal.

use std::borrow::Cow;

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
            out.push_str(&format!("{} ({}), level {}\n", printable(&module.url), printable(name), module.level));
            for result in &module.results {
                push_result(&mut out, result);
            }
            let count = |status| module.results.iter().filter(|r| r.status == status).count();
            out.push_str(&format!(
                "{}: {} passed, {} warned, {} failed, {} skipped\n\n",
                printable(&module.url),
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
    out.push_str(&format!("  {label} {}: {}\n", result.check.name(), printable(&result.reason)));
    // The reason is the first problem or, when none counts, the first warning.
    let warnings = result.warnings.iter().map(|warning| format!("warning: {warning}"));
    let mut extra: Vec<String> = result.problems.iter().cloned().chain(warnings).skip(1).collect();
    let hidden = extra.len().saturating_sub(MAX_EXTRA_LINES);
    extra.truncate(MAX_EXTRA_LINES);
    for line in extra {
        out.push_str(&format!("         {}\n", printable(&line)));
    }
    if hidden > 0 {
        out.push_str(&format!("         and {hidden} more (see --report json)\n"));
    }
    for note in &result.notes {
        out.push_str(&format!("         note: {}\n", printable(note)));
    }
}

/// `text` with every control character (line breaks, escape sequences,
/// C1 controls, the line and paragraph separators U+2028 and U+2029), every
/// bidirectional formatting character and the two noncharacters XML 1.0
/// forbids (U+FFFE, U+FFFF) written as its Rust escape (`\n`, `\u{1b}`,
/// `\u{202e}`), so it stays on its line, shows as sent and fits in an XML
/// document.
pub fn printable(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(
                c,
                '\u{200e}'
                    | '\u{200f}'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{fffe}'
                    | '\u{ffff}'
            )
    };
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_plain_text_is_kept() {
        assert!(matches!(printable("plain «text»"), Cow::Borrowed("plain «text»")));
        assert_eq!(printable("m\nx: 1 passed\x1b[2K\u{9b}\u{202e}"), "m\\nx: 1 passed\\u{1b}[2K\\u{9b}\\u{202e}");
        assert_eq!(printable("a\u{2028}b\u{2029}c"), "a\\u{2028}b\\u{2029}c", "line and paragraph separators");
    }
}
