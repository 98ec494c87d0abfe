//! Who owns a run cgroup, written in its name, so that a module starting
//! can tell the run cgroups a killed module left behind from those of a
//! live one: `code_runner-run-<pidns>-<pid>-<start>-<n>` is the owner's
//! PID namespace (the inode of `/proc/self/ns/pid`), its PID there, its
//! start time (clock ticks after boot, field 22 of `/proc/PID/stat`,
//! which tells a reused PID from its first process) and a counter.
//!
//! A name is read strictly: anything but exactly that, in the form
//! [`RunName`]'s `Display` writes, is no run cgroup of this scheme and is
//! left alone.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::str::FromStr;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::{CgroupError, io_error, read};

/// The start of every run cgroup's name.
const RUN_PREFIX: &str = "code_runner-run-";

/// A process, as a run cgroup's name records its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The inode of its PID namespace.
    pub pidns: u64,
    /// Its PID in that namespace (a positive `pid_t`).
    pub pid: u32,
    /// When it started, in clock ticks after boot.
    pub start: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> Result<Self, CgroupError> {
        let ns = Path::new("/proc/self/ns/pid");
        let pidns = std::fs::metadata(ns).map_err(io_error("inspect", ns))?.ino();
        let stat = Path::new("/proc/self/stat");
        let (_, start) = stat_fields(&read(stat)?).ok_or(CgroupError::NoStartTime)?;
        Ok(Self { pidns, pid: std::process::id(), start })
    }
}

/// The name of one run's cgroup (the same in every hierarchy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunName {
    /// The module that made it.
    pub owner: Owner,
    /// The owner's counter of runs.
    pub run: u64,
}

impl fmt::Display for RunName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Owner { pidns, pid, start } = self.owner;
        write!(f, "{RUN_PREFIX}{pidns}-{pid}-{start}-{}", self.run)
    }
}

/// What `/proc` tells of the process a name records as its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// No process has that PID, or only a zombie: the owner has ended.
    Gone,
    /// A running process has that PID, started at this time.
    StartedAt(u64),
    /// Nothing certain (unreadable): the owner may be alive.
    Unknown,
}

/// A field of a run cgroup's name: ASCII digits only (no sign, not empty).
fn decimal<T: FromStr>(field: Option<&str>) -> Option<T> {
    field.filter(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()
}

impl RunName {
    /// The name `name` is, when it is exactly one this scheme writes (no
    /// leading zeros, a PID that can be a process's); `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        let mut fields = name.strip_prefix(RUN_PREFIX)?.split('-');
        let owner = Owner {
            pidns: decimal(fields.next())?,
            pid: decimal(fields.next()).filter(|&pid| pid > 0 && i32::try_from(pid).is_ok())?,
            start: decimal(fields.next())?,
        };
        let parsed = Self { owner, run: decimal(fields.next())? };
        (fields.next().is_none() && parsed.to_string() == name).then_some(parsed)
    }

    /// Whether the owner was a process of `pidns` (this module's) that has
    /// ended, `seen` telling what its PID is now: gone, or reused by a
    /// process started at another time. A name of another PID namespace is
    /// never left behind, whatever its PID is here.
    pub fn left_behind(&self, pidns: u64, seen: impl FnOnce(u32) -> Seen) -> bool {
        if self.owner.pidns != pidns {
            return false;
        }
        match seen(self.owner.pid) {
            Seen::Gone => true,
            Seen::StartedAt(start) => start != self.owner.start,
            Seen::Unknown => false,
        }
    }
}

/// The state (field 3) and start time (field 22) of a `/proc/PID/stat`
/// line; the name before them (field 2) may hold spaces and `)`.
fn stat_fields(stat: &str) -> Option<(char, u64)> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

/// What a process's `/proc/PID/stat` line tells: a zombie has ended.
fn seen_in(stat: &str) -> Seen {
    match stat_fields(stat) {
        Some(('Z' | 'X', _)) => Seen::Gone,
        Some((_, start)) => Seen::StartedAt(start),
        None => Seen::Unknown,
    }
}

/// Whether the mounted `/proc` shows this process as `pid` (its PID in its
/// own namespace): only then does `/proc/PID` name the processes of this
/// PID namespace, as [`seen`] takes it to.
pub fn proc_shows(pid: u32) -> bool {
    std::fs::read_link("/proc/self").is_ok_and(|link| link.as_os_str() == pid.to_string().as_str())
}

/// What `/proc` (of this PID namespace) tells of process `pid` now.
pub fn seen(pid: u32) -> Seen {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => seen_in(&stat),
        // A `/proc` hiding others' processes (hidepid) answers NotFound
        // too: only the kernel's "no such process" is taken as gone.
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => match i32::try_from(pid) {
            Ok(pid) if pid > 0 => seen_by_signal(kill(Pid::from_raw(pid), None)),
            _ => Seen::Unknown,
        },
        Err(_) => Seen::Unknown,
    }
}

