//! The HTTP gate against a real listener and a handler with no tools; the
//! full protocol runs against the official Python client in corral-cli's
//! `mcp_serve` tests.

use rmcp::model::{ServerCapabilities, ServerConfig};

use super::*;

#[derive(Debug, Clone)]
struct Bare;

impl ServerHandler for Bare {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

const TOKEN: &str = "0123456789abcdef";

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// Starts the HTTP transport on a loopback port; returns its URL.
async fn start(auth: HttpAuth, stop: &CancellationToken) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let stop = stop.clone();
    let task = tokio::spawn(async move {
        serve_http(Bare, listener, auth, stop)
            .await
            .expect("http transport");
    });
    (format!("http://127.0.0.1:{port}{PATH}"), task)
}

async fn post(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

#[tokio::test]
async fn the_gate_wants_the_token_and_a_known_origin() {
    let stop = CancellationToken::new();
    let (url, task) = start(HttpAuth::new(TOKEN), &stop).await;
    let bearer = format!("Bearer {TOKEN}");
    let port = url
        .split(':')
        .nth(2)
        .and_then(|s| s.split('/').next())
        .expect("port");

    let none = post(&url, &[]).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"corral\"")
    );
    let wrong = post(&url, &[("authorization", "Bearer 0123456789abcdeX")]).await;
    assert_eq!(wrong.status(), 401);
    let short = post(&url, &[("authorization", "Bearer 0123")]).await;
    assert_eq!(short.status(), 401);
    let basic = post(&url, &[("authorization", &format!("Basic {TOKEN}"))]).await;
    assert_eq!(basic.status(), 401);

    let evil = post(
        &url,
        &[
            ("authorization", &bearer),
            ("origin", "http://evil.example"),
        ],
    )
    .await;
    assert_eq!(evil.status(), 403);
    let other_port = post(
        &url,
        &[("authorization", &bearer), ("origin", "http://localhost:1")],
    )
    .await;
    assert_eq!(other_port.status(), 403);

    let ok = post(&url, &[("authorization", &bearer)]).await;
    assert_eq!(ok.status(), 200, "{:?}", ok.text().await);
    let origin = format!("http://localhost:{port}");
    let ok = post(
        &url,
        &[
            ("authorization", &format!("bearer {TOKEN}")),
            ("origin", &origin),
        ],
    )
    .await;
    assert_eq!(ok.status(), 200);
    let body = ok.text().await.expect("body");
    assert!(body.contains("protocolVersion"), "{body}");

    let elsewhere = post(&url.replace(PATH, "/other"), &[("authorization", &bearer)]).await;
    assert_eq!(elsewhere.status(), 404);

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the transport returns once stopped")
        .expect("no panic");
}

#[tokio::test]
async fn a_foreign_host_is_refused_unless_any_host() {
    let stop = CancellationToken::new();
    let bearer = format!("Bearer {TOKEN}");
    let (url, _task) = start(HttpAuth::new(TOKEN), &stop).await;
    let refused = post(
        &url,
        &[("authorization", &bearer), ("host", "evil.example")],
    )
    .await;
    assert_eq!(refused.status(), 403);
    let mut auth = HttpAuth::new(TOKEN);
    auth.any_host = true;
    let (url, _task) = start(auth, &stop).await;
    let served = post(
        &url,
        &[("authorization", &bearer), ("host", "server.example")],
    )
    .await;
    assert_eq!(served.status(), 200);
    stop.cancel();
}

#[test]
fn secrets_compare_whole() {
    assert!(same_secret(b"abc", b"abc"));
    assert!(!same_secret(b"abd", b"abc"));
    assert!(!same_secret(b"ab", b"abc"));
    assert!(!same_secret(b"", b"abc"));
}

#[test]
fn the_token_is_not_in_debug_output() {
    let text = format!("{:?}", HttpAuth::new("s3cret"));
    assert!(!text.contains("s3cret"), "{text}");
}
