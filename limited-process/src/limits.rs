//! Resource limits, applied in the child between fork and exec.

use std::io;
use std::os::unix::process::CommandExt;

use nix::sys::resource::{Resource, setrlimit};

/// The kernel resource limits (`setrlimit`) a program runs under; each is
/// both the soft and the hard limit, so the program cannot raise it, but
/// for CPU time, whose hard limit is one second more (see
/// [`Limits::cpu_hard_seconds`]).
/// `RLIMIT_CORE` is always 0: a crashing program writes no core dump, which
/// the host's dump handler (systemd-coredump, apport: started as root,
/// outside the sandbox and its cgroup) would otherwise read whole, up to
/// `address_space_bytes` per process, charged to nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_CPU`: CPU seconds before the kernel sends the process
    /// `SIGXCPU` (which ends it unless caught).
    pub cpu_seconds: u64,
    /// `RLIMIT_AS`: the largest virtual address space, in bytes.
    pub address_space_bytes: u64,
    /// `RLIMIT_NOFILE`: the most open file descriptors.
    pub open_files: u64,
    /// `RLIMIT_NPROC`: the most processes of the running user (counted by
    /// the kernel per user, not per group; ignored for root).
    pub processes: u64,
    /// `RLIMIT_FSIZE`: the largest file the program may write, in bytes
    /// (a write past it fails, and SIGXFSZ ends the program); `None` leaves
    /// the inherited limit.
    pub file_size_bytes: Option<u64>,
}

impl Default for Limits {
    /// 30 CPU seconds, 1 GiB of address space, 256 open files, 256
    /// processes, the inherited file size limit.
    fn default() -> Self {
        Self { cpu_seconds: 30, address_space_bytes: 1 << 30, open_files: 256, processes: 256, file_size_bytes: None }
    }
}

impl Limits {
    /// The hard `RLIMIT_CPU`: one second past [`Self::cpu_seconds`], where
    /// the kernel sends `SIGKILL` to a program that caught or ignored
    /// `SIGXCPU`. Were it equal to the soft limit, the kernel would send
    /// `SIGKILL` at once, and the program's end would not tell its CPU limit
    /// from any other kill.
    pub fn cpu_hard_seconds(&self) -> u64 {
        self.cpu_seconds.saturating_add(1)
    }

    /// Sets every limit on the calling process, and no core dumps. Only
    /// `setrlimit` calls: no allocation, no locks, so it may run between
    /// fork and exec.
    fn apply(&self) -> io::Result<()> {
        let set = |resource, value: u64| setrlimit(resource, value, value).map_err(io::Error::from);
        set(Resource::RLIMIT_CORE, 0)?;
        setrlimit(Resource::RLIMIT_CPU, self.cpu_seconds, self.cpu_hard_seconds())?;
        set(Resource::RLIMIT_AS, self.address_space_bytes)?;
        set(Resource::RLIMIT_NOFILE, self.open_files)?;
        set(Resource::RLIMIT_NPROC, self.processes)?;
        match self.file_size_bytes {
            Some(bytes) => set(Resource::RLIMIT_FSIZE, bytes),
            None => Ok(()),
        }
    }
}

/// Makes `command`'s child set `limits` on itself right before exec; the
/// spawn fails if a limit cannot be set.
#[allow(unsafe_code)]
pub(crate) fn apply_before_exec(command: &mut std::process::Command, limits: Limits) {
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed. It captures `Limits` by value
    // (plain integers) and makes only `setrlimit` system calls: it
    // allocates nothing, takes no locks, touches no shared state.
    // (`io::Error::from(Errno)` is `from_raw_os_error`, which does not allocate.)
    unsafe {
        command.pre_exec(move || limits.apply());
    }
}
