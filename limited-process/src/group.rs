//! A child leading its own process group, killed with what it started:
//! the whole group, and every process below the child still attached to
//! its tree (even one that started a session of its own).

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::tree::kill_descendants;

/// Kills a child's process group and the tree below it when dropped, for a
/// child spawned as the leader of its own group (`process_group(0)`), so
/// that nothing it started outlives whoever holds the guard (a run given
/// up half-way, a long-lived server whose `sh -c` or `npx` started the
/// real one).
#[derive(Debug)]
pub struct ProcessGroupGuard {
    group: Option<Pid>,
    /// Whether the child was reaped: its pid may then belong to another
    /// process, whose descendants are none of this guard's business.
    reaped: bool,
}

impl ProcessGroupGuard {
    /// The guard of the child with id `leader` (`Child::id`: `None` once
    /// it was reaped, and then there is nothing to kill), leading its own
    /// group, so that the group's id is its id. The child must not be
    /// reaped while the guard lives without [`Self::reaped`] being called.
    pub fn new(leader: Option<u32>) -> Self {
        Self { group: leader.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw), reaped: false }
    }

    /// The child was reaped: only its group is killed on drop, not the
    /// tree below a pid that may be another process's by now.
    pub fn reaped(&mut self) {
        self.reaped = true;
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        if let (Some(group), false) = (self.group, self.reaped) {
            kill_descendants(group);
        }
        kill_group(self.group);
    }
}

/// SIGKILL to every process of the group; a group already gone is fine.
pub(crate) fn kill_group(group: Option<Pid>) {
    signal_group(group, Signal::SIGKILL);
}

/// Stops every process of `group` (a no-op for `None`), so none runs while
/// the tree below it is killed: a shell waiting for a child killed first
/// cannot exit on its own, with a status of its choosing, before it is
/// killed too.
pub(crate) fn stop_group(group: Option<Pid>) {
    signal_group(group, Signal::SIGSTOP);
}

fn signal_group(group: Option<Pid>, signal: Signal) {
    if let Some(group) = group {
        let _ = killpg(group, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::time::Duration;

    use crate::tree::{descendants, running, wait_exited};

    #[tokio::test]
    async fn dropping_the_guard_kills_the_group_and_the_detached_tree() {
        // A shell in its own group: one child stays in the group, one starts its own session.
        let mut shell = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & setsid sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let root = Pid::from_raw(i32::try_from(shell.id()).unwrap());
        let mut found = Vec::new();
        for _ in 0..2000 {
            found = descendants(root);
            if found.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(found.len(), 2, "both sleeps run: {found:?}");
        drop(ProcessGroupGuard::new(Some(shell.id())));
        shell.wait().unwrap();
        wait_exited(&found, Duration::from_secs(5)).await;
        let alive: Vec<Pid> = found.into_iter().filter(|&pid| running(pid)).collect();
        assert!(alive.is_empty(), "{alive:?} still run");
    }
}
