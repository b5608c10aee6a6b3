//! Helpers shared by the `corral` binary's tests; include with `mod common;`.
//!
//! Processes are named by identity ([`Proc`]: pid plus start time from
//! `/proc/PID/stat`) and signalled only through a pidfd after re-checking
//! that identity. A zombie is not a survivor. [`Guard`] SIGKILLs whatever a
//! test started if the test fails half-way.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    os::unix::process::ExitStatusExt,
    process::{Child, ChildStdout, Command, ExitStatus},
    sync::{OnceLock, mpsc},
    thread,
    time::{Duration, Instant},
};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// The `corral` binary under test.
pub fn corral() -> Command {
    Command::new(corral_path())
}

/// Where the `corral` binary is: as cargo-nextest says at run time (also for
/// an archive unpacked elsewhere, as the unprivileged pass does), else where
/// cargo built it.
pub fn corral_path() -> std::path::PathBuf {
    std::env::var_os("NEXTEST_BIN_EXE_corral")
        .map_or_else(|| env!("CARGO_BIN_EXE_corral").into(), Into::into)
}

/// This package's directory: as the test runner says at run time (nextest
/// remaps it for an archive), else where it was built.
pub fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), Into::into)
}

/// A scratch file or directory name for this test process, in the temporary
/// directory (writable by any user, unlike the build's target directory).
pub fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("corral-cli-test-{}-{name}", std::process::id()))
}

/// GNU `timeout`, to compare with.
pub const GNU_TIMEOUT: &str = "/usr/bin/timeout";

/// The status as a shell reports it: the exit code, or 128+N for a death by
/// signal N.
pub fn shell_status(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|n| 128 + n))
        .expect("exited or signalled")
}

/// A process: pid and start time (clock ticks after boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub start_time: u64,
}

/// `(state, start_time)` from `/proc/PID/stat`, if the pid exists.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start_time = fields.get(22 - 3)?.parse().ok()?;
    Some((state, start_time))
}

impl Proc {
    /// The process now behind `pid`, if any.
    pub fn of(pid: i32) -> Option<Self> {
        stat(pid).map(|(_, start_time)| Self { pid, start_time })
    }

    /// Parses a pid printed by a test command and identifies it.
    pub fn of_line(line: &str) -> Self {
        let pid = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("not a pid: {line:?}"));
        Self::of(pid).unwrap_or_else(|| panic!("pid {pid} vanished before it was identified"))
    }

    /// Whether this very process is still running (a zombie is not).
    pub fn is_alive(self) -> bool {
        matches!(stat(self.pid), Some((state, start)) if start == self.start_time && !matches!(state, 'Z' | 'X' | 'x'))
    }

    /// Sends `signal` through a pidfd, after checking the pidfd refers to
    /// this process. False if it is gone.
    pub fn signal(self, signal: Signal) -> bool {
        let Some(pid) = Pid::from_raw(self.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        // The pidfd pins one process; check it is the one we identified.
        if !matches!(stat(self.pid), Some((_, start)) if start == self.start_time) {
            return false;
        }
        pidfd_send_signal(&pidfd, signal).is_ok()
    }

    /// The signal masks of `/proc/PID/status` (`SigIgn`, `SigCgt`, ...).
    pub fn signal_masks(self) -> HashMap<String, u64> {
        let text =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                key.starts_with("Sig")
                    .then(|| Some((key.to_owned(), u64::from_str_radix(value.trim(), 16).ok()?)))?
            })
            .collect()
    }
}

/// Whether signal `n`'s bit is set in a `/proc` signal mask.
pub fn has_signal(mask: u64, n: i32) -> bool {
    mask & (1 << (n - 1)) != 0
}

/// Kills on drop, by identity, everything a test started that still runs:
/// the direct child and every process recorded with [`Guard::watch`].
#[derive(Debug, Default)]
pub struct Guard {
    procs: Vec<Proc>,
    pub child: Option<Child>,
}

