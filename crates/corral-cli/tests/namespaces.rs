//! corral inside a PID namespace that still shows its parent's `/proc`, and
//! corral inside corral.

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use common::{backend_available, corral, corral_path, private_ledger};
use corral_tests::{Guard, Lines, Proc};
use rustix::process::Signal;

const UNSHARE: &str = "/usr/bin/unshare";

/// Whether this test can use the cgroup backend, or `SKIPPED:` and why not.
fn cgroup_backend() -> bool {
    match backend_available("cgroup") {
        Ok(()) => true,
        Err(reason) => {
            corral_tests::skipped(format!("backend cgroup: {reason}"));
            false
        }
    }
}

/// `unshare --pid --fork` without `--mount-proc`: `/proc` numbers every
/// process as the host does, while `cgroup.procs` and corral's own calls
/// number them in the new namespace. The command still gets `--signal` at
/// the deadline; before, corral "sent SIGTERM to 0 processes" (it read the
/// leaf's numbers in the host's `/proc`) and the command got SIGKILL after
/// the grace instead.
#[test]
fn in_a_pid_namespace_showing_the_parents_proc_the_command_gets_the_signal() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a new PID namespace (unshare --pid) needs root");
        return;
    }
    if !Path::new(UNSHARE).exists() {
        corral_tests::skipped(format!("{UNSHARE} is not installed"));
        return;
    }
    if !cgroup_backend() {
        return;
    }
    let script = "trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.05; done";
    let mut command = Command::new(UNSHARE);
    private_ledger(&mut command, "pid-namespace");
    // The grace is long: SIGKILL after it would be the old failure.
    let mut child = command
        .args(["--pid", "--fork", "--kill-child"])
        .arg(corral_path())
        .args([
            "run",
            "-v",
            "--backend",
            "cgroup",
            "-t",
            "300ms",
            "-k",
            "30s",
        ])
        .args(["--", "sh", "-c", script])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn unshare");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    let errors = Lines::new(child.stderr.take().expect("stderr"));
    let mut guard = Guard::new(child);
    assert_eq!(
        lines.next(Duration::from_secs(10)).as_deref(),
        Some("ready")
    );
    assert_eq!(
        lines.next(Duration::from_secs(10)).as_deref(),
        Some("got TERM"),
        "the command did not get SIGTERM at the deadline"
    );
    let status = guard
        .wait_exit(Duration::from_secs(10))
        .expect("corral ends");
    let said: Vec<String> = std::iter::from_fn(|| errors.next(Duration::from_secs(2))).collect();
    assert_eq!(status.code(), Some(124), "{said:#?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with("corral: sent SIGTERM to ") && !l.contains(" to 0 processes")),
        "{said:#?}"
    );
}

/// The directories directly below `dir` whose names start with `prefix`.
fn dirs_below(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// A `corral run` inside a `corral run`: SIGKILL to the outer corral (by
/// pidfd) ends everything through the outer watchdog, and no cgroup is left:
/// neither the outer leaf nor the inner corral's leaf below it, which the
/// inner corral (killed too) cannot remove itself.
#[test]
fn a_nested_run_whose_outer_corral_is_killed_leaves_no_cgroup() {
    if !cgroup_backend() {
        return;
    }
    let Some(parent) = corral_tests::cgroup_parent() else {
        return;
    };
    let mut command = corral();
    private_ledger(&mut command, "nested");
    let mut child = command
        .args(["run", "--backend", "cgroup", "-t", "60", "--"])
        .arg(corral_path())
        .args(["run", "--backend", "cgroup", "-t", "60", "--"])
        .args(["sh", "-c", "echo $$; exec sleep 1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    let mut guard = Guard::new(child);
    let outer = Proc::of(guard.child().id() as i32).expect("corral runs");
    let sleeper = Proc::of_line(&lines.next(Duration::from_secs(10)).expect("the pid line"));
    guard.watch(sleeper);
    let outer_leaf = dirs_below(&parent, &format!("corral-{}-", outer.pid));
    assert_eq!(outer_leaf.len(), 1, "the outer leaf: {outer_leaf:?}");
    let outer_leaf = outer_leaf[0].clone();
    let inner_leaf = dirs_below(&outer_leaf, "corral-");
    assert_eq!(inner_leaf.len(), 1, "the inner leaf: {inner_leaf:?}");
    let inner_leaf = inner_leaf[0].clone();

    assert!(outer.signal(Signal::KILL));
    guard
        .wait_exit(Duration::from_secs(5))
        .expect("corral dies");
    assert!(
        corral_tests::wait_until(Duration::from_secs(5), || !sleeper.is_alive()),
        "the inner command outlived the outer corral"
    );
    assert!(
        corral_tests::wait_until(Duration::from_secs(5), || !inner_leaf.exists()
            && !outer_leaf.exists()),
        "left behind: inner {} {}, outer {} {}",
        inner_leaf.display(),
        inner_leaf.exists(),
        outer_leaf.display(),
        outer_leaf.exists()
    );
}
