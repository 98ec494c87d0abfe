//! One contained run of a program: spawn, read, wait, and clean up.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::unistd::Pid;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cgroup::join_before_exec;
use crate::descriptors::close_from_on_exec;
use crate::group::{ProcessGroupGuard, kill_group, stop_group};
use crate::limits::{Limits, apply_before_exec};
use crate::orphans::{adopt_orphans_below, kill_orphans, spawn_registered};
use crate::output::{Captured, read_capped};
use crate::parent_death::die_with_parent;
use crate::session_keyring::new_session_keyring;
use crate::side_input::pipe_to_fd4;
use crate::side_output::{SIDE_OUTPUT_FD, pipe_to_fd3};
use crate::tree::{kill_descendants, wait_exited};

/// How long the output readers may still run after the process group is
/// gone: a descendant that left the group may hold a pipe open.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What to run and under which limits; build with [`Run::new`].
#[derive(Debug, Clone)]
pub struct Run {
    program: OsString,
    args: Vec<OsString>,
    current_dir: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    limits: Limits,
    timeout: Duration,
    max_output_bytes: usize,
    stdin: Option<Vec<u8>>,
    user: Option<(u32, u32)>,
    side_output_bytes: Option<usize>,
    side_input: Option<Vec<u8>>,
    /// `cgroup.procs` files the child writes itself into before exec.
    cgroups: Vec<Arc<std::fs::File>>,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (SIGKILL after the timeout, SIGXCPU at the CPU limit...).
    Signal(i32),
}

/// The result of a run that started.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How it ended.
    pub exit: Exit,
    /// Whether it was killed for running past the timeout.
    pub timed_out: bool,
    /// Its standard output, capped.
    pub stdout: Captured,
    /// Its standard error, capped.
    pub stderr: Captured,
    /// What it wrote to descriptor 3, capped, when [`Run::side_output`] asked
    /// for it (else empty).
    pub side_output: Captured,
    /// Wall-clock time from spawn to exit.
    pub duration: Duration,
}

