//! Running one call of a skill tool: the argv from the arguments, the
//! contained process, and a result with its output scrubbed.

use std::path::Path;

use limited_process::{Exit, Run, RunError};
use module_sdk::ToolError;
use rustix::io::Errno;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::arguments::{ArgType, as_word};
use crate::catalog::SkillTool;
use crate::settings::over_own_hard_limits;
use crate::slots::RunSlots;
use crate::stdout::stdout_value;

/// Characters of stderr's end quoted in an error.
const STDERR_TAIL_CHARS: usize = 600;

/// `SIGXCPU`: the CPU-seconds limit was reached.
const SIGXCPU: i32 = 24;

/// What a script gave back.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SkillOutput {
    /// The exit code (0).
    pub exit_code: i32,
    /// Standard output: parsed when it is JSON and was not cut, else the text.
    pub stdout: Value,
    /// Standard error, as text.
    pub stderr: String,
    /// Whether stdout or stderr was longer than the tool's `max_output_bytes`
    /// and was cut there.
    pub truncated: bool,
}

/// Runs `tool` with the validated `arguments` in one of `slots`, waiting
/// for one while at least half the tool's timeout is left to run it.
pub async fn run(tool: &SkillTool, arguments: Map<String, Value>, slots: &RunSlots) -> Result<SkillOutput, ToolError> {
    let argv = tool
        .template
        .argv(
            |name| {
                let integer = tool.arguments.iter().any(|a| a.name == name && a.kind == ArgType::Integer);
                arguments.get(name).filter(|v| !v.is_null()).map(|value| as_word(value, integer))
            },
            |name| tool.arguments.iter().any(|argument| argument.name == name && argument.may_start_with_dash),
        )
        .map_err(|error| ToolError::invalid_arguments(error.to_string()))?;
    let (program, args) = argv.split_first().expect("a template has a program word");
    // The wait for a slot is part of the tool's timeout.
    let deadline = Instant::now() + process_timeout(tool.timeout);
    let _slot = slots.take(deadline, tool.timeout).await?;
    let mut run = Run::new(program_path(&tool.directory, program), args)
        .current_dir(&tool.directory)
        .limits(tool.limits)
        .timeout(deadline.saturating_duration_since(Instant::now()))
        // Read past the cap so a secret the cap would split is scrubbed whole.
        .max_output_bytes(tool.max_output_bytes.saturating_add(tool.scrubber.lookahead_bytes()));
    for (name, value) in &tool.env {
        run = run.env(name, value);
    }
    let outcome = run.run().await.map_err(|error| run_error(tool, program, &error))?;
    let cap = tool.max_output_bytes;
    let (stdout, stdout_cut) = tool.scrubber.scrub_capped(&outcome.stdout.bytes, outcome.stdout.cut, cap);
    let (stderr, stderr_cut) = tool.scrubber.scrub_capped(&outcome.stderr.bytes, outcome.stderr.cut, cap);
    let tail = stderr_tail(&stderr);
    if outcome.timed_out {
        let seconds = tool.timeout.as_secs_f64();
        return Err(ToolError::timeout(format!(
            "the script ran past the tool's timeout of {seconds} s and was killed with its child processes{tail}"
        )));
    }
    match outcome.exit {
        Exit::Code(0) => Ok(SkillOutput {
            exit_code: 0,
            stdout: stdout_value(&tool.scrubber, &outcome.stdout.bytes, stdout, stdout_cut),
            stderr,
            truncated: stdout_cut || stderr_cut,
        }),
        Exit::Code(code) => Err(ToolError::execution_failed(format!("the script exited with code {code}{tail}"))),
        Exit::Signal(SIGXCPU) => Err(ToolError::execution_failed(format!(
            "the script used up its CPU time limit of {} s (SKILL_CPU_SECONDS) and was stopped{tail}",
            tool.limits.cpu_seconds
        ))),
        Exit::Signal(signal) => Err(ToolError::execution_failed(format!(
            "the script was ended by signal {signal} (a resource limit, or a crash){tail}"
        ))),
    }
}

/// The tool error of a script that could not be run; `program` is named
/// as the template writes it, not by its path on the host.
fn run_error(tool: &SkillTool, program: &str, error: &RunError) -> ToolError {
    let source = match error {
        RunError::Spawn { source, .. } => source,
        RunError::Wait { source, .. } => {
            return ToolError::execution_failed(tool.scrubber.scrub(&format!("lost track of `{program}`: {source}")));
        }
    };
    match source.raw_os_error().map(Errno::from_raw_os_error) {
        // The arguments together exceed what `execve` accepts.
        Some(Errno::TOOBIG) => ToolError::invalid_arguments(
            "the arguments together are longer than the kernel accepts for one command line; send shorter values",
        ),
        // No file descriptor left (the system's, the module's) for the script's pipes.
        Some(Errno::NFILE | Errno::MFILE) => ToolError::unavailable(format!(
            "the module has no file descriptor left to start the script ({source}): each call in flight holds about \
             four (its connection, two pipes, the process); try again later, and lower MAX_CONNECTIONS or raise the \
             module's open-file limit (ulimit -n)"
        )),
        // A resource limit could not be set before exec.
        Some(Errno::PERM) if !over_own_hard_limits(&tool.limits).is_empty() => {
            let settings = over_own_hard_limits(&tool.limits).join(", ");
            ToolError::unavailable(format!(
                "the script's resource limits could not be set ({source}): {settings} above the module's own hard \
                 limit (ulimit -H), which it may not raise; lower {settings} or raise the module's limit"
            ))
        }
        _ => ToolError::execution_failed(tool.scrubber.scrub(&format!("cannot start `{program}`: {source}"))),
    }
}

/// A program word with a slash is a path: a relative one from the skill's
/// directory, an absolute one as written; a bare name is looked up in the
/// allow-listed `PATH`.
fn program_path(directory: &Path, program: &str) -> std::ffi::OsString {
    if program.contains('/') { directory.join(program).into_os_string() } else { program.into() }
}

/// The process's own deadline, a little before the SDK's, so a timed-out
/// call reports what the script printed and always kills its group first.
fn process_timeout(timeout: std::time::Duration) -> std::time::Duration {
    timeout.saturating_sub((timeout / 10).min(std::time::Duration::from_millis(500)))
}

/// `; stderr ends with: ...` with the last characters of stderr, or nothing.
fn stderr_tail(stderr: &str) -> String {
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        return String::new();
    }
    let count = trimmed.chars().count();
    let tail: String = trimmed.chars().skip(count.saturating_sub(STDERR_TAIL_CHARS)).collect();
    format!("; stderr ends with: {tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(program_path(Path::new("/s"), "scripts/a.py"), "/s/scripts/a.py");
        assert_eq!(program_path(Path::new("/s"), "python3"), "python3");
        assert_eq!(program_path(Path::new("/s"), "/usr/bin/python3"), "/usr/bin/python3");
        assert_eq!(program_path(Path::new("/s"), "../shared/x"), "/s/../shared/x");
        assert_eq!(stderr_tail("  \n"), "");
        assert_eq!(stderr_tail(&format!("{}end\n", "x".repeat(1000))).chars().count(), 600 + 20);
        let ten = std::time::Duration::from_secs(10);
        assert_eq!(process_timeout(ten), std::time::Duration::from_millis(9500));
    }
}
