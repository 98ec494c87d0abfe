//! Discovery: every `SKILL.toml` one level under `SKILLS_DIR` becomes
//! tools; a broken file is skipped with a reason, never stopping the others.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use limited_process::Limits;
use module_sdk::Permission;
use schemars::JsonSchema;
use serde::Serialize;

use crate::arguments::{ArgType, Argument};
use crate::scrub::Scrubber;
use crate::settings::Settings;
use crate::skill_file::{ArgEntry, Problem, SkillHeader, Source, ToolEntry};
use crate::template::CommandTemplate;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.toml";

/// The module's own tool (`tools::list_skills`), whose name no skill tool may take.
pub const LIST_TOOL: &str = "list_skills";

/// Variables every script gets from the module's environment.
const BASE_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// `PATH` for scripts when the module has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The longest tool name the contract allows.
const MAX_NAME_CHARS: usize = 40;

/// One tool of one skill, ready to run.
#[derive(Debug, Clone)]
pub struct SkillTool {
    /// Its name inside the module: `<skill>_<tool>`, normalized.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The command line, split into words.
    pub template: CommandTemplate,
    /// One per placeholder.
    pub arguments: Vec<Argument>,
    /// The skill's directory, where the command runs.
    pub directory: PathBuf,
    /// Its SKILL.toml, relative to `SKILLS_DIR`, as problems name it.
    pub file: String,
    /// The allow-listed environment.
    pub env: Vec<(String, String)>,
    /// Cleans its output of the skill's secrets and known token shapes.
    pub scrubber: Scrubber,
    /// The longest a call may run.
    pub timeout: Duration,
    /// Bytes kept of stdout, and of stderr.
    pub max_output_bytes: usize,
    /// Resource limits of the process.
    pub limits: Limits,
    /// The least privileged caller allowed.
    pub permission: Permission,
    /// Whether the user must approve each call.
    pub requires_approval: bool,
    /// Whether it changes nothing.
    pub read_only: bool,
    /// Whether it can destroy data.
    pub destructive: bool,
}

/// A loaded skill, as `list_skills` shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillSummary {
    /// The skill's name.
    pub name: String,
    /// Its version, when the file gives one.
    pub version: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Its SKILL.toml, relative to `SKILLS_DIR`.
    pub file: String,
    /// Its tools' full names.
    pub tools: Vec<String>,
}

/// Everything found under `SKILLS_DIR`.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The tools served.
    pub tools: Vec<SkillTool>,
    /// The skills they come from.
    pub skills: Vec<SkillSummary>,
    /// Skipped files and tools, and warnings, each with its place.
    pub problems: Vec<Problem>,
}

impl Catalog {
    /// [`Catalog::discover`], with its problems and counts logged.
    pub fn discover_logged(settings: &Settings) -> Self {
        let catalog = Self::discover(settings);
        for problem in &catalog.problems {
            problem.log();
        }
        tracing::info!(
            skills = catalog.skills.len(),
            tools = catalog.tools.len(),
            problems = catalog.problems.len(),
            "skills loaded"
        );
        catalog
    }

