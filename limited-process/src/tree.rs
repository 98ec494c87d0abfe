//! The processes below a child, found through `/proc`, so that a timeout
//! also ends descendants that left the child's process group (`setsid`),
//! as long as they are still attached to the tree.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The most descendants collected at once; a tree larger than this is
/// killed in several rounds.
const MAX_DESCENDANTS: usize = 4096;

/// Rounds of "list, then kill": a process forking while its tree is being
/// killed adds children only until its own SIGKILL arrives.
const KILL_ROUNDS: usize = 4;

/// How often a killed descendant is checked for having exited.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Every process below `root` (children, their children...), read from
/// `/proc/<pid>/task/<tid>/children`; empty when `/proc` does not say.
pub(crate) fn descendants(root: Pid) -> Vec<Pid> {
    let mut found = Vec::new();
    let mut next = 0;
    let mut parent = root;
    loop {
        for child in children(parent) {
            if found.len() < MAX_DESCENDANTS && !found.contains(&child) {
                found.push(child);
            }
        }
        let Some(&following) = found.get(next) else { return found };
        parent = following;
        next += 1;
    }
}

/// The direct children of every thread of `pid`.
pub(crate) fn children(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace().filter_map(|pid| pid.parse().ok()).map(Pid::from_raw).collect::<Vec<_>>()
        })
        .collect()
}

/// SIGKILL to every descendant of `root` (not `root` itself), in a few
/// rounds; returns the processes killed.
pub(crate) fn kill_descendants(root: Pid) -> Vec<Pid> {
    let mut killed = Vec::new();
    for _ in 0..KILL_ROUNDS {
        let found: Vec<Pid> = descendants(root).into_iter().filter(|pid| !killed.contains(pid)).collect();
        if found.is_empty() {
            break;
        }
        for &pid in &found {
            let _ = kill(pid, Signal::SIGKILL);
        }
        killed.extend(found);
    }
    killed
}

/// Waits, at most `grace`, until every process of `pids` has exited (gone,
/// or a zombie whose exit is complete: for the first process of a PID
/// namespace, that means every process of the namespace is gone too).
pub(crate) async fn wait_exited(pids: &[Pid], grace: Duration) {
    let deadline = tokio::time::Instant::now() + grace;
    while pids.iter().any(|&pid| running(pid)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Whether `pid` exists and has not finished exiting.
pub(crate) fn running(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finds_and_kills_a_detached_grandchild() {
        // The shell starts a child that starts its own session, then sleeps.
        let mut shell = std::process::Command::new("/bin/sh").args(["-c", "setsid sleep 30 & wait"]).spawn().unwrap();
        let root = Pid::from_raw(i32::try_from(shell.id()).unwrap());
        let mut found = Vec::new();
        for _ in 0..2000 {
            found = descendants(root);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        assert!(!found.is_empty(), "the sleeping child was not found");
        let killed = kill_descendants(root);
        wait_exited(&killed, Duration::from_secs(5)).await;
        assert!(killed.iter().all(|&pid| !running(pid)), "{killed:?} still run");
        shell.wait().unwrap();
        assert!(descendants(Pid::from_raw(i32::MAX)).is_empty());
    }
}
