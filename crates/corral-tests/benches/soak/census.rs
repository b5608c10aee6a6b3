//! What is left after a stretch of the soak: processes from the run, and the
//! resources that must come back (descriptors, cgroup leaves, ledger records,
//! memory). Only read at quiet points, when no tree runs.
//!
//! Processes are killed only by identity (pidfd, then the start time checked,
//! then the signal through the pidfd: [`Proc::kill`]) and zombies are reaped
//! only while no corral leader is unreaped (no supervisor task alive).

use std::{
    collections::{HashMap, HashSet},
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use corral::Backend;
use rustix::process::{Pid, WaitOptions, waitpid};

use corral_tests::{
    Proc, kill_within,
    proc::{self, Stat},
};

use crate::plan::Mode;

/// The environment variable that ties every process of a tree to its
/// invocation: `RUN:N`, the run's id and the invocation's number.
pub const MARKER: &str = "CORRAL_SOAK_CALL";

/// What an invocation ran, by its number.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    pub backend: Backend,
    pub mode: Mode,
}

/// The invocations since the last quiet point.
pub type Origins = HashMap<usize, Origin>;

/// A running process from the run.
#[derive(Debug)]
pub struct Leftover {
    pub stat: Stat,
    pub command: String,
    /// The invocation number from its environment, if it has one.
    pub call: Option<usize>,
    pub origin: Option<Origin>,
}

impl Leftover {
    /// An orphan in a session of its own from a fixture that makes one, on
    /// the process-group backend: the documented hole (G1, "partly").
    pub fn documented_hole(&self) -> bool {
        self.stat.sid == self.stat.pid
            && self
                .origin
                .is_some_and(|o| o.backend == Backend::Group && !o.mode.group_holes().is_empty())
    }
}

/// Running processes from this run: every descendant of this process (it is
/// a child subreaper, so orphans of the trees come to it) and every process
/// whose environment names the run (should one reach init anyway).
/// Zombies do not count; the watchdog helper is not from the run.
pub fn leftovers(run: &str, origins: &Origins) -> Vec<Leftover> {
    let Ok(table) = proc::all_processes() else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let helper = corral::watchdog::helper_pid();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for stat in &table {
        children.entry(stat.ppid).or_default().push(stat.pid);
    }
    let mut ours = HashSet::new();
    let mut queue = vec![me];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if Some(child) != helper && ours.insert(child) {
                queue.push(child);
            }
        }
    }
    table
        .into_iter()
        .filter(|s| s.is_running() && s.pid != me)
        .filter_map(|stat| {
            let call = call_of(stat.pid, run);
            (ours.contains(&stat.pid) || call.is_some()).then(|| Leftover {
                command: proc::command_line(&stat),
                origin: call.and_then(|n| origins.get(&n).copied()),
                call,
                stat,
            })
        })
        .collect()
}

/// The invocation number in `/proc/PID/environ`, if the process is from `run`.
fn call_of(pid: i32, run: &str) -> Option<usize> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER}={run}:");
    environ.split(|&b| b == 0).find_map(|entry| {
        std::str::from_utf8(entry)
            .ok()?
            .strip_prefix(&prefix)?
            .parse()
            .ok()
    })
}

/// Kills the leftovers by identity and waits up to 2 s for them to go.
/// Returns how many still run.
pub fn kill(leftovers: &[Leftover]) -> usize {
    let procs: Vec<Proc> = leftovers
        .iter()
        .map(|l| Proc {
            pid: l.stat.pid,
            start_time: l.stat.start_time,
        })
        .collect();
    kill_within(&procs, Duration::from_secs(2)).1
}

/// Reaps this process's zombie children (orphans adopted as subreaper). Only
/// at a quiet point: every corral leader has been reaped by its supervisor,
/// and the watchdog helper is left to the library.
pub fn reap_zombies() -> usize {
    let me = std::process::id() as i32;
    let helper = corral::watchdog::helper_pid();
    let table = proc::all_processes().unwrap_or_default();
    table
        .iter()
        .filter(|s| s.ppid == me && s.state == 'Z' && Some(s.pid) != helper)
        .filter_map(|s| Pid::from_raw(s.pid))
        // A zombie's pid cannot be reused before it is reaped.
        .filter(|&pid| matches!(waitpid(Some(pid), WaitOptions::NOHANG), Ok(Some(_))))
        .count()
}

/// Open descriptors of this process.
pub fn open_fds() -> usize {
    fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

/// Resident memory of this process, in KiB (`VmRSS`).
pub fn rss_kib() -> u64 {
    status_kib("VmRSS")
}

/// The anonymous part of the resident memory (`RssAnon`), in KiB: the heap
/// and stacks, without the pages of the executable and libraries.
pub fn rss_anon_kib() -> u64 {
    status_kib("RssAnon")
}

fn status_kib(field: &str) -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Returns the allocator's free memory to the kernel (`malloc_trim(0)`), so
/// that resident memory measures what is allocated.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free heap memory; no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes the allocator has handed out and not had back (`mallinfo2`:
/// in-use chunks plus mmapped blocks), in KiB: live heap memory, whatever the
/// allocator keeps of freed memory. 0 where glibc is not the allocator.
pub fn heap_in_use_kib() -> u64 {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
        let info = unsafe { libc::mallinfo2() };
        ((info.uordblks + info.hblkhd) / 1024) as u64
    }
    #[cfg(not(target_env = "gnu"))]
    {
        0
    }
}

/// This process's cgroup leaves (`corral-PID-*`) under `parent`.
pub fn cgroup_leaves(parent: Option<&Path>) -> Vec<PathBuf> {
    let Some(parent) = parent else {
        return Vec::new();
    };
    let prefix = format!("corral-{}-", std::process::id());
    fs::read_dir(parent)
        .map(|dir| {
            dir.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Ledger records (`*.json`) in `dir`.
pub fn ledger_records(dir: &Path) -> usize {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
        .unwrap_or(0)
}

/// Polls `probe` every 10 ms until it returns true or `bound` passes.
pub fn settle(bound: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + bound;
    loop {
        if probe() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
