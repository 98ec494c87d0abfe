//! A cgroup per run, so that a run's memory, processes and CPU are bounded
//! in total, not per process: the kernel counts every process of the run
//! against `memory.max`, `pids.max` and `cpu.max` (cgroup v2), or the
//! same limits of the memory, pids and cpu hierarchies (cgroup v1).
//!
//! The run's cgroups are made under the module's own cgroup, which must be
//! writable (delegated), or under the cgroup `CODE_CGROUP_PARENT` names
//! ([`Hierarchy::discover`]); the first process of the run writes itself into
//! them before exec, and they are removed after the run with whatever is
//! still in them. A run cgroup's name says which process made it
//! ([`run_name`]); at start, a module empties and removes the run cgroups
//! that a killed module of its own PID namespace left behind
//! ([`Hierarchy::remove_left_behind`]).

mod run_name;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use self::run_name::{Owner, RunName};

/// The period `cpu.max` gives its quota in, in microseconds.
const CPU_PERIOD_MICROS: u64 = 100_000;

/// The controllers a run needs.
const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// The leaf the module moves itself into under cgroup v2 (a cgroup that
/// hands controllers to its children may hold no process itself).
const MODULE_LEAF: &str = "code_runner-module";

/// How often [`RunCgroup::remove`] tries to empty and remove the cgroups
/// (and [`Hierarchy::remove_left_behind`] all it found, together).
const REMOVE_ATTEMPTS: u32 = 100;

/// How long a run's cgroups that could not be removed at once (a call
/// given up mid-run, processes slow to exit) are still tried in the
/// background, with pauses growing to a second.
const REMOVE_IN_BACKGROUND: Duration = Duration::from_secs(600);

/// Numbers run cgroups, so that no two runs share a name.
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

/// Where the cgroups of runs are made; found once at start.
#[derive(Debug, Clone)]
pub enum Hierarchy {
    /// cgroup v2: the directory whose children get the memory, pids and cpu controllers.
    Unified(PathBuf),
    /// cgroup v1: the module's own cgroup (or the parent set) in each of the
    /// memory, pids and cpu hierarchies.
    Legacy(Vec<PathBuf>),
}

/// Why no cgroup per run can be made here.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No mounted hierarchy offers a controller a run needs.
    #[error("no cgroup hierarchy this process can see offers the `{0}` controller")]
    NoController(&'static str),
    /// A run's cgroup lacks a file its controller should have.
    #[error("a run's cgroup has no `{0}` file")]
    MissingFile(&'static str),
    /// The parent set for run cgroups cannot hold them.
    #[error("{} {problem}", dir.display())]
    BadParent {
        /// The parent's directory in one hierarchy.
        dir: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `/proc/self/stat` gives no start time to name run cgroups with.
    #[error("/proc/self/stat gives no start time (field 22) to name run cgroups with")]
    NoStartTime,
    /// A file of the cgroup file system could not be read or written.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was tried.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
}

/// The totals one run's cgroup enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunBudget {
    /// `memory.max`: bytes of memory (swap none) of all its processes.
    pub memory_bytes: u64,
    /// `pids.max`: processes and threads at one time.
    pub processes: u64,
    /// `cpu.max`: CPUs' worth of time per period.
    pub cpus: u64,
}

/// What a run ran into, read from its cgroup before it is removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exceeded {
    /// The kernel killed a process of the run for `memory.max`.
    pub memory: bool,
    /// A fork or thread of the run was refused for `pids.max`.
    pub processes: bool,
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CgroupError {
    let path = path.to_owned();
    move |source| CgroupError::Io { what, path, source }
}

fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(io_error("read", path))
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(io_error("write", path))
}

/// One mount of a cgroup file system, from `/proc/self/mountinfo`.
struct Mount {
    root: String,
    point: PathBuf,
    unified: bool,
    options: Vec<String>,
}

fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let options = right.nth(1)?.split(',').map(str::to_owned).collect();
            let unified = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount { root: (*left.get(3)?).to_owned(), point: PathBuf::from(left.get(4)?), unified, options })
        })
        .collect()
}

/// The directory of the cgroup at `path` (as `/proc/self/cgroup` says it)
/// in the hierarchy mounted at `mount`.
fn directory(mount: &Mount, path: &str) -> PathBuf {
    let relative = Path::new(path).strip_prefix(&mount.root).unwrap_or(Path::new(path));
    mount.point.join(relative.strip_prefix("/").unwrap_or(relative))
}

/// Whether a controllers file (`cgroup.controllers`, `cgroup.subtree_control`)
/// lists every controller a run needs.
fn lists_all(controllers: &str) -> bool {
    CONTROLLERS.iter().all(|c| controllers.split_whitespace().any(|listed| listed == *c))
}

/// Enables every controller a run needs in a `cgroup.subtree_control` file.
fn enable_controllers(subtree: &Path) -> Result<(), CgroupError> {
    write(subtree, &CONTROLLERS.map(|c| format!("+{c}")).join(" "))
}

/// Whether a `cgroup.procs` file lists any process.
fn holds_processes(procs: &str) -> bool {
    procs.lines().any(|line| !line.trim().is_empty())
}

/// The lines of `/proc/self/cgroup`, as (controllers, path) pairs.
fn own_cgroups(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            Some((parts.nth(1)?, parts.next()?))
        })
        .collect()
}

/// The cgroup v1 hierarchy of `controller`, if one is mounted.
fn legacy_mount<'a>(mounts: &'a [Mount], controller: &str) -> Option<&'a Mount> {
    mounts.iter().find(|mount| !mount.unified && mount.options.iter().any(|option| option == controller))
}

/// Whether a cgroup v1 hierarchy is mounted for each controller a run needs.
fn has_legacy_hierarchies(mounts: &[Mount]) -> bool {
    CONTROLLERS.iter().all(|controller| legacy_mount(mounts, controller).is_some())
}

/// The directories of the cgroup v1 memory, pids and cpu hierarchies that
/// run cgroups are made in: `parent` in each, or else the module's own
/// cgroup there (`own`, from `/proc/self/cgroup`); one per mount.
fn legacy_dirs(mounts: &[Mount], own: &[(&str, &str)], parent: Option<&str>) -> Result<Vec<PathBuf>, CgroupError> {
    let mut dirs = Vec::new();
    for controller in CONTROLLERS {
        let mount = legacy_mount(mounts, controller).ok_or(CgroupError::NoController(controller))?;
        let path = match parent {
            Some(parent) => parent,
            None => {
                own.iter()
                    .find(|(controllers, _)| controllers.split(',').any(|c| c == controller))
                    .ok_or(CgroupError::NoController(controller))?
                    .1
            }
        };
        let dir = directory(mount, path);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    Ok(dirs)
}

/// Checks that `dir`, a parent set for run cgroups, is a cgroup: a
/// directory with a `cgroup.procs` file. (Whether it is writable shows
/// when the trial run cgroup is made in it.)
fn check_parent(dir: &Path) -> Result<(), CgroupError> {
    let bad = |problem| CgroupError::BadParent { dir: dir.to_owned(), problem };
    match fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => return Err(bad("is not a directory")),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Err(bad("does not exist")),
        Err(error) => return Err(io_error("inspect", dir)(error)),
    }
    if !dir.join("cgroup.procs").is_file() {
        return Err(bad("has no cgroup.procs: it is not a cgroup"));
    }
    Ok(())
}

