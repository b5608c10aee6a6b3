//! One test per path that ends a connection. Each asserts the teardown's
//! postcondition: the runtime's tasks back at their baseline (counted, not
//! slept on), the server's whole tree gone by identity (the server and its
//! three helpers that escape a naive kill), and the connection gone from
//! its manager. Every test here is named `teardown_*`:
//! `cargo nextest run -E 'test(teardown_)'` runs them all.

use std::time::Duration;

use corral_mcp::client::{
    CallError, CallOptions, ConnectError, Connection, Ended, Manager, Server,
};
use corral_tests::Proc;
use tokio_util::sync::CancellationToken;

use crate::common::{Files, assert_gone_now, assert_gone_soon, message, quick, seconds, tasks};

const CALL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_disconnect_ends_the_whole_tree_and_every_task() {
    let files = Files::new("disconnect");
    let manager = Manager::new();
    let connection = manager
        .connect("fx", Server::Stdio(files.command(&["--helpers"])), quick())
        .await
        .expect("connected");
    let tree = files.tree();
    assert_eq!(tree.len(), 4, "the server and three helpers");
    let echoed = connection
        .call_tool("echo", message("hi"), &CallOptions::timeout(CALL))
        .await
        .expect("echo answered");
    assert_eq!(echoed.is_error, Some(false));
    drop(connection);
    let teardown = manager
        .disconnect("fx")
        .await
        .expect("known")
        .expect("torn down");
    assert_eq!(teardown.ended, Ended::Disconnected);
    assert_eq!(
        manager.live_tasks(),
        0,
        "writer, reader and supervisor finished"
    );
    assert_gone_now(&tree);
    assert!(!manager.contains("fx"));
    let finished = teardown.finished.as_ref().expect("a tree");
    assert!(
        finished.report.survivors.is_empty(),
        "{:?}",
        finished.report
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_handshake_error_names_the_reason_and_the_stderr_tail() {
    let files = Files::new("handshake-error");
    let manager = Manager::new();
    let error = manager
        .connect(
            "fx",
            Server::Stdio(files.command(&["--helpers", "--handshake-error"])),
            quick(),
        )
        .await
        .expect_err("the handshake fails");
    let tree = files.tree();
    let ConnectError::Handshake { why, stderr } = &error else {
        panic!("not a handshake error: {error:?}");
    };
    assert!(why.contains("fixture refuses the handshake"), "{why}");
    assert!(stderr.contains("HANDSHAKE-TAIL-MARKER"), "{stderr:?}");
    assert!(
        error.to_string().contains("HANDSHAKE-TAIL-MARKER"),
        "{error}"
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
    assert!(!manager.contains("fx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_handshake_timeout_reports_each_step_s_deadline() {
    let files = Files::new("handshake-timeout");
    let manager = Manager::new();
    let mut options = quick();
    options.discover_timeout = Duration::from_millis(300);
    options.initialize_timeout = Duration::from_millis(400);
    let error = manager
        .connect(
            "fx",
            Server::Stdio(files.command(&["--helpers", "--handshake-delay-ms", "20000"])),
            options,
        )
        .await
        .expect_err("the handshake times out");
    let tree = files.tree();
    let text = error.to_string();
    assert!(
        text.contains("initialize") && text.contains("deadline"),
        "{text}"
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_a_server_exiting_during_the_handshake() {
    let files = Files::new("exit-in-handshake");
    let manager = Manager::new();
    let error = manager
        .connect(
            "fx",
            Server::Stdio(files.command(&["--helpers", "--exit-in-handshake"])),
            quick(),
        )
        .await
        .expect_err("the server exits");
    let tree = files.tree();
    assert!(
        error.to_string().contains("exiting during the handshake"),
        "the stderr tail: {error}"
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_connect_cancelled_by_its_token_comes_before_the_error() {
    let files = Files::new("connect-cancel");
    let manager = Manager::new();
    let mut options = quick();
    let cancel = CancellationToken::new();
    options.cancel = cancel.clone();
    let command = files.command(&["--helpers", "--handshake-delay-ms", "20000"]);
    let connecting = manager.connect("fx", Server::Stdio(command), options);
    let cancelling = async {
        let pids = files.pids();
        corral_tests::wait_until_async(Duration::from_secs(10), || pids.exists()).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(connecting, cancelling);
    assert!(matches!(result, Err(ConnectError::Cancelled)), "{result:?}");
    // The error came after the teardown finished.
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&files.tree());
    assert!(!manager.contains("fx"), "the name is free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_connect_future_dropped_mid_handshake() {
    let files = Files::new("connect-drop");
    let manager = Manager::new();
    let command = files.command(&["--helpers", "--handshake-delay-ms", "20000"]);
    let pids = files.pids();
    tokio::select! {
        result = manager.connect("fx", Server::Stdio(command), quick()) => panic!("connected: {result:?}"),
        _ = corral_tests::wait_until_async(Duration::from_secs(10), || pids.exists()) => {}
    }
    // The connect future is dropped: its supervisor tears down on its own.
    let count = manager.task_count();
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || count.live() == 0).await,
        "{} tasks still alive",
        count.live()
    );
    assert_gone_now(&files.tree());
    assert!(!manager.contains("fx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_shutdown_ends_every_connection() {
    let (a, b) = (Files::new("shutdown-a"), Files::new("shutdown-b"));
    let manager = Manager::new();
    // One tree with escaping helpers (without cgroups, one subreaper tree
    // per process holds them), one without.
    for (name, files, args) in [("a", &a, &["--helpers"][..]), ("b", &b, &[])] {
        manager
            .connect(name, Server::Stdio(files.command(args)), quick())
            .await
            .expect("connected");
    }
    let trees = [a.tree(), b.tree()].concat();
    let done = crate::common::shutdown(&manager).await;
    assert_eq!(done.len(), 2);
    for (name, teardown) in &done {
        let teardown = teardown
            .as_ref()
            .unwrap_or_else(|| panic!("{name} torn down"));
        assert_eq!(teardown.ended, Ended::Shutdown);
    }
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&trees);
    assert!(manager.connected().is_empty());
    let late = manager
        .connect("c", Server::Stdio(a.command(&[])), quick())
        .await;
    assert!(matches!(late, Err(ConnectError::ShutDown)), "{late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_end_of_the_read_loop_ends_a_server_that_still_runs() {
    // The fixture exits after the handshake; its wrapper lives on with
    // stdout closed, so the reader sees end of file while the tree runs.
    let files = Files::new("read-loop-end");
    let manager = Manager::new();
    let mut options = quick();
    options.reconnect.attempts = 0;
    let mut command = corral::Command::new("/bin/sh");
    command
        .backend(corral_tests::containing_backend())
        .arg("-c")
        .arg(r#""$0" "$@"; exec sleep 600 >&-"#)
        .arg(crate::common::fixture())
        .args([
            "--pids".as_ref(),
            files.pids().as_os_str(),
            "--die-after-handshake".as_ref(),
        ])
        .grace(Duration::from_millis(500));
    let connection = manager
        .connect("fx", Server::Stdio(command), options)
        .await
        .expect("connected");
    let leader = Proc::of(connection.server_pid().expect("a pid")).expect("the wrapper runs");
    let mut tree = files.tree();
    tree.push(leader);
    let teardown = connection.closed().await.expect("torn down");
    assert!(
        matches!(teardown.ended, Ended::ReadLoopEnded(_)),
        "{:?}",
        teardown.ended
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
    assert!(
        manager.get("fx").is_none(),
        "the connection left the manager"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_server_crash_answers_the_call_in_flight_as_unknown() {
    let files = Files::new("crash");
    let manager = Manager::new();
    let connection = manager
        .connect("fx", Server::Stdio(files.command(&["--helpers"])), quick())
        .await
        .expect("connected");
    let tree = files.tree();
    let result = connection
        .call_tool("crash", None, &CallOptions::timeout(CALL))
        .await;
    assert!(
        matches!(result, Err(CallError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    let teardown = connection.closed().await.expect("torn down");
    assert!(
        matches!(
            teardown.ended,
            Ended::ServerExited(_) | Ended::ReadLoopEnded(_)
        ),
        "{:?}",
        teardown.ended
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
    assert!(manager.get("fx").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_writer_error_after_the_server_closed_its_stdin() {
    let files = Files::new("writer-error");
    let manager = Manager::new();
    let mut options = quick();
    options.reconnect.attempts = 0;
    let command = files.command(&["--helpers", "--close-stdin-after-handshake"]);
    let connection = manager
        .connect("fx", Server::Stdio(command), options)
        .await
        .expect("connected");
    let tree = files.tree();
    // Written, then the write fails (the pipe has no reader): unknown.
    let result = connection
        .call_tool(
            "echo",
            message("into the void"),
            &CallOptions::timeout(CALL),
        )
        .await;
    assert!(
        matches!(result, Err(CallError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    let teardown = connection.closed().await.expect("torn down");
    assert!(
        matches!(teardown.ended, Ended::WriteFailed(_)),
        "{:?}",
        teardown.ended
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
    assert!(manager.get("fx").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_dropping_the_manager_ends_every_tree() {
    let files = Files::new("drop-manager");
    let manager = Manager::new();
    let count = manager.task_count();
    let connection = manager
        .connect("fx", Server::Stdio(files.command(&["--helpers"])), quick())
        .await
        .expect("connected");
    let tree = files.tree();
    drop(connection);
    drop(manager);
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || count.live() == 0).await,
        "{} tasks still alive",
        count.live()
    );
    // The supervisor stopped counting only after its teardown ended.
    assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_dropping_a_connection_with_a_call_in_flight() {
    let files = Files::new("drop-connection");
    let baseline = tasks();
    let connection = Connection::spawn(files.command(&["--helpers"]), quick())
        .await
        .expect("connected");
    let tree = files.tree();
    let connection = std::sync::Arc::new(connection);
    let calling = {
        let connection = connection.clone();
        tokio::spawn(async move {
            connection
                .call_tool(
                    "sleep",
                    seconds(30.0),
                    &CallOptions::timeout(Duration::from_secs(60)),
                )
                .await
        })
    };
    // Abort the caller (which drops its handle), then drop ours.
    tokio::time::sleep(Duration::from_millis(100)).await;
    calling.abort();
    let _ = calling.await;
    drop(connection);
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || tasks() == baseline).await,
        "{} tasks alive, baseline {baseline}",
        tasks()
    );
    assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_kills_a_server_that_ignores_stdin_end_and_sigterm() {
    let files = Files::new("stubborn");
    let manager = Manager::new();
    manager
        .connect(
            "fx",
            Server::Stdio(files.command(&["--helpers", "--stubborn"])),
            quick(),
        )
        .await
        .expect("connected");
    let tree = files.tree();
    let teardown = manager
        .disconnect("fx")
        .await
        .expect("known")
        .expect("torn down");
    let finished = teardown.finished.as_ref().expect("a tree");
    assert!(
        finished.report.escalated,
        "SIGKILL was needed: {:?}",
        finished.report
    );
    assert_eq!(manager.live_tasks(), 0);
    assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_of_a_dropped_connection_is_bounded_by_the_policy() {
    let files = Files::new("drop-bounded");
    let connection = Connection::spawn(files.command(&["--helpers", "--stubborn"]), quick())
        .await
        .expect("connected");
    let tree = files.tree();
    drop(connection);
    assert_gone_soon(&tree).await;
}
