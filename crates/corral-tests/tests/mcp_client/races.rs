//! The manager under concurrency: a call during a connect, a shutdown
//! during a connect, a name reused while its old connection still tears
//! down. (Found by a hostile review; each test failed before its fix.)

use std::{sync::Arc, time::Duration};

use corral_mcp::client::{CallOptions, ConnectError, Manager, Server};
use corral_tests::Guard;

use crate::common::{Files, quick};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_during_the_connect_of_its_name_waits_for_it_and_spawns_nothing() {
    let files = Files::new("call-during-connect");
    let manager = Arc::new(Manager::new());
    let connecting = {
        let manager = manager.clone();
        let command = files.command(&["--handshake-delay-ms", "1000"]);
        tokio::spawn(async move { manager.connect("a", Server::Stdio(command), quick()).await })
    };
    let tree = files.tree(); // the server runs and is in its handshake
    let listed = manager
        .list_tools("a", &CallOptions::timeout(Duration::from_secs(10)))
        .await;
    let connected = connecting.await.expect("joined");
    assert!(connected.is_ok(), "{:?}", connected.map(|_| ()));
    assert!(listed.is_ok(), "{listed:?}");
    assert_eq!(
        files.spawn_count(),
        1,
        "the call started no server of its own"
    );
    crate::common::shutdown(&manager).await;
    crate::common::assert_gone_now(&tree);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_on_shutdown_also_ends_a_connect_under_way() {
    let files = Files::new("shutdown-during-connect");
    let manager = Arc::new(Manager::new());
    let connecting = {
        let manager = manager.clone();
        let command = files.command(&["--helpers", "--handshake-delay-ms", "20000"]);
        tokio::spawn(async move {
            manager
                .connect("slow", Server::Stdio(command), quick())
                .await
        })
    };
    let tree = files.tree();
    crate::common::shutdown(&manager).await;
    // Every tree is gone when shutdown returns, the connecting one too.
    crate::common::assert_gone_now(&tree);
    assert_eq!(manager.live_tasks(), 0);
    let result = connecting.await.expect("joined");
    assert!(
        matches!(result, Err(ConnectError::ShutDown)),
        "{:?}",
        result.map(|_| ())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_teardown_never_touches_the_new_connection_of_the_same_name() {
    let (old, new) = (Files::new("reuse-old"), Files::new("reuse-new"));
    let manager = Arc::new(Manager::new());
    manager
        .connect("a", Server::Stdio(old.command(&["--stubborn"])), quick())
        .await
        .expect("first");
    // The stubborn server's teardown takes close grace + grace.
    let disconnecting = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.disconnect("a").await })
    };
    while manager.contains("a") {
        tokio::task::yield_now().await;
    }
    manager
        .connect("a", Server::Stdio(new.command(&[])), quick())
        .await
        .expect("second");
    let tree = new.tree();
    let _guard = Guard::of(tree.iter().copied());
    disconnecting.await.expect("joined").expect("known");
    assert!(
        manager.get("a").is_some(),
        "the old teardown took the new connection out"
    );
    crate::common::shutdown(&manager).await;
    crate::common::assert_gone_now(&tree);
}