impl Hierarchy {
    /// Finds where run cgroups can be made. Without `parent`: the module's
    /// own cgroup v2 when it offers the memory, pids and cpu controllers
    /// (moving the module into a leaf of its own to hand them down), else
    /// its own cgroups in the v1 memory, pids and cpu hierarchies. With
    /// `parent` (a path as `/proc/self/cgroup` writes one): that cgroup
    /// under the v2 mount when it offers the controllers there (taken as it
    /// is: no process is moved), else under each of the v1 hierarchies'
    /// mounts, where it must be a cgroup already.
    pub fn discover(parent: Option<&str>) -> Result<Self, CgroupError> {
        let mounts = mounts(&read(Path::new("/proc/self/mountinfo"))?);
        let own = read(Path::new("/proc/self/cgroup"))?;
        let own = own_cgroups(&own);
        let unified_path =
            parent.or_else(|| own.iter().find(|(controllers, _)| controllers.is_empty()).map(|(_, path)| *path));
        if let (Some(mount), Some(path)) = (mounts.iter().find(|m| m.unified), unified_path) {
            let dir = directory(mount, path);
            if lists_all(&read(&dir.join("cgroup.controllers")).unwrap_or_default()) {
                return if parent.is_some() { Self::adopt(dir) } else { Self::delegate(dir) };
            }
            if parent.is_some() && !has_legacy_hierarchies(&mounts) {
                // No v1 hierarchy to look in: what is wrong is the v2 parent.
                check_parent(&dir)?;
                let problem = "does not offer the memory, pids and cpu controllers (its cgroup.controllers): enable them in its parent's cgroup.subtree_control";
                return Err(CgroupError::BadParent { dir, problem });
            }
        }
        let dirs = legacy_dirs(&mounts, &own, parent)?;
        if parent.is_some() {
            dirs.iter().try_for_each(|dir| check_parent(dir))?;
        }
        Ok(Self::Legacy(dirs))
    }

    /// Makes `dir` (cgroup v2) hand the controllers down to run cgroups:
    /// unless it already does, moves this process into a leaf below it
    /// and enables them.
    fn delegate(dir: PathBuf) -> Result<Self, CgroupError> {
        let subtree = dir.join("cgroup.subtree_control");
        if lists_all(&read(&subtree)?) {
            return Ok(Self::Unified(dir));
        }
        let leaf = dir.join(MODULE_LEAF);
        if let Err(error) = fs::create_dir(&leaf)
            && error.kind() != io::ErrorKind::AlreadyExists
        {
            return Err(io_error("create", &leaf)(error));
        }
        write(&leaf.join("cgroup.procs"), "0")?;
        enable_controllers(&subtree)?;
        Ok(Self::Unified(dir))
    }

    /// Takes `dir`, a parent set for run cgroups (cgroup v2), as it is:
    /// moves no process, refuses it when it holds processes (a cgroup that
    /// hands controllers down may hold none), and enables the controllers
    /// in its `cgroup.subtree_control` unless they are.
    fn adopt(dir: PathBuf) -> Result<Self, CgroupError> {
        check_parent(&dir)?;
        if holds_processes(&read(&dir.join("cgroup.procs"))?) {
            let problem = "holds processes: under cgroup v2 the parent of run cgroups may hold none";
            return Err(CgroupError::BadParent { dir, problem });
        }
        let subtree = dir.join("cgroup.subtree_control");
        if !lists_all(&read(&subtree)?) {
            enable_controllers(&subtree)?;
        }
        Ok(Self::Unified(dir))
    }

    /// Whether run cgroups are v2 ones, and the directories they are made in.
    fn parents(&self) -> (bool, &[PathBuf]) {
        match self {
            Self::Unified(dir) => (true, std::slice::from_ref(dir)),
            Self::Legacy(dirs) => (false, dirs.as_slice()),
        }
    }

