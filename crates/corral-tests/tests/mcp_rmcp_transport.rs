//! `corral_mcp::client::rmcp::CorralProcess` under the official Rust SDK's
//! client, against real peers: our fixture server (on the Python SDK), which
//! leaves three helpers behind (a `setsid` child holding its stdout, a
//! `SIGTERM` ignorer, a double-forked daemon), and
//! `@modelcontextprotocol/server-everything`. Peers are installed by
//! `scripts/install-mcp-peers`; without them these tests fail.
//!
//! The last test is the contrast: rmcp's own `TokioChildProcess` on the same
//! fixture leaves the helpers running (that is why the transport exists).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use corral_mcp::client::rmcp::CorralProcess;
use corral_tests::{Guard, Proc, Scratch, wait_until, wait_until_async};
use rmcp::{ServiceExt as _, model::CallToolRequestParams};
use serde_json::Value;

/// How long a connect, a call or a close may take before the test fails.
const STEP: Duration = Duration::from_secs(30);
/// How long the tree may take to be gone after the client is dropped.
const GONE: Duration = Duration::from_secs(15);
/// The grace from `SIGTERM` to `SIGKILL` (the `SIGTERM` ignorer needs it).
const GRACE: Duration = Duration::from_millis(500);

fn repo() -> PathBuf {
    corral_tests::manifest_dir!().join("../..")
}

fn python() -> PathBuf {
    repo().join(".venv-mcp/bin/python")
}

fn peer(name: &str) -> PathBuf {
    repo().join("tests/mcp-peers").join(name)
}

