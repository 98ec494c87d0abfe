//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by the SDK).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use limited_process::Limits;
use module_sdk::{PathSetting, PathUse};

use crate::slots::RunSlots;

/// The largest `SKILLS_MAX_MANIFEST_BYTES`: 3.75 MiB, under the
/// orchestrator's default MAX_MANIFEST_BYTES (4 MiB) by room for the
/// manifest's header and `list_skills` entry.
const MANIFEST_BYTES_CEILING: u64 = 3 * 1024 * 1024 + 768 * 1024;

/// `SKILLS_DIR`, for its errors.
pub const SKILLS_DIR: PathSetting =
    PathSetting { name: "SKILLS_DIR", what: "the skills directory", usage: PathUse::ReadDirectory };

/// Settings of the skills module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the skills module: the scripts described by SKILL.toml files, as tools.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// Directory whose subdirectories hold a `SKILL.toml` each; watched for changes.
    #[arg(long, env = "SKILLS_DIR", default_value = "./skills")]
    pub skills_dir: PathBuf,

    /// Timeout of a tool whose SKILL.toml gives no `timeout_seconds`.
    #[arg(long, env = "SKILL_DEFAULT_TIMEOUT_SECONDS", default_value_t = 30.0, value_parser = positive_seconds)]
    pub default_timeout_seconds: f64,

    /// The largest `timeout_seconds` a SKILL.toml may ask for.
    #[arg(long, env = "SKILL_MAX_TIMEOUT_SECONDS", default_value_t = 600.0, value_parser = positive_seconds)]
    pub max_timeout_seconds: f64,

    /// Bytes kept of a script's stdout, and of its stderr, when its SKILL.toml
    /// gives no `max_output_bytes`; also the most it may ask for.
    #[arg(long, env = "SKILL_MAX_OUTPUT_BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=64 * 1024 * 1024))]
    pub max_output_bytes: u64,

    /// CPU seconds a script may use (RLIMIT_CPU).
    #[arg(long, env = "SKILL_CPU_SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub cpu_seconds: u64,

    /// Virtual memory a script may map, in bytes (RLIMIT_AS).
    #[arg(long, env = "SKILL_ADDRESS_SPACE_BYTES", default_value_t = 2 << 30, value_parser = clap::value_parser!(u64).range(16 << 20..))]
    pub address_space_bytes: u64,

    /// Files a script may have open (RLIMIT_NOFILE).
    #[arg(long, env = "SKILL_OPEN_FILES", default_value_t = 256, value_parser = clap::value_parser!(u64).range(16..))]
    pub open_files: u64,

    /// Processes the module's user may have while a script runs (RLIMIT_NPROC,
    /// counted per user by the kernel; not enforced for root).
    #[arg(long, env = "SKILL_PROCESSES", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub processes: u64,

    /// Largest SKILL.toml read, in bytes.
    #[arg(long, env = "SKILL_FILE_MAX_BYTES", default_value_t = 256 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub skill_file_max_bytes: u64,

    /// The most skill tools served: skills load in directory-name order
    /// until one would pass it; that one and every later one are reported,
    /// not loaded.
    #[arg(long, env = "SKILLS_MAX_TOOLS", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_tools: u64,

    /// The most bytes the skill tools' manifest entries (JSON) may take
    /// together, kept under the orchestrator's MAX_MANIFEST_BYTES (4 MiB by
    /// default): skills load in directory-name order until one would pass
    /// it; that one and every later one are reported, not loaded. At most
    /// 3.75 MiB, leaving room for the rest of the manifest (its header and
    /// `list_skills`), which this does not count.
    #[arg(long, env = "SKILLS_MAX_MANIFEST_BYTES", default_value_t = 2 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=MANIFEST_BYTES_CEILING))]
    pub max_manifest_bytes: u64,

    /// Scripts running at once, all tools together; a call finding every
    /// slot taken waits for one within its tool's timeout.
    #[arg(long, env = "SKILLS_MAX_CONCURRENT_RUNS", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_concurrent_runs: u64,

    /// How long the module waits after a change under SKILLS_DIR before it
    /// reloads the tools (changes meanwhile join that reload), in milliseconds.
    #[arg(long, env = "SKILLS_WATCH_DEBOUNCE_MS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub watch_debounce_ms: u64,
}

impl Settings {
    /// The resource limits every script runs under.
    pub fn limits(&self) -> Limits {
        Limits {
            cpu_seconds: self.cpu_seconds,
            address_space_bytes: self.address_space_bytes,
            open_files: self.open_files,
            processes: self.processes,
            file_size_bytes: None,
        }
    }

    /// The script slots `max_concurrent_runs` allows.
    pub fn run_slots(&self) -> RunSlots {
        RunSlots::new(usize::try_from(self.max_concurrent_runs).unwrap_or(usize::MAX))
    }

    /// The reload debounce.
    pub fn debounce(&self) -> Duration {
        Duration::from_millis(self.watch_debounce_ms)
    }
}

/// The settings whose script limit in `limits` is above this process's own
/// hard limit: unless the module may raise its hard limits
/// (`CAP_SYS_RESOURCE`, and never past `fs.nr_open` for open files), no
/// script can start under them.
pub fn over_own_hard_limits(limits: &Limits) -> Vec<&'static str> {
    use rustix::process::{Resource, getrlimit};
    [
        ("SKILL_CPU_SECONDS", Resource::Cpu, limits.cpu_hard_seconds()),
        ("SKILL_ADDRESS_SPACE_BYTES", Resource::As, limits.address_space_bytes),
        ("SKILL_OPEN_FILES", Resource::Nofile, limits.open_files),
        ("SKILL_PROCESSES", Resource::Nproc, limits.processes),
    ]
    .into_iter()
    .filter(|(_, resource, value)| getrlimit(*resource).maximum.is_some_and(|hard| *value > hard))
    .map(|(name, ..)| name)
    .collect()
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 86_400.0 => Ok(seconds),
        _ => Err(format!("`{text}` is not a number of seconds between 0 (excluded) and 86400")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let settings = Settings::try_parse_from(["skills"]).unwrap();
        assert_eq!(settings.skills_dir, PathBuf::from("./skills"));
        assert_eq!(settings.limits().open_files, 256);
        assert!(Settings::try_parse_from(["skills", "--default-timeout-seconds", "0"]).is_err());
        assert!(Settings::try_parse_from(["skills", "--max-output-bytes", "0"]).is_err());
        assert!(Settings::try_parse_from(["skills", "--cpu-seconds", "lots"]).is_err());
        assert!(Settings::try_parse_from(["skills", "--max-manifest-bytes", "3932160"]).is_ok());
        // At the orchestrator's MAX_MANIFEST_BYTES the rest of the manifest would push it over.
        assert!(Settings::try_parse_from(["skills", "--max-manifest-bytes", "4194304"]).is_err());
    }
}
