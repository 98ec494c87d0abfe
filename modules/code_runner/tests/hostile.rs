//! Whole-process tests: the real `code_runner` binary against hostile
//! code (each time: the module answers, in about the run's timeout, and
//! nothing the code started is left), against honest code, and with run
//! cgroups under a parent of the test's (CODE_CGROUP_PARENT).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::{ModuleClient, Process, error_kind};

/// The module's service token; the code must not be able to read it.
const TOKEN: &str = "svc-token-5e1f0c9b-never-in-the-sandbox";

/// Another secret in the module's environment.
const SECRET: &str = "secret-value-77c2a1d4-never-in-the-sandbox";

/// The tool under test.
const TOOL: &str = "code_runner.execute_code";

/// A generous bound on the cleanup after a run's timeout, only so a hang
/// fails the test instead of blocking it (not a speed requirement; the
/// benchmark measures speed).
const HANG_GUARD: Duration = Duration::from_secs(10);

struct Runner {
    process: Process,
    client: ModuleClient,
}

/// The next module's first sandbox user id: each module of this test
/// binary gets its own range (and none the default range of other tests),
/// so a fork bomb here uses up no other module's process cap.
static NEXT_UID_BASE: AtomicU32 = AtomicU32::new(62_000);

fn start() -> Runner {
    start_with(&[])
}

/// Starts the module with `settings` on top of the test's own.
fn start_with(settings: &[(&str, &str)]) -> Runner {
    let mut command = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    command
        .env("CODE_SANDBOX_UID_BASE", NEXT_UID_BASE.fetch_add(16, Ordering::Relaxed).to_string())
        .env("SERVICE_AUTH_TOKEN", TOKEN)
        .env("CODE_TEST_SECRET", SECRET)
        .env("CODE_MAX_OUTPUT_BYTES", "65536")
        .env("CODE_MAX_RUNS_PER_USER", "8")
        .envs(settings.iter().copied());
    let process = Process::start(command);
    let client = process.client().with_token(TOKEN);
    Runner { process, client }
}

impl Runner {
    /// Runs `code` (tagged with a marker) with `timeout` seconds; returns the
    /// result after checking that the module still answers, within the
    /// hang guard, and that no process of the run is left.
    async fn run(&mut self, code: &str, timeout: u64) -> Value {
        self.run_with(code, timeout, None).await
    }

    async fn run_with(&mut self, code: &str, timeout: u64, stdin: Option<&str>) -> Value {
        let marker = format!("marker-{}-{}", std::process::id(), rand_suffix());
        let tagged = format!("# {marker}\n{code}");
        let started = Instant::now();
        let arguments = json!({"code": tagged, "timeout_seconds": timeout, "stdin": stdin});
        let result = self.client.call_ok(TOOL, arguments, Some("tester")).await;
        let elapsed = started.elapsed();
        eprintln!("answered in {elapsed:?} (timeout {timeout} s)");
        assert!(elapsed < Duration::from_secs(timeout) + HANG_GUARD, "no answer within the guard: {elapsed:?}");
        assert!(self.process.is_running(), "the module died");
        assert_eq!(self.client.health().await["status"], "ok");
        let left = processes_with(&marker);
        assert!(left.is_empty(), "processes of the run outlived its answer: {left:?}");
        let text = result.to_string();
        assert!(!text.contains(TOKEN) && !text.contains(SECRET), "a secret leaked: {text}");
        result
    }
}

/// A random enough suffix for markers, without another dependency.
fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

/// Processes whose command line contains `marker` (the code is an argument
/// of bubblewrap, of the shell and of Python, and stays in forked children).
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(format!("{name}: {stat}"));
        }
    }
    found
}

fn text(result: &Value, field: &str) -> String {
    result[field].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_fork_bomb_is_contained_and_others_still_run() {
    let mut runner = start();
    let bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass";
    let honest = runner.client.clone();
    let (result, neighbour) = tokio::join!(runner.run(bomb, 3), async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        honest.call_ok(TOOL, json!({"code": "print(sum(range(10)))"}), Some("neighbour")).await
    });
    assert_eq!(result["timed_out"], true, "{result}");
    assert_eq!(result["signal"], 9);
    // The run's own process count (its cgroup's pids.max) stopped the bomb.
    assert_eq!(result["exceeded_budgets"], json!(["CODE_PROCESSES"]), "{result}");
    assert_eq!(text(&neighbour, "stdout"), "45\n", "a run beside the bomb: {neighbour}");
}