    /// Reads every `SKILLS_DIR/*/SKILL.toml`, in directory-name order.
    pub fn discover(settings: &Settings) -> Self {
        let mut catalog = Self::default();
        let root = match settings.skills_dir.canonicalize() {
            Ok(root) => root,
            Err(error) => {
                catalog.problems.push(unplaced(&settings.skills_dir, format!("cannot read SKILLS_DIR: {error}")));
                return catalog;
            }
        };
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&root) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|entry| entry.path().join(SKILL_FILE))
                .filter(|file| file.is_file())
                .collect(),
            Err(error) => {
                catalog.problems.push(unplaced(&root, format!("cannot list SKILLS_DIR: {error}")));
                return catalog;
            }
        };
        files.sort();
        let mut taken: BTreeSet<String> = BTreeSet::from([LIST_TOOL.to_owned()]);
        let max_tools = usize::try_from(settings.max_tools).unwrap_or(usize::MAX);
        let mut full = false;
        for file in files {
            // Shown relative to SKILLS_DIR: a model calling `list_skills`
            // has no business with the host's directory layout.
            let shown = file.strip_prefix(&root).unwrap_or(&file);
            if full {
                catalog.problems.push(unplaced(shown, over_the_cap("SKILLS_MAX_TOOLS", settings.max_tools)));
                continue;
            }
            match load_skill(&file, shown, settings) {
                Ok((mut summary, tools, warnings)) => {
                    // Its tools that would be served (a name taken is not).
                    let new = tools
                        .iter()
                        .map(|tool| tool.name.as_str())
                        .filter(|name| !taken.contains(*name))
                        .collect::<BTreeSet<&str>>()
                        .len();
                    if catalog.tools.len() + new > max_tools {
                        let reason = format!(
                            "not loaded: its {} tools would make {}, over SKILLS_MAX_TOOLS ({max_tools}), the most \
                             tools the module serves; raise it, or move skills out of SKILLS_DIR",
                            new,
                            catalog.tools.len() + new
                        );
                        catalog.problems.push(unplaced(shown, reason));
                        full = true;
                        continue;
                    }
                    catalog.problems.extend(warnings);
                    for tool in tools {
                        if taken.insert(tool.name.clone()) {
                            summary.tools.push(format!("skills.{}", tool.name));
                            catalog.tools.push(tool);
                        } else {
                            let reason = format!(
                                "tool `{}` refused: its name `skills.{}` is already taken (by another skill's tool or the module's own); rename the skill or the tool",
                                tool.name, tool.name
                            );
                            catalog.problems.push(unplaced(shown, reason));
                        }
                    }
                    catalog.skills.push(summary);
                }
                Err(problem) => catalog.problems.push(problem),
            }
        }
        catalog
    }
}

/// Why a skill after the one that did not fit under the budget `setting`
/// (of `max`) is not loaded.
pub fn over_the_cap(setting: &str, max: u64) -> String {
    format!(
        "not loaded: an earlier skill (in directory-name order) did not fit under {setting} ({max}), so no later one \
         is; raise it, or move skills out of SKILLS_DIR"
    )
}

fn unplaced(file: &Path, reason: String) -> Problem {
    Problem { file: file.display().to_string(), line: 0, column: 0, reason }
}

/// One skill: its summary, its tools and its warnings, or the one problem
/// that makes the whole file unusable; `shown` is how `file` is named in
/// them.
fn load_skill(
    file: &Path,
    shown: &Path,
    settings: &Settings,
) -> Result<(SkillSummary, Vec<SkillTool>, Vec<Problem>), Problem> {
    let limit = settings.skill_file_max_bytes;
    let too_big =
        |size: String| unplaced(shown, format!("is {size}, over the limit of {limit} bytes (SKILL_FILE_MAX_BYTES)"));
    let cannot_read = |error: std::io::Error| unplaced(shown, format!("cannot read: {error}"));
    let opened = std::fs::File::open(file).map_err(cannot_read)?;
    let size = opened.metadata().map_err(cannot_read)?.len();
    if size > limit {
        return Err(too_big(format!("{size} bytes")));
    }
    // No further than the limit, whatever the size said: a file that grows
    // while it is read, one whose size is 0 (/proc), a device.
    let mut bytes = Vec::new();
    opened.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(cannot_read)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(too_big(format!("more than {limit} bytes")));
    }
    let text = String::from_utf8(bytes).map_err(|error| unplaced(shown, format!("cannot read: {error}")))?;
    let source = Source::new(shown, &text);
    let parsed = source.parse()?;
    let directory = file.parent().expect("a SKILL.toml is inside a directory").to_path_buf();
    let header = &parsed.skill;
    let mut warnings = Vec::new();
    let env = environment(header, &source, &mut warnings)?;
    let secrets = env.iter().filter(|(name, _)| !BASE_ENV.contains(&name.as_str())).map(|(_, value)| value.clone());
    let scrubber = Scrubber::new(secrets);
    if parsed.tools.is_empty() {
        return Err(source.problem(header.name.span().into(), "[[tools]]: the skill has no tools"));
    }
    let mut tools = Vec::new();
    for entry in &parsed.tools {
        let place = Some(entry.span());
        let tool = tool_from_entry(&source, header, entry.get_ref(), settings, &mut warnings)
            .map_err(|reason| source.problem(place.clone(), reason))?;
        tools.push(SkillTool {
            directory: directory.clone(),
            file: shown.display().to_string(),
            env: env.clone(),
            scrubber: scrubber.clone(),
            ..tool
        });
    }
    let summary = SkillSummary {
        name: header.name.get_ref().clone(),
        version: header.version.clone(),
        description: header.description.clone(),
        file: shown.display().to_string(),
        tools: Vec::new(),
    };
    Ok((summary, tools, warnings))
}

