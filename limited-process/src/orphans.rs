//! Descendants that outlive their program. A process that left the tree
//! (`setsid cmd &` whose parent exits, a double fork) is re-parented to
//! the nearest child subreaper, else to init, where no run can find it.
//! In a process that called [`become_subreaper`], every program run is a
//! subreaper too, so while it runs its orphans stay below it (the timeout
//! kills them with its tree); when it exits they are re-parented to this
//! process, and the run kills and reaps them.
//!
//! Reaping is by pid, never `waitpid(-1)`: the programs themselves are
//! reaped by tokio, and their pids are kept in a list while they may be,
//! so that they are never taken for orphans.

use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpid};

use crate::tree::{children, kill_descendants};

/// Whether [`become_subreaper`] was called.
static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// The pids of the programs being run, not yet reaped by their run.
static PROGRAMS: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

/// Rounds of "find the orphans, kill them": killing one re-parents its
/// own children here, for the next round.
const ROUNDS: usize = 4;

/// How often a killed orphan is checked for having exited.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so that
/// every run kills, after its program exits (normally or not), the
/// descendants that left the program's tree, and reaps them. Call it once
/// at start, in a process whose children are all started by [`crate::Run`]:
/// any other child would be taken for an orphan of a run, killed and reaped.
pub fn become_subreaper() -> Result<(), nix::Error> {
    nix::sys::prctl::set_child_subreaper(true)?;
    SUBREAPER.store(true, Ordering::SeqCst);
    Ok(())
}

/// A program's pid in the list of programs, removed when dropped (once
/// the program was reaped, or given up).
pub(crate) struct Registered(Option<Pid>);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let mut programs = programs();
            if let Some(at) = programs.iter().position(|&known| known == pid) {
                programs.swap_remove(at);
            }
        }
    }
}

/// Makes the program of `command` a subreaper when this process is one.
#[allow(unsafe_code)]
pub(crate) fn adopt_orphans_below(command: &mut std::process::Command) {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed; `prctl` is one system call.
    unsafe {
        command.pre_exec(|| nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from));
    }
}

/// Spawns with `spawn` and lists the child as a program before any run
/// looks for orphans, so none takes it for one.
pub(crate) fn spawn_registered<C>(
    spawn: impl FnOnce() -> std::io::Result<C>,
    pid_of: impl FnOnce(&C) -> Option<u32>,
) -> std::io::Result<(C, Registered)> {
    let mut programs = programs();
    let child = spawn()?;
    let pid = pid_of(&child).and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
    programs.extend(pid);
    Ok((child, Registered(pid)))
}

/// Kills this process's children that are no program being run (orphans
/// of runs whose program exited), with their trees, and reaps them,
/// waiting at most `grace`; nothing unless [`become_subreaper`] was called.
pub(crate) async fn kill_orphans(grace: Duration) {
    if !SUBREAPER.load(Ordering::SeqCst) {
        return;
    }
    // One hold of the list over finding and killing: no other run reaps
    // (and the kernel reuses) a pid between its finding and its kill.
    let mut killed = Vec::new();
    {
        let programs = programs();
        for _ in 0..ROUNDS {
            let found: Vec<Pid> =
                children(getpid()).into_iter().filter(|pid| !programs.contains(pid) && !killed.contains(pid)).collect();
            if found.is_empty() {
                break;
            }
            for &orphan in &found {
                kill_descendants(orphan);
                let _ = kill(orphan, Signal::SIGKILL);
            }
            killed.extend(found);
        }
    }
    let deadline = tokio::time::Instant::now() + grace;
    reap_killed(&mut killed);
    while !killed.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL_INTERVAL).await;
        reap_killed(&mut killed);
    }
}

/// Reaps the orphans of `killed` that have exited and leaves in it those
/// still running. A pid now listed as a program was reaped by another run
/// and reused by a new program, which is its run's to reap: it is dropped.
fn reap_killed(killed: &mut Vec<Pid>) {
    let programs = programs();
    killed.retain(|&pid| !programs.contains(&pid) && !reaped(pid));
}

/// Reaps `pid` if it has exited; whether it is gone (reaped now, or not a
/// child of this process any more).
fn reaped(pid: Pid) -> bool {
    !matches!(waitpid(pid, Some(WaitPidFlag::WNOHANG)), Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR))
}

fn programs() -> MutexGuard<'static, Vec<Pid>> {
    PROGRAMS.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::wait::{Id, waitid};

    #[test]
    fn a_pid_reused_by_a_program_is_left_to_its_run() {
        let (mut child, registered) =
            spawn_registered(|| std::process::Command::new("true").spawn(), |child| Some(child.id())).unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        // Until it has exited, without reaping it.
        waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT).unwrap();
        let mut killed = vec![pid];
        reap_killed(&mut killed);
        assert!(killed.is_empty());
        // Its run still gets its exit status.
        assert!(child.wait().unwrap().success());
        drop(registered);
    }
}
