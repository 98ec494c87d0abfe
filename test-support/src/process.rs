//! A real binary of the workspace, started on a port the kernel picks.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde_json::Value;

use crate::ModuleClient;

/// How long a started binary may take to log that it listens.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Process::start_failing`] waits, once the binary has exited,
/// for the ends of its pipes (held open past then only by a process it left
/// running).
const PIPE_DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Log targets whose "listening" event must survive any `RUST_LOG` a test sets.
const LISTENING_TARGETS: &str = "module_sdk::server=info,orchestrator::server=info";

/// A running binary, killed and reaped when dropped (even when a test panics).
///
/// Its waiting methods (`start`, `terminate`, `wait_for_log*`) block the
/// calling thread. In a `#[tokio::test]` (one thread) nothing else on the
/// test's runtime runs meanwhile: a test that has calls in flight from
/// spawned tasks, or serves the binary from its own runtime, while it waits,
/// runs multi-threaded (`flavor = "multi_thread"`) or waits in
/// `tokio::task::spawn_blocking`.
pub struct Process {
    child: Child,
    address: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `command` with `HOST=127.0.0.1`, `PORT=0` and `LOG_FORMAT=json`
    /// (set them on `command` to override) and waits until it logs an event
    /// whose message ends in `listening` with the `address` it bound.
    ///
    /// `RUST_LOG` defaults to `info`; when the command sets another filter,
    /// the listening events are kept anyway. Everything the process writes on
    /// stdout and stderr is kept, line by line, for [`Process::logs`]. Panics
    /// with those logs when the process exits or does not listen within
    /// [`START_TIMEOUT`].
    pub fn start(command: Command) -> Self {
        let (program, mut child) = spawn(command);

        let logs = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address_rx) = mpsc::channel();
        collect_lines(child.stdout.take().expect("stdout is piped"), Arc::clone(&logs), Some(address_tx));
        collect_lines(child.stderr.take().expect("stderr is piped"), Arc::clone(&logs), None);