/// Why a program could not be run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started (not found, not executable, a
    /// limit or user that could not be set, a missing working directory,
    /// no descriptors left for the pipes).
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program, as given.
        program: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// Waiting for the program failed.
    #[error("lost track of `{program}`: {source}")]
    Wait {
        /// The program, as given.
        program: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

impl Run {
    /// Runs `program` (looked up in the allow-listed `PATH` when it has no
    /// slash) with `args`, an empty environment, stdin closed,
    /// [`Limits::default`], a 30 s timeout and 1 MiB per output stream.
    pub fn new<I, S>(program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            current_dir: None,
            env: Vec::new(),
            limits: Limits::default(),
            timeout: Duration::from_secs(30),
            max_output_bytes: 1 << 20,
            stdin: None,
            user: None,
            side_output_bytes: None,
            side_input: None,
            cgroups: Vec::new(),
        }
    }

    /// Gives the program `bytes` on its stdin, then end of file (instead of
    /// a closed stdin).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Runs the program as user `uid` and group `gid`, without supplementary
    /// groups (the caller needs the right to switch, usually root).
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Moves the program into the cgroup whose `cgroup.procs` is `procs`
    /// (opened for writing) between fork and exec, so that it and every
    /// descendant are in it before its first instruction; the spawn fails
    /// if the kernel refuses. Call once per hierarchy (cgroup v1).
    pub fn cgroup(mut self, procs: std::fs::File) -> Self {
        self.cgroups.push(Arc::new(procs));
        self
    }

    /// Reads what the program writes to descriptor 3 as a third output,
    /// keeping at most `max_bytes` ([`Outcome::side_output`]).
    pub fn side_output(mut self, max_bytes: usize) -> Self {
        self.side_output_bytes = Some(max_bytes);
        self
    }

    /// Gives the program `bytes` to read on descriptor 4
    /// ([`crate::SIDE_INPUT_FD`]), then end of file: input that is neither
    /// its stdin nor an argument (a filter bubblewrap reads with `--seccomp 4`).
    pub fn side_input(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.side_input = Some(bytes.into());
        self
    }

    /// Runs in `dir` instead of the caller's directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Adds one variable to the otherwise empty environment.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// The resource limits set before exec.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The wall-clock time after which the whole process group is killed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The most bytes kept of stdout, and of stderr, each.
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Runs the program to its end (or its timeout), then kills whatever is
    /// left of its process group. At the timeout, every descendant still
    /// attached to the program's tree dies too, even one that started its
    /// own session, and the run waits (up to half a second) until they have
    /// exited. In a process that called [`crate::become_subreaper`], the
    /// descendants that left the tree are killed and reaped after every
    /// exit, normal or not, so none outlives the run. The program is
    /// killed (SIGKILL) when the thread that calls this exits, the process
    /// with it: call it from threads that live as long as the process.
    pub async fn run(&self) -> Result<Outcome, RunError> {
        let program = self.program.to_string_lossy().into_owned();
        let spawn_error = |source| RunError::Spawn { program: program.clone(), source };
        let mut command = std::process::Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        join_before_exec(&mut command, self.cgroups.clone());
        apply_before_exec(&mut command, self.limits);
        adopt_orphans_below(&mut command);
        die_with_parent(&mut command);
        new_session_keyring(&mut command);
        let side_pipe = match self.side_output_bytes {
            Some(_) => Some(pipe_to_fd3(&mut command).map_err(spawn_error)?),
            None => None,
        };
        // After descriptor 3 is placed: nothing above the program's own pipes is passed on.
        close_from_on_exec(&mut command, if side_pipe.is_some() { SIDE_OUTPUT_FD + 1 } else { SIDE_OUTPUT_FD });
        // After that: descriptor 4 is placed without close-on-exec.
        let input_pipe = match self.side_input {
            Some(_) => Some(pipe_to_fd4(&mut command).map_err(spawn_error)?),
            None => None,
        };
        let mut command = tokio::process::Command::from(command);
        command.kill_on_drop(true);
        let started = Instant::now();
        let spawned = spawn_registered(|| command.spawn(), tokio::process::Child::id);
        // Closes the parent's copies of descriptor 3's write end and descriptor 4's read end.
        drop(command);
        let (mut child, registered) = spawned.map_err(spawn_error)?;
        // The child leads its own group, so the group id is its pid.
        let group = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
        let mut guard = ProcessGroupGuard::new(child.id());
        if let (Some(pipe), Some(bytes)) = (child.stdin.take(), self.stdin.clone()) {
            feed(pipe, bytes);
        }
        if let (Some(pipe), Some(bytes)) = (input_pipe, self.side_input.clone()) {
            feed(tokio::net::unix::pipe::Sender::from_owned_fd(pipe).map_err(spawn_error)?, bytes);
        }
        let stdout = child.stdout.take().map(|pipe| Reader::start(pipe, self.max_output_bytes));
        let stderr = child.stderr.take().map(|pipe| Reader::start(pipe, self.max_output_bytes));
        let side = match (side_pipe, self.side_output_bytes) {
            (Some(pipe), Some(cap)) => {
                let pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe).map_err(spawn_error)?;
                Some(Reader::start(pipe, cap))
            }
            _ => None,
        };
        let (status, timed_out) = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(status) => (status.map_err(|source| RunError::Wait { program: program.clone(), source })?, false),
            Err(_elapsed) => {
                stop_group(group);
                let killed = group.map(kill_descendants).unwrap_or_default();
                kill_group(group);
                // The program itself too: it may have moved to another group
                // of this session (`setpgid`), which the group's kill misses.
                let _ = child.start_kill();
                let status = child.wait().await.map_err(|source| RunError::Wait { program, source })?;
                wait_exited(&killed, DRAIN_GRACE).await;
                (status, true)
            }
        };
        guard.reaped();
        let duration = started.elapsed();
        // Background children still in the group end with their parent.
        kill_group(group);
        // The program is reaped: what is left of its orphans is no program.
        drop(registered);
        kill_orphans(DRAIN_GRACE).await;
        let (stdout, stderr, side_output) = tokio::join!(finish(stdout), finish(stderr), finish(side));
        Ok(Outcome { exit: exit_of(status), timed_out, stdout, stderr, side_output, duration })
    }
}

