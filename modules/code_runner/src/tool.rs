//! The `execute_code` tool: its arguments, its answer, and one run.

use std::time::Duration;

use limited_process::{Exit, RunError};
use module_sdk::{Context, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::admission::Admission;
use crate::files::{OutputFile, files_of};
use crate::sandbox::{Ran, Sandbox, SandboxError};
use crate::settings::Settings;

/// What the tool's description tells a model.
pub const DESCRIPTION: &str = "Run a Python 3 program in a sandbox and answer what it printed. The sandbox has no network, \
     no access to other files than the Python installation (read-only), a fresh empty working directory and /tmp, \
     and limits on time, memory, processes and file sizes. Files the program leaves in its working directory are \
     listed in the answer, with the text of small ones.";

/// `SIGKILL`, what a run killed at its timeout reports.
const SIGKILL: i32 = 9;

/// The arguments of `execute_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCode {
    /// The Python 3 program, as the text of a file; run with `python3 -c`.
    pub code: String,
    /// Text given to the program on standard input (default: none).
    #[serde(default)]
    pub stdin: Option<String>,
    /// Wall-clock seconds the program may run before it is killed with
    /// everything it started (default and maximum: the module's settings;
    /// a larger value is lowered to the maximum).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<u64>,
}

/// What a run gave back.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CodeOutput {
    /// Standard output, as text (bytes that are not UTF-8 replaced).
    pub stdout: String,
    /// Standard error, as text: a failing program's traceback is here.
    pub stderr: String,
    /// Whether stdout or stderr was longer than the module keeps and was cut.
    pub truncated: bool,
    /// The exit status: the program's exit code, or 128 + N when signal N
    /// ended it (as a shell reports it); absent when the timeout ended the run.
    pub exit_code: Option<i32>,
    /// The signal that ended the program, if one did (9 at the timeout or
    /// when killed, 24 at the CPU time limit, 25 at the file size limit).
    pub signal: Option<i32>,
    /// Whether the program ran past its timeout and was killed.
    pub timed_out: bool,
    /// Wall-clock time of the run, in milliseconds.
    pub duration_ms: u64,
    /// The files the program left in its working directory (none when it
    /// was killed at its timeout).
    pub files: Vec<OutputFile>,
    /// Whether files were left out of `files` (too many, or a listing that
    /// could not be read).
    pub files_truncated: bool,
    /// The settings naming the run's totals it ran into: `CODE_MEMORY_BYTES`
    /// when the kernel killed a process of the run for memory,
    /// `CODE_PROCESSES` when a fork or thread was refused for the run's
    /// process count (empty when none, or when the module has no cgroup per run).
    pub exceeded_budgets: Vec<String>,
}

/// Everything a call needs, shared by all calls.
#[derive(Debug)]
pub struct Runner {
    sandbox: Sandbox,
    /// Why code is not run here, when the sandbox check failed at start.
    broken: Option<String>,
    admission: Admission,
    settings: Settings,
}

impl Runner {
    /// A runner for `settings` with `sandbox`; `broken` is the start-up check's finding.
    pub fn new(settings: &Settings, sandbox: Sandbox, broken: Option<String>) -> Self {
        let runs = usize::try_from(settings.max_concurrent_runs).unwrap_or(usize::MAX);
        Self {
            sandbox,
            broken,
            admission: Admission::new(runs, settings.max_runs_per_user),
            settings: settings.clone(),
        }
    }

    /// The longest a call can take: a wait for a turn, the longest run, and
    /// a little for the answer.
    pub fn call_timeout(settings: &Settings) -> Duration {
        Duration::from_secs(settings.queue_wait_seconds + settings.max_timeout_seconds + 3)
    }

