//! Helpers shared by the integration tests of `corral-fixtures`; include them
//! with `mod common;`.
//!
//! Processes are always named by *identity* ([`Proc`]: pid plus start time
//! from `/proc/PID/stat`), never by pid alone, so that a recycled pid is
//! never mistaken for a process a test started. Signals are only ever sent
//! through a pidfd after re-checking that identity ([`send_signal`],
//! [`kill_leftovers`]); tests must never signal anything by name.
//!
//! Zombies are not survivors: [`is_running`] is false for them. Note that
//! orphans are re-parented to pid 1 (or to the nearest subreaper), and pid 1
//! may never reap them; a test that wants no `<defunct>` entries left can
//! call [`become_subreaper`] first and [`reap_zombies`] when done.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::io::BufRead;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{
    Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, pidfd_open, pidfd_send_signal, waitid,
};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// How long [`read_ready`] and [`read_ready_blocking`] wait for the
/// readiness line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Path of the `fixture` binary built alongside these tests.
pub fn fixture_path() -> PathBuf {
    bin_path("fixture", env!("CARGO_BIN_EXE_fixture"))
}

/// Path of this package's binary `name`: where cargo-nextest says it is at
/// run time (also for an archive unpacked elsewhere, as the unprivileged
/// pass does), else `built`, where cargo built it.
pub fn bin_path(name: &str, built: &str) -> PathBuf {
    std::env::var_os(format!("NEXTEST_BIN_EXE_{name}"))
        .map_or_else(|| PathBuf::from(built), PathBuf::from)
}

/// The identity of a process: its pid and its start time (field 22 of
/// `/proc/PID/stat`, in clock ticks since boot). A pid can be reused; the
/// pair cannot (in practice).
///
/// `start_time == 0` means the process was already gone (reaped) when its
/// identity was read; such a `Proc` never counts as running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Proc {
    pub pid: i32,
    pub start_time: u64,
}

/// The fields of `/proc/PID/stat` the tests care about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T`, `Z`, `X`, ... (field 3).
    pub state: char,
    /// Field 4.
    pub ppid: i32,
    /// Process group id (field 5).
    pub pgrp: i32,
    /// Session id (field 6).
    pub session: i32,
    /// Start time in clock ticks since boot (field 22).
    pub start_time: u64,
}

/// Reads `/proc/PID/stat`; `None` if the process does not exist (any more)
/// or the file cannot be parsed.
///
/// The command name (field 2) is in parentheses and may itself contain
/// spaces and `)`, so the line is split at its *last* `)`.
pub fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    // `fields[0]` is field 3, so field N is `fields[N - 3]`.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The CPU time (user and system) this process has used so far.
pub fn cpu_time() -> Duration {
    let text = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let (_, rest) = text.rsplit_once(')').expect("a stat line");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .map(|&i| fields[i].parse::<u64>().expect("utime and stime"))
        .sum();
    Duration::from_secs_f64(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

/// The identity of `pid` right now, if it exists (zombies included).
pub fn proc_identity(pid: i32) -> Option<Proc> {
    stat(pid).map(|s| Proc {
        pid,
        start_time: s.start_time,
    })
}

/// True only if the very process `p` still exists (same start time) and is
/// neither a zombie (`Z`) nor dead (`X`).
pub fn is_running(p: &Proc) -> bool {
    stat(p.pid).is_some_and(|s| s.start_time == p.start_time && !matches!(s.state, 'Z' | 'X'))
}

/// Whether `pid` currently ignores signal `signum` (from `SigIgn` in
/// `/proc/PID/status`); `None` if the process is gone.
pub fn ignores_signal(pid: i32, signum: i32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
    Some(mask & (1 << (signum - 1)) != 0)
}

/// Parses a readiness line `ready <pid> <pid>...` (leader first) and reads
/// each process's identity immediately. A pid that is already gone gets
/// `start_time == 0` (see [`Proc`]).
///
/// # Panics
/// If the line is not a readiness line.
pub fn parse_ready(line: &str) -> Vec<Proc> {
    let mut words = line.split_whitespace();
    assert_eq!(
        words.next(),
        Some("ready"),
        "expected a readiness line `ready <pid>...`, got {line:?}"
    );
    let procs: Vec<Proc> = words
        .map(|word| {
            let pid = word
                .parse()
                .unwrap_or_else(|_| panic!("bad pid {word:?} in readiness line {line:?}"));
            proc_identity(pid).unwrap_or(Proc { pid, start_time: 0 })
        })
        .collect();
    assert!(!procs.is_empty(), "readiness line without pids: {line:?}");
    procs
}

/// Reads the readiness line from `reader` (pass `&mut reader` to keep using
/// it afterwards) and parses it with [`parse_ready`].
///
/// # Panics
/// On EOF, a read error, or no complete line within [`READY_TIMEOUT`].
pub async fn read_ready<R: AsyncBufRead + Unpin>(mut reader: R) -> Vec<Proc> {
    let mut line = String::new();
    let read = tokio::time::timeout(READY_TIMEOUT, reader.read_line(&mut line)).await;
    match read {
        Err(_) => panic!("no readiness line within {READY_TIMEOUT:?} (got so far: {line:?})"),
        Ok(Err(err)) => panic!("reading the readiness line: {err}"),
        Ok(Ok(0)) => panic!("EOF before the readiness line"),
        Ok(Ok(_)) => parse_ready(&line),
    }
}

/// Like [`read_ready`], for a blocking reader such as a
/// `BufReader<std::process::ChildStdout>`. The read happens on a helper
/// thread; the reader is handed back for further reads.
///
/// # Panics
/// On EOF, a read error, or no complete line within [`READY_TIMEOUT`] (the
/// helper thread then stays blocked until the pipe closes).
pub fn read_ready_blocking<R: BufRead + Send + 'static>(mut reader: R) -> (Vec<Proc>, R) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let result = reader.read_line(&mut line);
        let _ = tx.send((result, line, reader));
    });
    match rx.recv_timeout(READY_TIMEOUT) {
        Err(_) => panic!("no readiness line within {READY_TIMEOUT:?}"),
        Ok((Err(err), _, _)) => panic!("reading the readiness line: {err}"),
        Ok((Ok(0), _, _)) => panic!("EOF before the readiness line"),
        Ok((Ok(_), line, reader)) => (parse_ready(&line), reader),
    }
}

