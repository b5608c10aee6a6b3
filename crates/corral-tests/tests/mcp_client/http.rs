//! The streamable HTTP transport against `mcp-fixture --http`: calls work,
//! a held answer is cut short only by the caller's deadline (which closes
//! its stream and sends `notifications/cancelled`), malformed events are
//! dropped and counted, and every path that ends a connection leaves no
//! task behind (tests named `teardown_*`).

use std::time::{Duration, Instant};

use corral_mcp::client::{
    CallError, CallOptions, ConnectError, Connection, Ended, HttpOptions, Manager, Server,
};
use serde_json::Value;

use crate::common::{Files, message, quick, serve_http as serve};

/// The text of the fixture's log (received bodies and its notes).
fn log(files: &Files) -> String {
    std::fs::read_to_string(files.log()).unwrap_or_default()
}

/// The text of a tool result's first content block.
macro_rules! echoed {
    ($result:expr) => {
        $result
            .content
            .first()
            .and_then(|content| content.as_text())
            .map(|text| text.text.as_str())
            .unwrap_or_default()
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_lists_tools_and_calls_echo_through_the_manager() {
    let files = Files::new("http-echo");
    let served = serve(&files, &[]);
    let manager = Manager::new();
    let server = Server::Http {
        url: served.url.clone(),
        options: HttpOptions::default().header("Authorization", "Bearer fixture"),
    };
    let connection = manager
        .connect("fx", server, quick())
        .await
        .expect("connected over HTTP");
    let deadline = CallOptions::timeout(Duration::from_secs(10));
    let tools = connection.list_tools(&deadline).await.expect("tools/list");
    assert!(tools.iter().any(|tool| tool.name == "echo"), "{tools:?}");
    let result = connection
        .call_tool("echo", message("over http"), &deadline)
        .await
        .expect("echo answered");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(echoed!(result), "over http");
    drop(connection);
    manager.disconnect("fx").await.expect("known");
    assert_eq!(manager.live_tasks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_http_handshake_failure_nothing_listening() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let manager = Manager::new();
    let error = manager
        .connect(
            "fx",
            Server::Http {
                url: url.clone(),
                options: HttpOptions::default(),
            },
            quick(),
        )
        .await
        .expect_err("nothing listens");
    assert_eq!(
        manager.live_tasks(),
        0,
        "writer, reader and supervisor finished"
    );
    let ConnectError::Http { url: named, why } = &error else {
        panic!("not an HTTP error: {error:?}");
    };
    assert_eq!(named, &url);
    assert!(why.to_lowercase().contains("refused"), "{why}");
    assert!(!manager.contains("fx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_http_handshake_failure_refused_by_the_server() {
    let files = Files::new("http-handshake-error");
    let served = serve(&files, &["--handshake-error"]);
    let manager = Manager::new();
    let error = manager
        .connect(
            "fx",
            Server::Http {
                url: served.url.clone(),
                options: HttpOptions::default(),
            },
            quick(),
        )
        .await
        .expect_err("the handshake fails");
    assert_eq!(manager.live_tasks(), 0);
    let ConnectError::Handshake { why, .. } = &error else {
        panic!("not a handshake error: {error:?}");
    };
    assert!(why.contains("fixture refuses the handshake"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_http_disconnect_ends_the_session_and_closes_held_answers() {
    let files = Files::new("http-disconnect");
    // Legacy: `initialize` gives a session id, which the teardown deletes.
    let served = serve(&files, &["--legacy", "--hold-ms", "20000"]);
    let manager = Manager::new();
    let connection = manager
        .connect(
            "fx",
            Server::Http {
                url: served.url.clone(),
                options: HttpOptions::default(),
            },
            quick(),
        )
        .await
        .expect("connected");
    let held = tokio::spawn({
        let connection = connection.clone();
        async move {
            connection
                .call_tool(
                    "echo",
                    message("held"),
                    &CallOptions::timeout(Duration::from_secs(60)),
                )
                .await
        }
    });
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || log(&files)
            .contains("tools/call"))
        .await,
        "the fixture got no tools/call: {}",
        log(&files)
    );
    drop(connection);
    let started = Instant::now();
    let teardown = manager
        .disconnect("fx")
        .await
        .expect("known")
        .expect("torn down");
    let took = started.elapsed();
    assert_eq!(teardown.ended, Ended::Disconnected);
    assert_eq!(
        manager.live_tasks(),
        0,
        "writer, reader and supervisor finished"
    );
    assert!(
        took < Duration::from_secs(5),
        "the teardown waited for a held answer: {took:?}"
    );
    let outcome = held.await.expect("the call's task");
    assert!(
        matches!(outcome, Err(CallError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    assert!(
        log(&files).contains("fixture: session deleted"),
        "no DELETE of the session: {}",
        log(&files)
    );
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(5), || log(&files)
            .contains("fixture: stream closed for request"))
        .await,
        "the held answer's stream stayed open: {}",
        log(&files)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_answer_is_not_cut_short_by_the_http_client() {
    let files = Files::new("http-hold");
    let served = serve(&files, &["--hold-ms", "1500"]);
    let mut http = HttpOptions::default();
    http.pool_idle_timeout = Some(Duration::from_millis(100));
    http.connect_timeout = Duration::from_millis(500);
    let connection = Connection::http(&served.url, http, quick())
        .await
        .expect("connected");
    let started = Instant::now();
    let result = connection
        .call_tool(
            "echo",
            message("patience"),
            &CallOptions::timeout(Duration::from_secs(20)),
        )
        .await
        .expect("the held answer arrives");
    assert!(started.elapsed() >= Duration::from_millis(1400));
    assert_eq!(echoed!(result), "patience");
    connection.close().await.expect("torn down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_closes_the_held_stream_and_sends_cancelled() {
    let files = Files::new("http-deadline");
    let served = serve(&files, &["--hold-ms", "5000"]);
    let connection = Connection::http(&served.url, HttpOptions::default(), quick())
        .await
        .expect("connected");
    let started = Instant::now();
    let error = connection
        .call_tool(
            "echo",
            message("late"),
            &CallOptions::timeout(Duration::from_millis(300)),
        )
        .await
        .expect_err("the deadline passes first");
    assert!(started.elapsed() < Duration::from_secs(3));
    let CallError::OutcomeUnknown { request_id, .. } = &error else {
        panic!("not outcome unknown: {error:?}");
    };
    let closed = format!("fixture: stream closed for request {request_id}");
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(4), || log(&files).contains(&closed))
            .await,
        "the fixture saw no closed stream for {request_id}: {}",
        log(&files)
    );
    // The cancellation is a POST of its own, which the fixture may log before
    // or after it notices the closed stream: wait for it too.
    let cancelled = || {
        log(&files).lines().any(|line| {
            serde_json::from_str::<Value>(line).is_ok_and(|frame| {
                frame["method"] == "notifications/cancelled"
                    && serde_json::to_value(request_id)
                        .is_ok_and(|id| frame["params"]["requestId"] == id)
            })
        })
    };
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(4), cancelled).await,
        "no notifications/cancelled: {}",
        log(&files)
    );
    connection.close().await.expect("torn down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_events_are_dropped_and_the_call_still_answers() {
    let files = Files::new("http-garbage");
    let served = serve(&files, &["--garbage"]);
    let mut options = quick();
    // Under the fixture's 2 MiB event.
    options.max_frame_bytes = 1024 * 1024;
    let connection = Connection::http(&served.url, HttpOptions::default(), options)
        .await
        .expect("connected");
    let result = connection
        .call_tool(
            "echo",
            message("through the noise"),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("echo answered");
    assert_eq!(echoed!(result), "through the noise");
    let stats = connection.stats();
    assert!(stats.dropped() > 0, "{stats:?}");
    assert!(stats.too_long > 0, "the over-long event: {stats:?}");
    connection.close().await.expect("torn down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_the_session_the_version_and_the_callers_headers() {
    let files = Files::new("http-headers");
    // Legacy: `initialize` gives a session id.
    let served = serve(&files, &["--legacy"]);
    let http = HttpOptions::default().header("Authorization", "Bearer t0ken");
    let connection = Connection::http(&served.url, http, quick())
        .await
        .expect("connected");
    connection
        .list_tools(&CallOptions::timeout(Duration::from_secs(10)))
        .await
        .expect("tools/list");
    connection.close().await.expect("torn down");
    let log = log(&files);
    let notes: Vec<&str> = log
        .lines()
        .filter(|line| line.contains(" headers:"))
        .collect();
    // The discovery carries the version of its `_meta` (every 2026-07-28
    // POST must); the legacy `initialize` after it, no session and no
    // version yet.
    assert_eq!(
        notes.first().copied(),
        Some("fixture: POST headers: authorization=Bearer t0ken mcp-protocol-version=2026-07-28"),
        "{log}"
    );
    assert_eq!(
        notes.get(1).copied(),
        Some("fixture: POST headers: authorization=Bearer t0ken"),
        "{log}"
    );
    let after = "authorization=Bearer t0ken mcp-protocol-version=2025-11-25 \
                 mcp-session-id=fixture-session";
    assert!(
        notes.contains(&format!("fixture: POST headers: {after}").as_str()),
        "{log}"
    );
    assert!(
        notes.contains(&format!("fixture: DELETE headers: {after}").as_str()),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_answer_does_not_hold_back_other_requests() {
    let files = Files::new("http-concurrent");
    let served = serve(&files, &["--hold-ms", "5000"]);
    let connection = std::sync::Arc::new(
        Connection::http(&served.url, HttpOptions::default(), quick())
            .await
            .expect("connected"),
    );
    let held = tokio::spawn({
        let connection = connection.clone();
        async move {
            connection
                .call_tool(
                    "echo",
                    message("held"),
                    &CallOptions::timeout(Duration::from_secs(20)),
                )
                .await
        }
    });
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || log(&files)
            .contains("tools/call"))
        .await,
        "the fixture got no tools/call: {}",
        log(&files)
    );
    let started = Instant::now();
    connection
        .list_tools(&CallOptions::timeout(Duration::from_secs(3)))
        .await
        .expect("tools/list answered while tools/call is held");
    assert!(started.elapsed() < Duration::from_secs(2));
    connection.close().await.expect("torn down");
    let outcome = held.await.expect("the call's task");
    assert!(
        matches!(outcome, Err(CallError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_url_or_header_is_refused_before_anything_starts() {
    let manager = Manager::new();
    for (url, header, expected) in [
        ("not a url", "x-fine", "not a URL"),
        ("https://127.0.0.1:1/mcp", "x-fine", "no TLS"),
        (
            "http://127.0.0.1:1/mcp",
            "bad header",
            "not a valid header name",
        ),
    ] {
        let server = Server::Http {
            url: url.into(),
            options: HttpOptions::default().header(header, "1"),
        };
        let error = manager
            .connect("fx", server, quick())
            .await
            .expect_err("refused");
        let ConnectError::Http { why, .. } = &error else {
            panic!("not an HTTP error: {error:?}");
        };
        assert!(why.contains(expected), "{url}: {why}");
        assert_eq!(manager.live_tasks(), 0);
        assert!(!manager.contains("fx"));
    }
}