#[tokio::test]
async fn memory_is_bounded_per_run_not_per_process() {
    // Five children of 300 MiB each: every one is far below the per-process
    // limit (CODE_ADDRESS_SPACE_BYTES, 1 GiB), together they are three
    // times the run's 512 MiB. Each holds its memory until all have tried.
    let mut runner = start_with(&[("CODE_MEMORY_BYTES", "536870912")]);
    let children = r#"
import os, time
children = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        block = bytearray(300 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        os._exit(0)
    children.append(pid)
statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
print(statuses.count(0), "held", statuses.count(-9), "killed")
"#;
    let result = runner.run(children, 30).await;
    assert_eq!(result["exceeded_budgets"], json!(["CODE_MEMORY_BYTES"]), "{result}");
    // At most one child's 300 MiB fits in the run's 512 MiB at a time.
    let stdout = text(&result, "stdout");
    let held: u32 = stdout.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(u32::MAX);
    assert!(held <= 1 && stdout.contains("killed"), "{result}");
    assert_eq!(result["exit_code"], 0, "the parent is not what the kernel killed: {result}");
}

#[tokio::test]
async fn memory_cpu_output_and_file_size_are_bounded() {
    let mut runner = start();
    let memory = runner.run("x = bytearray(10 * 1024 ** 3)", 10).await;
    assert_eq!(memory["exit_code"], 1, "{memory}");
    assert!(text(&memory, "stderr").contains("MemoryError"), "{memory}");

    let endless = runner.run("while True:\n    pass", 2).await;
    assert_eq!((endless["timed_out"].clone(), endless["exit_code"].clone()), (json!(true), Value::Null), "{endless}");

    let flood =
        runner.run("import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)", 10).await;
    assert_eq!(flood["truncated"], true, "{flood}");
    assert_eq!(text(&flood, "stdout").len(), 65536);

    let big_file = "with open('big', 'wb') as f:\n    for _ in range(10240):\n        f.write(bytes(1 << 20))";
    let big = runner.run(big_file, 10).await;
    assert_ne!(big["exit_code"], 0, "{big}");
    assert!(text(&big, "stderr").contains("File too large"), "{big}");
    let sizes: Vec<u64> = big["files"].as_array().unwrap().iter().filter_map(|f| f["size"].as_u64()).collect();
    assert!(sizes.iter().all(|&size| size <= 16 << 20), "{sizes:?}");
}

#[tokio::test]
async fn host_files_environment_and_network_are_out_of_reach() {
    let mut runner = start();
    let binary = env!("CARGO_BIN_EXE_code_runner");
    let port = runner.process.address().port();
    let code = format!(
        r#"
import os, socket
def attempt(what, action):
    try:
        print(what, "OPEN", repr(action())[:200])
    except Exception as error:
        print(what, "DENIED", type(error).__name__)
attempt("shadow", lambda: open("/etc/shadow").read())
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("environ1", lambda: open("/proc/1/environ", "rb").read())
attempt("binary", lambda: open({binary:?}, "rb").read(10))
attempt("module", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
attempt("loopback", lambda: socket.create_connection(("127.0.0.1", 22), timeout=2))
attempt("internet", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
everything = b""
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            everything += open(f"/proc/{{pid}}/environ", "rb").read()
        except OSError:
            pass
print("env", dict(os.environ))
print("procs", everything)
host_own = ["/usr/local/bin", "/usr/local/etc", "/usr/local/sbin", "/usr/etc", "/usr/src"]
print("usr-visible", [path for path in host_own if os.path.isdir(path) and os.listdir(path)])
"#
    );
    let result = runner.run(&code, 20).await;
    let stdout = text(&result, "stdout");
    for what in ["shadow", "passwd", "binary", "module", "loopback", "internet"] {
        assert!(stdout.contains(&format!("{what} DENIED")), "{what}: {stdout}");
    }
    assert!(!stdout.contains("CODE_TEST_SECRET") && !stdout.contains("SERVICE_AUTH_TOKEN"), "{stdout}");
    // The host's own programs and configuration under /usr are covered.
    assert!(stdout.contains("usr-visible []"), "{stdout}");
}

#[tokio::test]
async fn escaping_children_and_kill_all_leave_nothing() {
    let mut runner = start();
    let double_fork = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n    os._exit(0)\nprint('parent done')";
    let detached = runner.run(double_fork, 5).await;
    assert_eq!(text(&detached, "stdout"), "parent done\n", "{detached}");

    let waiting = runner.run(&format!("{double_fork}\nimport time\ntime.sleep(600)"), 2).await;
    assert_eq!(waiting["timed_out"], true, "{waiting}");

    let kill_all = runner.run("import os\nos.kill(-1, 9)\nprint('still here')", 5).await;
    assert_eq!(kill_all["signal"], 9, "{kill_all}");

    let outside = r#"
import os
for path in ["/usr/evil", "/usr/local/evil", "/evil", "/proc/evil", "/dev/evil", "/tmp/../evil", "/work/../evil"]:
    try:
        open(path, "w").write("x")
        print(path, "WRITTEN")
    except OSError as error:
        print(path, "DENIED", error.errno)
open("/tmp/inside", "w").write("ok")
print("tmp", open("/tmp/inside").read())
"#;
    let written = runner.run(outside, 5).await;
    let stdout = text(&written, "stdout");
    assert!(!stdout.contains("WRITTEN"), "{stdout}");
    assert!(stdout.contains("tmp ok"), "{stdout}");
    assert!(!std::path::Path::new("/tmp/inside").exists() || std::fs::read_to_string("/tmp/inside").unwrap() != "ok");
}

#[tokio::test]
async fn honest_programs_get_their_answers() {
    let mut runner = start();
    let imports = "import json, math, re, datetime, collections, itertools, statistics, decimal, fractions, hashlib\n\
                   print(json.dumps({'pi': round(math.pi, 3), 'mean': statistics.mean([1, 2, 3])}))";
    assert_eq!(text(&runner.run(imports, 10).await, "stdout"), "{\"pi\": 3.142, \"mean\": 2}\n");

    let echo = runner.run_with("import sys\nprint(sys.stdin.read().upper(), end='')", 10, Some("héllo\nwörld")).await;
    assert_eq!(text(&echo, "stdout"), "HÉLLO\nWÖRLD");

    let failing = runner.run("def f():\n    raise ValueError('bad value')\nf()", 10).await;
    assert_eq!(failing["exit_code"], 1);
    assert_eq!(failing["signal"], Value::Null);
    let stderr = text(&failing, "stderr");
    assert!(stderr.contains("Traceback") && stderr.contains("ValueError: bad value"), "{stderr}");

    let unicode = runner.run("print('日本語 ✓ émoji 🎉')", 10).await;
    assert_eq!(text(&unicode, "stdout"), "日本語 ✓ émoji 🎉\n");

    let files = "import os\nopen('report.txt', 'w').write('total: 3\\n')\nos.mkdir('data')\nopen('data/raw.bin', 'wb').write(bytes([0, 255]))";
    let made = runner.run(files, 10).await;
    let listed: Vec<Value> = made["files"].as_array().unwrap().clone();
    assert_eq!(
        listed,
        vec![
            json!({"name": "report.txt", "size": 9, "content": "total: 3\n"}),
            json!({"name": "data/raw.bin", "size": 2})
        ],
        "{made}"
    );
    assert_eq!(made["files_truncated"], false);

    // 40 threads, below CODE_PROCESSES (64): the address space limit per
    // process (CODE_ADDRESS_SPACE_BYTES) must not be what stops them.
    let threads = "import threading\nstop = threading.Event()\nthreads = [threading.Thread(target=stop.wait) for _ in range(40)]\nfor t in threads:\n    t.start()\nstop.set()\nprint(len(threads), 'threads')";
    let pool = runner.run(threads, 10).await;
    assert_eq!(text(&pool, "stdout"), "40 threads\n", "{pool}");

    // Deeper than the lister can walk: the files cannot all be listed, and the answer says so.
    let deep = "import os\nfor _ in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nopen('leaf', 'w').write('x')";
    let nested = runner.run(deep, 10).await;
    assert_eq!((nested["exit_code"].clone(), nested["files_truncated"].clone()), (json!(0), json!(true)), "{nested}");

    let silent = runner.run("pass", 10).await;
    assert_eq!((silent["exit_code"].clone(), silent["files"].clone()), (json!(0), json!([])));
}

#[tokio::test]
async fn budgets_are_enforced_before_running() {
    let runner = start();
    let too_long = runner.client.call(TOOL, json!({"code": "#".repeat(64 * 1024 + 1)}), Some("u")).await;
    assert_eq!(error_kind(&too_long), "invalid_arguments");
    assert!(too_long["error"].as_str().unwrap().contains("CODE_MAX_BYTES"), "{too_long}");
    let manifest = runner.client.manifest().await;
    let tool = &manifest["tools"][0];
    assert_eq!(tool["requires_approval"], true);
    assert_eq!(tool["risk_level"], "high");
    assert_eq!(tool["annotations"]["open_world"], false);
    assert_eq!(tool["annotations"]["idempotent"], false);
}

#[tokio::test]
async fn a_broken_sandbox_refuses_code_and_says_why() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    command.env("CODE_BWRAP", "/nonexistent/bwrap");
    let process = Process::start(command);
    let client = process.client();
    let (status, health) = client.get("/health").await;
    assert_eq!(status, 503, "{health}");
    assert!(health["error"].as_str().unwrap().contains("/nonexistent/bwrap"), "{health}");
    let refused = client.call(TOOL, json!({"code": "print(1)"}), Some("u")).await;
    assert_eq!(error_kind(&refused), "unavailable", "{refused}");
}

#[tokio::test]
async fn a_module_without_root_runs_code_in_the_sandbox_too() {
    // As root, the test starts the module as nobody (setpriv); otherwise the
    // module already runs without root. Either way it cannot switch users, so
    // RLIMIT_NPROC counts every process of its user (other services running
    // as nobody included): the cap is set high here.
    let binary = env!("CARGO_BIN_EXE_code_runner");
    let mut command = if nix::unistd::Uid::effective().is_root() {
        let mut setpriv = Command::new("setpriv");
        setpriv.args(["--reuid=65534", "--regid=65534", "--clear-groups", binary]);
        setpriv
    } else {
        Command::new(binary)
    };
    command.env("CODE_PROCESSES", "4096");
    let mut refusing = Command::new(command.get_program());
    refusing.args(command.get_args()).env("CODE_PROCESSES", "4096");
    // As nobody (started by root) the module cannot make cgroups, and runs
    // code only when told to accept limits per process.
    command.env("CODE_PER_PROCESS_LIMITS_ONLY", "true");
    let process = Process::start(command);
    let client = process.client();
    assert_eq!(client.health().await["status"], "ok");
    let result = client.call_ok(TOOL, json!({"code": "import os\nprint(os.getuid() != 0)"}), Some("u")).await;
    assert_eq!(text(&result, "stdout"), "True\n", "{result}");
    let network = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), timeout=2)\nexcept OSError as error:\n    print(type(error).__name__)";
    let refused = client.call_ok(TOOL, json!({"code": network}), Some("u")).await;
    assert_eq!(text(&refused, "stdout"), "ConnectionRefusedError\n", "{refused}");

    if !nix::unistd::Uid::effective().is_root() {
        // A user's own cgroups may be delegated to it: nothing to refuse then.
        return;
    }
    let without_cgroups = Process::start(refusing);
    let client = without_cgroups.client();
    let (status, health) = client.get("/health").await;
    assert_eq!(status, 503, "{health}");
    assert!(health["error"].as_str().unwrap().contains("CODE_PER_PROCESS_LIMITS_ONLY"), "{health}");
    let refused = client.call(TOOL, json!({"code": "print(1)"}), Some("u")).await;
    assert_eq!(error_kind(&refused), "unavailable", "{refused}");
}

