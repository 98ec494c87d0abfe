//! A program gets a new, empty session keyring, so it can neither read the
//! keys of the caller's session keyring (a service's, a login's, a
//! container's) nor leave keys there for the next program to find.

use std::io;
use std::os::unix::process::CommandExt;

/// `keyctl`'s operation that joins a new anonymous session keyring.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// Makes `command`'s child join a new anonymous session keyring before
/// exec (after std changed its user, so the keyring is the new user's);
/// the spawn fails if the kernel refuses, except where keyrings cannot be
/// used at all: a kernel without them (`ENOSYS`) or a seccomp filter that
/// refuses `keyctl` (`EPERM`, Docker's default profile), which the
/// program inherits, so it cannot reach a keyring either.
#[allow(unsafe_code)]
pub(crate) fn new_session_keyring(command: &mut std::process::Command) {
    // SAFETY: the closure runs in the forked child, where only
    // async-signal-safe calls are allowed: `keyctl` is one system call with
    // a null name, and the error is made from a raw code (no allocation).
    unsafe {
        command.pre_exec(|| {
            let name: *const libc::c_char = std::ptr::null();
            if libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name) >= 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) => Ok(()),
                _ => Err(error),
            }
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

    /// Makes this thread (and what it spawns) get `EPERM` from `keyctl`, as
    /// Docker's default seccomp profile does.
    #[allow(unsafe_code)]
    fn refuse_keyctl() {
        let rule = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
        let keyctl = u32::try_from(libc::SYS_keyctl).unwrap();
        let filter = [
            // The system call's number, then: keyctl refused, the rest allowed.
            rule((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0, 0, 0),
            rule((libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, 0, 1, keyctl),
            rule((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
            rule((libc::BPF_RET | libc::BPF_K) as u16, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
        // SAFETY: `program` points at `filter`, both alive for the calls;
        // the filter applies to this test's thread only.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            assert_eq!(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &raw const program), 0);
        }
    }

    #[test]
    fn a_seccomp_filter_refusing_keyrings_does_not_stop_the_program() {
        // On a thread of its own: the filter stays with it.
        std::thread::spawn(|| {
            refuse_keyctl();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let outcome = runtime.block_on(Run::new("/bin/echo", ["ran"]).run()).unwrap();
            assert_eq!(outcome.stdout.bytes, b"ran\n");
        })
        .join()
        .unwrap();
    }
}
