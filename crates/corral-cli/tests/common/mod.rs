//! What the `corral` binary's tests share beyond the `corral_tests`
//! library: the binary itself, its capabilities, exit statuses and the
//! escapee tree. Include with `mod common;`.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::{
    os::unix::process::ExitStatusExt,
    path::PathBuf,
    process::{Command, ExitStatus},
    sync::OnceLock,
    time::Duration,
};

use corral_tests::{Guard, Lines, Proc};

/// The `corral` binary under test.
pub fn corral() -> Command {
    Command::new(corral_path())
}

/// Where the `corral` binary is: as cargo-nextest says at run time (also for
/// an archive unpacked elsewhere, as the unprivileged pass does), else where
/// cargo built it.
pub fn corral_path() -> PathBuf {
    corral_tests::bin_path!("corral")
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
            Err(reason) => corral_tests::skipped(format!("backend {backend}: {reason}")),
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

/// Sends signal `number` (any, the real-time ones included) to `proc`
/// through a pidfd, only if it is still that process (as
/// [`Proc::signal`], which takes only the signals rustix names).
pub fn signal_number(proc: &Proc, number: i32) -> bool {
    use std::os::fd::AsRawFd;
    let Some(pid) = rustix::process::Pid::from_raw(proc.pid) else {
        return false;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return false;
    };
    if !proc.is_alive() {
        return false;
    }
    // SAFETY: a plain system call on a pidfd we own; a null `info` has the
    // kernel fill it in as `kill` does.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            number,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

/// A ledger directory of one test, with the start-up sweep off, as
/// environment for corral: other corral processes' records and sweeps stay
/// out of the test (and its `-v` output).
pub fn private_ledger(command: &mut Command, name: &str) -> PathBuf {
    let dir = corral_tests::scratch(&format!("ledger-{name}"));
    command
        .env("CORRAL_LEDGER_DIR", &dir)
        .env("CORRAL_NO_STARTUP_SWEEP", "1");
    dir
}

/// A child of `parent` other than `except`.
pub fn other_child(parent: i32, except: i32) -> Option<Proc> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: i32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == parent && pid != except).then(|| Proc::of(pid))?
        })
}
