//! A third output stream, on the program's file descriptor 3, for a
//! report the program (or a wrapper around it) writes apart from its
//! stdout and stderr.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

/// The descriptor number the program writes its side output to.
pub const SIDE_OUTPUT_FD: i32 = 3;

/// A pipe whose write end `command`'s child gets as descriptor 3; returns
/// the read end. The parent's copy of the write end lives in `command`
/// and closes when `command` is dropped, so drop it right after spawning.
#[allow(unsafe_code)]
pub(crate) fn pipe_to_fd3(command: &mut std::process::Command) -> io::Result<OwnedFd> {
    let (reader, writer) = io::pipe()?;
    let writer = OwnedFd::from(writer);
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: it makes `dup2` or `fcntl`
    // system calls on a descriptor number it owns (captured by value),
    // allocates nothing and takes no locks.
    unsafe {
        command.pre_exec(move || {
            let fd = writer.as_raw_fd();
            // Both pipe ends are close-on-exec; `dup2` makes a copy without
            // the flag, unless the write end already is descriptor 3.
            let result =
                if fd == SIDE_OUTPUT_FD { libc::fcntl(fd, libc::F_SETFD, 0) } else { libc::dup2(fd, SIDE_OUTPUT_FD) };
            if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        });
    }
    Ok(OwnedFd::from(reader))
}
