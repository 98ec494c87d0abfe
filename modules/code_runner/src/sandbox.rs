//! The sandbox one run of code gets: a fresh bubblewrap with every
//! namespace unshared, a read-only `/usr` without the host's own programs
//! (`/usr/local`...), three small in-memory file
//! systems (working directory, `/tmp`, `/dev/shm`), an empty environment, no capabilities, a seccomp
//! filter (read by bubblewrap on descriptor 4), resource limits
//! per process, and a cgroup of its own that bounds the run's memory,
//! processes and CPU in total.
//!
//! Inside, `/bin/sh` first writes [`STARTED`] on descriptor 3 (so a run
//! whose sandbox bubblewrap could not set up is told from the code's own
//! failure), runs the code with `python3 -c`, then, when the code
//! left files in its working directory, lists them (with `list_files.py`)
//! on descriptor 3, which the code itself does not inherit.

use std::path::PathBuf;
use std::time::Duration;

use limited_process::{Limits, Outcome, Run, RunError, SIDE_INPUT_FD};

use crate::cgroup::{CgroupError, Exceeded, Hierarchy, RunBudget, RunCgroup};
use crate::host_usr::cover_arguments;
use crate::run_user;
use crate::seccomp::{self, FilterError};
use crate::settings::Settings;

/// The working directory inside the sandbox (also `HOME`).
pub const WORK_DIR: &str = "/work";

/// How far a run user's RLIMIT_NPROC is set above the run's `pids.max`
/// when runs have a cgroup: a backstop, so the run's own count is the one a
/// fork bomb meets (and the answer names).
const NPROC_ABOVE_PIDS_MAX: u64 = 8;

/// The lister, run inside the sandbox after the code.
const LIST_FILES: &str = include_str!("list_files.py");

/// What the script writes on descriptor 3 before anything else: without
/// it, the sandbox was never set up.
const STARTED: &[u8] = b"sandbox-started\n";

/// Writes [`STARTED`], runs the code (`$1` is the interpreter, `$2` the code), keeps its
/// status, lists the working directory on descriptor 3 when anything is in
/// it (`$3` the lister, `$4`..`$6` its caps), and exits with the code's
/// status. A lister that fails (a tree too deep for it, say) adds a line
/// that spoils its report, so the answer says `files_truncated`.
const SCRIPT: &str = r#"echo sandbox-started >&3
python="$1"; "$python" -c "$2" 3>&-
status=$?
for name in .[!.]* ..?* *; do
  if [ -e "$name" ] || [ -L "$name" ]; then
    "$python" -I -S -c "$3" "$4" "$5" "$6" >&3 2>/dev/null </dev/null || echo "the lister failed" >&3
    break
  fi
done
exit $status"#;

/// Caps of the file listing of one run.
#[derive(Debug, Clone, Copy)]
pub struct FileCaps {
    /// Most files listed.
    pub max_count: u64,
    /// Largest file whose text is included.
    pub content_max_bytes: u64,
    /// Most text included, all files together.
    pub max_content_bytes: u64,
}

impl FileCaps {
    /// The most bytes a listing within these caps takes as JSON: every
    /// byte of text escaped (`\u0000`, 6 bytes), every name a long path.
    pub fn listing_max_bytes(&self) -> usize {
        let bytes =
            self.max_content_bytes.saturating_mul(6).saturating_add(self.max_count.saturating_mul(4 * 4096 + 64));
        usize::try_from(bytes.saturating_add(1024)).unwrap_or(usize::MAX)
    }
}

/// How a run's totals are bounded.
#[derive(Debug, Clone)]
enum Totals {
    /// By a cgroup per run under this hierarchy.
    Cgroup(Hierarchy, RunBudget),
    /// Not at all: no cgroup can be made, and CODE_PER_PROCESS_LIMITS_ONLY accepts that.
    PerProcessOnly,
    /// No cgroup can be made, for this reason, and nothing accepts that: no code runs.
    Unavailable(String),
}

