//! A run slot's user, clean before a run takes it: the processes of the
//! slot's previous run are killed when that run ends (with its cgroup, or
//! with bubblewrap's PID namespace), but a killed process may take a while
//! to exit (a run with many files, a call given up mid-way). While one is
//! there it counts against the user's RLIMIT_NPROC, so the next run of the
//! slot would be charged for it: that run waits until they are gone.

use std::fs;
use std::time::Duration;

/// How often the slot's user is looked at again while its processes exit
/// (each look reads every `/proc/PID/status`).
const POLL: Duration = Duration::from_millis(50);

/// How many processes (and threads' leaders) of real user `uid` exist, as
/// `/proc` shows them; processes that vanish while being read are not counted.
pub fn processes_of(uid: u32) -> usize {
    let Ok(entries) = fs::read_dir("/proc") else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|entry| fs::read_to_string(entry.path().join("status")).ok())
        .filter(|status| real_uid(status) == Some(uid))
        .count()
}

/// The real user id of a `/proc/PID/status` text (the first field of `Uid:`).
fn real_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|line| line.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// Waits at most `wait` until user `uid` has no processes; `false` when
/// some are still there at the end. `/proc` is read on a blocking thread,
/// so the async workers stay free.
pub async fn wait_until_gone(uid: u32, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // A scan that panicked counts as processes still there.
        if tokio::task::spawn_blocking(move || processes_of(uid)).await.unwrap_or(1) == 0 {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn the_real_uid_is_the_first_field() {
        assert_eq!(real_uid("Name:\tsh\nUid:\t61001\t0\t0\t0\nGid:\t0\n"), Some(61001));
        assert_eq!(real_uid("Name:\tsh\n"), None);
    }

    /// Needs root (as the module's run users do): a process of a slot's
    /// user keeps the slot unclean until it has exited and been reaped.
    #[tokio::test]
    async fn a_slot_user_is_clean_only_when_its_processes_are_gone() {
        assert!(nix::unistd::Uid::effective().is_root(), "this test starts a process as another user: run it as root");
        let uid = 63917;
        assert!(wait_until_gone(uid, Duration::ZERO).await, "user {uid} is in use on this machine");
        let mut leftover = Command::new("sleep").arg("60").uid(uid).gid(65534).spawn().unwrap();
        assert_eq!(processes_of(uid), 1);
        assert!(!wait_until_gone(uid, Duration::from_millis(50)).await, "a leftover keeps the slot");
        leftover.kill().unwrap();
        leftover.wait().unwrap();
        assert!(wait_until_gone(uid, Duration::from_secs(5)).await);
    }
}