/// The base variables plus the skill's `env` names, from the module's environment.
fn environment(
    header: &SkillHeader,
    source: &Source<'_>,
    warnings: &mut Vec<Problem>,
) -> Result<Vec<(String, String)>, Problem> {
    let mut env: Vec<(String, String)> =
        BASE_ENV.iter().filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value))).collect();
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
    }
    for name in &header.env {
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(source.problem(None, format!("skill.env: `{name}` is not an environment variable name")));
        }
        match std::env::var(name) {
            Ok(value) => env.push((name.clone(), value)),
            Err(_) => warnings
                .push(source.problem(None, format!("skill.env: `{name}` is not set in the module's environment"))),
        }
    }
    Ok(env)
}

/// One tool of the file, or the reason (naming the field) it is unusable.
fn tool_from_entry(
    source: &Source<'_>,
    header: &SkillHeader,
    entry: &ToolEntry,
    settings: &Settings,
    warnings: &mut Vec<Problem>,
) -> Result<SkillTool, String> {
    let tool_name = entry.name.get_ref();
    let name = normalized_name(header.name.get_ref(), tool_name)
        .ok_or_else(|| format!("tools.name: `{}` and `{tool_name}` make no usable tool name", header.name.get_ref()))?;
    if entry.kind.get_ref() != "shell" {
        return Err(format!("tools.kind: `{}` is not supported; use `shell` (a command line)", entry.kind.get_ref()));
    }
    if entry.description.get_ref().trim().is_empty() {
        return Err(format!("tools.description: tool `{tool_name}` has an empty description"));
    }
    let template = CommandTemplate::parse(entry.command.get_ref())
        .map_err(|error| format!("tools.command of `{tool_name}`: {error}"))?;
    let placeholders = template.placeholders();
    for (arg, value) in &entry.args {
        if !placeholders.contains(&arg.as_str()) {
            let reason =
                format!("tools.args.{arg}: no placeholder `{{{arg}}}` in the command of `{tool_name}`; ignored");
            warnings.push(source.problem(Some(value.span()), reason));
        }
    }
    let mut arguments = Vec::new();
    for placeholder in placeholders {
        let (kind, description, required, allow_leading_dash) = match entry.args.get(placeholder).map(|v| v.get_ref()) {
            Some(ArgEntry::Description(text)) => (ArgType::inferred(placeholder), Some(text.clone()), true, false),
            Some(ArgEntry::Detailed(table)) => {
                let kind = match &table.kind {
                    Some(kind) => ArgType::explicit(kind, table.values.clone())
                        .map_err(|reason| format!("tools.args.{placeholder}: {reason}"))?,
                    None if table.values.is_some() => {
                        return Err(format!("tools.args.{placeholder}: `values` needs `type = \"enum\"`"));
                    }
                    None => ArgType::inferred(placeholder),
                };
                (kind, table.description.clone(), table.required.unwrap_or(true), table.allow_leading_dash)
            }
            None => (ArgType::inferred(placeholder), None, true, false),
        };
        let description = match description.filter(|d| !d.trim().is_empty()) {
            Some(description) => description.trim().to_owned(),
            None => {
                let place = Some(entry.command.span());
                let reason = format!(
                    "tools.args.{placeholder}: placeholder `{{{placeholder}}}` of `{tool_name}` has no description"
                );
                warnings.push(source.problem(place, reason));
                format!("The `{placeholder}` argument.")
            }
        };
        let max_bytes = template.max_value_bytes(placeholder);
        let may_start_with_dash =
            allow_leading_dash || matches!(kind, ArgType::Enum(_)) || !template.can_start_an_option(placeholder);
        arguments.push(Argument {
            name: placeholder.to_owned(),
            kind,
            description,
            required,
            max_bytes,
            may_start_with_dash,
        });
    }
    let timeout_seconds = match &entry.timeout_seconds {
        Some(seconds) if *seconds.get_ref() > 0.0 && *seconds.get_ref() <= settings.max_timeout_seconds => {
            *seconds.get_ref()
        }
        Some(seconds) => {
            return Err(format!(
                "tools.timeout_seconds: {} is not between 0 (excluded) and {} (SKILL_MAX_TIMEOUT_SECONDS)",
                seconds.get_ref(),
                settings.max_timeout_seconds
            ));
        }
        None => settings.default_timeout_seconds,
    };
    let max_output_bytes = match &entry.max_output_bytes {
        Some(bytes) if (1..=settings.max_output_bytes).contains(bytes.get_ref()) => *bytes.get_ref(),
        Some(bytes) => {
            return Err(format!(
                "tools.max_output_bytes: {} is not between 1 and {} (SKILL_MAX_OUTPUT_BYTES)",
                bytes.get_ref(),
                settings.max_output_bytes
            ));
        }
        None => settings.max_output_bytes,
    };
    Ok(SkillTool {
        name,
        description: entry.description.get_ref().trim().to_owned(),
        template,
        arguments,
        directory: PathBuf::new(),
        file: String::new(),
        env: Vec::new(),
        scrubber: Scrubber::default(),
        timeout: Duration::from_secs_f64(timeout_seconds),
        max_output_bytes: usize::try_from(max_output_bytes).unwrap_or(usize::MAX),
        limits: settings.limits(),
        permission: entry.permission.unwrap_or(Permission::Guest),
        requires_approval: entry.requires_approval,
        read_only: entry.read_only,
        destructive: entry.destructive,
    })
}