    /// Kills the processes in, and removes, the run cgroups here whose name
    /// records an owner of this process's PID namespace that has ended (its
    /// PID gone, or started at another time): those of a module killed
    /// mid-run. Names of another form or PID namespace, and of owners that
    /// may be alive, are left alone. Takes at most [`REMOVE_ATTEMPTS`]
    /// rounds of 10 ms in all; what fails is logged, never fatal.
    pub fn remove_left_behind(&self) {
        let own = match Owner::current() {
            Ok(own) => own,
            Err(error) => {
                tracing::warn!(%error, "cannot tell which run cgroups a killed module left behind; none are removed");
                return;
            }
        };
        if !run_name::proc_shows(own.pid) {
            // A `/proc` of another PID namespace (not remounted after
            // `unshare`) would show other processes under the names' PIDs.
            tracing::warn!(
                pid = own.pid,
                "/proc does not show this process under its own PID (it belongs to another PID namespace); run cgroups a killed module left behind are not removed"
            );
            return;
        }
        let (unified, parents) = self.parents();
        let mut found: Vec<(RunName, RunCgroup)> = Vec::new();
        for parent in parents {
            let entries = match fs::read_dir(parent) {
                Ok(entries) => entries,
                Err(error) => {
                    tracing::warn!(%error, parent = %parent.display(), "cannot list run cgroups left behind");
                    continue;
                }
            };
            for entry in entries.flatten() {
                let Some(name) = entry.file_name().to_str().and_then(RunName::parse) else { continue };
                if !entry.file_type().is_ok_and(|t| t.is_dir()) || !name.left_behind(own.pidns, run_name::seen) {
                    continue;
                }
                match found.iter_mut().find(|(known, _)| *known == name) {
                    Some((_, cgroup)) => cgroup.dirs.push(entry.path()),
                    None => found.push((name, RunCgroup { unified, dirs: vec![entry.path()] })),
                }
            }
        }
        if found.is_empty() {
            return;
        }
        let dirs: Vec<PathBuf> = found.iter().flat_map(|(_, cgroup)| cgroup.dirs.clone()).collect();
        let mut left: Vec<RunCgroup> = found.into_iter().map(|(_, cgroup)| cgroup).collect();
        for _ in 0..REMOVE_ATTEMPTS {
            left.retain_mut(|cgroup| !cgroup.try_remove());
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Taken, so that dropping them tries nothing more.
        let kept: Vec<PathBuf> = left.iter_mut().flat_map(|cgroup| std::mem::take(&mut cgroup.dirs)).collect();
        let removed: Vec<&PathBuf> = dirs.iter().filter(|dir| !kept.contains(dir)).collect();
        if !removed.is_empty() {
            tracing::warn!(cgroups = ?removed, "removed the run cgroups (and their processes) a killed module left behind");
        }
        if !kept.is_empty() {
            tracing::warn!(cgroups = ?kept, "run cgroups a killed module left behind could not be removed");
        }
    }
}

/// One run's cgroup (one per hierarchy under cgroup v1); removed by
/// [`RunCgroup::remove`], or at least tried on drop.
#[derive(Debug)]
pub struct RunCgroup {
    unified: bool,
    /// The directories made, the memory one first.
    dirs: Vec<PathBuf>,
}

impl RunCgroup {
    /// Makes a fresh cgroup for one run under `hierarchy`, with `budget`.
    pub fn create(hierarchy: &Hierarchy, budget: RunBudget) -> Result<Self, CgroupError> {
        let name = RunName { owner: Owner::current()?, run: NEXT_RUN.fetch_add(1, Ordering::Relaxed) };
        let (unified, parents) = hierarchy.parents();
        let mut cgroup = Self { unified, dirs: Vec::new() };
        for parent in parents {
            let dir = parent.join(name.to_string());
            fs::create_dir(&dir).map_err(io_error("create", &dir))?;
            cgroup.dirs.push(dir);
        }
        cgroup.set_limits(budget)?;
        Ok(cgroup)
    }

    /// The file in whichever of the run's directories has it.
    fn file(&self, name: &str) -> Option<PathBuf> {
        self.dirs.iter().map(|dir| dir.join(name)).find(|path| path.exists())
    }