impl Guard {
    pub fn new(child: Child) -> Self {
        let mut guard = Self::default();
        if let Some(me) = Proc::of(child.id() as i32) {
            guard.procs.push(me);
        }
        guard.child = Some(child);
        guard
    }

    pub fn watch(&mut self, proc: Proc) {
        self.procs.push(proc);
    }

    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("guard holds a child")
    }

    /// Waits for the child to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child().try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for proc in &self.procs {
            if proc.is_alive() {
                proc.signal(Signal::KILL);
            }
        }
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
    }
}

/// The lines a child writes to its standard output, read by a thread.
#[derive(Debug)]
pub struct Lines(mpsc::Receiver<String>);

impl Lines {
    pub fn new(stdout: ChildStdout) -> Self {
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self(receiver)
    }

    /// The next line, waiting at most `limit`.
    pub fn next(&self, limit: Duration) -> Option<String> {
        self.0.recv_timeout(limit).ok()
    }

    /// The next `n` lines, each within `limit`, or a panic naming what came.
    pub fn take(&self, n: usize, limit: Duration) -> Vec<String> {
        let mut lines = Vec::new();
        while lines.len() < n {
            match self.next(limit) {
                Some(line) => lines.push(line),
                None => panic!("expected {n} lines within {limit:?}, got {lines:?}"),
            }
        }
        lines
    }
}

/// Polls `predicate` until it holds (true) or `limit` passes (false).
pub fn wait_until(limit: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if predicate() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `backend` can be used by corral here, or why not (from `corral
/// capabilities --json`, asked once).
pub fn backend_available(backend: &str) -> Result<(), String> {
    static CAPABILITIES: OnceLock<serde_json::Value> = OnceLock::new();
    let capabilities = CAPABILITIES.get_or_init(|| {
        let output = corral()
            .args(["capabilities", "--json"])
            .output()
            .expect("run corral capabilities");
        serde_json::from_slice(&output.stdout).expect("capabilities JSON")
    });
    if backend == "auto" {
        return Ok(());
    }
    let entry = capabilities["backends"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["backend"] == backend))
        .ok_or_else(|| format!("backend {backend} not listed"))?;
    if entry["available"] == true {
        Ok(())
    } else {
        Err(entry["detail"].as_str().unwrap_or("no detail").to_owned())
    }
}

/// Runs `body` for each backend that is available, printing why the others
/// are skipped.
pub fn for_backends(backends: &[&str], mut body: impl FnMut(&str)) {
    for &backend in backends {
        match backend_available(backend) {
            Ok(()) => body(backend),
            Err(reason) => eprintln!("SKIPPED: backend {backend}: {reason}"),
        }
    }
}

/// `--backend NAME` as arguments.
pub fn backend_args(backend: &str) -> [String; 2] {
    ["--backend".to_owned(), backend.to_owned()]
}

/// The escapee tree: bash prints its own pid, then a `setsid` sleep, a sleep
/// that ignores SIGTERM and a plain background sleep (in non-interactive
/// bash `$!` is the sleep itself), then waits.
pub const ESCAPEES: &str = "echo $$; setsid sleep 1000 & echo $!; \
    (trap \"\" TERM; exec sleep 1000) & echo $!; sleep 1000 & echo $!; wait";

/// Reads the escapee tree's four pids and records them in the guard.
pub fn escapees(lines: &Lines, guard: &mut Guard) -> Vec<Proc> {
    let procs: Vec<Proc> = lines
        .take(4, Duration::from_secs(10))
        .iter()
        .map(|line| Proc::of_line(line))
        .collect();
    for &proc in &procs {
        guard.watch(proc);
    }
    procs
}

/// Panics naming every process of `procs` that still runs.
pub fn assert_all_gone(procs: &[Proc], context: &str) {
    let alive: Vec<&Proc> = procs.iter().filter(|p| p.is_alive()).collect();
    assert!(alive.is_empty(), "{context}: survivors {alive:?}");
}
