//! The read loop ends only when the transport ends: every malformed frame
//! is dropped and counted, the server's requests are answered.

use std::time::Duration;

use corral_mcp::client::{CallOptions, Connection};

use crate::common::{Files, message, quick};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_frame_is_dropped_and_counted_and_the_loop_goes_on() {
    let files = Files::new("garbage");
    let mut options = quick();
    options.max_frame_bytes = 1 << 20;
    // The fixture writes its garbage (with a 2 MiB line) after the handshake.
    let connection = Connection::spawn(files.command(&["--garbage"]), options)
        .await
        .expect("connected");
    let echoed = connection
        .call_tool(
            "echo",
            message("through the garbage"),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("answered");
    assert_eq!(echoed.is_error, Some(false));
    // The doubled answer to the call (an already-settled id) is counted too.
    let done = corral_tests::wait_until_async(Duration::from_secs(10), || {
        connection.stats().unknown_id >= 2
    })
    .await;
    let stats = connection.stats();
    assert!(done, "{stats:?}");
    assert_eq!(stats.not_json, 1, "{stats:?}");
    assert_eq!(stats.not_object, 3, "{stats:?}");
    assert_eq!(stats.bad_id, 2, "{stats:?}");
    assert_eq!(stats.bad_method, 1, "{stats:?}");
    assert_eq!(stats.too_long, 1, "{stats:?}");
    assert_eq!(stats.server_requests, 2, "{stats:?}");
    // The server's ping was answered, its unknown request refused.
    let answered = corral_tests::wait_until_async(Duration::from_secs(10), || {
        let frames = files.received();
        let ping = frames
            .iter()
            .any(|f| f["id"] == "srv-ping" && f["result"].is_object());
        let refused = frames
            .iter()
            .any(|f| f["id"] == "srv-unknown" && f["error"]["code"] == -32601);
        ping && refused
    })
    .await;
    assert!(answered, "{:?}", files.received());
    assert!(connection.ended().is_none(), "the connection lives on");
    connection.close().await;
}