    fn set(&self, name: &'static str, value: impl ToString) -> Result<(), CgroupError> {
        let path = self.file(name).ok_or(CgroupError::MissingFile(name))?;
        write(&path, &value.to_string())
    }

    fn set_limits(&self, budget: RunBudget) -> Result<(), CgroupError> {
        let quota = budget.cpus.saturating_mul(CPU_PERIOD_MICROS);
        if self.unified {
            self.set("memory.max", budget.memory_bytes)?;
            if let Some(swap) = self.file("memory.swap.max") {
                write(&swap, "0")?;
            }
            self.set("pids.max", budget.processes)?;
            return self.set("cpu.max", format!("{quota} {CPU_PERIOD_MICROS}"));
        }
        self.set("memory.limit_in_bytes", budget.memory_bytes)?;
        // Memory plus swap, so no swap at all (absent without swap accounting).
        if self.file("memory.memsw.limit_in_bytes").is_some() {
            self.set("memory.memsw.limit_in_bytes", budget.memory_bytes)?;
        }
        self.set("pids.max", budget.processes)?;
        self.set("cpu.cfs_period_us", CPU_PERIOD_MICROS)?;
        self.set("cpu.cfs_quota_us", quota)
    }

    /// The `cgroup.procs` files of the run's cgroups, opened for writing,
    /// for the run's first process to write itself into.
    pub fn procs(&self) -> Result<Vec<File>, CgroupError> {
        self.dirs
            .iter()
            .map(|dir| {
                let path = dir.join("cgroup.procs");
                OpenOptions::new().write(true).open(&path).map_err(io_error("open", &path))
            })
            .collect()
    }