/// One output stream read in a task of its own, so that the program never
/// blocks on a full pipe while the run waits for it to exit.
struct Reader {
    task: JoinHandle<Captured>,
    /// Sent (or dropped) to make the task stop with what it has read.
    stop: oneshot::Sender<()>,
}

impl Reader {
    fn start(pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static, cap: usize) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(read_capped(pipe, cap, async {
            let _ = stopped.await;
        }));
        Self { task, stop }
    }
}

/// Writes `bytes` to an input of the program (stdin, descriptor 4) on a
/// task of its own, then closes it: a program that does not read an input
/// must not hold the run up, and the write ends once it closes its end.
fn feed(mut pipe: impl tokio::io::AsyncWrite + Unpin + Send + 'static, bytes: Vec<u8>) {
    tokio::spawn(async move {
        let _ = tokio::io::AsyncWriteExt::write_all(&mut pipe, &bytes).await;
    });
}

/// The reader's result; one kept open by an escaped descendant is stopped
/// after [`DRAIN_GRACE`] with what it had read (then marked cut).
async fn finish(reader: Option<Reader>) -> Captured {
    let Some(Reader { mut task, stop }) = reader else { return Captured::default() };
    if let Ok(read) = tokio::time::timeout(DRAIN_GRACE, &mut task).await {
        return read.unwrap_or_else(|_| Captured { cut: true, ..Captured::default() });
    }
    let _ = stop.send(());
    task.await.unwrap_or_else(|_| Captured { cut: true, ..Captured::default() })
}

fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Run {
        Run::new("/bin/sh", ["-c", script]).env("PATH", "/usr/bin:/bin")
    }

    #[tokio::test]
    async fn output_exit_code_and_environment() {
        let outcome = sh("echo out; echo err >&2; echo \"[$SECRET_HOME][$KEPT]\"; exit 3")
            .env("KEPT", "yes")
            .run()
            .await
            .unwrap();
        assert_eq!(outcome.exit, Exit::Code(3));
        assert_eq!(outcome.stdout.bytes, b"out\n[][yes]\n");
        assert_eq!(outcome.stderr.bytes, b"err\n");
        assert!(!outcome.timed_out && !outcome.stdout.cut);
    }

    #[tokio::test]
    async fn stdin_is_closed() {
        let outcome = sh("cat; echo done").timeout(Duration::from_secs(5)).run().await.unwrap();
        assert_eq!(outcome.stdout.bytes, b"done\n");
    }

    #[tokio::test]
    async fn the_timeout_kills_the_whole_group() {
        let dir = std::env::temp_dir().join(format!("limited-process-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("child.pid");
        let script = format!("sleep 30 & echo $! > {}; wait", pid_file.display());
        // Long enough for the shell to start and write the pid on a loaded machine.
        let outcome = sh(&script).timeout(Duration::from_secs(2)).run().await.unwrap();
        assert!(outcome.timed_out);
        assert_eq!(outcome.exit, Exit::Signal(9));
        assert!(outcome.duration < Duration::from_secs(5));
        let child: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let alive = nix::sys::signal::kill(Pid::from_raw(child), None).is_ok();
        let zombie = std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|s| s.contains(") Z"));
        assert!(!alive || zombie, "the background child {child} survived");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn the_timeout_kills_a_program_that_left_its_group() {
        // The program joins the test's own process group (in the same session).
        let script = "import os, time; os.setpgid(0, os.getpgid(os.getppid())); time.sleep(30)";
        let run = Run::new("/usr/bin/python3", ["-c", script]).timeout(Duration::from_millis(500));
        let outcome = run.run().await.unwrap();
        assert!(outcome.timed_out);
        assert_eq!(outcome.exit, Exit::Signal(9));
        assert!(outcome.duration < Duration::from_secs(10), "{:?}: the run waited for the program", outcome.duration);
    }

    #[tokio::test]
    async fn output_is_capped_and_the_rest_drained() {
        let outcome = sh("head -c 5000000 /dev/zero").max_output_bytes(1000).run().await.unwrap();
        assert_eq!(outcome.exit, Exit::Code(0), "the writer was never blocked");
        assert_eq!(outcome.stdout.bytes.len(), 1000);
        assert!(outcome.stdout.cut);
        assert_eq!(outcome.stdout.total_bytes, 5_000_000);
    }

    #[tokio::test]
    async fn limits_are_set_before_exec() {
        let limits = Limits {
            cpu_seconds: 7,
            address_space_bytes: 1 << 30,
            open_files: 33,
            processes: 99,
            file_size_bytes: None,
        };
        // A core dump limit the program could raise (soft 0, hard
        // unlimited: a common default) is made 0 for both.
        let outcome =
            sh("ulimit -t; ulimit -H -t; ulimit -n; ulimit -v; ulimit -c; ulimit -H -c; ulimit -c unlimited || echo refused")
                .limits(limits)
                .run()
                .await
                .unwrap();
        assert_eq!(String::from_utf8_lossy(&outcome.stdout.bytes), "7\n8\n33\n1048576\n0\n0\nrefused\n");
        let tight = Limits { address_space_bytes: 50 << 20, ..limits };
        let hungry = Run::new("python3", ["-c", "x = bytearray(200 * 1024 * 1024)"])
            .env("PATH", "/usr/bin:/bin")
            .limits(tight)
            .run()
            .await
            .unwrap();
        assert_ne!(hungry.exit, Exit::Code(0), "{:?}", String::from_utf8_lossy(&hungry.stderr.bytes));
        // The CPU limit ends the program with SIGXCPU, which tells it from other kills.
        let spin = sh("while :; do :; done").limits(Limits { cpu_seconds: 1, ..limits }).run().await.unwrap();
        assert_eq!(spin.exit, Exit::Signal(24));
        assert!(!spin.timed_out);
    }

    #[tokio::test]
    async fn stdin_bytes_side_output_and_file_size() {
        let limits = Limits { file_size_bytes: Some(4096), ..Limits::default() };
        let dir = std::env::temp_dir().join(format!("limited-process-fsize-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let outcome = sh("tr a-z A-Z; echo report >&3; head -c 10000 /dev/zero > big")
            .stdin("hello")
            .side_output(100)
            .limits(limits)
            .current_dir(&dir)
            .run()
            .await
            .unwrap();
        assert_eq!(outcome.stdout.bytes, b"HELLO");
        assert_eq!(outcome.side_output.bytes, b"report\n");
        assert_eq!(std::fs::metadata(dir.join("big")).unwrap().len(), 4096);
        std::fs::remove_dir_all(dir).unwrap();
        let without = sh("echo x >&3").run().await.unwrap();
        assert_ne!(without.exit, Exit::Code(0), "descriptor 3 is closed unless asked for");
    }

    #[tokio::test]
    async fn the_timeout_kills_a_descendant_in_its_own_session() {
        let dir = std::env::temp_dir().join(format!("limited-process-setsid-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("child.pid");
        let script = format!("setsid sh -c 'echo $$ > {}; exec sleep 30' & wait", pid_file.display());
        let outcome = sh(&script).timeout(Duration::from_millis(500)).run().await.unwrap();
        assert!(outcome.timed_out);
        let child: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let zombie = std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|s| s.contains(") Z"));
        let alive = nix::sys::signal::kill(Pid::from_raw(child), None).is_ok();
        assert!(!alive || zombie, "the child {child} in its own session survived");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn output_written_before_a_detached_descendant_holds_the_pipes_is_kept() {
        let dir = std::env::temp_dir().join(format!("limited-process-daemon-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("daemon.pid");
        // The program ends once its daemon is in a session of its own (out of
        // the group killed at exit), holding stdout and stderr open.
        let script = format!(
            "echo result; echo warning >&2; setsid sh -c 'echo $$ > {0}; exec sleep 30' & \
             while [ ! -s {0} ]; do sleep 0.01; done; exit 0",
            pid_file.display()
        );
        let started = Instant::now();
        let outcome = sh(&script).run().await.unwrap();
        let elapsed = started.elapsed();
        let daemon: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        let _ = nix::sys::signal::kill(Pid::from_raw(daemon), nix::sys::signal::Signal::SIGKILL);
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(outcome.exit, Exit::Code(0));
        assert_eq!((outcome.stdout.bytes.as_slice(), outcome.stdout.cut), (&b"result\n"[..], true));
        assert_eq!((outcome.stderr.bytes.as_slice(), outcome.stderr.cut), (&b"warning\n"[..], true));
        // Both streams get their grace at once, not one after the other: the
        // time after the program ended is one grace (two would be sequential).
        let draining = elapsed.saturating_sub(outcome.duration);
        assert!(draining < DRAIN_GRACE * 2, "{draining:?} after the program ended");
    }

    /// A descriptor of this process without close-on-exec, as a launcher
    /// leaves one (`exec prog 9<>file`).
    #[allow(unsafe_code)]
    fn inheritable(file: &std::fs::File) -> i32 {
        let fd = std::os::fd::AsRawFd::as_raw_fd(file);
        // SAFETY: `fd` is open for as long as `file` lives; only its flags change.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
        fd
    }

    #[tokio::test]
    async fn descriptors_the_caller_inherited_are_not_passed_on() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = inheritable(&file);
        let probe = format!("[ -e /proc/self/fd/{fd} ] && echo open || echo closed; echo side >&3");
        let outcome = sh(&probe).run().await.unwrap();
        assert_eq!(outcome.stdout.bytes, b"closed\n", "descriptor {fd}");
        let with_side = sh(&probe).side_output(100).run().await.unwrap();
        assert_eq!(with_side.stdout.bytes, b"closed\n", "descriptor {fd}");
        assert_eq!(with_side.side_output.bytes, b"side\n", "descriptor 3 is kept");
        let with_input = sh(&probe).side_input("x").run().await.unwrap();
        assert_eq!(with_input.stdout.bytes, b"closed\n", "descriptor {fd}");
        drop(file);
    }

    #[tokio::test]
    async fn side_input_is_read_on_descriptor_4() {
        let probe =
            "cat <&4; echo; for fd in 3 4 5 6 7 8 9; do [ -e /proc/self/fd/$fd ] && printf '%s ' $fd; done; echo";
        let both = sh(probe).side_input("filter").side_output(100).run().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&both.stdout.bytes), "filter\n3 4 \n", "{both:?}");
        let alone = sh(probe).side_input("filter").run().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&alone.stdout.bytes), "filter\n4 \n", "{alone:?}");
        // More than a pipe holds: written while the program reads it.
        let large = sh("wc -c <&4").side_input(vec![b'x'; 1 << 20]).run().await.unwrap();
        assert_eq!(String::from_utf8_lossy(&large.stdout.bytes).trim(), "1048576");
        // A program that does not read it still ends.
        let unread = sh("echo ran").side_input(vec![b'x'; 1 << 20]).run().await.unwrap();
        assert_eq!(unread.stdout.bytes, b"ran\n");
        let without = sh("cat <&4").run().await.unwrap();
        assert_ne!(without.exit, Exit::Code(0), "descriptor 4 is closed unless asked for");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let error = Run::new("/nonexistent/program", ["x"]).run().await.unwrap_err();
        assert!(matches!(error, RunError::Spawn { .. }));
        assert!(error.to_string().contains("/nonexistent/program"), "{error}");
    }

    #[tokio::test]
    async fn a_cgroup_the_child_cannot_join_fails_the_spawn() {
        // /dev/full refuses every write, as the kernel refuses a cgroup the
        // child may not join; /dev/null takes it, as a joinable cgroup does.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let error = sh("echo ran").cgroup(full).run().await.unwrap_err();
        assert!(matches!(error, RunError::Spawn { .. }), "{error}");
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
        let outcome = sh("echo ran").cgroup(null).run().await.unwrap();
        assert_eq!(outcome.stdout.bytes, b"ran\n");
    }
}
