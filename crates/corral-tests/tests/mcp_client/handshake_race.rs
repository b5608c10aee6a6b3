//! A server that answers the handshake and exits at once: its answer was
//! written before it went, so the connect succeeds (and the connection then
//! ends by itself). Regression: the supervisor's biased wait saw the end
//! first (the leader exited, or the output ended) and failed a handshake
//! that had been answered, about one connect in a dozen.

use std::time::Duration;

use corral_mcp::client::{ConnectOptions, Connection};

use crate::common::{Files, fixture, tasks};

const CONNECTS: usize = 100;
const CONCURRENCY: usize = 4;

fn options() -> ConnectOptions {
    let mut options = crate::common::quick();
    options.reconnect.attempts = 0;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_exiting_right_after_its_handshake_answer_still_connects() {
    let files = std::sync::Arc::new(Files::new("answer-then-exit"));
    let baseline = tasks();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..CONCURRENCY {
        let files = files.clone();
        workers.spawn(async move {
            for round in (worker..CONNECTS).step_by(CONCURRENCY) {
                // No `--pids`: fixtures at once would race on its file.
                let mut command = corral::Command::new(fixture());
                command
                    .backend(corral_tests::containing_backend())
                    .arg("--spawn-log")
                    .arg(files.spawns())
                    .arg("--die-after-handshake")
                    .grace(Duration::from_millis(500));
                let connection = Connection::spawn(command, options())
                    .await
                    .unwrap_or_else(|error| panic!("connect {round}: {error}"));
                connection.closed().await.expect("torn down");
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined {
            std::panic::resume_unwind(error.into_panic());
        }
    }
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || tasks() == baseline).await,
        "{} tasks alive, baseline {baseline}",
        tasks()
    );
    crate::common::assert_gone_now(&files.spawned());
}
