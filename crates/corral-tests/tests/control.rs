//! What a caller can do to a running tree besides waiting for it
//! ([`corral::Control`]), and what the command starts with
//! ([`corral::Command::ignore_sigpipe`]), on every available backend.

use std::time::Duration;

use corral::{Backend, BackendChoice, Command, Outcome, Signal, Stdio};

/// The backends this process can use (the subreaper one once claimed).
fn backends() -> Vec<Backend> {
    corral::settings::Settings::new().subreaper().apply();
    corral::capabilities()
        .backends
        .into_iter()
        .filter(|status| {
            if !status.available {
                corral_tests::skipped(format!("backend {}: {}", status.backend, status.detail));
            }
            status.available
        })
        .map(|status| status.backend)
        .collect()
}

/// A leader and a background child that each print `ready`, then
/// `leader USR1` or `child USR1` when they get SIGUSR1.
const TRAPPING: &str = "( trap 'echo child USR1' USR1; echo ready; while :; do sleep 0.05; done ) & \
    trap 'echo leader USR1' USR1; echo ready; while :; do sleep 0.05; done";

/// `Control::signal` reaches every process of the tree, which runs on; the
/// report notes it; once the call has ended, nothing more is sent.
#[tokio::test(flavor = "current_thread")]
async fn a_signal_passed_on_reaches_every_process_and_the_tree_runs_on() {
    for backend in backends() {
        let mut child = Command::new("bash")
            .args(["-c", TRAPPING])
            .stdout(Stdio::Capture)
            .backend(BackendChoice::Only(backend))
            .grace(Duration::from_millis(300))
            .spawn()
            .expect("spawn");
        let mut tap = child.stdout_tap().expect("captured");
        let ready = |b: &[u8]| String::from_utf8_lossy(b).matches("ready").count() == 2;
        assert!(tap.wait_for(ready).await, "{backend}: not ready");
        let control = child.control();
        assert!(control.signal(Signal::USR1), "{backend}");
        let both = |b: &[u8]| {
            let text = String::from_utf8_lossy(b);
            text.contains("leader USR1") && text.contains("child USR1")
        };
        let reached = tokio::time::timeout(Duration::from_secs(5), tap.wait_for(both)).await;
        assert!(
            matches!(reached, Ok(true)),
            "{backend}: {:?}",
            String::from_utf8_lossy(&tap.snapshot())
        );
        control.terminate();
        let finished = child.wait().await.expect("finished");
        assert_eq!(finished.outcome, Outcome::Cancelled, "{backend}");
        assert!(
            finished
                .report
                .notes
                .iter()
                .any(|n| n.starts_with("passed SIGUSR1 on to ")),
            "{backend}: {:?}",
            finished.report.notes
        );
        assert!(
            !control.signal(Signal::USR1),
            "{backend}: sent after the end"
        );
    }
}

/// `Control::time_up` is the time limit passing: the policy's signal, then
/// `Outcome::TimedOut`.
#[tokio::test(flavor = "current_thread")]
async fn time_up_ends_the_tree_as_the_time_limit_does() {
    for backend in backends() {
        let mut child = Command::new("bash")
            .args([
                "-c",
                "trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
            ])
            .stdout(Stdio::Capture)
            .backend(BackendChoice::Only(backend))
            .spawn()
            .expect("spawn");
        let mut tap = child.stdout_tap().expect("captured");
        assert!(tap.wait_for(|b| b.starts_with(b"ready")).await);
        child.control().time_up();
        let finished = child.wait().await.expect("finished");
        assert_eq!(finished.outcome, Outcome::TimedOut, "{backend}");
        assert_eq!(finished.stdout.text(), "ready\ngot TERM\n", "{backend}");
        assert!(!finished.report.escalated, "{backend}");
    }
}

/// The command starts with SIGPIPE ignored only if asked (else at its
/// default, although this test process, as every Rust program, ignores it).
#[tokio::test(flavor = "current_thread")]
async fn sigpipe_is_ignored_by_the_command_only_if_asked() {
    for backend in backends() {
        for ignore in [false, true] {
            let finished = Command::new("sh")
                .args(["-c", "grep SigIgn /proc/self/status"])
                .stdout(Stdio::Capture)
                .backend(BackendChoice::Only(backend))
                .ignore_sigpipe(ignore)
                .run()
                .await
                .expect("runs");
            let text = finished.stdout.text();
            let mask = text
                .trim()
                .strip_prefix("SigIgn:")
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
                .unwrap_or_else(|| panic!("not a SigIgn line: {text:?}"));
            assert_eq!(
                corral_tests::proc::has_signal(mask, 13),
                ignore,
                "{backend}, ignore_sigpipe({ignore}): {text}"
            );
        }
    }
}