/// The hierarchies a cgroup path is taken in: the cgroup v1 mounts of the
/// memory, pids and cpu controllers, or the cgroup v2 mount where there are none.
fn cgroup_mounts() -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (mut legacy, mut unified) = (Vec::new(), Vec::new());
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let point = PathBuf::from(left.split(' ').nth(4).unwrap());
        let right: Vec<&str> = right.split(' ').collect();
        let options = right.get(2).copied().unwrap_or_default();
        match right[0] {
            "cgroup" if options.split(',').any(|o| ["memory", "pids", "cpu"].contains(&o)) => legacy.push(point),
            "cgroup2" => unified.push(point),
            _ => {}
        }
    }
    if legacy.is_empty() { unified } else { legacy }
}

/// A cgroup the test makes at `path` in each hierarchy, for
/// CODE_CGROUP_PARENT; removed on drop, with any run cgroup left in it.
struct TestParent {
    path: String,
    dirs: Vec<PathBuf>,
}

impl TestParent {
    fn new(path: &str) -> Self {
        let mut parent = Self { path: path.to_owned(), dirs: Vec::new() };
        for mount in cgroup_mounts() {
            let dir = mount.join(path.trim_start_matches('/'));
            std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("a writable cgroup is needed: {}: {e}", dir.display()));
            parent.dirs.push(dir);
        }
        assert!(!parent.dirs.is_empty(), "no cgroup hierarchy is mounted");
        parent
    }

    /// The run cgroups in it, in every hierarchy.
    fn runs(&self) -> Vec<PathBuf> {
        let entries = self.dirs.iter().flat_map(|dir| std::fs::read_dir(dir).unwrap().flatten());
        let runs = entries.filter(|entry| entry.file_name().to_string_lossy().starts_with("code_runner-run-"));
        runs.map(|entry| entry.path()).collect()
    }
}