/// Polls `pred` every 5 ms until it returns true (→ `true`) or `deadline`
/// has passed (→ `false`, after one last check).
pub async fn wait_until(deadline: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if pred() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Number of entries in `/proc/self/fd`. This includes the descriptor used
/// to list the directory, and counts the whole test process, so compare two
/// counts only while no other test runs concurrently.
pub fn open_fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("listing /proc/self/fd")
        .count()
}

/// Sends `sig` to `p` through a pidfd, only if `p` is still that very
/// process: the pidfd pins whatever process has the pid when it is opened,
/// and the identity is re-checked after opening it. Returns whether the
/// signal was sent (false if `p` is gone or a zombie).
pub fn send_signal(p: &Proc, sig: Signal) -> bool {
    let Some(pid) = Pid::from_raw(p.pid) else {
        return false;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return false;
    };
    is_running(p) && pidfd_send_signal(&pidfd, sig).is_ok()
}

/// Cleanup for tests that expect (or may leave) survivors: SIGKILLs each of
/// `procs` that is still running, by pidfd with an identity check (see
/// [`send_signal`]), then waits up to 5 s until none of them runs any more
/// (zombies count as gone). Never panics.
pub fn kill_leftovers(procs: &[Proc]) {
    for p in procs {
        send_signal(p, Signal::KILL);
    }
    let end = Instant::now() + Duration::from_secs(5);
    while procs.iter().any(is_running) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Makes the calling (test) process a child subreaper
/// (`PR_SET_CHILD_SUBREAPER`), so that orphaned descendants are re-parented
/// to it instead of pid 1 and can be reaped with [`reap_zombies`].
/// Process-wide and irreversible for the test binary; it changes what
/// `getppid()` returns to orphans, so only use it where that does not matter.
pub fn become_subreaper() {
    // SAFETY: `prctl(PR_SET_CHILD_SUBREAPER, 1)` takes no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_CHILD_SUBREAPER) failed");
}

/// Reaps those of `procs` that are zombie children of this process (e.g.
/// orphans re-parented to it by [`become_subreaper`]), by pidfd after an
/// identity check. Others are left alone. Do not pass a process whose exit
/// status someone else (a `std::process::Child`, corral) still wants to
/// collect: wait for those first.
pub fn reap_zombies(procs: &[Proc]) {
    for p in procs {
        let Some(pid) = Pid::from_raw(p.pid) else {
            continue;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            continue;
        };
        let same = stat(p.pid).is_some_and(|s| s.start_time == p.start_time && s.state == 'Z');
        if same {
            // ECHILD if it is not our child: nothing to do then.
            let _ = waitid(
                WaitId::PidFd(pidfd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            );
        }
    }
}

/// An innocent process (`fixture sleep 600`) unrelated to anything under
/// test, to check that nothing kills it. Killed with SIGKILL (via pidfd) and
/// reaped on drop.
#[derive(Debug)]
pub struct Bystander {
    child: Child,
    proc: Proc,
}

impl Bystander {
    /// Starts the bystander (stdin and stdout on /dev/null, stderr
    /// inherited).
    pub fn spawn() -> Self {
        let mut child = Command::new(fixture_path())
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning the bystander `fixture sleep 600`");
        let pid = i32::try_from(child.id()).expect("pid fits in i32");
        let Some(proc) = proc_identity(pid) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the bystander {pid} vanished right after spawning");
        };
        Self { child, proc }
    }

    /// The bystander's identity.
    pub fn proc(&self) -> Proc {
        self.proc
    }

    /// Whether the bystander is still alive (not a zombie).
    pub fn is_running(&self) -> bool {
        is_running(&self.proc)
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        // It is our unreaped child, so its pid cannot have been reused.
        let signalled = Pid::from_raw(self.proc.pid)
            .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok())
            .is_some_and(|pidfd| pidfd_send_signal(&pidfd, Signal::KILL).is_ok());
        if !signalled {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
