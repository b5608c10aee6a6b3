//! A spawn that fails after its leader started leaves nothing: the tree the
//! leader started meanwhile is ended before the error returns, and a spawn
//! short of descriptors is refused before anything starts.
//!
//! The failure is injected (`fail-after-launch`, the `fault-injection`
//! feature): the spawn fails at the point where running out of descriptors
//! or memory used to leave the tree running (`reading the leader's /proc
//! entry: Too many open files`), once the command has started its escapees
//! and said so by creating a file. Each test runs its body in a child
//! process, since the faults are read once per process.

mod common;
#[allow(dead_code)] // Only part of the fault tests' support is needed here.
#[path = "faults/support.rs"]
mod support;

use std::{ffi::OsStr, time::Duration};

use corral::{Backend, BackendChoice, Command, Error};
use corral_tests::{Guard, Proc, Scratch, this_process::become_subreaper, wait_until_async};
use support::{MARK, Run, in_child_with, leaves, marked, reap_orphans, runtime};

/// A tree with a `setsid` child, a TERM-ignoring child, a double-forked
/// orphan and the leader itself, all marked; it creates `$WHEN` once they
/// have all been started.
const ESCAPES: &str = "setsid sleep 300 & (trap '' TERM; sleep 300) & \
                       (sh -c 'sleep 300 &' &); sleep 0.05; : > \"$WHEN\"; exec sleep 300";

/// The processes marked `mark` still running once what `SIGKILL` was sent
/// to has had a moment to go (up to 5 s), and a guard that ends them.
async fn left_running(mark: &str) -> (Vec<corral_tests::Stat>, Guard) {
    wait_until_async(Duration::from_secs(5), || {
        reap_orphans();
        marked(mark).is_empty()
    })
    .await;
    let left = marked(mark);
    let guard = Guard::of(left.iter().map(|stat| Proc {
        pid: stat.pid,
        start_time: stat.start_time,
    }));
    (left, guard)
}

fn fails_after_launch_and_leaves_nothing(name: &str, backend: Backend) {
    let scratch = Scratch::new(name);
    let when = scratch.path("started");
    let env: [(&str, &OsStr); 1] = [("CORRAL_FAULT_WHEN", when.as_os_str())];
    let Run::Body = in_child_with(name, "fail-after-launch", false, &env) else {
        return;
    };
    if backend == Backend::Subreaper {
        become_subreaper();
        corral::settings::Settings::new().subreaper().apply();
    }
    runtime().block_on(async {
        let mark = format!("{name}-{}", std::process::id());
        let result = Command::new("sh")
            .args(["-c", ESCAPES])
            .env("WHEN", std::env::var_os("CORRAL_FAULT_WHEN").expect("set"))
            .env(MARK, &mark)
            .backend(BackendChoice::Only(backend))
            .spawn();
        match result {
            Err(Error::BackendUnavailable { reason, .. }) => {
                return println!("SKIPPED: {backend} is not available here: {reason}");
            }
            Err(error) => println!("{backend}: {error}"),
            Ok(_) => panic!("{backend}: the injected fault did not fire"),
        }
        let (left, _cleanup) = left_running(&mark).await;
        assert!(
            left.is_empty(),
            "{backend}: the tree runs on after the failed spawn: {left:?}"
        );
        assert!(leaves().is_empty(), "{backend}: a cgroup leaf was left");
    });
}

#[test]
fn a_spawn_failing_after_the_leader_started_leaves_nothing_cgroup() {
    fails_after_launch_and_leaves_nothing(
        "a_spawn_failing_after_the_leader_started_leaves_nothing_cgroup",
        Backend::Cgroup,
    );
}

#[test]
fn a_spawn_failing_after_the_leader_started_leaves_nothing_group() {
    fails_after_launch_and_leaves_nothing(
        "a_spawn_failing_after_the_leader_started_leaves_nothing_group",
        Backend::Group,
    );
}

#[test]
fn a_spawn_failing_after_the_leader_started_leaves_nothing_subreaper() {
    fails_after_launch_and_leaves_nothing(
        "a_spawn_failing_after_the_leader_started_leaves_nothing_subreaper",
        Backend::Subreaper,
    );
}

/// Out of descriptors while the tree runs (the test fills its own table
/// after the spawn, as a host's other work could): the cleanup still ends
/// the whole tree on every backend, with the descriptors the spawn held
/// back for it (given back when the cleanup starts: `cgroup.kill`, the
/// `/proc` reads, the pidfds all need one).
fn out_of_descriptors_during_supervision_the_tree_still_ends(name: &str, backend: Backend) {
    let Run::Body = in_child_with(name, "", false, &[]) else {
        return;
    };
    if backend == Backend::Subreaper {
        become_subreaper();
        corral::settings::Settings::new().subreaper().apply();
    }
    runtime().block_on(async {
        let mark = format!("{name}-{}", std::process::id());
        let token = tokio_util::sync::CancellationToken::new();
        let spawned = Command::new("sh")
            .args(["-c", ESCAPES_READY])
            .env(MARK, &mark)
            .backend(BackendChoice::Only(backend))
            .grace(Duration::from_millis(200))
            .cancel_on(token.clone())
            .spawn();
        let mut child = match spawned {
            Err(Error::BackendUnavailable { reason, .. }) => {
                return println!("SKIPPED: {backend} is not available here: {reason}");
            }
            Err(error) => panic!("{backend}: {error}"),
            Ok(child) => child,
        };
        let mut tap = child.stdout_tap().expect("captured");
        let started = tokio::time::timeout(
            Duration::from_secs(10),
            tap.wait_for(|b| b.windows(5).any(|w| w == b"ready")),
        )
        .await;
        assert!(
            matches!(started, Ok(true)),
            "{backend}: the tree never got ready"
        );
        // Every descriptor this process may still open, taken.
        let mut filler = Vec::new();
        while let Ok(file) = std::fs::File::open("/dev/null") {
            filler.push(file);
        }
        token.cancel();
        let finished = child.wait().await;
        drop(filler);
        let finished = finished.expect("a result");
        let (left, _cleanup) = left_running(&mark).await;
        assert!(
            left.is_empty(),
            "{backend}: the tree ran on after a cleanup out of descriptors: {left:?}, {:?}",
            finished.report
        );
        assert!(
            finished.report.survivors.is_empty(),
            "{:?}",
            finished.report
        );
        assert!(leaves().is_empty(), "{backend}: a cgroup leaf was left");
    });
}

/// [`ESCAPES`], saying `ready` once its escapees run.
const ESCAPES_READY: &str = "setsid sleep 300 & (trap '' TERM; sleep 300) & \
                             (sh -c 'sleep 300 &' &); sleep 0.05; echo ready; exec sleep 300";

#[test]
fn out_of_descriptors_during_supervision_the_tree_still_ends_cgroup() {
    out_of_descriptors_during_supervision_the_tree_still_ends(
        "out_of_descriptors_during_supervision_the_tree_still_ends_cgroup",
        Backend::Cgroup,
    );
}

#[test]
fn out_of_descriptors_during_supervision_the_tree_still_ends_group() {
    out_of_descriptors_during_supervision_the_tree_still_ends(
        "out_of_descriptors_during_supervision_the_tree_still_ends_group",
        Backend::Group,
    );
}

#[test]
fn out_of_descriptors_during_supervision_the_tree_still_ends_subreaper() {
    out_of_descriptors_during_supervision_the_tree_still_ends(
        "out_of_descriptors_during_supervision_the_tree_still_ends_subreaper",
        Backend::Subreaper,
    );
}
