//! What the fault tests share: running a test's body in a child process
//! (with faults injected, or as an ordinary user) and looking at processes.

use std::{
    path::{Path, PathBuf},
    process::{Command as StdCommand, Stdio},
};

use corral::Backend;
use corral_tests::{
    is_root,
    proc::{Stat, all_processes},
};

use crate::common::fixture_path;

/// Set in the child to the name of the test whose body it runs.
pub(crate) const CHILD: &str = "CORRAL_FAULTS_CHILD";
/// In the environment of every tree a test here starts, to find its
/// processes wherever they end up.
pub(crate) const MARK: &str = "CORRAL_FAULTS_TREE";
/// The unprivileged user the children of root run as.
pub(crate) const NOBODY: &str = "65534";

/// How the body of a test that needs a process of its own runs.
pub(crate) enum Run {
    /// We are that process: run the body.
    Body,
    /// The child ran it (and passed), or the case was skipped with a reason.
    Done,
}

/// Runs the test `name` again in a child process with `faults` injected and,
/// with `unprivileged`, as an ordinary user. Fails if the child fails; passes
/// its output on.
pub(crate) fn in_child(name: &str, faults: &str, unprivileged: bool) -> Run {
    in_child_with(name, faults, unprivileged, &[])
}

/// [`in_child`], with more environment for the child.
pub(crate) fn in_child_with(
    name: &str,
    faults: &str,
    unprivileged: bool,
    env: &[(&str, &std::ffi::OsStr)],
) -> Run {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        return Run::Body;
    }
    let exe = std::env::current_exe().expect("this test binary");
    let ledger = std::env::temp_dir().join(format!("corral-faults-{}-{name}", std::process::id()));
    let mut command = if unprivileged && is_root() {
        if let Err(reason) = reachable_by_nobody(&[&exe, &fixture_path()]) {
            println!(
                "SKIPPED: {name} needs an unprivileged user and {reason}; \
                 scripts/test-unprivileged runs it as corral-ci"
            );
            return Run::Done;
        }
        let mut setpriv = StdCommand::new("setpriv");
        setpriv.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--inh-caps=-all",
            "--",
        ]);
        setpriv.arg(&exe);
        // The ledger of `nobody` goes in a directory `nobody` can create.
        setpriv.env("TMPDIR", "/tmp");
        setpriv
    } else {
        StdCommand::new(&exe)
    };
    command
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        // The parent runs only if it was asked to; so does the child.
        .arg("--include-ignored")
        .env(CHILD, name)
        .env("CORRAL_FAULTS", faults)
        .env("CORRAL_LEDGER_DIR", &ledger)
        .env("CORRAL_NO_STARTUP_SWEEP", "1")
        .envs(env.iter().copied())
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null());
    let output = command.output().expect("starting the test's child");
    let _ = std::fs::remove_dir_all(&ledger);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for line in stdout.lines().filter(|l| !l.starts_with("running ")) {
        println!("  child: {line}");
    }
    assert!(
        output.status.success(),
        "the child running {name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("1 passed"),
        "the child did not run {name}:\n{stdout}\n{stderr}"
    );
    Run::Done
}

/// Whether uid 65534 can execute each file (every directory on the way must
/// let others through).
pub(crate) fn reachable_by_nobody(files: &[&Path]) -> Result<(), String> {
    let status = StdCommand::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
            "sh",
            "-c",
            r#"for f in "$@"; do [ -x "$f" ] || exit 1; done"#,
            "sh",
        ])
        .args(files)
        .status()
        .map_err(|e| format!("`setpriv` cannot run ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "uid {NOBODY} cannot reach {} (a parent directory is closed to others)",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        ))
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Running processes that carry `MARK=mark` in their environment.
pub(crate) fn marked(mark: &str) -> Vec<Stat> {
    let needle = format!("{MARK}={mark}");
    all_processes()
        .expect("walking /proc")
        .into_iter()
        .filter(Stat::is_running)
        .filter(|s| {
            std::fs::read(format!("/proc/{}/environ", s.pid)).is_ok_and(|env| {
                env.split(|&b| b == 0)
                    .any(|entry| entry == needle.as_bytes())
            })
        })
        .collect()
}

/// Running children of this process.
pub(crate) fn running_children() -> Vec<Stat> {
    let me = std::process::id() as i32;
    all_processes()
        .expect("walking /proc")
        .into_iter()
        .filter(|s| s.ppid == me && s.is_running())
        .collect()
}

/// This process's cgroup leaves.
pub(crate) fn leaves() -> Vec<PathBuf> {
    let Some(parent) = corral::capabilities().cgroup_parent else {
        return Vec::new();
    };
    let prefix = format!("corral-{}-", std::process::id());
    std::fs::read_dir(parent)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn cgroup_status() -> corral::BackendStatus {
    corral::capabilities()
        .backends
        .into_iter()
        .find(|s| s.backend == Backend::Cgroup)
        .expect("the cgroup backend is listed")
}

/// Sets this process's `RLIMIT_NPROC` (soft and hard) to `limit`.
pub(crate) fn limit_processes(limit: u64) {
    let limit = rustix::process::Rlimit {
        current: Some(limit),
        maximum: Some(limit),
    };
    rustix::process::setrlimit(rustix::process::Resource::Nproc, limit)
        .expect("setrlimit(RLIMIT_NPROC)");
}

/// The number of tasks (threads included) that `uid` runs: what
/// `RLIMIT_NPROC` counts.
pub(crate) fn tasks_of(uid: u32) -> u64 {
    let uid = uid.to_string();
    all_processes()
        .unwrap_or_default()
        .iter()
        .filter_map(|s| std::fs::read_to_string(format!("/proc/{}/status", s.pid)).ok())
        .filter(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                == Some(uid.as_str())
        })
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Reaps the zombie children of this process (orphans adopted as subreaper).
/// Only while corral holds no unreaped leader.
pub(crate) fn reap_orphans() {
    let me = std::process::id() as i32;
    for stat in all_processes().unwrap_or_default() {
        if stat.ppid == me && stat.state == 'Z' {
            // A zombie's pid cannot be reused before it is reaped.
            if let Some(pid) = rustix::process::Pid::from_raw(stat.pid) {
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
            }
        }
    }
}
