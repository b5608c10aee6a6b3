//! One test per path that ends a connection. Each asserts the teardown's
//! postcondition: the runtime's tasks back at their baseline (counted, not
//! slept on), the server's whole tree gone by identity (the server and its
//! three helpers that escape a naive kill), and the connection gone from
//! its manager.

use std::time::Duration;

use corral_mcp::client::{CallOptions, ConnectError, Ended, Manager, Server};

use crate::common::{Files, assert_gone_now, quick};

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
        .call_tool(
            "echo",
            Some(
                serde_json::json!({"message": "hi"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
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
