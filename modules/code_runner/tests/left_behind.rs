//! Whole-process test: the run cgroups of a module killed mid-run are
//! emptied and removed when a module starts again, and run cgroups of
//! another PID namespace, of a live owner or of another name are not. A
//! test binary of its own, so no other module of this crate's tests starts
//! (and sweeps) meanwhile. Like `tests/hostile.rs`, it needs bubblewrap and
//! a writable cgroup, and fails without them.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::json;
use test_support::Process;

/// The module's service token.
const TOKEN: &str = "svc-token-left-behind";

/// A bound on waiting for the run to start, only so a hang fails the test.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn start() -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    command.env("CODE_SANDBOX_UID_BASE", "63000").env("SERVICE_AUTH_TOKEN", TOKEN);
    Process::start(command)
}

/// The `<pidns>-<pid>-<start>` a run cgroup's name records for process `pid`.
fn owner_of(pid: u32) -> String {
    let pidns = std::fs::metadata(format!("/proc/{pid}/ns/pid")).unwrap().ino();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(19).unwrap().to_owned();
    format!("{pidns}-{pid}-{start}")
}

/// Directories whose name starts with `prefix`, in any cgroup hierarchy
/// mounted under /sys/fs/cgroup.
fn cgroups_named(prefix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: u32, prefix: &str, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(prefix) {
                found.push(entry.path());
            } else if depth > 0 {
                walk(&entry.path(), depth - 1, prefix, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), 6, prefix, &mut found);
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

/// A `sleep` in cgroups made by the test (removed on drop, with it).
struct Planted {
    sleep: Child,
    dirs: Vec<PathBuf>,
}

impl Planted {
    /// Starts a `sleep` and writes it into the cgroup `name` below each of
    /// `parents` (made unless it exists).
    fn new(parents: &[PathBuf], name: &str) -> Self {
        let sleep = Command::new("sleep").arg("600").spawn().unwrap();
        let mut planted = Self { sleep, dirs: Vec::new() };
        for parent in parents {
            let dir = parent.join(name);
            if !dir.exists() {
                std::fs::create_dir(&dir).unwrap();
            }
            std::fs::write(dir.join("cgroup.procs"), planted.sleep.id().to_string()).unwrap();
            planted.dirs.push(dir);
        }
        planted
    }

    /// The `sleep`'s end, when it has ended within the hang guard.
    fn ended(&mut self) -> Option<std::process::ExitStatus> {
        let started = Instant::now();
        while started.elapsed() < HANG_GUARD {
            if let Some(status) = self.sleep.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = self.sleep.kill();
        let _ = self.sleep.wait();
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[tokio::test]
async fn a_killed_modules_run_cgroups_are_removed_at_the_next_start_and_no_others() {
    let mut first = start();
    assert_eq!(first.client().health().await["status"], "ok", "bubblewrap and a writable cgroup are needed");
    let marker = format!("left-behind-marker-{}", std::process::id());
    let code = format!("# {marker}\nimport time\ntime.sleep(120)");
    let client = first.client().with_token(TOKEN);
    let call = tokio::spawn(async move {
        client.try_call("code_runner.execute_code", json!({"code": code, "timeout_seconds": 60}), Some("u")).await
    });
    let started = Instant::now();
    while !processes_with(&marker).iter().any(|stat| stat.contains("(python3)")) {
        assert!(started.elapsed() < HANG_GUARD, "the run did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = owner_of(first.pid());
    let left = cgroups_named(&format!("code_runner-run-{killed}-"));
    assert!(!left.is_empty(), "no run cgroup named after the module");
    first.kill();
    assert!(call.await.unwrap().is_err(), "the killed module answered");
    assert!(left.iter().all(|dir| dir.exists()), "the killed module's run cgroups are gone by themselves");

    // bubblewrap dies with the module (--die-with-parent), and the sandbox's
    // processes with it, so a `sleep` stands in for a process still in the
    // run's cgroups (one that started while the module was being killed).
    let parents: Vec<PathBuf> = left.iter().map(|dir| dir.parent().unwrap().to_owned()).collect();
    let left_name = left[0].file_name().unwrap().to_str().unwrap().to_owned();
    let mut stand_in = Planted::new(&parents, &left_name);

    // Kept: another PID namespace's run (the killed module's PID and start
    // time, as a container's module could have), a live owner's (this
    // test's), and names that are not exactly of the scheme.
    let (pidns, rest) = killed.split_once('-').unwrap();
    let foreign = format!("code_runner-run-{}-{rest}-0", pidns.parse::<u64>().unwrap() + 1);
    let live = format!("code_runner-run-{}-0", owner_of(std::process::id()));
    let odd = [
        format!("code_runner-run-{killed}-00"),
        format!("code_runner-run-{killed}"),
        format!("code_runner-run-{killed}-1-"),
    ];
    let mut kept: Vec<Planted> = [foreign, live].iter().map(|name| Planted::new(&parents, name)).collect();
    kept.extend(odd.iter().map(|name| Planted::new(&parents, name)));

    let second = start();
    assert_eq!(second.client().health().await["status"], "ok");
    let still: Vec<&PathBuf> = left.iter().filter(|dir| dir.exists()).collect();
    assert!(still.is_empty(), "run cgroups of the killed module are still there: {still:?}");
    let status = stand_in.ended().expect("the process in the left cgroups still runs");
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert!(processes_with(&marker).is_empty(), "processes of the killed run are still there");
    for planted in &mut kept {
        assert!(planted.dirs.iter().all(|dir| dir.exists()), "removed: {:?}", planted.dirs);
        assert!(planted.sleep.try_wait().unwrap().is_none(), "killed: the process in {:?}", planted.dirs);
    }
    let named =
        |line: &str| line.contains("left behind") && left.iter().all(|dir| line.contains(&dir.display().to_string()));
    assert!(second.wait_for_log_line(named, HANG_GUARD), "{:?}", second.logs());
}
