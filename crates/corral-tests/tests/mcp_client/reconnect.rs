//! Reconnecting a crashed server: bounded, backed off, single-flight, and
//! never resending a call.

use std::time::Duration;

use corral_mcp::client::{CallError, CallOptions, ConnectError, Manager, Server};

use crate::common::{Files, message, quick, seconds};

fn fast() -> corral_mcp::client::ConnectOptions {
    let mut options = quick();
    options.reconnect.attempts = 3;
    options.reconnect.backoff = Duration::from_millis(10);
    options.reconnect.max_backoff = Duration::from_millis(50);
    options
}

const CALL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dying_after_every_handshake_cannot_make_more_spawns_than_the_cap() {
    let files = Files::new("die-after-handshake");
    let manager = Manager::new();
    manager
        .connect(
            "fx",
            Server::Stdio(files.command(&["--die-after-handshake"])),
            fast(),
        )
        .await
        .expect("the first handshake succeeds");
    let mut failed = None;
    for _ in 0..20 {
        match manager
            .call_tool("fx", "echo", message("hi"), &CallOptions::timeout(CALL))
            .await
        {
            Err(CallError::NotSent { reason }) if reason.contains("reconnect attempt") => {
                failed = Some(reason);
                break;
            }
            _ => {}
        }
    }
    let reason = failed.expect("reported failed once the budget was spent");
    assert!(reason.contains("Manager::reconnect"), "{reason}");
    assert_eq!(files.spawn_count(), 4, "the first server and 3 attempts");
    // Still failed until asked again.
    let again = manager
        .call_tool("fx", "echo", message("hi"), &CallOptions::timeout(CALL))
        .await;
    assert!(matches!(again, Err(CallError::NotSent { .. })), "{again:?}");
    assert_eq!(files.spawn_count(), 4);
    // Asked again: a fresh budget, still capped.
    let _ = manager.reconnect("fx").await;
    for _ in 0..20 {
        let _ = manager
            .call_tool("fx", "echo", message("hi"), &CallOptions::timeout(CALL))
            .await;
    }
    assert!(files.spawn_count() <= 7, "{} spawns", files.spawn_count());
    crate::common::shutdown(&manager).await;
    assert_eq!(manager.live_tasks(), 0);
    crate::common::assert_gone_now(&files.spawned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_share_one_reconnect() {
    let files = Files::new("single-flight");
    let manager = std::sync::Arc::new(Manager::new());
    let connection = manager
        .connect("fx", Server::Stdio(files.command(&[])), fast())
        .await
        .expect("connected");
    let _ = connection
        .call_tool("crash", None, &CallOptions::timeout(CALL))
        .await;
    connection.closed().await;
    drop(connection);
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..20 {
        let manager = manager.clone();
        calls.spawn(async move {
            manager
                .call_tool(
                    "fx",
                    "echo",
                    message(&format!("call {i}")),
                    &CallOptions::timeout(CALL),
                )
                .await
        });
    }
    let results = calls.join_all().await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(files.spawn_count(), 2, "one reconnect for twenty callers");
    crate::common::shutdown(&manager).await;
    crate::common::assert_gone_now(&files.spawned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_at_a_crash_is_unknown_and_never_resent() {
    let files = Files::new("in-flight-crash");
    let manager = Manager::new();
    let connection = manager
        .connect("fx", Server::Stdio(files.command(&[])), fast())
        .await
        .expect("connected");
    let long = CallOptions::timeout(Duration::from_secs(60));
    let sleeping = connection.call_tool("sleep", seconds(30.0), &long);
    let crashing = async {
        let log = files.log();
        corral_tests::wait_until_async(CALL, || {
            std::fs::read_to_string(&log).is_ok_and(|text| text.contains("\"sleep\""))
        })
        .await;
        connection
            .call_tool("crash", None, &CallOptions::timeout(CALL))
            .await
    };
    let (slept, _) = tokio::join!(sleeping, crashing);
    assert!(
        matches!(slept, Err(CallError::OutcomeUnknown { .. })),
        "{slept:?}"
    );
    // The next call reconnects; the sleep is never sent again.
    manager
        .call_tool("fx", "echo", message("after"), &CallOptions::timeout(CALL))
        .await
        .expect("reconnected");
    let sleeps = files
        .received()
        .iter()
        .filter(|f| f["method"] == "tools/call" && f["params"]["name"] == "sleep")
        .count();
    assert_eq!(sleeps, 1);
    crate::common::shutdown(&manager).await;
    crate::common::assert_gone_now(&files.spawned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_taken_once_and_unknown_names_are_clear_errors() {
    let files = Files::new("names");
    let manager = Manager::new();
    manager
        .connect("fx", Server::Stdio(files.command(&[])), quick())
        .await
        .expect("connected");
    let twice = manager
        .connect("fx", Server::Stdio(files.command(&[])), quick())
        .await;
    assert!(
        matches!(twice, Err(ConnectError::NameTaken(_))),
        "{twice:?}"
    );
    let unknown = manager
        .call_tool("nope", "echo", None, &CallOptions::default())
        .await;
    assert!(
        matches!(unknown, Err(CallError::NotSent { .. })),
        "{unknown:?}"
    );
    assert_eq!(
        files.spawn_count(),
        1,
        "the refused connect spawned nothing"
    );
    crate::common::shutdown(&manager).await;
}
