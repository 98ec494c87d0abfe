//! The CPU time a server process spends, read from `/proc/<pid>/stat`
//! (user and system time, in clock ticks), and the time of this process's
//! ended children (a load generator run to its end), so a benchmark can
//! print what one call costs in CPU beside its latency and throughput: a
//! figure that says where a gap comes from.

use std::process::Command;
use std::time::Duration;

/// A process's user and system CPU time so far.
#[derive(Debug, Clone, Copy)]
pub struct CpuTime {
    /// Time in user space.
    pub user: Duration,
    /// Time in the kernel (for a proxy: mostly its socket reads and writes).
    pub system: Duration,
}

impl CpuTime {
    /// `pid`'s CPU time so far, all its threads included.
    pub fn of(pid: u32) -> Self {
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        Self::read(pid, 11)
    }

    /// What this process's children spent that have ended and been waited
    /// for (a load generator run to its end, for one).
    pub fn of_ended_children() -> Self {
        // cutime and cstime are fields 16 and 17 of the line, 14 and 15 after the name.
        Self::read(std::process::id(), 13)
    }

    /// The user and system times at `user_index` and the field after it,
    /// counted from the first field after `pid`'s command name.
    fn read(pid: u32, user_index: usize) -> Self {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process is alive");
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat[stat.rfind(')').expect("a stat line") + 2..].split(' ').collect();
        let ticks = |index: usize| fields[index].parse::<u64>().expect("a tick count");
        let seconds = |count: u64| Duration::from_secs_f64(count as f64 / clock_ticks_per_second());
        Self { user: seconds(ticks(user_index)), system: seconds(ticks(user_index + 1)) }
    }

    /// What was spent since `earlier`, per one of `calls` calls, in µs: (user, system).
    pub fn per_call_since(&self, earlier: &CpuTime, calls: f64) -> (f64, f64) {
        let per_call = |now: Duration, then: Duration| (now - then).as_secs_f64() * 1e6 / calls.max(1.0);
        (per_call(self.user, earlier.user), per_call(self.system, earlier.system))
    }
}

/// `getconf CLK_TCK` (100 on Linux).
fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let output = Command::new("getconf").arg("CLK_TCK").output().expect("getconf runs");
        String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(100.0)
    })
}

/// The first child of `pid` (nginx's worker, for its master's pid).
pub fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_run_to_its_end_counts_among_the_ended_children() {
        let before = CpuTime::of_ended_children();
        // A busy shell loop of about half a second.
        let status = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        let after = CpuTime::of_ended_children();
        let spent = (after.user + after.system).saturating_sub(before.user + before.system);
        assert!(spent >= Duration::from_millis(100), "the loop's CPU was not counted: {spent:?}");
    }
}
