//! The orchestrator as the first process of a PID namespace (PID 1, as in
//! a container started without an init). The kernel makes PID 1 the parent
//! of every orphan of its namespace: what a stdio MCP server started is
//! reparented to it when the server's process group is killed, and stays a
//! zombie for good unless PID 1 waits for it. The server cannot wait for
//! any child (`waitpid(-1)`) itself: that would take the exit statuses
//! tokio waits for. So as PID 1 the binary runs itself again as its only
//! child, passes that child the signals a container runtime sends, waits
//! for every child that exits (orphans included) and exits as the
//! orchestrator did, which is what `tini` or `podman run --init` would do.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The signals passed on to the orchestrator.
const FORWARDED: [Signal; 6] =
    [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP, Signal::SIGQUIT, Signal::SIGUSR1, Signal::SIGUSR2];

/// When this process is PID 1: runs the command line again as a child
/// process, reaps orphans until that child ends and returns its exit code.
/// `None` when this process is not PID 1, or the child could not be
/// started (then the caller goes on in this process, orphans unreaped).
/// Elsewhere, it unblocks those signals: the child of this PID 1 starts
/// with them blocked (a spawned process keeps its parent's signal mask).
pub fn supervise_if_pid_1() -> Option<ExitCode> {
    let mut signals = SigSet::empty();
    for signal in FORWARDED.into_iter().chain([Signal::SIGCHLD]) {
        signals.add(signal);
    }
    if std::process::id() != 1 {
        // Before any other thread starts, so that all of them inherit it.
        let _ = signals.thread_unblock();
        return None;
    }
    // Blocked, the signals wait for `signals.wait()` (a blocked signal
    // reaches PID 1 even without a handler).
    if let Err(error) = signals.thread_block() {
        eprintln!("orchestrator: as PID 1, could not block signals ({error}); orphans will not be reaped");
        return None;
    }
    let mut arguments = std::env::args_os();
    let mut command = Command::new("/proc/self/exe");
    if let Some(name) = arguments.next() {
        command.arg0(name);
    }
    let child = match command.args(arguments).spawn() {
        // Linux process ids are below 2^22.
        Ok(child) => Pid::from_raw(child.id() as i32),
        Err(error) => {
            let _ = signals.thread_unblock();
            eprintln!(
                "orchestrator: as PID 1, could not start itself as a child ({error}); orphans will not be reaped"
            );
            return None;
        }
    };
    loop {
        match signals.wait() {
            Ok(Signal::SIGCHLD) => {
                if let Some(code) = reap(child) {
                    return Some(code);
                }
            }
            Ok(signal) => {
                let _ = kill(child, signal);
            }
            Err(_) => {}
        }
    }
}

/// Waits for every child that has ended; the exit code of `child` once it has
/// (128 + the signal's number when a signal ended it, as a shell reports it).
fn reap(child: Pid) -> Option<ExitCode> {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return Some(ExitCode::from(exit_byte(code))),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                return Some(ExitCode::from(exit_byte(128 + signal as i32)));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// The low byte of an exit status, as the kernel keeps it.
fn exit_byte(code: i32) -> u8 {
    u8::try_from(code & 0xff).unwrap_or(u8::MAX)
}