/// What the answer to signal 0 tells: only "no such process" is gone
/// (`EPERM` is another user's running process).
fn seen_by_signal(answer: nix::Result<()>) -> Seen {
    match answer {
        Err(Errno::ESRCH) => Seen::Gone,
        _ => Seen::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: Owner = Owner { pidns: 4_026_531_836, pid: 4242, start: 3_692_086 };

    #[test]
    fn proc_shows_this_process_under_its_own_pid_only() {
        let pid = std::process::id();
        assert!(proc_shows(pid));
        assert!(!proc_shows(pid + 1));
        assert!(!proc_shows(1));
    }

    #[test]
    fn a_name_is_written_and_read_back() {
        let name = RunName { owner: OWNER, run: 7 };
        assert_eq!(name.to_string(), "code_runner-run-4026531836-4242-3692086-7");
        assert_eq!(RunName::parse(&name.to_string()), Some(name));
        let extremes = RunName { owner: Owner { pidns: u64::MAX, pid: i32::MAX as u32, start: 0 }, run: u64::MAX };
        assert_eq!(RunName::parse(&extremes.to_string()), Some(extremes));
    }

    #[test]
    fn anything_but_the_exact_scheme_is_no_run_name() {
        for other in [
            "code_runner-run-4242-7",
            "code_runner-run-4026531836-4242-3692086",
            "code_runner-run-4026531836-4242-3692086-7-1",
            "code_runner-run-4026531836-4242-3692086-",
            "code_runner-run-4026531836--3692086-7",
            "code_runner-run-4026531836-+4242-3692086-7",
            "code_runner-run-4026531836-04242-3692086-7",
            "code_runner-run-4026531836-4242-3692086-07",
            "code_runner-run--4026531836-4242-3692086-7",
            "code_runner-run-4026531836-42x-3692086-7",
            "code_runner-run-4026531836-٤٢-3692086-7",
            "code_runner-run-4026531836-4242-3692086-7 ",
            "code_runner-run-18446744073709551616-4242-3692086-7",
            "code_runner-run-4026531836-0-3692086-7",
            "code_runner-run-4026531836-2147483648-3692086-7",
            "code_runner-run-4026531836-4294967295-3692086-7",
            "Code_runner-run-4026531836-4242-3692086-7",
            "code_runner-module",
            "code_runner-run-",
            "",
        ] {
            assert_eq!(RunName::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn only_an_ended_owner_of_this_pid_namespace_left_a_cgroup_behind() {
        let name = RunName { owner: OWNER, run: 0 };
        let ours = OWNER.pidns;
        assert!(name.left_behind(ours, |_| Seen::Gone));
        assert!(name.left_behind(ours, |_| Seen::StartedAt(OWNER.start + 1)), "a reused PID");
        assert!(!name.left_behind(ours, |_| Seen::StartedAt(OWNER.start)), "the owner runs");
        assert!(!name.left_behind(ours, |_| Seen::Unknown));
        for seen in [Seen::Gone, Seen::StartedAt(1), Seen::Unknown] {
            assert!(!name.left_behind(ours + 1, |_| seen), "another PID namespace, {seen:?}");
        }
        let mut asked = None;
        name.left_behind(ours, |pid| {
            asked = Some(pid);
            Seen::Unknown
        });
        assert_eq!(asked, Some(OWNER.pid), "the owner's PID is the one looked up");
    }

    #[test]
    fn stat_lines_with_odd_names_and_zombies() {
        let tail = "1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 3692086 1000 10";
        assert_eq!(seen_in(&format!("77 (python3) S {tail}")), Seen::StartedAt(3_692_086));
        assert_eq!(seen_in(&format!("77 (a) b) (c) D {tail}")), Seen::StartedAt(3_692_086));
        assert_eq!(seen_in(&format!("77 (a) b) (c) Z {tail}")), Seen::Gone, "a zombie");
        assert_eq!(seen_in(&format!("77 (code_runner) X {tail}")), Seen::Gone);
        assert_eq!(seen_in("77 (cut short) S 1 1"), Seen::Unknown);
        assert_eq!(seen_in("no name"), Seen::Unknown);
        assert_eq!(seen_by_signal(Err(Errno::ESRCH)), Seen::Gone);
        assert_eq!(seen_by_signal(Err(Errno::EPERM)), Seen::Unknown, "hidden from /proc, but running");
        assert_eq!(seen_by_signal(Ok(())), Seen::Unknown);
    }

    #[test]
    fn this_process_is_seen_running_and_an_impossible_pid_gone() {
        let own = Owner::current().unwrap();
        assert_eq!(own.pid, std::process::id());
        assert_eq!(seen(own.pid), Seen::StartedAt(own.start));
        assert_eq!(seen(i32::MAX as u32), Seen::Gone, "beyond any pid_max");
        let name = RunName { owner: own, run: 3 };
        assert!(!name.left_behind(own.pidns, seen), "this process's own run cgroups are never swept");
    }
}