        let deadline = Instant::now() + START_TIMEOUT;
        let address = loop {
            match address_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(address) => break address,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    if let Ok(Some(status)) = child.try_wait() {
                        // Let the readers catch the last lines before reporting.
                        std::thread::sleep(Duration::from_millis(100));
                        panic!("{program} exited ({status}) before listening; its output:\n{}", joined(&logs));
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{program} did not listen within {START_TIMEOUT:?}; its output:\n{}", joined(&logs));
                }
            }
        };
        Self { child, address, logs }
    }

    /// Starts `command` as [`Process::start`] does, for a binary that must
    /// refuse to start: waits up to [`START_TIMEOUT`] for it to exit, checks
    /// that it failed with `exit_code` (an error's, such as
    /// `module_sdk::run_main`'s 1, not a panic's 101) and gives its standard
    /// error. Panics with its output otherwise.
    pub fn start_failing(command: Command, exit_code: i32) -> String {
        let (program, mut child) = spawn(command);
        // Both pipes are drained while it runs: one it filled would block it.
        let (stdout, stderr) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let readers = [
            collect_lines(child.stdout.take().expect("stdout is piped"), Arc::clone(&stdout), None),
            collect_lines(child.stderr.take().expect("stderr is piped"), Arc::clone(&stderr), None),
        ];
        let deadline = Instant::now() + START_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let status = child.wait().expect("the child is reaped");
        // A process it started may hold the pipes open: the output so far is
        // taken after a while, its readers left behind.
        let drained = Instant::now() + PIPE_DRAIN_TIMEOUT;
        while readers.iter().any(|reader| !reader.is_finished()) && Instant::now() < drained {
            std::thread::sleep(Duration::from_millis(20));
        }
        for reader in readers.into_iter().filter(|reader| reader.is_finished()) {
            let _ = reader.join();
        }
        let (stdout, stderr) = (joined(&stdout), joined(&stderr));
        assert_eq!(
            status.code(),
            Some(exit_code),
            "{program} did not fail with exit code {exit_code}; its output:\n{stdout}\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{program} panicked:\n{stderr}");
        stderr
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://ADDRESS`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A client of this process's HTTP API.
    pub fn client(&self) -> ModuleClient {
        ModuleClient::new(self.url())
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its peak resident memory so far, in bytes (`VmHWM` of
    /// `/proc/<pid>/status`), for the tests that check a memory budget.
    /// Panics when the process is gone or the kernel does not report it.
    pub fn peak_rss_bytes(&self) -> u64 {
        let path = format!("/proc/{}/status", self.child.id());
        let status = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        vm_hwm_bytes(&status).unwrap_or_else(|| panic!("no VmHWM line in {path}"))
    }

    /// Every line it wrote so far, stdout and stderr interleaved as read.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The log lines that are JSON events, parsed.
    pub fn events(&self) -> Vec<Value> {
        self.logs().iter().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    /// Waits up to `within` for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str, within: Duration) -> bool {
        self.wait_for_log_line(|line| line.contains(needle), within)
    }

    /// Waits up to `within` for a log line that `matches`: a line the
    /// process wrote is read by another thread, so it may arrive a little
    /// after the answer that followed it.
    pub fn wait_for_log_line(&self, matches: impl Fn(&str) -> bool, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.logs().iter().any(|line| matches(line)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills it with SIGKILL, as a crash would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to 10 s for it to exit (then SIGKILL).
    pub fn terminate(&mut self) -> ExitStatus {
        signal(self.child.id(), Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return self.child.wait().expect("the child is reaped");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGSTOP: the process stays, holding its sockets, and answers
    /// nothing (a hung dependency) until [`Process::resume`].
    pub fn pause(&self) {
        signal(self.child.id(), Signal::STOP);
    }

    /// Sends SIGCONT after [`Process::pause`].
    pub fn resume(&self) {
        signal(self.child.id(), Signal::CONT);
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `command` with `HOST=127.0.0.1`, `PORT=0`, `LOG_FORMAT=json` and
/// `RUST_LOG=info` unless it sets them (another `RUST_LOG` keeps the
/// listening events), standard input closed and its output piped; the
/// program's name with the child.
fn spawn(mut command: Command) -> (String, Child) {
    let log_filter = command
        .get_envs()
        .find(|(key, _)| *key == "RUST_LOG")
        .and_then(|(_, value)| value)
        .map(|value| format!("{},{LISTENING_TARGETS}", value.to_string_lossy()))
        .unwrap_or_else(|| "info".to_owned());
    for (name, default) in [("HOST", "127.0.0.1"), ("PORT", "0"), ("LOG_FORMAT", "json")] {
        if !command.get_envs().any(|(key, value)| key == name && value.is_some()) {
            command.env(name, default);
        }
    }
    command.env("RUST_LOG", log_filter).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let program = command.get_program().to_string_lossy().into_owned();
    let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    (program, child)
}

/// Reads `stream` line by line into `logs` on a thread of its own, to its
/// end (a line that is not UTF-8 is kept with U+FFFD, and the pipe is still
/// drained); the first JSON event whose message ends in "listening" sends
/// its `address`. The thread ends with the stream.
fn collect_lines(
    stream: impl Read + Send + 'static,
    logs: Arc<Mutex<Vec<String>>>,
    mut address_tx: Option<mpsc::Sender<SocketAddr>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut bytes = Vec::new();
        while matches!(reader.read_until(b'\n', &mut bytes), Ok(read) if read > 0) {
            let text = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
            let line = String::from_utf8_lossy(text.strip_suffix(b"\r").unwrap_or(text)).into_owned();
            bytes.clear();
            if let Some(tx) = &address_tx
                && let Some(address) = listening_address(&line)
            {
                let _ = tx.send(address);
                address_tx = None;
            }
            logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
        }
    })
}

/// The `address` of a JSON "... listening" event.
fn listening_address(line: &str) -> Option<SocketAddr> {
    let event: Value = serde_json::from_str(line).ok()?;
    let message = event.get("message").or_else(|| event.pointer("/fields/message"))?.as_str()?;
    if !message.ends_with("listening") {
        return None;
    }
    let address = event.get("address").or_else(|| event.pointer("/fields/address"))?.as_str()?;
    address.parse().ok()
}

/// Sends `signal` to process `pid`, ignoring a process already gone.
fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// The `VmHWM:   1234 kB` line of a `/proc/<pid>/status` text, in bytes.
fn vm_hwm_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?;
    let kibibytes: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kibibytes.checked_mul(1024)
}

fn joined(logs: &Mutex<Vec<String>>) -> String {
    logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).join("\n")
}

#[cfg(test)]
mod tests {
    use super::{Process, listening_address, vm_hwm_bytes};

    #[test]
    fn a_failing_childs_output_is_read_whole_past_bytes_not_utf8() {
        // 256 KiB of 0xff fill stdout's pipe four times over (the child
        // only gets to its exit if the pipe is read), and a line of standard
        // error that is not UTF-8 comes before the last one.
        let script =
            "head -c 262144 /dev/zero | tr '\\000' '\\377'; printf 'bad \\377\\n' >&2; echo 'the end' >&2; exit 3";
        let mut command = std::process::Command::new("sh");
        command.args(["-c", script]);
        let stderr = Process::start_failing(command, 3);
        assert_eq!(stderr, "bad \u{fffd}\nthe end");
    }

    #[test]
    fn a_failing_child_that_leaves_a_process_holding_its_pipes_does_not_hang_the_test() {
        // The background `sleep` keeps both pipes open long after its parent exits.
        let mut command = std::process::Command::new("sh");
        command.args(["-c", "sleep 600 & echo \"left $!\" >&2; exit 3"]);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || done_tx.send(Process::start_failing(command, 3)));
        let stderr = done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("start_failing returned");
        let pid: i32 = stderr.trim().strip_prefix("left ").and_then(|pid| pid.parse().ok()).expect("pid of sleep");
        let _ =
            rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), rustix::process::Signal::KILL);
    }

    #[test]
    fn reads_the_peak_resident_memory_of_a_status_text() {
        let status = "Name:\tresearch\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(vm_hwm_bytes(status), Some(2048 * 1024));
        assert_eq!(vm_hwm_bytes("Name:\tresearch\n"), None);
    }

    #[test]
    fn reads_the_address_of_a_listening_event() {
        let flat = r#"{"message":"module listening","address":"127.0.0.1:4321"}"#;
        let nested = r#"{"fields":{"message":"orchestrator listening","address":"127.0.0.1:99"}}"#;
        assert_eq!(listening_address(flat).unwrap().port(), 4321);
        assert_eq!(listening_address(nested).unwrap().port(), 99);
        assert_eq!(listening_address(r#"{"message":"module stopped","address":"127.0.0.1:1"}"#), None);
        assert_eq!(listening_address("module listening on 127.0.0.1:1"), None);
    }
}
