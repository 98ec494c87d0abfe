//! The seccomp filter of every run: bubblewrap loads it (`--seccomp 4`)
//! right before it starts the shell, and every process of the run
//! inherits it. A deny list of system calls a program has no use for in
//! the sandbox, and which reach past the namespaces (the kernel's keyrings
//! are not namespaced) or into kernel code with a history of exploits; they
//! fail with `EPERM`, a refusal a program can handle, and everything else
//! is allowed. A system call of another ABI than the module's own (i386 on
//! x86_64, arm32 on aarch64) kills the process: its numbers are not the
//! ones listed. x86_64's x32 ABI shares the architecture but marks its
//! numbers with a high bit: every number with that bit fails with `EPERM`.
//!
//! Built at start-up with `seccompiler` (rust-vmm's, from Firecracker:
//! pure Rust, x86_64, aarch64 and riscv64, libc its only dependency), which
//! compiles the list to classic BPF behind its own architecture check.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch, sock_filter};

/// The system calls refused on every architecture.
const REFUSED: &[libc::c_long] = &[
    // The kernel's keyrings, shared by every namespace.
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // Reading or changing another process.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    // Loading a kernel or kernel modules.
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    // Kernel facilities behind many privilege escalations.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Mounts and namespaces (already refused for want of capabilities, and
    // nested user namespaces are disabled: a second wall).
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    // The machine's own state: swap, power, accounting, clocks, quotas, the kernel log.
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_adjtimex,
    libc::SYS_clock_adjtime,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_syslog,
    // File handles open files by inode, past the sandbox's mounts.
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // Watching the whole file system; profiling the kernel.
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
];

/// The system calls refused on x86_64 alone.
#[cfg(target_arch = "x86_64")]
const REFUSED_HERE: &[libc::c_long] = &[libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_kexec_file_load];

/// The system calls refused on the other architectures, numbered as in the
/// kernel's generic table (aarch64, riscv64): `kexec_file_load`, which
/// libc does not name for every C library there.
#[cfg(not(target_arch = "x86_64"))]
const REFUSED_HERE: &[libc::c_long] = &[294];

/// The bit x86_64's x32 ABI sets in its system call numbers; no other ABI
/// numbers a system call that high.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The filter could not be built: the module does not start, as it never
/// runs code without it.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the sandbox's seccomp filter for {arch}: {source}; the module never runs code without it")]
pub struct FilterError {
    /// The architecture the module was built for.
    arch: &'static str,
    /// seccompiler's reason.
    source: seccompiler::BackendError,
}

/// The compiled filter, as bubblewrap reads it: each instruction's 8
/// bytes (`struct sock_filter`), in the machine's byte order.
pub fn build() -> Result<Vec<u8>, FilterError> {
    Ok(to_bytes(&program()?))
}

/// The filter's instructions: the x32 refusal, then seccompiler's
/// architecture check and deny list.
fn program() -> Result<BpfProgram, FilterError> {
    let arch = std::env::consts::ARCH;
    let error = |source| FilterError { arch, source };
    let target = TargetArch::try_from(arch).map_err(error)?;
    // An empty rule list refuses the call whatever its arguments.
    let rules: BTreeMap<i64, Vec<_>> = REFUSED.iter().chain(REFUSED_HERE).map(|&number| (number, Vec::new())).collect();
    let refuse = SeccompAction::Errno(libc::EPERM.unsigned_abs());
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, refuse, target).map_err(error)?;
    let listed = BpfProgram::try_from(filter).map_err(error)?;
    let statement = |code: u32, jt: u8, jf: u8, k: u32| sock_filter { code: code as u16, jt, jf, k };
    let refused = libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs();
    // The number (`seccomp_data.nr`, at offset 0); with the x32 bit: refused,
    // else on to the architecture check (jumps count from the next instruction).
    let mut program = vec![
        statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        statement(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 0, 1, X32_SYSCALL_BIT),
        statement(libc::BPF_RET | libc::BPF_K, 0, 0, refused),
    ];
    program.extend(listed);
    Ok(program)
}

/// `program` as the bytes of an array of `struct sock_filter`.
fn to_bytes(program: &[sock_filter]) -> Vec<u8> {
    let instruction = |i: &sock_filter| {
        let [code0, code1] = i.code.to_ne_bytes();
        let [k0, k1, k2, k3] = i.k.to_ne_bytes();
        [code0, code1, i.jt, i.jf, k0, k1, k2, k3]
    };
    program.iter().flat_map(instruction).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instruction_is_eight_bytes_in_the_kernels_layout() {
        let program = program().unwrap();
        let bytes = build().unwrap();
        assert_eq!(bytes.len(), program.len() * 8);
        // The x32 test first: `BPF_JMP | BPF_JSET | BPF_K` (0x45), jumps 0 and 1,
        // the bit (seccompiler builds only for little-endian machines).
        assert_eq!(bytes[8..16], [0x45, 0, 0, 1, 0, 0, 0, 0x40]);
        assert!(program.len() < 4096, "the kernel's limit");
    }

    /// Runs `code` in python3 on a thread with the filter loaded; its stdout.
    fn filtered_python(code: &str) -> String {
        let code = code.to_owned();
        std::thread::spawn(move || {
            seccompiler::apply_filter(&program().unwrap()).unwrap();
            let output = std::process::Command::new("/usr/bin/python3").args(["-c", &code]).output().unwrap();
            String::from_utf8_lossy(&output.stdout).into_owned()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn listed_calls_and_x32_numbers_fail_with_eperm_and_others_run() {
        let code = format!(
            "import ctypes, os\nL = ctypes.CDLL(None, use_errno=True)\nL.syscall.restype = ctypes.c_long\n\
             def errno(*args):\n    ctypes.set_errno(0)\n    L.syscall(*args)\n    return ctypes.get_errno()\n\
             print(errno({keyctl}, 0, ctypes.c_long(-3), 0), errno({getpid} | {x32}), os.getpid() > 0)",
            keyctl = libc::SYS_keyctl,
            getpid = libc::SYS_getpid,
            x32 = X32_SYSCALL_BIT,
        );
        assert_eq!(filtered_python(&code), "1 1 True\n");
    }
}
