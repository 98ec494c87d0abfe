//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by the SDK).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use limited_process::Limits;

use crate::cgroup::RunBudget;

/// The largest code accepted at all: the code is one argument of `execve`,
/// and the kernel refuses a single argument over 128 KiB.
const CODE_MAX_BYTES_CEILING: u64 = 120 * 1024;

/// The largest CODE_MAX_OUTPUT_BYTES: an answer holds stdout and stderr,
/// each up to it, and JSON escapes a control byte as `\u0000` (6 bytes), so
/// they take at most 12 times it, 6 MiB, under the orchestrator's 8 MiB
/// answer limit (`MAX_ANSWER_BYTES`) with room for the rest of the answer.
const MAX_OUTPUT_BYTES_CEILING: u64 = 512 * 1024;

/// Settings of the code_runner module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the code_runner module: Python run in a bubblewrap sandbox.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// The bubblewrap binary.
    #[arg(long, env = "CODE_BWRAP", default_value = "/usr/bin/bwrap")]
    pub bwrap: PathBuf,

    /// The Python interpreter, as seen inside the sandbox (it must be under /usr).
    #[arg(long, env = "CODE_PYTHON", default_value = "/usr/bin/python3")]
    pub python: PathBuf,

    /// Largest `code`, in bytes.
    #[arg(long, env = "CODE_MAX_BYTES", default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(1..=CODE_MAX_BYTES_CEILING))]
    pub code_max_bytes: u64,

    /// Largest `stdin`, in bytes.
    #[arg(long, env = "CODE_STDIN_MAX_BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u64).range(0..=64 * 1024 * 1024))]
    pub stdin_max_bytes: u64,

    /// Wall-clock seconds a run gets when the call gives no `timeout_seconds`.
    #[arg(long, env = "CODE_DEFAULT_TIMEOUT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub default_timeout_seconds: u64,

    /// The largest `timeout_seconds` a call may ask for.
    #[arg(long, env = "CODE_MAX_TIMEOUT_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub max_timeout_seconds: u64,

    /// Bytes kept of stdout, and of stderr, each (the rest is read and
    /// dropped); at most 512 KiB, so that the answer stays under the
    /// orchestrator's 8 MiB.
    #[arg(long, env = "CODE_MAX_OUTPUT_BYTES", default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(1..=MAX_OUTPUT_BYTES_CEILING))]
    pub max_output_bytes: u64,

    /// CPU seconds each process of a run may use (RLIMIT_CPU).
    #[arg(long, env = "CODE_CPU_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub cpu_seconds: u64,

    /// Virtual memory each process of a run may map, in bytes (RLIMIT_AS).
    #[arg(long, env = "CODE_ADDRESS_SPACE_BYTES", default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(64 << 20..))]
    pub address_space_bytes: u64,

    /// Processes (and threads) a run may have at one time, all together
    /// (`pids.max` of its cgroup; also RLIMIT_NPROC of its user).
    #[arg(long, env = "CODE_PROCESSES", default_value_t = 64, value_parser = clap::value_parser!(u64).range(8..))]
    pub processes: u64,

    /// Memory a run may use, all its processes together, in bytes
    /// (`memory.max` of its cgroup, no swap); the kernel kills a process of
    /// a run that needs more.
    #[arg(long, env = "CODE_MEMORY_BYTES", default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(64 << 20..))]
    pub memory_bytes: u64,

    /// CPUs' worth of time a run may use at once, all its processes
    /// together (`cpu.max` of its cgroup), so a run uses at most this many
    /// times its timeout in CPU seconds.
    #[arg(long, env = "CODE_CPUS", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub cpus: u64,

    /// Run code without a cgroup per run when none can be made here: then
    /// only the per-process limits hold, and a run's total is
    /// CODE_PROCESSES times them. Without this, such a module refuses to run code.
    #[arg(long, env = "CODE_PER_PROCESS_LIMITS_ONLY")]
    pub per_process_limits_only: bool,

    /// The cgroup run cgroups are made under instead of the module's own,
    /// as `/proc/self/cgroup` writes a path (`/code_runner`,
    /// `/system.slice/x`): taken under each of the cgroup v1 memory, pids
    /// and cpu hierarchies, or under cgroup v2. When it cannot hold them,
    /// the module does not start.
    #[arg(long, env = "CODE_CGROUP_PARENT", value_parser = cgroup_path)]
    pub cgroup_parent: Option<String>,

    /// Files a process of a run may have open (RLIMIT_NOFILE).
    #[arg(long, env = "CODE_OPEN_FILES", default_value_t = 64, value_parser = clap::value_parser!(u64).range(16..))]
    pub open_files: u64,

    /// Largest file a run may write, in bytes (RLIMIT_FSIZE).
    #[arg(long, env = "CODE_FILE_SIZE_BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub file_size_bytes: u64,

    /// Size of each of a run's three in-memory file systems, the working
    /// directory, `/tmp` and `/dev/shm`, in bytes.
    #[arg(long, env = "CODE_TMPFS_BYTES", default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1 << 20..))]
    pub tmpfs_bytes: u64,

    /// Runs at one time; later calls wait for a turn.
    #[arg(long, env = "CODE_MAX_CONCURRENT_RUNS", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_concurrent_runs: u64,

    /// Runs of one user (the call's `user_id`) at one time; more are refused.
    #[arg(long, env = "CODE_MAX_RUNS_PER_USER", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_runs_per_user: u64,

    /// Seconds a call waits for a turn before it is answered `unavailable`.
    #[arg(long, env = "CODE_QUEUE_WAIT_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub queue_wait_seconds: u64,

    /// Most files of the working directory listed in an answer.
    #[arg(long, env = "CODE_FILES_MAX_COUNT", default_value_t = 32, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub files_max_count: u64,

    /// Largest file whose text is included in the answer, in bytes.
    #[arg(long, env = "CODE_FILE_CONTENT_MAX_BYTES", default_value_t = 16 * 1024, value_parser = clap::value_parser!(u64).range(0..=16 * 1024 * 1024))]
    pub file_content_max_bytes: u64,

    /// Bytes of file text included in one answer, all files together.
    #[arg(long, env = "CODE_FILES_MAX_CONTENT_BYTES", default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(0..=64 * 1024 * 1024))]
    pub files_max_content_bytes: u64,

    /// The first user id runs get when the module runs as root (the kernel
    /// does not enforce RLIMIT_NPROC for root): run slot `i` of
    /// CODE_MAX_CONCURRENT_RUNS runs as `base + i`, so each run's process cap
    /// is its own. Ignored when the module does not run as root.
    #[arg(long, env = "CODE_SANDBOX_UID_BASE", default_value_t = 61000, value_parser = clap::value_parser!(u32).range(1..))]
    pub sandbox_uid_base: u32,

    /// The group id runs get when the module runs as root.
    #[arg(long, env = "CODE_SANDBOX_GID", default_value_t = 65534, value_parser = clap::value_parser!(u32).range(1..))]
    pub sandbox_gid: u32,
}