    /// A counter of an events file (`oom_kill` of `memory.events`), 0 when absent.
    fn counter(&self, file: &str, key: &str) -> u64 {
        let Some(path) = self.file(file) else { return 0 };
        let text = fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .find(|(name, _)| *name == key)
            .and_then(|(_, value)| value.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Which of the run's totals it ran into.
    pub fn exceeded(&self) -> Exceeded {
        let memory_events = if self.unified { "memory.events" } else { "memory.oom_control" };
        Exceeded {
            memory: self.counter(memory_events, "oom_kill") > 0,
            processes: self.counter("pids.events", "max") > 0,
        }
    }

    /// Kills what is left in the cgroups and removes them; `true` when they are gone.
    fn try_remove(&mut self) -> bool {
        if let Some(kill_all) = self.file("cgroup.kill") {
            let _ = fs::write(kill_all, "1");
        }
        for dir in &self.dirs {
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            // Never 0 or below: kill(2) would take those for process groups.
            for pid in procs.lines().filter_map(|line| line.trim().parse().ok()).filter(|&pid| pid > 0) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        self.dirs.retain(|dir| fs::remove_dir(dir).is_err() && dir.exists());
        self.dirs.is_empty()
    }

    /// Kills every process still in the run's cgroups (descendants that
    /// escaped the process tree included) and removes the cgroups, waiting
    /// for the processes to exit; what is still there after
    /// [`REMOVE_ATTEMPTS`] tries is left to the background (see `Drop`).
    pub async fn remove(mut self) {
        for _ in 0..REMOVE_ATTEMPTS {
            if self.try_remove() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Tries to remove the cgroups `dirs` for [`REMOVE_IN_BACKGROUND`]:
    /// the processes of a run with many files may take seconds to exit.
    /// (Not a method: a task dropped before its first poll, at shutdown,
    /// drops plain paths, and no `Drop` spawns another.)
    async fn remove_in_background(unified: bool, dirs: Vec<PathBuf>) {
        let mut cgroup = Self { unified, dirs };
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(10);
        while started.elapsed() < REMOVE_IN_BACKGROUND {
            if cgroup.try_remove() {
                return;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
        tracing::warn!(cgroups = ?cgroup.dirs, "a run's cgroup could not be removed; its processes were killed");
        cgroup.dirs.clear();
    }
}

impl Drop for RunCgroup {
    /// A run given up mid-way (its call dropped), or one whose processes
    /// are slow to exit: the processes are killed now and the cgroups
    /// removed by a background task once they are gone, so that no empty
    /// run cgroup stays behind for the module's lifetime.
    fn drop(&mut self) {
        if self.dirs.is_empty() || self.try_remove() {
            return;
        }
        let dirs = std::mem::take(&mut self.dirs);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(Self::remove_in_background(self.unified, dirs));
            }
            Err(_) => tracing::warn!(cgroups = ?dirs, "a run's cgroup is left behind"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_and_directories_of_both_versions() {
        let mountinfo = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                         32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
                         41 31 0:38 /outer /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                         23 1 0:21 / /proc rw - proc proc rw";
        let found = mounts(mountinfo);
        assert_eq!(found.len(), 3);
        assert!(found[1].options.iter().any(|o| o == "cpu") && !found[1].unified);
        assert_eq!(directory(&found[0], "/a/b"), PathBuf::from("/sys/fs/cgroup/memory/a/b"));
        assert!(found[2].unified);
        assert_eq!(directory(&found[2], "/outer/module"), PathBuf::from("/sys/fs/cgroup/unified/module"));
        assert_eq!(directory(&found[2], "/outer"), PathBuf::from("/sys/fs/cgroup/unified"));
        assert_eq!(directory(&found[2], "/outerx/a"), PathBuf::from("/sys/fs/cgroup/unified/outerx/a"));
    }

    #[test]
    fn a_parent_is_taken_in_each_v1_hierarchy_instead_of_the_own_cgroups() {
        let mountinfo = "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                         39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
                         32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct";
        let found = mounts(mountinfo);
        let own = own_cgroups("8:pids:/\n4:memory:/api/7\n2:cpu,cpuacct:/\n0::/");
        let dirs = |parent| legacy_dirs(&found, &own, parent).unwrap();
        let at = |dirs: [&str; 3]| dirs.map(PathBuf::from).to_vec();
        assert_eq!(
            dirs(None),
            at(["/sys/fs/cgroup/memory/api/7", "/sys/fs/cgroup/pids/", "/sys/fs/cgroup/cpu,cpuacct/"])
        );
        assert_eq!(
            dirs(Some("/system.slice/x")),
            at([
                "/sys/fs/cgroup/memory/system.slice/x",
                "/sys/fs/cgroup/pids/system.slice/x",
                "/sys/fs/cgroup/cpu,cpuacct/system.slice/x"
            ])
        );
        let no_pids = mounts("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory");
        assert!(matches!(legacy_dirs(&no_pids, &own, Some("/x")), Err(CgroupError::NoController("pids"))));
        assert!(has_legacy_hierarchies(&found));
        assert!(!has_legacy_hierarchies(&no_pids));
        let v2_only = mounts("29 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate");
        assert!(!has_legacy_hierarchies(&v2_only), "a v2 parent's own problem is named");
    }

    #[test]
    fn controllers_and_processes_of_a_v2_parent() {
        assert!(lists_all("cpuset cpu io memory hugetlb pids rdma\n"));
        assert!(!lists_all("cpu io pids\n") && !lists_all("") && !lists_all("memory pids cpuset"));
        assert!(!holds_processes("") && !holds_processes("\n"));
        assert!(holds_processes("4242\n"));
    }

    #[test]
    fn a_parent_that_is_no_cgroup_is_named_with_what_is_wrong() {
        let problem = |dir: &Path| match check_parent(dir) {
            Err(CgroupError::BadParent { problem, .. }) => problem,
            other => panic!("{other:?}"),
        };
        assert_eq!(problem(Path::new("/nonexistent/code_runner")), "does not exist");
        assert_eq!(problem(Path::new("/proc/self/stat")), "is not a directory");
        assert_eq!(problem(Path::new("/proc/self")), "has no cgroup.procs: it is not a cgroup");
    }
}
