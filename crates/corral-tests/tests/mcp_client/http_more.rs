//! More of the streamable HTTP transport against `mcp-fixture --http`: a
//! handshake past its deadline leaves no task behind.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use corral_mcp::client::{HttpOptions, Manager, Server};
use corral_tests::Guard;

use crate::common::{Files, fixture, quick};

/// A fixture serving HTTP, killed by identity when dropped.
struct Served {
    url: String,
    _guard: Guard,
}

/// Starts `mcp-fixture --http 127.0.0.1:0 --log FILE ARGS` and waits for
/// its `listening` line (as `http.rs` does).
fn serve(files: &Files, args: &[&str]) -> Served {
    let mut child = Command::new(fixture())
        .args(["--http", "127.0.0.1:0", "--log"])
        .arg(files.log())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning mcp-fixture --http");
    let stdout = child.stdout.take().expect("piped stdout");
    let guard = Guard::new(child);
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reading the listening line");
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("not a listening line: {line:?}"))
        .to_owned();
    Served { url, _guard: guard }
}

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
