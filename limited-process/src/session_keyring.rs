//! A program gets a new, empty session keyring, so it can neither read the
//! keys of the caller's session keyring (a service's, a login's, a
//! container's) nor leave keys there for the next program to find.

use std::io;
use std::os::unix::process::CommandExt;

/// `keyctl`'s operation that joins a new anonymous session keyring.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Makes `command`'s child join a new anonymous session keyring before
/// exec (after std changed its user, so the keyring is the new user's);
/// the spawn fails if the kernel refuses.
#[allow(unsafe_code)]
pub(crate) fn new_session_keyring(command: &mut std::process::Command) {
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: `keyctl` is one system call with
    // a null name, and the error is made from a raw code (no allocation).
    unsafe {
        command.pre_exec(|| {
            let name: *const libc::c_char = std::ptr::null();
            if libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::Run;

    /// This thread's session keyring (its user session keyring when it has none).
    #[allow(unsafe_code)]
    fn own_session_keyring() -> i64 {
        const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
        const KEY_SPEC_SESSION_KEYRING: libc::c_long = -3;
        // SAFETY: a query of this thread's credentials; no memory is passed.
        unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0 as libc::c_long) }
    }

    #[tokio::test]
    async fn the_program_gets_a_session_keyring_of_its_own() {
        let own = own_session_keyring();
        assert!(own > 0, "no session keyring to compare with: {}", std::io::Error::last_os_error());
        let script = "import ctypes\nL = ctypes.CDLL(None)\nL.syscall.restype = ctypes.c_long\nprint(L.syscall(250, 0, ctypes.c_long(-3), 0))";
        let outcome = Run::new("/usr/bin/python3", ["-c", script]).run().await.unwrap();
        let theirs: i64 = String::from_utf8_lossy(&outcome.stdout.bytes).trim().parse().unwrap();
        assert!(theirs > 0, "{outcome:?}");
        assert_ne!(theirs, own, "the program shares the caller's session keyring");
    }
}
