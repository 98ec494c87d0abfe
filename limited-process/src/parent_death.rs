//! A program that outlives the process that ran it (killed with SIGKILL,
//! by the OOM killer) is killed too, not left running without a timeout.

use std::io;
use std::os::unix::process::CommandExt;

use nix::sys::signal::Signal;
use nix::unistd::{getpid, getppid};

/// Makes `command`'s child ask for SIGKILL when its parent dies
/// (`PR_SET_PDEATHSIG`), and not start when the parent died before it
/// asked. The kernel sends the signal when the *thread* that spawned the
/// child exits: spawn from threads that live as long as the process (a
/// runtime's worker or serving threads, not a `spawn_blocking` thread,
/// which ends after some idle seconds).
#[allow(unsafe_code)]
pub(crate) fn die_with_parent(command: &mut std::process::Command) {
    let parent = getpid();
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: `prctl` and `getppid` are one
    // system call each, and the error is made from a raw code (no allocation).
    // std runs it after changing the user, which would clear the setting.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            if getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
