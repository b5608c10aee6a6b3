//! Legacy (`initialize`) sessions on HTTP belong to the client whose
//! token made them: a session id carries no rights.

use std::time::Duration;

use corral_mcp::serve::{
    CorralServer, Principal, Runner,
    transport::{self, Client, HttpAuth},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::harness::options;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-9876543210";

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// A request to `url` as the client with `token`, on `session`.
fn request(
    method: reqwest::Method,
    url: &str,
    token: &str,
    session: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    request
}

async fn send(request: reqwest::RequestBuilder) -> (u16, String) {
    let response = tokio::time::timeout(Duration::from_secs(10), request.send())
        .await
        .expect("answered within 10 s")
        .expect("a response");
    let status = response.status().as_u16();
    if status == 200 {
        // A stream: its status is the answer.
        return (status, String::new());
    }
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_client_with_a_session_id_can_neither_cancel_resume_nor_end_it() {
    let root = corral_tests::Scratch::new("serve-session-owner");
    let runner = Runner::new(options(&root)).expect("a runner");
    let listener = transport::listen("127.0.0.1:0".parse().expect("address")).expect("bind");
    let url = format!(
        "http://{}{}",
        listener.local_addr().expect("address"),
        transport::PATH
    );
    let auth = HttpAuth::with_clients(vec![
        Client::new(Principal::new("alice"), ALICE),
        Client::new(Principal::new("bob"), BOB),
    ]);
    let stop = CancellationToken::new();
    let server = tokio::spawn(transport::http(
        CorralServer::new(runner.clone()),
        listener,
        auth,
        stop.clone(),
    ));

    // Alice's session, and a run in it that waits for `go`.
    let made = request(reqwest::Method::POST, &url, ALICE, None)
        .body(INITIALIZE)
        .send()
        .await
        .expect("initialize");
    assert_eq!(made.status(), 200);
    let session = made
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .expect("a session id")
        .to_owned();
    made.text().await.expect("the initialize answer");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, why) = send(
        request(reqwest::Method::POST, &url, ALICE, Some(&session)).body(initialized.to_string()),
    )
    .await;
    assert_eq!(status, 202, "{why}");
    let (started, go) = (root.path("started"), root.path("go"));
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done; echo FINISHED-FOR-ALICE",
        started.display(),
        go.display()
    );
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run", "arguments": {"shell": script, "timeout": "60s"}}});
    let hers = tokio::spawn(
        request(reqwest::Method::POST, &url, ALICE, Some(&session))
            .body(call.to_string())
            .send(),
    );
    let waited = std::time::Instant::now();
    while !started.exists() {
        assert!(
            waited.elapsed() < Duration::from_secs(20),
            "the run never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Bob, with his own token and her session id: as for an unknown session.
    let unknown = send(
        request(reqwest::Method::POST, &url, BOB, Some("no-such-session")).body(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 2}})
            .to_string(),
        ),
    )
    .await;
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "bob"}});
    let answer =
        send(request(reqwest::Method::POST, &url, BOB, Some(&session)).body(cancel.to_string()))
            .await;
    assert_eq!(answer, unknown, "bob's cancel of alice's run");
    let answer = send(
        request(reqwest::Method::GET, &url, BOB, Some(&session)).header("last-event-id", "0/0"),
    )
    .await;
    assert_eq!(answer, unknown, "bob's resume of alice's stream");
    let answer = send(request(reqwest::Method::DELETE, &url, BOB, Some(&session))).await;
    assert_eq!(answer, unknown, "bob's end of alice's session");

    // Alice's run goes on to its end, and she reads its result.
    std::fs::write(&go, "").expect("go");
    let response = tokio::time::timeout(Duration::from_secs(30), hers)
        .await
        .expect("alice answered within 30 s")
        .expect("joined")
        .expect("a response");
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("alice's stream ends within 30 s")
        .expect("alice's answer");
    assert!(body.contains("FINISHED-FOR-ALICE"), "{body}");
    assert!(body.contains(r#""id":2"#), "{body}");
    // Her session is still hers to end.
    let (status, why) = send(request(
        reqwest::Method::DELETE,
        &url,
        ALICE,
        Some(&session),
    ))
    .await;
    assert_eq!(status, 202, "{why}");

    stop.cancel();
    server.await.expect("joined").expect("served");
    runner.shutdown().await;
}
