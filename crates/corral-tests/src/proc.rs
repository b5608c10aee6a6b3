//! A process by identity, and `/proc` read with corral's own `/proc/PID/stat`
//! parser.

use std::{collections::HashMap, io};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

// The very parser corral uses, included by its path (it needs nothing but
// `std`): what a test reads of a process is what corral reads.
#[path = "../../corral/src/identity/stat.rs"]
mod stat;

pub use stat::{Stat, parse_stat};
use stat::{read_small, read_small_text};

/// Reads `/proc/PID/stat`; `None` if the process does not exist (any more)
/// or the file cannot be parsed.
pub fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let text = read_small(&format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&String::from_utf8_lossy(&text))
}

/// Every process listed in `/proc`, zombies included, read as corral's walk
/// reads it. Entries that vanish or cannot be parsed mid-walk are skipped;
/// an error only if `/proc` itself cannot be listed.
pub fn all_processes() -> io::Result<Vec<Stat>> {
    Ok(pids()?.filter_map(stat).collect())
}

/// The pids listed in `/proc` (processes, not threads).
fn pids() -> io::Result<impl Iterator<Item = i32>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok()))
}

/// The identity of a process: its pid and its start time (field 22 of
/// `/proc/PID/stat`, in clock ticks since boot). A pid can be reused; the
/// pair cannot (in practice).
///
/// `start_time == 0` means the process was already gone (reaped) when its
/// identity was read; such a `Proc` is never alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Proc {
    pub pid: i32,
    pub start_time: u64,
}

impl Proc {
    /// The identity of `pid` right now, if it exists (zombies included).
    pub fn of(pid: i32) -> Option<Self> {
        stat(pid).map(|s| Self {
            pid,
            start_time: s.start_time,
        })
    }

    /// Parses a pid printed by a test command and identifies it.
    ///
    /// # Panics
    /// If `line` is not a pid, or the process is already gone.
    pub fn of_line(line: &str) -> Self {
        let pid = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("not a pid: {line:?}"));
        Self::of(pid).unwrap_or_else(|| panic!("pid {pid} vanished before it was identified"))
    }

    /// True only if this very process still exists (same start time) and is
    /// neither a zombie nor dead.
    pub fn is_alive(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.start_time == self.start_time && s.is_running())
    }

    /// Sends `signal` through a pidfd, only if this is still that very
    /// process: the pidfd pins whatever process has the pid when it is
    /// opened, and the identity is re-checked after opening it. Returns
    /// whether the signal was sent (false if it is gone or a zombie).
    pub fn signal(&self, signal: Signal) -> bool {
        let Some(pid) = Pid::from_raw(self.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        self.is_alive() && pidfd_send_signal(&pidfd, signal).is_ok()
    }

    /// `SIGKILL` by identity (see [`Proc::signal`]).
    pub fn kill(&self) -> bool {
        self.signal(Signal::KILL)
    }

    /// What the process is, for a failure message: its pid, state, parent
    /// (with the parent's command line), process group and session, and its
    /// command line; or that it is gone.
    pub fn describe(&self) -> String {
        let Some(stat) = stat(self.pid).filter(|s| s.start_time == self.start_time) else {
            return format!("pid {} (gone)", self.pid);
        };
        format!(
            "pid {} {:?} (state {}, parent {} {:?}, group {}, session {})",
            self.pid,
            cmdline(self.pid),
            stat.state,
            stat.ppid,
            cmdline(stat.ppid),
            stat.pgid,
            stat.sid
        )
    }

    /// The signal masks of `/proc/PID/status` (`SigIgn`, `SigCgt`, ...);
    /// empty if the process is gone.
    pub fn signal_masks(&self) -> HashMap<String, u64> {
        let text = read_small_text(&format!("/proc/{}/status", self.pid)).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.starts_with("Sig")
                    .then(|| Some((key.to_owned(), u64::from_str_radix(value.trim(), 16).ok()?)))?
            })
            .collect()
    }

    /// Whether the process takes signal `signum` itself: it has a handler
    /// for it (`SigCgt`), or its main thread holds it (`SigBlk`) for a
    /// `signalfd`, as `corral run` does; `false` if it is gone.
    pub fn takes(&self, signum: i32) -> bool {
        let masks = self.signal_masks();
        let bit = |key: &str| masks.get(key).is_some_and(|&m| has_signal(m, signum));
        bit("SigCgt") || bit("SigBlk")
    }

    /// Whether the process ignores signal `signum` (`SigIgn`); `None` if it
    /// is gone.
    pub fn ignores(&self, signum: i32) -> Option<bool> {
        let mask = *self.signal_masks().get("SigIgn")?;
        Some(has_signal(mask, signum))
    }
}

/// The command line of `pid` (`/proc/PID/cmdline`, its arguments joined by
/// spaces); empty if it is gone or a zombie.
pub fn cmdline(pid: i32) -> String {
    let text = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    text.split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command line of a process as corral reports it: its arguments joined
/// by spaces, or `[comm]` when it has none (a kernel thread or a zombie).
pub fn command_line(stat: &Stat) -> String {
    let line = cmdline(stat.pid);
    if line.is_empty() {
        format!("[{}]", stat.comm)
    } else {
        line
    }
}

/// Whether signal `n`'s bit is set in a `/proc` signal mask.
pub fn has_signal(mask: u64, n: i32) -> bool {
    mask & (1 << (n - 1)) != 0
}

/// How many of `procs` are still alive.
pub fn count_alive(procs: &[Proc]) -> usize {
    procs.iter().filter(|p| p.is_alive()).count()
}

/// The running processes that have `argument` as one of their command-line
/// arguments: a token only one test's processes carry, so that what they
/// left running is found without a look at anyone else's.
pub fn with_argument(argument: &str) -> Vec<Proc> {
    with_entry("cmdline", argument)
}

/// The running processes whose environment (as they were started:
/// `/proc/PID/environ`) holds `name=value`: a marker that every process a
/// test's program starts inherits, including those that left its session or
/// were reparented, and that no other process carries. Processes of other
/// users whose environment this one may not read are never found.
pub fn with_env(name: &str, value: &str) -> Vec<Proc> {
    with_entry("environ", &format!("{name}={value}"))
}

/// The running processes with `entry` as one of the NUL-separated entries of
/// `/proc/PID/{file}`.
fn with_entry(file: &str, entry: &str) -> Vec<Proc> {
    let Ok(pids) = pids() else {
        return Vec::new();
    };
    pids.filter(|pid| {
        std::fs::read(format!("/proc/{pid}/{file}"))
            .is_ok_and(|text| text.split(|&b| b == 0).any(|e| e == entry.as_bytes()))
    })
    .filter_map(stat)
    .filter(Stat::is_running)
    .map(|stat| Proc {
        pid: stat.pid,
        start_time: stat.start_time,
    })
    .collect()
}
