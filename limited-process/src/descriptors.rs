//! The descriptors a program gets: its stdin, stdout and stderr (and
//! descriptor 3 when side output is asked for, 4 when side input is),
//! never one the calling
//! process itself inherited without close-on-exec (a listening socket of
//! socket activation, a launcher's pipe, a file a shell redirected).

use std::io;
use std::os::unix::process::CommandExt;

use nix::sys::resource::{Resource, getrlimit};

/// How many descriptors the fallback for kernels without `close_range`
/// (before Linux 5.11, or a seccomp profile refusing it) marks one by one at
/// most: those inherited sit far below.
const FALLBACK_DESCRIPTORS: i32 = 65_536;

/// Makes every descriptor from `first` up close on exec in `command`'s
/// child, right before exec (after its stdin, stdout and stderr are set
/// up); register it after any closure that places a descriptor the
/// program should keep (below `first`). [`crate::Run`] does it for every
/// run; a caller spawning a `Command` of its own uses it with `first` 3.
#[allow(unsafe_code)]
pub fn close_from_on_exec(command: &mut std::process::Command, first: i32) {
    // Where the fallback stops: descriptors at or above the limit cannot be
    // opened (one opened before the limit was lowered is missed), and at
    // most FALLBACK_DESCRIPTORS calls per spawn (a container's limit is
    // often 1M, an unlimited one would never end).
    let bound = getrlimit(Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| i32::try_from(soft).unwrap_or(i32::MAX))
        .min(FALLBACK_DESCRIPTORS);
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: it makes `close_range` or
    // `fcntl` system calls on plain integers, allocates nothing and takes
    // no locks.
    unsafe {
        command.pre_exec(move || {
            let first_fd = libc::c_uint::try_from(first).unwrap_or(0);
            let flags = libc::CLOSE_RANGE_CLOEXEC;
            if libc::syscall(libc::SYS_close_range, first_fd, libc::c_uint::MAX, flags) == 0 {
                return Ok(());
            }
            // Linux before 5.11: one descriptor at a time (`EBADF` for the unused ones).
            for fd in first..bound {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
            Ok::<(), io::Error>(())
        });
    }
}