    /// Checks `args` against the budgets, waits for a turn, runs.
    pub async fn execute(&self, user: Option<&str>, args: ExecuteCode) -> Result<CodeOutput, ToolError> {
        if let Some(reason) = &self.broken {
            return Err(ToolError::unavailable(format!("code is not run here, the sandbox does not work: {reason}")));
        }
        self.check(&args)?;
        let timeout = args
            .timeout_seconds
            .unwrap_or(self.settings.default_timeout_seconds)
            .clamp(1, self.settings.max_timeout_seconds);
        let queue_deadline = tokio::time::Instant::now() + self.settings.queue_wait();
        let turn = self.admission.enter(user.unwrap_or(""), self.settings.queue_wait()).await?;
        let wait_left = queue_deadline.saturating_duration_since(tokio::time::Instant::now());
        self.sandbox
            .wait_for_clean_slot(turn.slot(), wait_left)
            .await
            .map_err(|error| ToolError::unavailable(error.to_string()))?;
        let ran = self.sandbox.execute(&args.code, args.stdin.as_deref(), Duration::from_secs(timeout), turn.slot());
        let Ran { outcome, exceeded } = ran.await.map_err(|error| match error {
            // Before the code: the module lacked processes, descriptors or memory, or the kernel refused the run's cgroup.
            SandboxError::Run(RunError::Spawn { .. }) => {
                ToolError::unavailable(format!("{error}; the code did not run, try again later"))
            }
            SandboxError::Run(RunError::Wait { .. }) => ToolError::execution_failed(error.to_string()),
            SandboxError::Unavailable(_) | SandboxError::Cgroup(_) | SandboxError::Setup(_) => {
                ToolError::unavailable(error.to_string())
            }
        })?;
        let exceeded_budgets = [(exceeded.memory, "CODE_MEMORY_BYTES"), (exceeded.processes, "CODE_PROCESSES")]
            .into_iter()
            .filter(|(hit, _)| *hit)
            .map(|(_, setting)| setting.to_owned())
            .collect();
        let (exit_code, signal) = match outcome.exit {
            Exit::Code(code) => (Some(code), (129..=128 + 64).contains(&code).then(|| code - 128)),
            Exit::Signal(signal) => (None, Some(signal)),
        };
        let (files, files_truncated) = files_of(&outcome.side_output, self.sandbox.files);
        Ok(CodeOutput {
            stdout: String::from_utf8_lossy(&outcome.stdout.bytes).into_owned(),
            stderr: String::from_utf8_lossy(&outcome.stderr.bytes).into_owned(),
            truncated: outcome.stdout.cut || outcome.stderr.cut,
            exit_code,
            signal: if outcome.timed_out { Some(SIGKILL) } else { signal },
            timed_out: outcome.timed_out,
            duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            files,
            files_truncated,
            exceeded_budgets,
        })
    }

    /// The budgets of the arguments.
    fn check(&self, args: &ExecuteCode) -> Result<(), ToolError> {
        let code_bytes = args.code.len() as u64;
        if code_bytes > self.settings.code_max_bytes {
            return Err(ToolError::invalid_arguments(format!(
                "`code` is {code_bytes} bytes, more than the {} allowed (CODE_MAX_BYTES); send a shorter program",
                self.settings.code_max_bytes
            )));
        }
        if args.code.contains('\0') {
            return Err(ToolError::invalid_arguments(
                "`code` contains a NUL character, which a program text cannot hold",
            ));
        }
        let stdin_bytes = args.stdin.as_ref().map_or(0, |stdin| stdin.len() as u64);
        if stdin_bytes > self.settings.stdin_max_bytes {
            return Err(ToolError::invalid_arguments(format!(
                "`stdin` is {stdin_bytes} bytes, more than the {} allowed (CODE_STDIN_MAX_BYTES)",
                self.settings.stdin_max_bytes
            )));
        }
        Ok(())
    }
}

/// The handler of `code_runner.execute_code`.
pub async fn execute_code(ctx: Context, args: ExecuteCode) -> Result<CodeOutput, ToolError> {
    let runner = ctx.state::<Runner>()?;
    runner.execute(ctx.user_id(), args).await
}