/// A cgroup's path as `/proc/self/cgroup` writes it: absolute, with no
/// `.` or `..` that could lead out of the hierarchy.
fn cgroup_path(value: &str) -> Result<String, String> {
    if !value.starts_with('/') {
        return Err("a cgroup path starts with `/` (as in /proc/self/cgroup)".to_owned());
    }
    if value.split('/').any(|part| part == "." || part == "..") {
        return Err("a cgroup path has no `.` or `..` parts".to_owned());
    }
    Ok(value.to_owned())
}

impl Settings {
    /// The resource limits every process of a run gets.
    pub fn limits(&self) -> Limits {
        Limits {
            cpu_seconds: self.cpu_seconds,
            address_space_bytes: self.address_space_bytes,
            open_files: self.open_files,
            processes: self.processes,
            file_size_bytes: Some(self.file_size_bytes),
        }
    }

    /// The totals of one run, enforced by its cgroup.
    pub fn run_budget(&self) -> RunBudget {
        RunBudget { memory_bytes: self.memory_bytes, processes: self.processes, cpus: self.cpus }
    }

    /// The longest a call may wait for a turn.
    pub fn queue_wait(&self) -> Duration {
        Duration::from_secs(self.queue_wait_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let settings = Settings::try_parse_from(["code_runner"]).unwrap();
        assert_eq!((settings.sandbox_uid_base, settings.sandbox_gid), (61000, 65534));
        assert_eq!(settings.limits().file_size_bytes, Some(16 << 20));
        assert!(Settings::try_parse_from(["code_runner", "--code-max-bytes", "200000"]).is_err());
        assert!(Settings::try_parse_from(["code_runner", "--sandbox-uid-base", "0"]).is_err());
        assert!(Settings::try_parse_from(["code_runner", "--max-concurrent-runs", "0"]).is_err());
        assert_eq!(settings.run_budget(), RunBudget { memory_bytes: 1 << 30, processes: 64, cpus: 1 });
        assert!(!settings.per_process_limits_only);
        assert_eq!(settings.cgroup_parent, None);
    }

    #[test]
    fn output_is_bounded_so_the_answer_fits_the_orchestrators_limit() {
        let output = |value: &str| Settings::try_parse_from(["code_runner", "--max-output-bytes", value]);
        assert_eq!(output("524288").unwrap().max_output_bytes, 512 * 1024);
        let refused = output("524289").unwrap_err().to_string();
        assert!(refused.contains("--max-output-bytes") && refused.contains("524288"), "{refused}");
        // stdout and stderr escaped, with the default files listing, under 8 MiB.
        let settings = Settings::try_parse_from(["code_runner"]).unwrap();
        let caps = crate::sandbox::FileCaps {
            max_count: settings.files_max_count,
            content_max_bytes: settings.file_content_max_bytes,
            max_content_bytes: settings.files_max_content_bytes,
        };
        let worst = 2 * 6 * MAX_OUTPUT_BYTES_CEILING + caps.listing_max_bytes() as u64;
        assert!(worst < 8 * 1024 * 1024, "{worst}");
    }

    #[test]
    fn a_cgroup_parent_is_an_absolute_path_that_stays_in_its_hierarchy() {
        let parent = |value: &str| Settings::try_parse_from(["code_runner", "--cgroup-parent", value]);
        for good in ["/", "/code_runner", "/system.slice/x.service", "/a..b/.c"] {
            assert_eq!(parent(good).unwrap().cgroup_parent.as_deref(), Some(good));
        }
        for bad in ["", "code_runner", "/a/../b", "/..", "/a/./b"] {
            assert!(parent(bad).is_err(), "{bad:?}");
        }
    }
}
