//! The cap on legacy sessions and their idle expiry, against a real
//! listener.

use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::serve::transport::{
    HttpAuth, HttpLimits, PATH, serve_http_with,
    tests::{Bare, INITIALIZE, TOKEN},
};

const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;

async fn post(url: &str, body: &'static str, session: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    request.send().await.expect("request sent")
}

/// A new session's id; the `initialize` answer read whole.
async fn initialize(url: &str) -> Result<String, (u16, String)> {
    initialize_as(url, TOKEN).await
}

#[tokio::test]
async fn sessions_beyond_the_cap_are_refused_and_idle_ones_end() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}{PATH}", listener.local_addr().expect("address"));
    let limits = HttpLimits {
        sessions: 2,
        session_idle: Duration::from_secs(1),
        ..HttpLimits::default()
    };
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve_http_with(
        Bare,
        listener,
        HttpAuth::new(TOKEN),
        limits,
        stop.clone(),
    ));

    let first = initialize(&url).await.expect("the first session");
    initialize(&url).await.expect("the second session");
    let (status, why) = initialize(&url).await.expect_err("a third session");
    assert_eq!(status, 500, "{why}");
    assert!(why.contains("2 sessions are live"), "{why}");
    assert!(why.contains("2026-07-28"), "{why}");
    // A live session is still served.
    assert_eq!(post(&url, PING, Some(&first)).await.status(), 200);

    // Idle for a second, both end: their ids are unknown, new ones are made.
    // Two new ones, the cap: the second session, idle since its start, may
    // end a moment before the first, which the ping kept alive, and a
    // second new session is made only once the first has ended as well
    // (`docs/flakes.md` (17)).
    let started = Instant::now();
    for made in 0..2 {
        while initialize(&url).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{made} new session(s) made within 10 s of idling, 2 expected"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(post(&url, PING, Some(&first)).await.status(), 404);

    stop.cancel();
    server.await.expect("joined").expect("served");
}

/// A new session of the client with `token`.
async fn initialize_as(url: &str, token: &str) -> Result<String, (u16, String)> {
    let response = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    id.filter(|_| status == 200).ok_or((status, text))
}

#[tokio::test]
async fn one_client_holds_at_most_half_the_sessions_and_ended_ones_free_its_share() {
    use crate::serve::{
        Principal,
        transport::{Client, HttpAuth},
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}{PATH}", listener.local_addr().expect("address"));
    let limits = HttpLimits {
        sessions: 4,
        session_idle: Duration::from_secs(1),
        ..HttpLimits::default()
    };
    let (alice, bob) = ("alice-token-0123", "bob-token-456789");
    let auth = HttpAuth::with_clients(vec![
        Client::new(Principal::new("alice"), alice),
        Client::new(Principal::new("bob"), bob),
    ]);
    let stop = CancellationToken::new();
    let server = tokio::spawn(serve_http_with(Bare, listener, auth, limits, stop.clone()));

    let first = initialize_as(&url, bob).await.expect("bob's first session");
    initialize_as(&url, bob)
        .await
        .expect("bob's second session");
    let (status, why) = initialize_as(&url, bob).await.expect_err("bob's third");
    assert_eq!(status, 503, "{why}");
    assert!(why.contains("this client holds 2 sessions"), "{why}");
    // The refused session was ended: alice gets both places left.
    initialize_as(&url, alice)
        .await
        .expect("alice's first session");
    initialize_as(&url, alice)
        .await
        .expect("alice's second session");

    // A session bob ends frees his share.
    let ended = reqwest::Client::new()
        .delete(&url)
        .header("authorization", format!("Bearer {bob}"))
        .header("mcp-session-id", &first)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("request sent");
    assert_eq!(ended.status(), 202);
    initialize_as(&url, bob)
        .await
        .expect("bob's session after one ended");

    // Sessions that idle out free it too: both of bob's, each in its turn
    // (the one made before the delete ends first; `docs/flakes.md` (17)).
    let started = Instant::now();
    for made in 0..2 {
        while initialize_as(&url, bob).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "bob's idle sessions still count after 10 s ({made} new made)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    stop.cancel();
    server.await.expect("joined").expect("served");
}
