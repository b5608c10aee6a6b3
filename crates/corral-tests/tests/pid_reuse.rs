//! PID reuse, for real: each test runs the `reuse` program as PID 1 of a
//! private PID namespace with a small `pid_max`, where a dead tree member's
//! pid is handed to a new *bystander* (same command line, its own session),
//! and then one cleanup path runs: cancellation, the watchdog after the
//! owner's SIGKILL, or the crash-ledger sweep. The bystander must never be
//! signalled; the rest of the tree must still be ended. See the top of
//! `src/bin/reuse/main.rs` for how the pid is made to be reused.
//!
//! Needs `unshare` (util-linux) and either root or unprivileged user
//! namespaces; otherwise each test prints `SKIPPED: <reason>` and passes. A
//! scenario the machine cannot run (the cgroup backend unavailable, or a
//! `pid_max` that cannot be lowered) is skipped the same way.

mod common;

use std::{
    io::Read,
    os::fd::AsRawFd,
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use common::reuse_path;
use corral_tests::{Proc, skipped, stat};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// A scenario takes about a second; this bounds a hung one.
const TIMEOUT: Duration = Duration::from_secs(120);
/// `reuse`'s exit status for "this machine cannot run the scenario".
const EXIT_SKIP: i32 = 77;

/// The `unshare` options that give a private PID namespace here, or why
/// there is none. `--kill-child`: if `unshare` dies, so does the namespace.
fn namespace() -> Result<&'static [&'static str], String> {
    static PROBED: OnceLock<Result<&'static [&'static str], String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let options: &'static [&'static str] = if rustix::process::geteuid().is_root() {
                &["--pid", "--fork", "--kill-child", "--mount-proc"]
            } else {
                &[
                    "--user",
                    "--map-root-user",
                    "--pid",
                    "--fork",
                    "--kill-child",
                    "--mount-proc",
                ]
            };
            let probe = Command::new("unshare")
                .args(options)
                .arg("true")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output();
            match probe {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    Err("`unshare` (util-linux) is not installed".to_owned())
                }
                Err(error) => Err(format!("cannot run `unshare`: {error}")),
                Ok(output) if output.status.success() => Ok(options),
                Ok(output) => Err(format!(
                    "cannot create a private PID namespace (`unshare {}` failed: {})",
                    options.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                )),
            }
        })
        .clone()
}

/// Holds an exclusive lock on a file for as long as it lives.
struct Lock(std::fs::File);

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: flock(2) on a descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Serialises the cgroup scenarios across test processes: corral names a
/// leaf `corral-<pid>-<n>` with the pid *as the supervisor's namespace sees
/// it*, while the cgroup tree is shared by all namespaces; two scenarios
/// running at once would have the same pids in their own namespaces (they
/// are deterministic) and collide on the same leaf name.
fn cgroup_lock() -> Option<Lock> {
    let uid = rustix::process::geteuid().as_raw();
    let path = std::env::temp_dir().join(format!("corral-pid-reuse-cgroup-{uid}.lock"));
    let file = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) => {
            println!(
                "not serialised with other cgroup scenarios: {}: {error}",
                path.display()
            );
            return None;
        }
    };
    // SAFETY: flock(2) on a descriptor `file` owns; blocks until granted.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock {}", path.display());
    Some(Lock(file))
}

/// Ends an overrunning run: SIGKILL to the namespace's init (the child of
/// `unshare`), which makes the kernel kill everything inside, then to
/// `unshare` itself (our unreaped child, so its pid is still its own).
fn kill_namespace(unshare: &mut Child) {
    let outer = i32::try_from(unshare.id()).unwrap_or(0);
    let inits: Vec<Proc> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|&pid| stat(pid).is_some_and(|s| s.ppid == outer))
                .filter_map(Proc::of)
                .collect()
        })
        .unwrap_or_default();
    for init in inits {
        init.kill();
    }
    if let Some(fd) = Pid::from_raw(outer).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok()) {
        let _ = pidfd_send_signal(&fd, Signal::KILL);
    }
}

/// Runs `reuse SCENARIO BACKEND` in a private PID namespace and asserts that
/// it passed.
fn run(scenario: &str, backend: &str) {
    let options = match namespace() {
        Ok(options) => options,
        Err(reason) => {
            skipped(reason);
            return;
        }
    };
    let _lock = (backend == "cgroup").then(cgroup_lock).flatten();
    let started = Instant::now();
    let mut child = Command::new("unshare")
        .args(options)
        .arg(reuse_path())
        .args([scenario, backend])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn unshare");
    let collect = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = collect(child.stdout.take().map(|s| Box::new(s) as _));
    let stderr = collect(child.stderr.take().map(|s| Box::new(s) as _));
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            kill_namespace(&mut child);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    eprint!("{stderr}");
    print!("{stdout}");
    let Some(status) = status else {
        panic!("`reuse {scenario} {backend}` overran {TIMEOUT:?} and was killed");
    };
    match status.code() {
        Some(0) => {
            assert!(
                stdout.lines().any(|l| l.starts_with("PASS ")),
                "exit 0 without a PASS line"
            );
            println!("took {:?}", started.elapsed());
        }
        Some(EXIT_SKIP) => println!(
            "SKIPPED: {}",
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("SKIP "))
                .unwrap_or("(no reason given)")
        ),
        _ => panic!(
            "`reuse {scenario} {backend}` failed ({status}): {}",
            stdout.lines().last().unwrap_or("(no result line)")
        ),
    }
}

// Cancellation: a member's pid is reused after the supervisor's re-scans
// learnt the member; the cancel ends the tree by identity.

#[test]
fn cancel_never_signals_a_reused_pid_cgroup() {
    run("cancel", "cgroup");
}

#[test]
fn cancel_never_signals_a_reused_pid_subreaper() {
    run("cancel", "subreaper");
}

#[test]
fn cancel_never_signals_a_reused_pid_group() {
    run("cancel", "group");
}

// Owner death: a member the watchdog was told of dies and its pid is reused;
// then the owner is SIGKILLed and the watchdog ends the tree within 1 s.

#[test]
fn watchdog_never_signals_a_reused_pid_cgroup() {
    run("watchdog", "cgroup");
}

#[test]
fn watchdog_never_signals_a_reused_pid_subreaper() {
    run("watchdog", "subreaper");
}

#[test]
fn watchdog_never_signals_a_reused_pid_group() {
    run("watchdog", "group");
}

// Crash ledger: owner and leader dead, the leader's pid (and for the group
// backend its group id) taken by a new session leader; the sweep runs.

#[test]
fn ledger_sweep_never_signals_a_reused_leader_pid_cgroup() {
    run("ledger", "cgroup");
}

#[test]
fn ledger_sweep_never_signals_a_reused_leader_pid_subreaper() {
    run("ledger", "subreaper");
}

#[test]
fn ledger_sweep_never_signals_a_reused_leader_pid_group() {
    run("ledger", "group");
}
