//! Joining cgroups, in the child between fork and exec.

use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::sync::Arc;

/// Makes `command`'s child write itself (`0`, the writing process) into
/// each of the `procs` files (`cgroup.procs` of a cgroup, opened for
/// writing by the caller) right before exec; the spawn fails if the kernel
/// refuses one.
#[allow(unsafe_code)]
pub(crate) fn join_before_exec(command: &mut std::process::Command, procs: Vec<Arc<std::fs::File>>) {
    if procs.is_empty() {
        return;
    }
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed. The files were opened (and the
    // vector allocated) before the fork; the closure only borrows them and
    // makes `write` system calls: it allocates nothing and takes no locks.
    // (An error is `from_raw_os_error`, which does not allocate.)
    unsafe {
        command.pre_exec(move || {
            for file in &procs {
                (&**file).write_all(b"0")?;
            }
            Ok::<(), io::Error>(())
        });
    }
}
