//! Run a program from an argv, contained: a cleared environment plus an
//! allow-list, stdin closed (or given bytes), no descriptor of the caller's
//! but the pipes it is given, its own process group,
//! resource limits (and optionally another user and cgroups to join) set before exec, a
//! wall-clock timeout that kills the whole group and every descendant
//! still attached to the tree, SIGKILL when the caller dies, a new empty session keyring, and stdout/stderr (and optionally
//! descriptor 3) read concurrently with a byte cap, and optionally bytes to read
//! on descriptor 4.
//!
//! ```no_run
//! # async fn example() -> Result<(), limited_process::RunError> {
//! use limited_process::{Limits, Run};
//! let run = Run::new("wc", ["-w"]).env("PATH", "/usr/bin:/bin").limits(Limits::default());
//! let outcome = run.run().await?;
//! println!("{:?} {}", outcome.exit, String::from_utf8_lossy(&outcome.stdout.bytes));
//! # Ok(())
//! # }
//! ```
//!
//! No shell is involved: the argv is given to `execve` as it is.
//!
//! [`ProcessGroupGuard`] gives the same end to a child spawned elsewhere as
//! the leader of its own group (a long-lived server): dropping it kills the
//! group and the tree below the child.
//!
//! A process whose children are all runs can call [`become_subreaper`]:
//! then descendants that left a program's tree (`setsid cmd &`, a double
//! fork) are killed and reaped after every exit of their program, not only
//! at the timeout.

mod cgroup;
mod descriptors;
mod group;
mod limits;
mod orphans;
mod output;
mod parent_death;
mod run;
mod session_keyring;
mod side_input;
mod side_output;
mod tree;

pub use descriptors::close_from_on_exec;
pub use group::ProcessGroupGuard;
pub use limits::Limits;
pub use orphans::become_subreaper;
pub use output::Captured;
pub use run::{Exit, Outcome, Run, RunError};
pub use side_input::SIDE_INPUT_FD;
pub use side_output::SIDE_OUTPUT_FD;