impl Totals {
    /// Finds a place for run cgroups, removes those a killed module left
    /// there, and makes (and removes) one to be sure. When
    /// CODE_CGROUP_PARENT is set, a place that fails is an error.
    fn discover(settings: &Settings) -> Result<Self, ParentError> {
        let budget = settings.run_budget();
        let parent = settings.cgroup_parent.as_deref();
        let found = Hierarchy::discover(parent).and_then(|hierarchy| {
            hierarchy.remove_left_behind();
            drop(RunCgroup::create(&hierarchy, budget)?);
            Ok(hierarchy)
        });
        let found = match (found, parent) {
            (Err(source), Some(parent)) => return Err(ParentError { parent: parent.to_owned(), source }),
            (found, _) => found,
        };
        Ok(match found {
            Ok(hierarchy) => {
                tracing::info!(?hierarchy, "each run gets a cgroup of its own (memory, pids, cpu)");
                Self::Cgroup(hierarchy, budget)
            }
            Err(error) if settings.per_process_limits_only => {
                tracing::warn!(
                    %error,
                    "NO CGROUP PER RUN: runs are bounded per process only (CODE_PER_PROCESS_LIMITS_ONLY); \
                     one run may use CODE_PROCESSES times CODE_ADDRESS_SPACE_BYTES of memory and of CODE_CPU_SECONDS"
                );
                Self::PerProcessOnly
            }
            Err(error) => Self::Unavailable(format!(
                "no cgroup per run can be made here ({error}); give the module a writable (delegated) cgroup, \
                 or set CODE_PER_PROCESS_LIMITS_ONLY=true to accept limits per process only (a run may then \
                 use CODE_PROCESSES times each of them)"
            )),
        })
    }
}

/// The cgroup CODE_CGROUP_PARENT names cannot hold run cgroups: the
/// module does not start.
#[derive(Debug, thiserror::Error)]
#[error("CODE_CGROUP_PARENT={parent}: run cgroups cannot be made under it: {source}")]
pub struct ParentError {
    /// The setting's value.
    parent: String,
    /// What is wrong.
    source: CgroupError,
}