/// `<skill>_<tool>` in the contract's form `^[a-z][a-z0-9_]{0,39}$`:
/// lowercased, every run of other characters one `_`, no `_` at the ends,
/// `s_` in front when it would not start with a letter, cut to 40
/// characters. `None` when nothing is left.
pub fn normalized_name(skill: &str, tool: &str) -> Option<String> {
    let mut name = String::new();
    for c in format!("{skill}_{tool}").to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('_') {
            name.push('_');
        }
    }
    let mut name = name.trim_end_matches('_').to_owned();
    if name.is_empty() {
        return None;
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        name.insert_str(0, "s_");
    }
    name.truncate(MAX_NAME_CHARS);
    Some(name.trim_end_matches('_').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn names_are_normalized_to_the_contract() {
        assert_eq!(normalized_name("telegram-reader", "list_dialogs").unwrap(), "telegram_reader_list_dialogs");
        assert_eq!(normalized_name("Git Tools", "Log!").unwrap(), "git_tools_log");
        assert_eq!(normalized_name("7zip", "pack").unwrap(), "s_7zip_pack");
        assert_eq!(normalized_name("é", "-").unwrap_or_default(), "");
        let long = normalized_name(&"a".repeat(30), &"b".repeat(30)).unwrap();
        assert_eq!(long.len(), 40);
        assert!(module_sdk::contract::is_valid_name(&long));
    }

    fn write(root: &Path, skill: &str, text: &str) {
        std::fs::create_dir_all(root.join(skill)).unwrap();
        std::fs::write(root.join(skill).join(SKILL_FILE), text).unwrap();
    }

    fn discover(root: &Path) -> Catalog {
        Catalog::discover(&Settings::try_parse_from(["skills", "--skills-dir", root.to_str().unwrap()]).unwrap())
    }

    #[test]
    fn good_broken_and_colliding_skills() {
        let root = tempfile::tempdir().unwrap();
        let good = "[skill]\nname = \"words\"\n[[tools]]\nname = \"count\"\ndescription = \"Count.\"\ncommand = \"wc -w {file} --max {max_items}\"\ntimeout_seconds = 5\nread_only = true\n[tools.args]\nfile = \"The file.\"\nunused = \"Nothing.\"\n";
        write(root.path(), "a_words", good);
        write(
            root.path(),
            "b_broken",
            "[skill]\nname = \"broken\"\n[[tools]]\nname = \"x\"\ndescription = \"X.\"\ncommand = \"echo {a}\"\n[tools.args]\na = { type = \"float\" }\n",
        );
        write(root.path(), "c_same", good);
        write(root.path(), "d_syntax", "[skill\n");
        std::fs::create_dir_all(root.path().join("e_no_file")).unwrap();
        let catalog = discover(root.path());
        let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["words_count"]);
        let tool = &catalog.tools[0];
        assert_eq!(tool.timeout, Duration::from_secs(5));
        assert!(tool.read_only);
        assert_eq!(tool.arguments[1].kind, ArgType::Integer);
        let problems: Vec<String> = catalog.problems.iter().map(ToString::to_string).collect();
        let find = |needle: &str| {
            problems.iter().find(|p| p.contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in {problems:#?}"))
        };
        assert!(find("tools.args.unused").contains("a_words/SKILL.toml:11:"));
        assert!(find("placeholder `{max_items}`").contains("tools.args.max_items"));
        assert!(find("float").contains("b_broken/SKILL.toml:3:1"));
        assert!(find("already taken").contains("c_same"));
        find("d_syntax/SKILL.toml:1:");
        assert_eq!(catalog.skills.len(), 2, "the colliding skill is listed, without tools");
    }

    #[test]
    fn a_skill_file_is_read_no_further_than_its_limit_whatever_its_size_says() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("proc")).unwrap();
        // A file of size 0 with more than 100 bytes in it.
        std::os::unix::fs::symlink("/proc/self/status", root.path().join("proc").join(SKILL_FILE)).unwrap();
        let arguments = ["skills", "--skills-dir", root.path().to_str().unwrap(), "--skill-file-max-bytes", "100"];
        let catalog = Catalog::discover(&Settings::try_parse_from(arguments).unwrap());
        let reason = &catalog.problems[0].reason;
        assert_eq!(reason, "is more than 100 bytes, over the limit of 100 bytes (SKILL_FILE_MAX_BYTES)");
    }

    #[test]
    fn skills_past_the_tool_cap_are_reported_and_the_earlier_ones_served() {
        let root = tempfile::tempdir().unwrap();
        let skill = |name: &str, tools: usize| {
            let mut text = format!("[skill]\nname = \"{name}\"\n");
            for n in 0..tools {
                text.push_str(&format!("[[tools]]\nname = \"t{n}\"\ndescription = \"T.\"\ncommand = \"true\"\n"));
            }
            text
        };
        write(root.path(), "a", &skill("a", 2));
        write(root.path(), "b", &skill("b", 2));
        write(root.path(), "c", &skill("c", 1));
        write(root.path(), "d", &skill("d", 1));
        let arguments = ["skills", "--skills-dir", root.path().to_str().unwrap(), "--max-tools", "4"];
        let catalog = Catalog::discover(&Settings::try_parse_from(arguments).unwrap());
        let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a_t0", "a_t1", "b_t0", "b_t1"]);
        assert_eq!(catalog.skills.len(), 2);
        let problems: Vec<String> = catalog.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 2, "{problems:#?}");
        assert!(
            problems[0].starts_with("c/SKILL.toml") && problems[0].contains("would make 5, over SKILLS_MAX_TOOLS (4)")
        );
        assert!(
            problems[1].starts_with("d/SKILL.toml") && problems[1].contains("did not fit under SKILLS_MAX_TOOLS (4)")
        );
    }

    #[test]
    fn a_missing_directory_is_a_problem_not_a_crash() {
        let catalog = discover(Path::new("/nonexistent/skills"));
        assert!(catalog.tools.is_empty());
        assert!(catalog.problems[0].reason.contains("SKILLS_DIR"));
    }
}
