//! A second input, on the program's file descriptor 4: bytes it reads
//! apart from its stdin and its arguments (bubblewrap's `--seccomp 4`
//! takes a compiled filter that way).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use crate::side_output::SIDE_OUTPUT_FD;

/// The descriptor number the program reads its side input from.
pub const SIDE_INPUT_FD: i32 = SIDE_OUTPUT_FD + 1;

/// A pipe whose read end `command`'s child gets as descriptor 4; returns
/// the write end (close-on-exec), to write the input to and then close. The
/// parent's copy of the read end lives in `command` and closes when
/// `command` is dropped, so drop it right after spawning. Register it after
/// [`crate::close_from_on_exec`], which would otherwise mark descriptor 4
/// close-on-exec again.
#[allow(unsafe_code)]
pub(crate) fn pipe_to_fd4(command: &mut std::process::Command) -> io::Result<OwnedFd> {
    let (reader, writer) = io::pipe()?;
    // Above descriptors 3 and 4, so that placing descriptor 3 (side output)
    // before this one cannot close the read end.
    let above = SIDE_INPUT_FD + 1;
    // SAFETY: `F_DUPFD_CLOEXEC` makes a new descriptor from one this
    // function owns; on success the new one is owned by the `OwnedFd` alone.
    let reader = unsafe {
        let fd = libc::fcntl(reader.as_raw_fd(), libc::F_DUPFD_CLOEXEC, above);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: it makes a `dup2` system call on
    // a descriptor number it owns (captured by value, never 4), allocates
    // nothing and takes no locks. `dup2` makes a copy without close-on-exec.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(reader.as_raw_fd(), SIDE_INPUT_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(OwnedFd::from(writer))
}
