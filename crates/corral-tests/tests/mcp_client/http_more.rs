//! More of the streamable HTTP transport against `mcp-fixture --http`: a
//! handshake past its deadline leaves no task behind.

use std::time::{Duration, Instant};

use corral_mcp::client::{HttpOptions, Manager, Server};

use crate::common::{Files, quick, serve_http as serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_http_handshake_timeout_names_the_deadline_and_leaves_no_task() {
    let files = Files::new("http-handshake-timeout");
    // The fixture holds each handshake answer (discover and initialize).
    let served = serve(&files, &["--handshake-delay-ms", "20000"]);
    let manager = Manager::new();
    let mut options = quick();
    options.discover_timeout = Duration::from_millis(300);
    options.initialize_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = manager
        .connect(
            "fx",
            Server::Http {
                url: served.url.clone(),
                options: HttpOptions::default(),
            },
            options,
        )
        .await
        .expect_err("the handshake times out");
    assert_eq!(
        manager.live_tasks(),
        0,
        "writer, reader and supervisor finished"
    );
    let took = started.elapsed();
    let text = error.to_string();
    assert!(text.contains("deadline"), "{text}");
    assert!(
        took < Duration::from_secs(5),
        "the held answers were waited for: {took:?}"
    );
    assert!(!manager.contains("fx"));
}