fn server_everything() -> PathBuf {
    peer("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Fails (never skips) when the peers are not installed.
fn require_peers() {
    let missing: Vec<String> = [python(), peer("fixture_server.py"), server_everything()]
        .into_iter()
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "the MCP peers are not installed (missing: {}): run scripts/install-mcp-peers",
        missing.join(", ")
    );
}

/// The fixture server, told to start its helpers and name them in `pids`.
fn fixture(pids: &Path) -> corral::Command {
    let mut command = corral::Command::new(python());
    command
        .backend(corral_tests::containing_backend())
        .arg(peer("fixture_server.py"))
        .env("CORRAL_MCP_FIXTURE_PIDS", pids)
        .grace(GRACE);
    command
}

/// The server and its three helpers, by identity, from the fixture's file
/// (written before it serves, so before the handshake completes).
fn fixture_procs(pids: &Path) -> Vec<(&'static str, Proc)> {
    let mut value = None;
    wait_until(STEP, || {
        value = std::fs::read(pids)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        value.is_some()
    });
    let value = value.unwrap_or_else(|| panic!("no helpers file at {}", pids.display()));
    ["server", "setsid_child", "term_ignorer", "daemon"]
        .into_iter()
        .map(|name| {
            let proc = Proc {
                pid: i32::try_from(value[name]["pid"].as_i64().expect("pid")).expect("a pid"),
                start_time: value[name]["start_time"].as_u64().expect("start_time"),
            };
            (name, proc)
        })
        .collect()
}

fn alive(procs: &[(&'static str, Proc)]) -> Vec<&'static str> {
    procs
        .iter()
        .filter(|(_, proc)| proc.is_alive())
        .map(|(name, _)| *name)
        .collect()
}

/// Bounds a step of the test.
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {STEP:?}"))
}

async fn echo(client: &rmcp::service::RunningService<rmcp::RoleClient, ()>) {
    let arguments = serde_json::json!({ "message": "hello" });
    let params = CallToolRequestParams::new("echo")
        .with_arguments(arguments.as_object().cloned().expect("an object"));
    let result = within("tools/call echo", client.call_tool(params))
        .await
        .expect("calling echo");
    let text = serde_json::to_string(&result).expect("a result");
    assert!(text.contains("Echo: hello"), "echo answered {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_server_and_all_three_escaped_helpers_and_keeps_the_report() {
    require_peers();
    let scratch = Scratch::new("rmcp-cancel");
    let pids = scratch.path("pids.json");
    let transport = CorralProcess::new(fixture(&pids)).expect("spawning the fixture");
    let leader = transport.id();
    let report = transport.finished();
    let client = within("the handshake", ().serve(transport))
        .await
        .expect("connecting");
    let procs = fixture_procs(&pids);
    let _guard = Guard::of(procs.iter().map(|(_, proc)| *proc));
    assert_eq!(procs[0].1.pid, leader, "the fixture's server is the leader");
    assert_eq!(alive(&procs).len(), 4, "all four are up before the call");
    echo(&client).await;

    within("cancel", client.cancel())
        .await
        .expect("the serve task");

    // `close` waited for the whole cleanup: nothing of the tree is left now.
    assert_eq!(alive(&procs), Vec::<&str>::new(), "alive after cancel");
    let finished = report.get().expect("close publishes the report");
    assert!(
        finished.report.survivors.is_empty(),
        "survivors: {:?}",
        finished.report.survivors
    );
}

/// A wrapper (as `npx` or a shell script) that outlives its server: the
/// leader does not exit when its standard input closes, so only the
/// terminate after the close grace ends the tree.
fn lingering_wrapper(pids: &Path) -> corral::Command {
    let mut command = corral::Command::new("sh");
    command
        .backend(corral_tests::containing_backend())
        .args(["-c", "\"$0\" \"$@\"; exec sleep 600"])
        .arg(python())
        .arg(peer("fixture_server.py"))
        .env("CORRAL_MCP_FIXTURE_PIDS", pids)
        .grace(GRACE);
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_running_client_ends_a_lingering_wrapper_its_server_and_helpers() {
    require_peers();
    let scratch = Scratch::new("rmcp-drop");
    let pids = scratch.path("pids.json");
    let (transport, _stderr) = CorralProcess::builder(lingering_wrapper(&pids))
        .close_grace(Duration::from_millis(300))
        .spawn()
        .expect("spawning the wrapped fixture");
    let wrapper = Proc::of(transport.id()).expect("the leader, unreaped");
    let mut report = transport.finished();
    let client = within("the handshake", ().serve(transport))
        .await
        .expect("connecting");
    let mut procs = fixture_procs(&pids);
    procs.push(("wrapper", wrapper));
    let _guard = Guard::of(procs.iter().map(|(_, proc)| *proc));
    echo(&client).await;

    drop(client);

    let gone = wait_until_async(GONE, || alive(&procs).is_empty()).await;
    assert!(
        gone,
        "alive {GONE:?} after the client was dropped: {:?}",
        alive(&procs)
    );
    let finished = within("the report", report.wait())
        .await
        .expect("rmcp closes the transport of a dropped client");
    assert!(
        finished.report.survivors.is_empty(),
        "survivors: {:?}",
        finished.report.survivors
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_lists_its_tools_then_close_leaves_nothing() {
    require_peers();
    let mut command = corral::Command::new("node");
    command
        .backend(corral_tests::containing_backend())
        .arg(server_everything())
        .arg("stdio")
        .grace(GRACE);
    let transport = CorralProcess::new(command).expect("spawning server-everything");
    let leader = Proc::of(transport.id()).expect("the leader, unreaped");
    let _guard = Guard::of([leader]);
    let report = transport.finished();
    let client = within("the handshake", ().serve(transport))
        .await
        .expect("connecting");
    let tools = within("tools/list", client.list_all_tools())
        .await
        .expect("listing tools");
    assert!(
        tools.iter().any(|tool| tool.name == "echo"),
        "server-everything lists echo"
    );

    within("cancel", client.cancel())
        .await
        .expect("the serve task");

    assert!(!leader.is_alive(), "server-everything outlived the close");
    let finished = report.get().expect("close publishes the report");
    assert!(
        finished.report.survivors.is_empty(),
        "survivors: {:?}",
        finished.report.survivors
    );
}

/// Why the transport exists: rmcp's own child-process transport ends the
/// server only, and the three helpers live on. They are killed here, by
/// identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contrast_rmcp_own_child_process_transport_leaves_the_helpers_running() {
    require_peers();
    let scratch = Scratch::new("rmcp-contrast");
    let pids = scratch.path("pids.json");
    let mut command = tokio::process::Command::new(python());
    command
        .arg(peer("fixture_server.py"))
        .env("CORRAL_MCP_FIXTURE_PIDS", &pids);
    let transport = rmcp::transport::TokioChildProcess::new(command).expect("spawning the fixture");
    let client = within("the handshake", ().serve(transport))
        .await
        .expect("connecting");
    let procs = fixture_procs(&pids);
    let guard = Guard::of(procs.iter().map(|(_, proc)| *proc));
    echo(&client).await;

    within("cancel", client.cancel())
        .await
        .expect("the serve task");

    let server_gone = wait_until_async(GONE, || !procs[0].1.is_alive()).await;
    assert!(server_gone, "rmcp ends the server itself");
    assert_eq!(
        alive(&procs),
        ["setsid_child", "term_ignorer", "daemon"],
        "rmcp's TokioChildProcess leaves these running"
    );
    drop(guard);
    assert_eq!(alive(&procs), Vec::<&str>::new(), "killed by identity");
}
