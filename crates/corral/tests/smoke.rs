//! The library end to end with `sh`, on every backend this machine has.

use std::time::{Duration, Instant};

use corral::{Backend, BackendChoice, Command, Outcome};

async fn run_on(backend: Backend, script: &str, timeout_ms: u64) -> Option<corral::Finished> {
    if backend == Backend::Subreaper {
        corral::claim_subreaper();
    }
    let command = Command::new("sh")
        .args(["-c", script])
        .timeout(Duration::from_millis(timeout_ms))
        .grace(Duration::from_millis(300))
        .final_bound(Duration::from_millis(500))
        .backend(BackendChoice::Only(backend));
    match command.run().await {
        Ok(finished) => Some(finished),
        Err(corral::Error::BackendUnavailable { reason, .. }) => {
            println!("skipping {backend}: {reason}");
            None
        }
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_escapees_on_cgroup_and_subreaper() {
    for backend in [Backend::Cgroup, Backend::Subreaper] {
        let started = Instant::now();
        let Some(finished) = run_on(
            backend,
            "setsid sleep 1000 & (trap '' TERM; sleep 1000) & echo hello; sleep 1000",
            300,
        )
        .await
        else {
            continue;
        };
        let took = started.elapsed();
        println!(
            "{backend}: {:?} in {took:?}: {:#?}",
            finished.outcome, finished.report
        );
        assert_eq!(finished.outcome, Outcome::TimedOut);
        assert_eq!(finished.stdout.text(), "hello\n");
        assert!(finished.report.survivors.is_empty());
        assert!(
            took < Duration::from_millis(300 + 300 + 500 + 500),
            "{took:?}"
        );
    }
}

#[tokio::test]
async fn exit_code_is_reported() {
    let finished = Command::new("sh")
        .args(["-c", "echo out; echo err >&2; exit 7"])
        .run()
        .await
        .expect("runs");
    assert_eq!(finished.outcome, Outcome::Exited { code: 7 });
    assert_eq!(finished.stdout.text(), "out\n");
    assert_eq!(finished.stderr.text(), "err\n");
}
