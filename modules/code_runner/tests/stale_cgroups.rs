//! Whole-process test: the run cgroups of a module killed mid-run are
//! removed, with what is in them, when a module starts again. A test
//! binary of its own, so no other module starting meanwhile cleans them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::Process;

/// The module's service token.
const TOKEN: &str = "svc-token-stale-cgroups";

/// A bound on waiting for the run to start, only so a hang fails the test.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn start() -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    command.env("CODE_SANDBOX_UID_BASE", "63000").env("SERVICE_AUTH_TOKEN", TOKEN);
    Process::start(command)
}

/// Directories named `code_runner-run-PID-N` for module `pid`, in any
/// cgroup hierarchy mounted under /sys/fs/cgroup.
fn run_cgroups_of(pid: u32) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: u32, prefix: &str, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(path);
            } else if depth > 0 {
                walk(&path, depth - 1, prefix, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 6, &format!("code_runner-run-{pid}-"), &mut found);
    found
}

/// Live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(stat);
        }
    }
    found
}

#[tokio::test]
async fn a_killed_modules_run_cgroups_are_removed_at_the_next_start() {
    let mut first = start();
    let marker = format!("stale-marker-{}", std::process::id());
    let code = format!("# {marker}\nimport os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(120)");
    let client = first.client().with_token(TOKEN);
    let call = tokio::spawn(async move {
        client.try_call("code_runner.execute_code", json!({"code": code, "timeout_seconds": 60}), Some("u")).await
    });
    let started = Instant::now();
    while processes_with(&marker).len() < 2 {
        assert!(started.elapsed() < HANG_GUARD, "the run did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = first.pid();
    first.kill();
    assert!(call.await.unwrap().is_err(), "the killed module answered");
    let left = run_cgroups_of(pid);
    assert!(!left.is_empty(), "the killed module's run left no cgroup to clean");
    eprintln!("left behind: {left:?}; processes: {:?}", processes_with(&marker));

    let second = start();
    assert_eq!(second.client().health().await["status"], "ok");
    let still = run_cgroups_of(pid);
    assert!(still.is_empty(), "run cgroups of the killed module are still there: {still:?}");
    assert!(processes_with(&marker).is_empty(), "processes of the killed run are still there");
    let named = |line: &str| left.iter().all(|dir| line.contains(&dir.display().to_string()));
    assert!(
        second.wait_for_log_line(|line| line.contains("left behind") && named(line), HANG_GUARD),
        "{:?}",
        second.logs()
    );
}
