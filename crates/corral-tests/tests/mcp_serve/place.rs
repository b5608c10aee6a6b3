//! Runs that stay where they were put: a `cwd` swapped for a symlink while
//! calls run never moves a run out of the roots, and the result names the
//! directory the run used; relative `PATH` entries are searched from the
//! run's `cwd`.

use std::{
    fs,
    os::unix::fs::{PermissionsExt, symlink},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::json;

use crate::harness::serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cwd_swapped_for_a_symlink_while_calls_run_never_runs_outside_the_roots() {
    const CALLS: usize = 400;
    const AT_ONCE: usize = 8;
    let served = serve("serve-cwd-swap", |options| {
        options.max_concurrent = AT_ONCE;
    })
    .await;
    let outside = corral_tests::Scratch::new("serve-cwd-swap-outside");
    fs::write(outside.path("marker"), "OUTSIDE\n").expect("outside marker");
    let real = served.path("real");
    fs::create_dir(&real).expect("real");
    fs::write(real.join("marker"), "INSIDE\n").expect("inside marker");
    let link = served.path("link");
    symlink(&outside.0, &link).expect("link");
    // The hostile swapper: `cwd` flips between the real directory and a
    // symlink out of the root, as fast as it can, until the calls are done.
    let cwd = served.path("cwd");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (real, link, cwd) = (real.clone(), link.clone(), cwd.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for entry in [&real, &link] {
                    if fs::rename(entry, &cwd).is_ok() {
                        flips += 1;
                        let _ = fs::rename(&cwd, entry);
                    }
                }
            }
            flips
        })
    };
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..CALLS / AT_ONCE {
        let calls = (0..AT_ONCE).map(|_| {
            served.run(json!({"shell": "cat marker; pwd -P", "cwd": "cwd", "timeout": 10}))
        });
        for result in futures_util::future::join_all(calls).await {
            if result["outcome"] == "exited" {
                ran += 1;
                let stdout = result["stdout"].as_str().unwrap_or_default();
                assert!(
                    stdout.starts_with("INSIDE\n"),
                    "a run left the roots: {result:#}"
                );
                let named = result["cwd"].as_str().unwrap_or_default();
                assert!(
                    named.starts_with(&*served.root.0.to_string_lossy()),
                    "the result names a directory outside the root: {result:#}"
                );
            } else {
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = swapper.join().expect("the swapper");
    println!("{ran} ran inside, {refused} refused, {flips} flips");
    assert!(ran > 0, "no call ran: the test proves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_path_entries_in_env_are_searched_from_the_cwd() {
    let served = serve("serve-relative-path", |_| {}).await;
    let bin = served.path("work/bin");
    fs::create_dir_all(&bin).expect("bin");
    let program = bin.join("corral-found-here");
    fs::write(&program, "#!/bin/sh\necho found in the run cwd\n").expect("script");
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).expect("chmod");
    let result = served
        .run(json!({
            "argv": ["corral-found-here"],
            "cwd": "work",
            "env": {"PATH": "bin:/usr/bin:/bin"},
        }))
        .await;
    assert_eq!(result["outcome"], "exited", "{result:#}");
    assert_eq!(result["stdout"], "found in the run cwd\n", "{result:#}");
}

/// On a legacy (`initialize`) HTTP session, a client that closes the
/// response stream of a `run` does not cancel it (rmcp's sessions keep the
/// request going; send `notifications/cancelled`, or use protocol
/// 2026-07-28, where closing the stream ends the tree): the run goes on to
/// its own `timeout`, and its concurrency slot is free as soon as it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_stream_closed_leaves_the_run_to_its_timeout_then_frees_its_slot() {
    use std::time::{Duration, Instant};

    use corral_mcp::serve::{
        CorralServer, Runner,
        transport::{self, HttpAuth},
    };

    const TOKEN: &str = "a-legacy-session-token";
    let root = corral_tests::Scratch::new("serve-legacy-close");
    let audit = corral_tests::Scratch::new("serve-legacy-close-audit");
    let mut options = crate::harness::options(&root);
    options.max_concurrent = 1;
    options.audit = Some(audit.path("audit.jsonl"));
    let runner = Runner::new(options).expect("a runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        listener.local_addr().expect("addr").port()
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(transport::http(
        CorralServer::new(runner),
        listener,
        HttpAuth::new(TOKEN),
        stop.clone(),
    ));
    let http = reqwest::Client::new();
    let post = |body: serde_json::Value, session: Option<&str>| {
        let mut request = http
            .post(&url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialized = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "closer", "version": "0"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("a legacy session id")
        .to_owned();
    let _ = initialized.text().await;
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .expect("initialized");
    // The run's answer stream opens, the run starts (its marker: it holds
    // the only slot then; the stream's headers can come before that, and
    // a next run asked for in between took the slot first: docs/flakes.md
    // (37)), then the client closes the stream.
    let marker = root.path("started");
    let started = Instant::now();
    let held = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run", "arguments": {
                "shell": format!("touch '{}'; exec sleep 30", marker.display()),
                "timeout": 2}}}),
        Some(&session),
    )
    .await
    .expect("the run's stream");
    assert!(held.status().is_success(), "{}", held.status());
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || marker.exists()).await,
        "the run never started"
    );
    drop(held);
    // The only slot is the closed run's until its timeout ends it.
    let next = post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run", "arguments": {"argv": ["echo", "the next run"]}}}),
        Some(&session),
    )
    .await
    .expect("the next run");
    let body = tokio::time::timeout(Duration::from_secs(30), next.text())
        .await
        .expect("the next run answered within 30 s")
        .expect("its body");
    let took = started.elapsed();
    assert!(body.contains("the next run"), "{body}");
    assert!(
        took >= Duration::from_secs(2),
        "the closed stream cancelled the run after {took:?}: update docs/mcp.md"
    );
    assert!(
        took < Duration::from_secs(20),
        "the slot was held past the run's timeout: {took:?}"
    );
    let audit = std::fs::read_to_string(audit.path("audit.jsonl")).expect("the audit log");
    let first: serde_json::Value =
        serde_json::from_str(audit.lines().next().expect("an audit line")).expect("JSON");
    assert_eq!(first["outcome"], "timed_out", "{audit}");
    stop.cancel();
    let _ = server.await;
}
