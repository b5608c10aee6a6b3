//! The client runtime against real peers: the official Python SDK's server
//! (with three helpers that escape a naive kill) and
//! `@modelcontextprotocol/server-everything` over stdio and over streamable
//! HTTP. Each lists its tools, calls `echo` and disconnects; nothing of it
//! is left. The peers come from `scripts/install-mcp-peers`: a missing one
//! fails the test, never skips it.

use std::{
    net::TcpStream,
    path::PathBuf,
    process::{Command, Stdio},
    time::Duration,
};

use corral_mcp::client::{CallOptions, Era, HttpOptions, Manager, Server};
use corral_tests::{Guard, Proc};
use serde_json::Value;

use crate::common::{Files, assert_gone_now, message, quick};

const CALL: Duration = Duration::from_secs(20);

fn repo() -> PathBuf {
    corral_tests::manifest_dir!().join("../..")
}

/// `tests/mcp-peers/NAME`, which must exist.
fn peer(name: &str) -> PathBuf {
    let path = repo().join("tests/mcp-peers").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-mcp-peers",
        path.display()
    );
    path
}

fn python() -> PathBuf {
    let path = repo().join(".venv-mcp/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-mcp-peers",
        path.display()
    );
    path
}

fn server_everything() -> PathBuf {
    peer("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Peers start slower than the fixture (an interpreter, imports).
fn patient() -> corral_mcp::client::ConnectOptions {
    let mut options = quick();
    options.discover_timeout = Duration::from_secs(20);
    options.initialize_timeout = Duration::from_secs(30);
    options
}

/// Lists the tools (which must include `echo`) and calls `echo`.
async fn list_and_echo(connection: &corral_mcp::client::Connection) {
    let deadline = CallOptions::timeout(CALL);
    let tools = connection.list_tools(&deadline).await.expect("tools/list");
    assert!(
        tools.iter().any(|tool| tool.name == "echo"),
        "no echo among {:?}",
        tools.iter().map(|tool| &tool.name).collect::<Vec<_>>()
    );
    let result = connection
        .call_tool("echo", message("to a real peer"), &deadline)
        .await
        .expect("echo answered");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default();
    assert!(text.contains("to a real peer"), "{text:?}");
}

/// [`list_and_echo`], then the connection `name` torn down with no task of
/// its left.
async fn echo_then_disconnect(
    manager: &Manager,
    connection: std::sync::Arc<corral_mcp::client::Connection>,
    name: &str,
) {
    list_and_echo(&connection).await;
    drop(connection);
    manager
        .disconnect(name)
        .await
        .expect("known")
        .expect("torn down");
    assert_eq!(manager.live_tasks(), 0, "writer, reader and supervisor");
}

fn proc_of(value: &Value) -> Proc {
    Proc {
        pid: i32::try_from(value["pid"].as_i64().expect("pid")).expect("a pid"),
        start_time: value["start_time"].as_u64().expect("start_time"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_python_sdk_server_with_escaping_helpers_on_disconnect() {
    let files = Files::new("python-sdk");
    let pids = files.pids();
    let mut command = corral::Command::new(python());
    command
        .backend(corral_tests::containing_backend())
        .arg(peer("fixture_server.py"))
        .env("CORRAL_MCP_FIXTURE_PIDS", &pids)
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(2));
    let manager = Manager::new();
    let connection = manager
        .connect("py", Server::Stdio(command), patient())
        .await
        .expect("connected to the Python SDK's server");
    let era = connection.peer().era;
    println!(
        "the Python SDK's server answered {era:?} (protocol {:?})",
        connection.peer().protocol_version
    );
    assert!(matches!(era, Era::Discover | Era::Initialize), "{era:?}");
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(10), || pids.exists()).await,
        "the server wrote no identities"
    );
    let json: Value =
        serde_json::from_slice(&std::fs::read(&pids).expect("reading the identities"))
            .expect("the identities are JSON");
    let tree: Vec<Proc> = ["server", "setsid_child", "term_ignorer", "daemon"]
        .iter()
        .map(|name| proc_of(&json[*name]))
        .collect();
    echo_then_disconnect(&manager, connection, "py").await;
    assert_gone_now(&tree);
}

/// A modern server still starting when the discovery's own deadline passes
/// (the Python SDK's, behind a second of start-up) reads the discovery first
/// once it runs and answers it, then refuses the `initialize` the client
/// sent meanwhile: the late answer still counts, and the connection is made
/// in the modern era (docs/flakes.md (20): it failed with -32022).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_starting_server_answering_the_discovery_late_is_reached() {
    let files = Files::new("python-late");
    let pids = files.pids();
    let mut command = corral::Command::new("sh");
    command
        .backend(corral_tests::containing_backend())
        .args(["-c", "sleep 1; exec \"$0\" \"$1\""])
        .arg(python())
        .arg(peer("fixture_server.py"))
        .env("CORRAL_MCP_FIXTURE_PIDS", &pids)
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(2));
    let mut options = patient();
    options.discover_timeout = Duration::from_millis(300);
    let manager = Manager::new();
    let connection = manager
        .connect("py", Server::Stdio(command), options)
        .await
        .expect("connected to the Python SDK's server, though it answered late");
    assert_eq!(connection.peer().era, Era::Discover);
    echo_then_disconnect(&manager, connection, "py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_server_everything_over_stdio_on_disconnect() {
    let mut command = corral::Command::new("node");
    command
        .backend(corral_tests::containing_backend())
        .arg(server_everything())
        .arg("stdio")
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(2));
    let manager = Manager::new();
    let connection = manager
        .connect("everything", Server::Stdio(command), patient())
        .await
        .expect("connected to server-everything");
    println!("server-everything answered {:?}", connection.peer().era);
    let server = Proc::of(connection.server_pid().expect("a pid")).expect("the server runs");
    list_and_echo(&connection).await;
    drop(connection);
    manager
        .disconnect("everything")
        .await
        .expect("known")
        .expect("torn down");
    assert_eq!(manager.live_tasks(), 0, "writer, reader and supervisor");
    assert_gone_now(&[server]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_server_everything_over_streamable_http_on_disconnect() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    // server-everything's streamableHttp transport listens on $PORT and
    // serves `/mcp`.
    let child = Command::new("node")
        .arg(server_everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning server-everything");
    let _guard = Guard::new(child);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(20), || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })
        .await,
        "server-everything did not listen on {addr}"
    );
    let manager = Manager::new();
    let server = Server::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        options: HttpOptions::default(),
    };
    let connection = manager
        .connect("everything", server, patient())
        .await
        .expect("connected to server-everything over HTTP");
    println!(
        "server-everything over HTTP answered {:?}",
        connection.peer().era
    );
    list_and_echo(&connection).await;
    drop(connection);
    manager
        .disconnect("everything")
        .await
        .expect("known")
        .expect("torn down");
    assert_eq!(manager.live_tasks(), 0, "writer, reader and supervisor");
    assert!(!manager.contains("everything"));
}
