//! The `SKILL.toml` format, read with positions so that every problem
//! names its file, line and field.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use module_sdk::Permission;
use serde::Deserialize;
use toml::Spanned;

/// A whole `SKILL.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillFile {
    /// The `[skill]` table.
    pub skill: SkillHeader,
    /// The `[[tools]]` tables.
    #[serde(default)]
    pub tools: Vec<Spanned<ToolEntry>>,
}

/// `[skill]`: what the skill is.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillHeader {
    /// Its name, the first part of its tools' names.
    pub name: Spanned<String>,
    /// Its version, for people.
    #[serde(default)]
    pub version: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Names of variables of the module's own environment its scripts get
    /// (and whose values are scrubbed from their output).
    #[serde(default)]
    pub env: Vec<String>,
}

/// One `[[tools]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolEntry {
    /// The tool's name inside the skill.
    pub name: Spanned<String>,
    /// What it does, for the model.
    pub description: Spanned<String>,
    /// Only `shell`: a command line (split into words, never given to a shell).
    #[serde(default = "shell_kind")]
    pub kind: Spanned<String>,
    /// The command template, with `{placeholders}`.
    pub command: Spanned<String>,
    /// `[tools.args]`: a description, or a table, per placeholder.
    #[serde(default)]
    pub args: BTreeMap<String, Spanned<ArgEntry>>,
    /// The longest a call may run, in seconds.
    #[serde(default)]
    pub timeout_seconds: Option<Spanned<f64>>,
    /// The least privileged caller allowed.
    #[serde(default)]
    pub permission: Option<Permission>,
    /// Whether the user must approve each call.
    #[serde(default)]
    pub requires_approval: bool,
    /// Whether the tool changes nothing.
    #[serde(default)]
    pub read_only: bool,
    /// Whether the tool can destroy or overwrite data.
    #[serde(default)]
    pub destructive: bool,
    /// The most bytes kept of stdout (and of stderr).
    #[serde(default)]
    pub max_output_bytes: Option<Spanned<u64>>,
}

fn shell_kind() -> Spanned<String> {
    Spanned::new(0..0, "shell".to_owned())
}

/// An `[tools.args]` entry: a plain description, or a table.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum ArgEntry {
    /// `limit = "Maximum number of dialogs"`.
    Description(String),
    /// `name = { description = "...", type = "string", required = false }`.
    Detailed(ArgTable),
}

/// The table form of an argument.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgTable {
    /// What the argument means.
    #[serde(default)]
    pub description: Option<String>,
    /// `string`, `integer`, `number`, `boolean` or `enum`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The allowed values of an `enum`.
    #[serde(default)]
    pub values: Option<Vec<String>>,
    /// `false` makes the argument optional.
    #[serde(default)]
    pub required: Option<bool>,
    /// `true` lets a value start an argv word with `-` (the script reads
    /// it as an option, or takes its arguments by position and knows that
    /// `-x` is text).
    #[serde(default)]
    pub allow_leading_dash: bool,
}

/// A problem in one file, at one place.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Problem {
    /// The file, relative to `SKILLS_DIR` (`SKILLS_DIR` itself, as set,
    /// when that directory cannot be read).
    pub file: String,
    /// 1-based line, 0 when the problem has no place in the file.
    pub line: usize,
    /// 1-based column, 0 when the problem has no place in the file.
    pub column: usize,
    /// What is wrong, naming the field.
    pub reason: String,
}

impl Problem {
    /// Logs it, at `warn`.
    pub fn log(&self) {
        tracing::warn!(file = %self.file, line = self.line, column = self.column, reason = %self.reason, "SKILL.toml problem");
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.reason)
    }
}

/// A file's text, to turn byte spans into lines and columns.
pub struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl<'a> Source<'a> {
    /// The text of the file at `path`.
    pub fn new(path: &'a Path, text: &'a str) -> Self {
        Self { path, text }
    }

    /// A problem at `span` (a byte range of the text).
    pub fn problem(&self, span: Option<Range<usize>>, reason: impl Into<String>) -> Problem {
        let (line, column) = span.map_or((0, 0), |span| line_column(self.text, span.start));
        Problem { file: self.path.display().to_string(), line, column, reason: reason.into() }
    }

    /// Parses the file; a syntax or shape error is one problem.
    pub fn parse(&self) -> Result<SkillFile, Problem> {
        toml::from_str(self.text).map_err(|error| self.problem(error.span(), error.message().trim().to_owned()))
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |last| last.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SkillFile, Problem> {
        Source::new(Path::new("s/SKILL.toml"), text).parse()
    }

    #[test]
    fn the_issue_example_reads() {
        let file = parse(
            r#"
[skill]
name = "telegram-reader"
version = "1.0.0"
description = "Read Telegram dialogs."

[[tools]]
name = "list_dialogs"
description = "List the user's dialogs."
kind = "shell"
command = "python3 scripts/reader.py list --limit {limit} --name {name}"
permission = "user"

[tools.args]
limit = "Maximum number of dialogs"          # plain string: a description
name = { description = "Only dialogs with this name", type = "string", required = false }
"#,
        )
        .unwrap();
        assert_eq!(file.skill.name.get_ref(), "telegram-reader");
        let tool = file.tools[0].get_ref();
        assert_eq!(tool.permission, Some(Permission::User));
        assert!(matches!(tool.args["limit"].get_ref(), ArgEntry::Description(d) if d == "Maximum number of dialogs"));
        assert!(matches!(tool.args["name"].get_ref(), ArgEntry::Detailed(ArgTable { required: Some(false), .. })));
    }

    #[test]
    fn problems_name_line_column_and_field() {
        let problem =
            parse("[skill]\nname = \"s\"\n\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = 5\n").unwrap_err();
        assert_eq!((problem.line, problem.column), (7, 11), "{problem}");
        assert!(problem.reason.contains("string"), "{problem}");
        let unknown = parse("[skill]\nname = \"s\"\nnmae = 1\n").unwrap_err();
        assert_eq!(unknown.line, 3, "{unknown}");
        assert!(unknown.reason.contains("nmae"), "{unknown}");
        let syntax = parse("[skill\nname = 1").unwrap_err();
        assert_eq!(syntax.line, 1, "{syntax}");
        assert!(syntax.to_string().starts_with("s/SKILL.toml:1:"), "{syntax}");
    }
}
