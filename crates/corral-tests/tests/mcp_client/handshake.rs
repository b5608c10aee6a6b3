//! The handshake speaks both eras: `server/discover` first, `initialize`
//! after any error (not one code), a wrong answer or silence.

use std::time::{Duration, Instant};

use corral_mcp::client::{CallOptions, Connection, Era};

use crate::common::{Files, message, quick};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_server_is_discovered_and_every_request_carries_the_version() {
    let files = Files::new("modern");
    let connection = Connection::spawn(files.command(&[]), quick())
        .await
        .expect("connected");
    assert_eq!(connection.peer().era, Era::Discover);
    assert_eq!(connection.peer().protocol_version.as_str(), "2026-07-28");
    connection
        .call_tool(
            "echo",
            message("hi"),
            &CallOptions::timeout(Duration::from_secs(10)),
        )
        .await
        .expect("answered");
    let frames = files.received();
    let call = frames
        .iter()
        .find(|f| f["method"] == "tools/call")
        .expect("the call");
    assert_eq!(
        call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(!frames.iter().any(|f| f["method"] == "initialize"));
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_is_reached_through_initialize_whatever_error_it_gives() {
    for code in ["-32601", "-32600", "-32602", "-32603", "42"] {
        let files = Files::new(&format!("legacy{code}"));
        let connection = Connection::spawn(
            files.command(&["--legacy", "--discover-error-code", code]),
            quick(),
        )
        .await
        .unwrap_or_else(|error| panic!("code {code}: {error}"));
        assert_eq!(connection.peer().era, Era::Initialize, "code {code}");
        let initialized = corral_tests::wait_until_async(Duration::from_secs(10), || {
            files
                .received()
                .iter()
                .any(|f| f["method"] == "notifications/initialized")
        })
        .await;
        assert!(initialized, "code {code}: no notifications/initialized");
        connection.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_silent_on_discover_is_reached_after_the_discover_deadline() {
    let files = Files::new("silent");
    let mut options = quick();
    options.discover_timeout = Duration::from_millis(300);
    let connection = Connection::spawn(files.command(&["--discover-silent"]), options)
        .await
        .expect("connected");
    assert_eq!(connection.peer().era, Era::Initialize);
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_deadline_bounds_both_steps_together() {
    // Silent on discover, initialize answered only after 20 s: each step's
    // own deadline would let it connect after 20.3 s; the handshake's
    // deadline of 1 s ends it, and the error names the step and the share.
    let files = Files::new("whole-deadline");
    let mut options = quick();
    options.discover_timeout = Duration::from_millis(300);
    options.initialize_timeout = Duration::from_secs(20);
    options.handshake_timeout = Some(Duration::from_secs(1));
    let started = Instant::now();
    let error = Connection::spawn(
        files.command(&["--discover-silent", "--handshake-delay-ms", "20000"]),
        options,
    )
    .await
    .expect_err("the handshake's deadline passes");
    let took = started.elapsed();
    let text = error.to_string();
    for part in [
        "initialize: no answer within 0.",
        "the handshake's deadline of 1.000 s passed",
        "server/discover used 0.3",
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    // The deadline, then the teardown (close_grace 300 ms at most).
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_only_skips_the_probe() {
    let files = Files::new("legacy-only");
    let mut options = quick();
    options.legacy_only = true;
    let connection = Connection::spawn(files.command(&[]), options)
        .await
        .expect("connected");
    assert_eq!(connection.peer().era, Era::Initialize);
    assert!(
        !files
            .received()
            .iter()
            .any(|f| f["method"] == "server/discover")
    );
    connection.close().await;
}
