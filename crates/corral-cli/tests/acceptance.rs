//! The acceptance line: a one-second limit over a tree with a
//! `setsid` escapee and a SIGTERM-ignorer returns 124 after about 1.5 s, and
//! nothing it started is alive afterwards.

mod common;

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use common::{assert_all_gone, backend_args, corral, for_backends};
use corral_tests::{Guard, Lines, Proc};

/// `bash -c 'setsid sleep 1000 & (trap "" TERM; sleep 1000) & sleep 1000'`,
/// with each child's pid printed (`exec` keeps the TERM-ignorer's pid that
/// of its sleep) and the last sleep in the background so its pid is known.
const TREE: &str = "echo $$; setsid sleep 1000 & echo $!; \
    (trap \"\" TERM; exec sleep 1000) & echo $!; sleep 1000 & echo $!; wait";

#[test]
fn timeout_1s_kill_after_500ms_returns_124_in_about_1_5s_with_nothing_left() {
    for_backends(&["auto", "cgroup", "subreaper"], |backend| {
        let started = Instant::now();
        let mut child = corral()
            .arg("run")
            .args(backend_args(backend))
            .args([
                "--timeout",
                "1s",
                "--kill-after",
                "500ms",
                "--",
                "bash",
                "-c",
                TREE,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn corral");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let tree: Vec<Proc> = lines
            .take(4, Duration::from_secs(10))
            .iter()
            .map(|line| Proc::of_line(line))
            .collect();
        for &proc in &tree {
            guard.watch(proc);
        }
        let status = guard
            .wait_exit(Duration::from_secs(10))
            .expect("corral returns");
        let elapsed = started.elapsed();
        assert_eq!(status.code(), Some(124), "{backend}");
        assert!(
            elapsed >= Duration::from_secs(1) && elapsed <= Duration::from_millis(3500),
            "{backend}: returned after {elapsed:?}, expected about 1.5 s"
        );
        assert_all_gone(&tree, backend);
        eprintln!("{backend}: 124 after {elapsed:?}");
    });
}