impl Drop for TestParent {
    fn drop(&mut self) {
        for run in self.runs() {
            let _ = std::fs::remove_dir(run);
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[tokio::test]
async fn run_cgroups_are_made_under_code_cgroup_parent() {
    let parent = TestParent::new(&format!("/code_runner-test-parent-{}", std::process::id()));
    // A run cgroup a killed module of this PID namespace left there (its
    // PID is beyond any pid_max): swept at start.
    let pidns = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata("/proc/self/ns/pid").unwrap());
    let left: Vec<PathBuf> =
        parent.dirs.iter().map(|dir| dir.join(format!("code_runner-run-{pidns}-{}-0-0", i32::MAX))).collect();
    left.iter().for_each(|dir| std::fs::create_dir(dir).unwrap());
    let mut runner = start_with(&[("CODE_CGROUP_PARENT", &parent.path), ("CODE_MEMORY_BYTES", "268435456")]);
    assert_eq!(parent.runs(), Vec::<PathBuf>::new(), "the sweep at start left these");
    let client = runner.client.clone();
    let code = "import time\ntime.sleep(8)\nprint('slept')";
    let sleeping =
        tokio::spawn(
            async move { client.call_ok(TOOL, json!({"code": code, "timeout_seconds": 30}), Some("u")).await },
        );
    // The run's cgroup, in each hierarchy, is under the parent, with the run's processes in it.
    let started = Instant::now();
    loop {
        let runs = parent.runs();
        let holding = |run: &PathBuf| !std::fs::read_to_string(run.join("cgroup.procs")).unwrap_or_default().is_empty();
        if runs.len() == parent.dirs.len() && runs.iter().all(holding) {
            break;
        }
        assert!(started.elapsed() < HANG_GUARD, "no run cgroup with processes under {:?}: {runs:?}", parent.dirs);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let slept = sleeping.await.unwrap();
    assert_eq!(text(&slept, "stdout"), "slept\n", "{slept}");
    assert_eq!(parent.runs(), Vec::<PathBuf>::new(), "the run's cgroups outlived it");
    // 400 MiB, far below CODE_ADDRESS_SPACE_BYTES (1 GiB), over the run's 256 MiB.
    let memory = runner.run("x = b'x' * (400 * 1024 * 1024)", 30).await;
    assert_eq!(memory["signal"], 9, "{memory}");
    assert_eq!(memory["exceeded_budgets"], json!(["CODE_MEMORY_BYTES"]), "{memory}");
}

#[test]
fn a_missing_cgroup_parent_stops_start_up_naming_the_setting() {
    let missing = format!("/code_runner-test-missing-{}", std::process::id());
    let mut command = Command::new(env!("CARGO_BIN_EXE_code_runner"));
    command.env("CODE_CGROUP_PARENT", &missing);
    let stderr = Process::start_failing(command, 1);
    assert!(stderr.contains(&format!("CODE_CGROUP_PARENT={missing}")), "{stderr}");
    assert!(stderr.contains(&format!("{missing} does not exist")), "{stderr}");
}

#[tokio::test]
async fn a_call_given_up_mid_run_leaves_no_run_cgroup() {
    let parent = TestParent::new(&format!("/code_runner-test-given-up-{}", std::process::id()));
    let runner = start_with(&[("CODE_CGROUP_PARENT", &parent.path)]);
    // Children that hold memory take a moment to exit once killed: the run's
    // cgroups cannot be removed at the instant the call is dropped.
    let code = "import os, time\nfor _ in range(30):\n    if os.fork() == 0:\n        block = bytearray(20 * 1024 * 1024)\n        for i in range(0, len(block), 4096):\n            block[i] = 1\n        time.sleep(600)\n        os._exit(0)\ntime.sleep(600)";
    let call = runner.client.call(TOOL, json!({"code": code, "timeout_seconds": 60}), Some("u"));
    let populated = async {
        let procs = |run: &PathBuf| std::fs::read_to_string(run.join("cgroup.procs")).unwrap_or_default();
        while !parent.runs().iter().any(|run| procs(run).lines().count() > 30) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        answer = call => panic!("the run ended by itself: {answer}"),
        () = populated => {}
        () = tokio::time::sleep(HANG_GUARD) => panic!("the run's children did not start: {:?}", parent.runs()),
    }
    // The call was dropped with its connection: the module gives the run up.
    let started = Instant::now();
    while !parent.runs().is_empty() {
        assert!(started.elapsed() < HANG_GUARD, "the given-up run's cgroups stay: {:?}", parent.runs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runner.client.health().await["status"], "ok");
}

#[tokio::test]
async fn a_descriptor_the_module_inherited_does_not_reach_the_code() {
    // The module started as a launcher may leave it (`exec module 9<>file`):
    // a host file open for writing on descriptor 9, without close-on-exec.
    let host_file = std::env::temp_dir().join(format!("code_runner-inherited-{}", std::process::id()));
    std::fs::write(&host_file, "").unwrap();
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", r#"exec "$0" 9<>"$1""#, env!("CARGO_BIN_EXE_code_runner")])
        .arg(&host_file)
        .env("CODE_SANDBOX_UID_BASE", NEXT_UID_BASE.fetch_add(16, Ordering::Relaxed).to_string())
        .env("SERVICE_AUTH_TOKEN", TOKEN);
    let process = Process::start(command);
    let mut runner = Runner { client: process.client().with_token(TOKEN), process };
    let code = "import os
try:
    os.write(9, b'escaped')
    print('WRITTEN')
except OSError as error:
    print('DENIED', error.errno)
print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))";
    let result = runner.run(code, 10).await;
    let written = std::fs::read_to_string(&host_file).unwrap();
    std::fs::remove_file(&host_file).unwrap();
    assert_eq!(written, "", "the code wrote a host file: {result}");
    // stdin, stdout, stderr, and the directory being listed.
    assert_eq!(text(&result, "stdout"), "DENIED 9\n[0, 1, 2, 3]\n", "{result}");
}

#[tokio::test]
async fn a_flood_of_empty_files_meets_the_runs_memory() {
    // No tmpfs size bounds empty files; the kernel memory of each (inode,
    // dentry) is charged to the run's memory cgroup.
    let mut runner = start_with(&[("CODE_MEMORY_BYTES", "67108864")]);
    let flood =
        "import os\nn = 0\nwhile True:\n    os.close(os.open(f'/tmp/{n}', os.O_CREAT | os.O_WRONLY))\n    n += 1";
    let result = runner.run(flood, 30).await;
    assert_eq!(result["timed_out"], false, "{result}");
    assert_eq!(result["exceeded_budgets"], json!(["CODE_MEMORY_BYTES"]), "{result}");
}

/// Python that calls `keyctl` and `add_key` with ctypes (no `keyutils` needed).
const KEYS: &str = "import ctypes
L = ctypes.CDLL(None, use_errno=True)
L.syscall.restype = ctypes.c_long
def find(description):
    key = L.syscall(250, 10, ctypes.c_long(-3), b'user', description, 0)
    if key < 0:
        return 'absent'
    value = ctypes.create_string_buffer(100)
    length = L.syscall(250, 11, ctypes.c_long(key), value, 100)
    return 'FOUND ' + repr(value.raw[:max(length, 0)])
";

#[tokio::test]
async fn runs_share_no_session_keyring_with_the_module_or_each_other() {
    // The module starts in a session keyring of its own (as a systemd
    // service, a login shell or a container does) holding a secret key.
    let wrapper = "import ctypes, os, sys
L = ctypes.CDLL(None, use_errno=True)
L.syscall.restype = ctypes.c_long
assert L.syscall(250, 1, b'module-session') > 0, ctypes.get_errno()
assert L.syscall(248, b'user', b'module-token', b'keyring-secret', 14, ctypes.c_long(-3)) > 0, ctypes.get_errno()
os.execv(sys.argv[1], sys.argv[1:])";
    let mut command = Command::new("/usr/bin/python3");
    command
        .args(["-c", wrapper, env!("CARGO_BIN_EXE_code_runner")])
        .env("CODE_SANDBOX_UID_BASE", NEXT_UID_BASE.fetch_add(16, Ordering::Relaxed).to_string())
        .env("SERVICE_AUTH_TOKEN", TOKEN);
    let process = Process::start(command);
    let mut runner = Runner { client: process.client().with_token(TOKEN), process };
    let module_key = runner.run(&format!("{KEYS}print(find(b'module-token'))"), 10).await;
    assert_eq!(text(&module_key, "stdout"), "absent\n", "{module_key}");
    // The seccomp filter refuses `add_key` (EPERM): no run can leave a key
    // for the next (the keyring of its own is the wall behind the filter,
    // tested in limited-process).
    let drop_off =
        "print(L.syscall(248, b'user', b'dropbox', b'from-run-a', 10, ctypes.c_long(-3)), ctypes.get_errno())";
    let left = runner.run(&format!("{KEYS}{drop_off}"), 10).await;
    assert_eq!(text(&left, "stdout"), "-1 1\n", "{left}");
}

#[tokio::test]
async fn the_seccomp_filter_refuses_kernel_calls_and_honest_programs_still_run() {
    let mut runner = start();
    let code = format!(
        r#"
import ctypes, os, subprocess, sys, threading, time
L = ctypes.CDLL(None, use_errno=True)
L.syscall.restype = ctypes.c_long
def attempt(name, *args):
    ctypes.set_errno(0)
    result = L.syscall(*args)
    print(name, result, ctypes.get_errno())
attempt("keyctl", {keyctl}, 0, ctypes.c_long(-3), 0)
attempt("add_key", {add_key}, b"user", b"k", b"v", 1, ctypes.c_long(-3))
attempt("ptrace", {ptrace}, 16, 999999, 0, 0)
attempt("process_vm_readv", {process_vm_readv}, 999999, 0, 0, 0, 0, 0)
attempt("unshare", {unshare}, 0x00000400)
attempt("io_uring_setup", {io_uring_setup}, 1, 0)
attempt("x32", {getpid} | 0x40000000)
open("/tmp/scratch", "w").write("tmp")
open("here.txt", "w").write("work")
threads = [threading.Thread(target=time.sleep, args=(0.01,)) for _ in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
child = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True)
print("honest", open("/tmp/scratch").read(), open("here.txt").read(), child.stdout.strip(), time.time() > 0, os.getpid())
"#,
        keyctl = libc::SYS_keyctl,
        add_key = libc::SYS_add_key,
        ptrace = libc::SYS_ptrace,
        process_vm_readv = libc::SYS_process_vm_readv,
        unshare = libc::SYS_unshare,
        io_uring_setup = libc::SYS_io_uring_setup,
        getpid = libc::SYS_getpid,
    );
    let result = runner.run(&code, 20).await;
    let stdout = text(&result, "stdout");
    // Each would answer otherwise: a keyring id, ESRCH, 0 (`CLONE_FILES`), EFAULT, ENOSYS.
    for name in ["keyctl", "add_key", "ptrace", "process_vm_readv", "unshare", "io_uring_setup", "x32"] {
        assert!(stdout.contains(&format!("{name} -1 1\n")), "{name} is not refused with EPERM: {result}");
    }
    assert!(stdout.contains("honest tmp work child True "), "{result}");
    assert_eq!(result["exit_code"], 0, "{result}");
}

/// A bubblewrap in a directory of its own named after `name`, that runs
/// `failing` (shell) instead while a flag file exists, and the real one
/// otherwise; the directory, the flag and the wrapper.
fn flagged_bwrap(name: &str, failing: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("code_runner-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flag = dir.join("fail");
    let wrapper = dir.join("bwrap");
    let script = format!("#!/bin/sh\nif [ -e {} ]; then\n{failing}\nfi\nexec /usr/bin/bwrap \"$@\"\n", flag.display());
    std::fs::write(&wrapper, script).unwrap();
    for path in [&dir, &wrapper] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    (dir, flag, wrapper)
}

#[tokio::test]
async fn a_sandbox_bubblewrap_cannot_start_or_set_up_is_unavailable_not_the_codes_failure() {
    // A bubblewrap that fails as a real one does when another run's fork
    // bomb took the processes its namespaces need, while a flag file exists.
    let failing = "  echo 'bwrap: Creating new namespace failed: Resource temporarily unavailable' >&2\n  exit 1";
    let (dir, flag, wrapper) = flagged_bwrap("bwrap", failing);
    let runner = start_with(&[("CODE_BWRAP", wrapper.to_str().unwrap())]);
    std::fs::write(&flag, "").unwrap();
    let refused = runner.client.call(TOOL, json!({"code": "print(1)"}), Some("u")).await;
    std::fs::remove_file(&flag).unwrap();
    assert_eq!(error_kind(&refused), "unavailable", "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("Creating new namespace failed"), "{refused}");
    // The code's own failure, even one that looks like bubblewrap's, stays the code's.
    let mimic = "import sys\nprint('bwrap: Creating new namespace failed', file=sys.stderr)\nsys.exit(1)";
    let own = runner.client.call_ok(TOOL, json!({"code": mimic}), Some("u")).await;
    assert_eq!(own["exit_code"], 1, "{own}");
    // A bubblewrap that cannot even be started (as when the module is out
    // of processes or descriptors, or its run cgroup is refused).
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let unstarted = runner.client.call(TOOL, json!({"code": "print(1)"}), Some("u")).await;
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(error_kind(&unstarted), "unavailable", "{unstarted}");
    assert!(unstarted["error"].as_str().unwrap().contains("cannot start"), "{unstarted}");
}

#[tokio::test]
async fn a_sandbox_killed_for_memory_before_the_code_ran_names_the_memory_budget() {
    // A bubblewrap whose set-up the kernel kills for the run's memory
    // (its cgroup's 64 MiB), before the shell's first line.
    let failing = "  /usr/bin/python3 -c \"x = b'x' * (256 << 20)\"\n  exit 1";
    let (dir, flag, wrapper) = flagged_bwrap("bwrap-memory", failing);
    let runner = start_with(&[("CODE_BWRAP", wrapper.to_str().unwrap()), ("CODE_MEMORY_BYTES", "67108864")]);
    std::fs::write(&flag, "").unwrap();
    let killed = runner.client.call(TOOL, json!({"code": "print(1)"}), Some("u")).await;
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(killed["success"], true, "answered as a run, not `unavailable`: {killed}");
    let result = &killed["result"];
    assert_eq!(result["exceeded_budgets"], json!(["CODE_MEMORY_BYTES"]), "{killed}");
    assert_eq!((result["exit_code"].clone(), result["stdout"].clone()), (json!(1), json!("")), "{killed}");
}