/// Why the module cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// CODE_CGROUP_PARENT cannot hold run cgroups.
    #[error(transparent)]
    Parent(#[from] ParentError),
    /// The seccomp filter could not be built.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// Why a run did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Runs cannot be bounded here (see [`Sandbox::check`]).
    #[error("{0}")]
    Unavailable(String),
    /// The run's cgroup could not be made.
    #[error("cannot make the run's cgroup: {0}")]
    Cgroup(#[from] CgroupError),
    /// bubblewrap started but could not set up the sandbox (a namespace
    /// refused for want of processes, say): the code never ran.
    #[error("bubblewrap could not set up the sandbox: {0}; try again later")]
    Setup(String),
    /// bubblewrap could not be started or waited for.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// What a run gave back, and which of its totals it ran into.
#[derive(Debug)]
pub struct Ran {
    /// How it ended and what it printed.
    pub outcome: Outcome,
    /// The totals of its cgroup it ran into (none without a cgroup).
    pub exceeded: Exceeded,
}

/// How every run is sandboxed; one per module.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    python: PathBuf,
    /// bubblewrap's arguments that cover the host's own parts of `/usr`,
    /// found at start-up.
    usr_cover: Vec<String>,
    limits: Limits,
    /// The first user id and the group id of runs, when the module is root.
    users: Option<(u32, u32)>,
    tmpfs_bytes: u64,
    max_output_bytes: usize,
    totals: Totals,
    /// The compiled seccomp filter, given to bubblewrap on descriptor 4.
    filter: Vec<u8>,
    /// The caps of the file listing.
    pub files: FileCaps,
}

impl Sandbox {
    /// The sandbox the settings describe; when the module runs as root, run
    /// slot `i` runs as user `CODE_SANDBOX_UID_BASE + i`. Finds where run
    /// cgroups can be made (under cgroup v2 and without
    /// CODE_CGROUP_PARENT, this may move the module into a leaf cgroup of
    /// its own); fails when CODE_CGROUP_PARENT cannot hold them, or when
    /// the seccomp filter cannot be built.
    pub fn new(settings: &Settings) -> Result<Self, StartError> {
        let root = nix::unistd::Uid::effective().is_root();
        let filter = seccomp::build()?;
        let totals = Totals::discover(settings)?;
        let mut limits = settings.limits();
        if let Totals::Cgroup(..) = totals {
            limits.processes = limits.processes.saturating_add(NPROC_ABOVE_PIDS_MAX);
        }
        Ok(Self {
            bwrap: settings.bwrap.clone(),
            python: settings.python.clone(),
            usr_cover: cover_arguments(&settings.python),
            limits,
            users: root.then_some((settings.sandbox_uid_base, settings.sandbox_gid)),
            tmpfs_bytes: settings.tmpfs_bytes,
            max_output_bytes: usize::try_from(settings.max_output_bytes).unwrap_or(usize::MAX),
            totals,
            filter,
            files: FileCaps {
                max_count: settings.files_max_count,
                content_max_bytes: settings.file_content_max_bytes,
                max_content_bytes: settings.files_max_content_bytes,
            },
        })
    }

    /// Runs `code` with `stdin` for at most `timeout`, in run slot `slot`,
    /// in a cgroup of its own that is removed afterwards with anything
    /// still in it.
    pub async fn execute(
        &self,
        code: &str,
        stdin: Option<&str>,
        timeout: Duration,
        slot: u32,
    ) -> Result<Ran, SandboxError> {
        let mut run = self.run(code, stdin, timeout, slot);
        let cgroup = match &self.totals {
            Totals::Cgroup(hierarchy, budget) => Some(RunCgroup::create(hierarchy, *budget)?),
            Totals::PerProcessOnly => None,
            Totals::Unavailable(reason) => return Err(SandboxError::Unavailable(reason.clone())),
        };
        if let Some(cgroup) = &cgroup {
            for procs in cgroup.procs()? {
                run = run.cgroup(procs);
            }
        }
        let outcome = run.run().await;
        let exceeded = cgroup.as_ref().map(RunCgroup::exceeded).unwrap_or_default();
        if let Some(cgroup) = cgroup {
            cgroup.remove().await;
        }
        Ok(Ran { outcome: set_up(outcome?, exceeded)?, exceeded })
    }

    /// Waits at most `wait` until the processes of run slot `slot`'s
    /// previous run are gone (when runs have a user per slot), so a run is
    /// never charged for another's leftovers.
    pub async fn wait_for_clean_slot(&self, slot: u32, wait: Duration) -> Result<(), SandboxError> {
        let Some((base, _)) = self.users else { return Ok(()) };
        let uid = base.saturating_add(slot);
        if run_user::wait_until_gone(uid, wait).await {
            return Ok(());
        }
        Err(SandboxError::Unavailable(format!(
            "the processes of the previous run as sandbox user {uid} (CODE_SANDBOX_UID_BASE + slot {slot}) did not exit \
             within the queue wait ({} s, CODE_QUEUE_WAIT_SECONDS); try again later",
            wait.as_secs_f64()
        )))
    }

    /// The contained process that runs `code` with `stdin` for at most
    /// `timeout`, in run slot `slot`.
    fn run(&self, code: &str, stdin: Option<&str>, timeout: Duration, slot: u32) -> Run {
        let mut run = Run::new(&self.bwrap, self.arguments(code))
            .limits(self.limits)
            .timeout(timeout)
            .max_output_bytes(self.max_output_bytes)
            .side_output(self.files.listing_max_bytes().saturating_add(STARTED.len()))
            .side_input(self.filter.clone());
        if let Some((base, gid)) = self.users {
            run = run.user(base.saturating_add(slot), gid);
        }
        if let Some(stdin) = stdin {
            run = run.stdin(stdin.as_bytes().to_vec());
        }
        run
    }

    /// bubblewrap's argv after the program name: the isolation, the
    /// seccomp filter, then the shell that runs `code` and lists the files it left.
    fn arguments(&self, code: &str) -> Vec<String> {
        let mut args = self.isolation_arguments();
        args.extend(["--seccomp".to_owned(), SIDE_INPUT_FD.to_string()]);
        args.extend(["--", "/bin/sh", "-c", SCRIPT, "sh"].map(str::to_owned));
        let caps = [self.files.max_count, self.files.content_max_bytes, self.files.max_content_bytes];
        args.extend([self.python.to_string_lossy().into_owned(), code.to_owned(), LIST_FILES.to_owned()]);
        args.extend(caps.map(|cap| cap.to_string()));
        args
    }

    /// bubblewrap's isolation flags (namespaces, mounts, environment), the
    /// same for every run; the seccomp filter (`--seccomp`, with its
    /// descriptor) and the program and its arguments follow.
    pub fn isolation_arguments(&self) -> Vec<String> {
        let size = self.tmpfs_bytes.to_string();
        let mut args: Vec<String> = [
            // Namespaces: user (no nested ones), mount, PID, network (only an
            // empty loopback), IPC, UTS, cgroup.
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--hostname",
            "sandbox",
            // The sandbox dies with bubblewrap; the code cannot reach the terminal.
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            // Only the interpreter's files, read-only.
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--proc",
            "/proc",
            // Device nodes (null, zero, random, tty...) on a read-only /dev,
            // with a writable /dev/shm of its own size.
            "--dev",
            "/dev",
            "--size",
            &size,
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--size",
            &size,
            "--tmpfs",
            "/tmp",
            "--size",
            &size,
            "--tmpfs",
            WORK_DIR,
            "--chdir",
            WORK_DIR,
            // The sandbox's root (bubblewrap's own tmpfs) is read-only too.
            "--remount-ro",
            "/",
            // Nothing of the module's environment.
            "--clearenv",
            "--setenv",
            "HOME",
            WORK_DIR,
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "TMPDIR",
            "/tmp",
            // Output as it is printed, so a run killed at its timeout still
            // answers what it printed before.
            "--setenv",
            "PYTHONUNBUFFERED",
            "1",
            "--setenv",
            "PYTHONDONTWRITEBYTECODE",
            "1",
            // glibc's malloc reserves 64 MiB of address space per thread
            // arena: under CODE_ADDRESS_SPACE_BYTES (1 GiB) a program could
            // start only about 14 threads, far below CODE_PROCESSES.
            "--setenv",
            "MALLOC_ARENA_MAX",
            "2",
        ]
        .map(str::to_owned)
        .into();
        // After `/usr` is bound: the host's own programs in it are covered.
        args.extend(self.usr_cover.iter().cloned());
        args
    }

    /// The bubblewrap binary.
    pub fn bwrap(&self) -> &std::path::Path {
        &self.bwrap
    }

    /// The interpreter inside the sandbox.
    pub fn python(&self) -> &std::path::Path {
        &self.python
    }

    /// Runs a trivial program in the sandbox; `Err` says why the sandbox
    /// does not work here (the module then refuses to run code).
    pub async fn check(&self) -> Result<(), String> {
        let Ran { outcome, .. } = self
            .execute("print('ok')", None, Duration::from_secs(30), 0)
            .await
            .map_err(|error| format!("cannot start the sandbox ({}): {error}", self.bwrap.display()))?;
        if outcome.stdout.bytes == b"ok\n" && outcome.exit == limited_process::Exit::Code(0) {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
        Err(format!(
            "a trivial program fails in the sandbox ({} with {}): ended {:?}, stderr: {}",
            self.bwrap.display(),
            self.python.display(),
            outcome.exit,
            stderr.trim()
        ))
    }
}

/// The most characters of bubblewrap's stderr an answer quotes when it
/// could not set up the sandbox (its own messages are one line).
const SETUP_MESSAGE_MAX_CHARS: usize = 1000;

/// `outcome` without the [`STARTED`] line on descriptor 3, or the error of
/// a sandbox that was never set up: not at a timeout, which may come
/// first, nor when the kernel killed a process of the run for its memory
/// (`exceeded`), which the answer names as for any run.
fn set_up(mut outcome: Outcome, exceeded: Exceeded) -> Result<Outcome, SandboxError> {
    let side = &mut outcome.side_output;
    if let Some(listing) = side.bytes.strip_prefix(STARTED) {
        side.bytes = listing.to_vec();
        side.total_bytes = side.total_bytes.saturating_sub(STARTED.len() as u64);
        return Ok(outcome);
    }
    if outcome.timed_out || exceeded.memory {
        return Ok(outcome);
    }
    let message = String::from_utf8_lossy(&outcome.stderr.bytes).trim().chars().take(SETUP_MESSAGE_MAX_CHARS).collect();
    Err(SandboxError::Setup(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_code_is_one_argument_after_the_script() {
        let settings = Settings::try_parse_from(["code_runner"]).unwrap();
        let args = Sandbox::new(&settings).unwrap().arguments("print(1)");
        let script = args.iter().position(|arg| arg == SCRIPT).unwrap();
        assert_eq!(&args[script + 1..script + 4], ["sh", "/usr/bin/python3", "print(1)"]);
        assert_eq!(args[script + 5..], ["32", "16384", "65536"]);
        assert!(args.iter().any(|arg| arg == "--unshare-all") && args.iter().any(|arg| arg == "--clearenv"));
        assert!(SCRIPT.starts_with(&format!("echo {} >&3\n", String::from_utf8_lossy(STARTED).trim_end())));
        let seccomp = args.iter().position(|arg| arg == "--seccomp").unwrap();
        assert!(seccomp < script && args[seccomp + 1] == "4", "{args:?}");
    }

    #[test]
    fn a_shell_killed_for_memory_before_its_first_line_is_a_run_not_a_setup_failure() {
        let killed = |timed_out| Outcome {
            exit: limited_process::Exit::Signal(9),
            timed_out,
            stdout: Default::default(),
            stderr: Default::default(),
            side_output: Default::default(),
            duration: Duration::from_millis(5),
        };
        let memory = Exceeded { memory: true, processes: false };
        assert_eq!(set_up(killed(false), memory).unwrap().exit, limited_process::Exit::Signal(9));
        assert!(set_up(killed(true), Exceeded::default()).is_ok());
        let error = set_up(killed(false), Exceeded { memory: false, processes: true }).unwrap_err();
        assert!(matches!(error, SandboxError::Setup(_)), "{error}");
    }
}
