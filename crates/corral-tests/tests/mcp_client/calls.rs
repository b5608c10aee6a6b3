//! Calls end with an honest outcome: `OutcomeUnknown` (with a cancellation
//! sent) once the request was written, `NotSent` before; nothing is sent
//! twice; progress extends an idle deadline, never the hard one.

use std::time::Duration;

use corral_mcp::client::{CallError, CallOptions, Connection};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::common::{Files, message, quick, seconds};

/// Waits until the fixture received a frame matching `predicate`.
async fn received(files: &Files, predicate: impl Fn(&Value) -> bool) -> bool {
    corral_tests::wait_until_async(Duration::from_secs(10), || {
        files.received().iter().any(&predicate)
    })
    .await
}

fn is_call_of(frame: &Value, tool: &str) -> bool {
    frame["method"] == "tools/call" && frame["params"]["name"] == tool
}

fn cancels(frame: &Value, id: &Value) -> bool {
    frame["method"] == "notifications/cancelled" && &frame["params"]["requestId"] == id
}

fn id_json(error: &CallError) -> Value {
    match error {
        CallError::OutcomeUnknown { request_id, .. } => {
            serde_json::to_value(request_id).expect("an id")
        }
        other => panic!("not OutcomeUnknown: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_after_the_write_is_outcome_unknown_sends_a_cancellation_and_never_resends() {
    let files = Files::new("deadline");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    let error = connection
        .call_tool(
            "sleep",
            seconds(30.0),
            &CallOptions::timeout(Duration::from_millis(300)),
        )
        .await
        .expect_err("the deadline passes");
    assert!(error.effects_unknown());
    let id = id_json(&error);
    assert!(
        received(&files, |frame| cancels(frame, &id)).await,
        "no notifications/cancelled for {id}"
    );
    // The connection still serves, and the call was written exactly once.
    let echoed = connection
        .call_tool(
            "echo",
            message("still here"),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("echo answered");
    assert_eq!(echoed.is_error, Some(false));
    let sent = files
        .received()
        .iter()
        .filter(|frame| is_call_of(frame, "sleep"))
        .count();
    assert_eq!(sent, 1, "the timed-out call was never sent again");
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_is_outcome_unknown_and_the_server_is_told() {
    let files = Files::new("cancel");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    let token = CancellationToken::new();
    let cancelling = {
        let token = token.clone();
        let log = files.log();
        async move {
            corral_tests::wait_until_async(Duration::from_secs(10), || {
                std::fs::read_to_string(&log).is_ok_and(|text| text.contains("\"sleep\""))
            })
            .await;
            token.cancel();
        }
    };
    let options = CallOptions::timeout(Duration::from_secs(60)).cancel_on(token);
    let (result, ()) = tokio::join!(
        connection.call_tool("sleep", seconds(30.0), &options),
        cancelling
    );
    let error = result.expect_err("cancelled");
    let id = id_json(&error);
    assert!(
        received(&files, |frame| cancels(frame, &id)).await,
        "no notifications/cancelled for {id}"
    );
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_written_call_sends_its_cancellation() {
    let files = Files::new("drop-call");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    let options = CallOptions::default();
    let call = connection.call_tool("sleep", seconds(30.0), &options);
    let log = files.log();
    tokio::select! {
        result = call => panic!("answered: {result:?}"),
        _ = corral_tests::wait_until_async(Duration::from_secs(10), || {
            std::fs::read_to_string(&log).is_ok_and(|text| text.contains("\"sleep\""))
        }) => {}
    }
    // The call future is dropped here.
    let frames = files.received();
    let id = frames
        .iter()
        .find(|frame| is_call_of(frame, "sleep"))
        .map(|frame| frame["id"].clone())
        .expect("the sleep call was written");
    assert!(
        received(&files, |frame| cancels(frame, &id)).await,
        "no notifications/cancelled for {id}"
    );
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_could_not_be_written_is_not_sent_and_never_reaches_the_server() {
    // A peer that answers the handshake, then reads nothing until told: the
    // writer blocks on a full pipe, and a call queued behind it gives up.
    // Then the peer reads (and answers) everything: the call that gave up
    // must not be among what it read.
    let (client, server) = tokio::io::duplex(256);
    let (server_read, mut server_write) = tokio::io::split(server);
    let resume = std::sync::Arc::new(tokio::sync::Notify::new());
    let peer = {
        let resume = resume.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_read).lines();
            let mut read = Vec::new();
            let mut first = true;
            while let Ok(Some(line)) = lines.next_line().await {
                let request: Value = serde_json::from_str(&line).expect("JSON");
                let result = if first {
                    serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                        "capabilities": {}, "ttlMs": 0, "cacheScope": "private"})
                } else {
                    serde_json::json!({"content": [], "isError": false})
                };
                if request.get("id").is_some() {
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
                    let _ = server_write
                        .write_all(format!("{answer}\n").as_bytes())
                        .await;
                }
                if std::mem::take(&mut first) {
                    resume.notified().await;
                }
                read.push(request);
            }
            read
        })
    };
    let (read, write) = tokio::io::split(client);
    let connection = Connection::attach(read, write, quick())
        .await
        .expect("connected");
    let big = "x".repeat(64 << 10);
    let short = CallOptions::timeout(Duration::from_millis(300));
    let (first, second) = tokio::join!(
        connection.call_tool("echo", message(&big), &short),
        connection.call_tool("echo", message("queued"), &short),
    );
    assert!(
        matches!(first, Err(CallError::OutcomeUnknown { .. })),
        "{first:?}"
    );
    let Err(CallError::NotSent { reason }) = &second else {
        panic!("not NotSent: {second:?}");
    };
    assert!(
        reason.contains("before the request was written"),
        "{reason}"
    );
    // The peer reads again; a later call goes through the same queue.
    resume.notify_one();
    connection
        .call_tool(
            "echo",
            message("after"),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("answered");
    let teardown = connection.close().await.expect("torn down");
    assert!(teardown.finished.is_none(), "no process");
    let read = peer.await.expect("the peer's frames");
    let messages: Vec<&Value> = read
        .iter()
        .filter(|f| f["method"] == "tools/call")
        .map(|f| &f["params"]["arguments"]["message"])
        .collect();
    assert_eq!(messages.len(), 2, "the big call and the later one only");
    assert_eq!(messages[1], "after");
    assert!(
        !messages.contains(&&Value::from("queued")),
        "the call that gave up was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_close_is_not_sent() {
    let files = Files::new("after-close");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    connection.close().await;
    let result = connection
        .call_tool("echo", message("late"), &CallOptions::default())
        .await;
    assert!(
        matches!(result, Err(CallError::NotSent { .. })),
        "{result:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_cap_refuses_a_call_as_not_sent() {
    let files = Files::new("cap");
    let mut options = quick();
    options.max_in_flight = 2;
    let connection = Connection::spawn(files.command(&[]), options)
        .await
        .expect("connected");
    let slow = CallOptions::timeout(Duration::from_secs(30));
    let third = async {
        let log = files.log();
        corral_tests::wait_until_async(Duration::from_secs(10), || {
            std::fs::read_to_string(&log).is_ok_and(|text| text.matches("\"sleep\"").count() == 2)
        })
        .await;
        connection
            .call_tool("echo", message("one too many"), &slow)
            .await
    };
    tokio::select! {
        _ = connection.call_tool("sleep", seconds(30.0), &slow) => panic!("answered"),
        _ = connection.call_tool("sleep", seconds(30.0), &slow) => panic!("answered"),
        result = third => {
            let Err(CallError::NotSent { reason }) = &result else { panic!("{result:?}") };
            assert!(reason.contains("max_in_flight"), "{reason}");
        }
    }
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_extends_the_idle_deadline_and_never_the_hard_one() {
    let idle = Duration::from_millis(400);
    // Without progress, a 1.5 s call misses a 0.4 s idle deadline.
    let quiet = Files::new("progress-quiet");
    let connection = Connection::spawn(quiet.command(&[]), quick())
        .await
        .expect("connected");
    let options = CallOptions::timeout(Duration::from_secs(20)).idle(idle);
    let result = connection.call_tool("sleep", seconds(1.5), &options).await;
    assert!(
        matches!(result, Err(CallError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    connection.close().await;

    // With progress every 100 ms, the same call completes.
    let chatty = Files::new("progress-chatty");
    let connection = Connection::spawn(chatty.command(&["--progress-ms", "100"]), quick())
        .await
        .expect("connected");
    let result = connection.call_tool("sleep", seconds(1.5), &options).await;
    assert!(result.is_ok(), "{result:?}");

    // And progress never carries a call past its hard deadline.
    let hard = CallOptions::timeout(Duration::from_millis(1500)).idle(idle);
    let result = connection.call_tool("sleep", seconds(30.0), &hard).await;
    assert!(
        matches!(result, Err(CallError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_error_is_a_result_and_a_json_rpc_error_is_its_own_outcome() {
    let files = Files::new("errors");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    let result = connection
        .call_tool(
            "no-such-tool",
            None,
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("a result");
    assert_eq!(result.is_error, Some(true));
    let error = connection
        .request(
            "no/such/method",
            None,
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect_err("method not found");
    assert!(
        matches!(error, CallError::Rpc { code: -32601, .. }),
        "{error:?}"
    );
    assert!(!error.effects_unknown());
    connection.close().await;
}
