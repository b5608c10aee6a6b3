//! `corral mcp call` and `corral mcp list` end to end: the real `corral`
//! binary against real servers (server-everything, and the Python fixture
//! that leaves three escaping helpers behind). Every tree-gone assertion is
//! made the moment corral returns, by identity.

mod mcp_common;

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use corral_tests::{Guard, Owned, Proc, Scratch, wait_until};
use mcp_common::*;
use rustix::process::Signal;
use serde_json::Value;

/// How long any one corral invocation may take here (the fixture's
/// term-ignoring helper costs the 2s --kill-after, python's start ~1s).
const LIMIT: Duration = Duration::from_secs(30);

/// `corral mcp ARGS`, all pipes.
fn corral(args: &[&str], env: &[(&str, &Path)]) -> Owned {
    let mut command = Command::new(wrapper());
    command.arg("mcp").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting corral mcp");
    Owned(child)
}

/// Reads all of `stream` on a thread.
fn drain(stream: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stream) = stream {
            let _ = stream.read_to_string(&mut text);
        }
        text
    })
}

/// What one invocation gave.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("stdout is not JSON ({error}): {}", self.stdout))
    }
}

/// Waits (bounded) for `child` to exit.
fn wait(child: &mut Owned) -> ExitStatus {
    let mut status = None;
    wait_until(LIMIT, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.unwrap_or_else(|| panic!("corral did not exit within {LIMIT:?}"))
}

/// Runs `corral mcp ARGS` to its end.
fn run(args: &[&str], env: &[(&str, &Path)]) -> Ran {
    let mut child = corral(args, env);
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let status = wait(&mut child);
    Ran {
        status,
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// `node server-everything stdio`.
fn everything() -> Vec<String> {
    require_peers();
    vec![
        "node".into(),
        server_everything().display().to_string(),
        "stdio".into(),
    ]
}

/// `python fixture_server.py`.
fn fixture() -> Vec<String> {
    require_peers();
    vec![
        python().display().to_string(),
        peer("fixture_server.py").display().to_string(),
    ]
}

/// `options`, `--`, `server`.
fn line<'a>(options: &[&'a str], server: &'a [String]) -> Vec<&'a str> {
    let mut args = options.to_vec();
    args.push("--");
    args.extend(server.iter().map(String::as_str));
    args
}

/// The fixture's processes as it wrote them, watched by `guard`.
fn fixture_tree(pids: &Path, guard: &mut Guard) -> Vec<(String, Proc)> {
    let procs = fixture_procs(&read_json(pids, Duration::from_secs(10)));
    guard.extend(procs.iter().map(|(_, p)| *p));
    procs
}

/// Every process of the tree is gone now (not alive, or a zombie).
fn assert_tree_gone(procs: &[(String, Proc)], when: &str) {
    let alive: Vec<String> = procs
        .iter()
        .filter(|(_, p)| p.is_alive())
        .map(|(name, p)| format!("{name} ({})", p.pid))
        .collect();
    assert!(
        alive.is_empty(),
        "still running when {when}: {}",
        alive.join(", ")
    );
}

#[test]
fn list_prints_one_line_per_tool_of_server_everything() {
    let server = everything();
    let ran = run(&line(&["list"], &server), &[]);
    assert_eq!(ran.code(), Some(0), "stderr: {}", ran.stderr);
    let echo = ran
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some("echo"))
        .unwrap_or_else(|| panic!("no echo line in {}", ran.stdout));
    let (_, description) = echo.split_once("  ").expect("NAME  DESCRIPTION");
    assert_eq!(description.trim(), "Echoes back the input string");
    assert!(ran.stdout.lines().count() > 3, "{}", ran.stdout);
}

#[test]
fn list_json_gives_the_whole_tools_list_and_the_cleanup() {
    let server = everything();
    let ran = run(&line(&["list", "--json"], &server), &[]);
    assert_eq!(ran.code(), Some(0), "stderr: {}", ran.stderr);
    let envelope = ran.json();
    assert_eq!(envelope["version"], 1);
    assert_eq!(envelope["outcome"], "ok");
    let tools = envelope["result"]["tools"].as_array().expect("tools");
    let echo = tools
        .iter()
        .find(|tool| tool["name"] == "echo")
        .expect("echo listed");
    assert_eq!(echo["inputSchema"]["type"], "object");
    assert!(envelope["cleanup"]["backend"].is_string(), "{envelope:#}");
    assert_clean(&envelope["cleanup"]);
}

#[test]
fn call_echo_prints_the_text_and_exits_0() {
    let server = everything();
    let ran = run(
        &line(&["call", "echo", r#"{"message": "hi there"}"#], &server),
        &[],
    );
    assert_eq!(ran.code(), Some(0), "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "Echo: hi there\n");
}

#[test]
fn call_json_gives_one_envelope_with_outcome_ok_and_the_cleanup() {
    let server = fixture();
    let ran = run(
        &line(&["call", "--json", "echo", r#"{"message": "hi"}"#], &server),
        &[],
    );
    assert_eq!(ran.code(), Some(0), "stderr: {}", ran.stderr);
    let envelope = ran.json();
    assert_eq!(envelope["version"], 1);
    assert_eq!(envelope["outcome"], "ok");
    assert_eq!(envelope["exit_status"], 0);
    assert_eq!(envelope["error"], Value::Null);
    assert_eq!(envelope["result"]["content"][0]["text"], "Echo: hi");
    let cleanup = &envelope["cleanup"];
    assert!(cleanup["backend"].is_string(), "{envelope:#}");
    assert!(cleanup["signals"].is_array(), "{envelope:#}");
    assert_clean(cleanup);
}

#[test]
fn a_tool_error_exits_1_with_its_text_on_stdout() {
    let server = fixture();
    // `echo` without its required `message`: the SDK answers isError.
    let ran = run(&line(&["call", "echo", "{}"], &server), &[]);
    assert_eq!(ran.code(), Some(1), "stderr: {}", ran.stderr);
    assert!(ran.stdout.contains("message"), "stdout: {}", ran.stdout);
    assert!(ran.stderr.contains("isError"), "stderr: {}", ran.stderr);
    let ran = run(&line(&["call", "--json", "echo", "{}"], &server), &[]);
    assert_eq!(ran.code(), Some(1), "stderr: {}", ran.stderr);
    assert_eq!(ran.json()["outcome"], "tool_error");
    assert_eq!(ran.json()["result"]["isError"], true);
}

#[test]
fn a_call_past_its_timeout_exits_124_and_leaves_nothing_of_the_tree() {
    let scratch = Scratch::new("mcp-call-timeout");
    let pids = scratch.path("pids.json");
    let mut guard = Guard::default();
    let server = fixture();
    let options = [
        "call",
        "--json",
        "--timeout",
        "0.5",
        "sleep",
        r#"{"seconds": 60}"#,
    ];
    let env = [("CORRAL_MCP_FIXTURE_PIDS", pids.as_path())];
    let started = Instant::now();
    let ran = run(&line(&options, &server), &env);
    let procs = fixture_tree(&pids, &mut guard);
    assert_tree_gone(&procs, "corral mcp call returned after its --timeout");
    assert_eq!(ran.code(), Some(124), "stderr: {}", ran.stderr);
    assert!(started.elapsed() < Duration::from_secs(20));
    let envelope = ran.json();
    assert_eq!(envelope["outcome"], "unknown");
    assert!(!envelope["request_id"].is_null(), "{envelope:#}");
    assert!(ran.stderr.contains("outcome unknown"), "{}", ran.stderr);
    assert_ended_by_corral(&envelope);
}

#[test]
fn sigterm_during_a_call_exits_124_and_leaves_nothing_of_the_tree() {
    let scratch = Scratch::new("mcp-call-sigterm");
    let pids = scratch.path("pids.json");
    let mut guard = Guard::default();
    let server = fixture();
    let env = [("CORRAL_MCP_FIXTURE_PIDS", pids.as_path())];
    let args = line(
        &["call", "-v", "--json", "sleep", r#"{"seconds": 60}"#],
        &server,
    );
    let mut child = corral(&args, &env);
    let out = drain(child.stdout.take());
    // The lines of -v: once connected, the next request written is the call.
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let err = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let end = Instant::now() + LIMIT;
    let mut connected = false;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("no `request written` line for the call from corral -v");
        connected |= line.contains("connected; sending the request");
        if connected && line.contains("request written") {
            break;
        }
    }
    let procs = fixture_tree(&pids, &mut guard);
    let corral_proc = Proc::of(i32::try_from(child.id()).expect("pid")).expect("corral runs");
    assert!(corral_proc.signal(Signal::TERM), "corral is gone already");
    let status = wait(&mut child);
    assert_tree_gone(&procs, "corral mcp call returned after SIGTERM");
    let stderr = err.join().expect("stderr");
    assert_eq!(status.code(), Some(124), "stderr: {stderr}");
    assert!(stderr.contains("SIGTERM received"), "{stderr}");
    let envelope: Value = serde_json::from_str(&out.join().expect("stdout")).expect("JSON");
    assert_eq!(envelope["outcome"], "unknown");
    assert_ended_by_corral(&envelope);
}

/// The envelope's cleanup is corral's own teardown of the fixture's tree,
/// finished before corral returned (not the watchdog's after it exited):
/// a backend, no survivors, and SIGKILL for the term-ignoring helper.
fn assert_ended_by_corral(envelope: &Value) {
    let cleanup = &envelope["cleanup"];
    assert!(cleanup["backend"].is_string(), "no teardown: {envelope:#}");
    assert_clean(cleanup);
    assert_eq!(cleanup["escalated"], true, "{envelope:#}");
}

#[test]
fn a_server_that_does_not_exist_is_not_sent_125_with_the_reason() {
    let missing = "/nonexistent/corral-test-mcp-server";
    let ran = run(&["call", "echo", "--", missing], &[]);
    assert_eq!(ran.code(), Some(125), "stderr: {}", ran.stderr);
    assert!(ran.stderr.contains("cannot start"), "{}", ran.stderr);
    assert!(ran.stderr.contains(missing), "{}", ran.stderr);
    let ran = run(&["list", "--json", "--", missing], &[]);
    assert_eq!(ran.code(), Some(125), "stderr: {}", ran.stderr);
    assert_eq!(ran.json()["outcome"], "not_sent");
}

#[test]
fn args_json_that_is_not_an_object_is_refused_125_before_anything_runs() {
    let scratch = Scratch::new("mcp-call-args");
    let marker: PathBuf = scratch.path("ran");
    let server = [
        "sh".to_owned(),
        "-c".to_owned(),
        format!("touch {}", path_str(&marker)),
    ];
    for bad in ["[1, 2]", "not json", "\"text\"", "{\"open\": "] {
        let ran = run(&line(&["call", "echo", bad], &server), &[]);
        assert_eq!(ran.code(), Some(125), "{bad}: {}", ran.stderr);
        assert!(ran.stderr.contains("ARGS_JSON"), "{bad}: {}", ran.stderr);
        assert!(ran.stderr.contains("JSON object"), "{bad}: {}", ran.stderr);
        assert_eq!(ran.stdout, "");
        assert!(!marker.exists(), "{bad}: the server command ran");
    }
}

/// server-everything serving streamable HTTP on a free loopback port: its
/// guard and its URL once it listens.
fn everything_over_http() -> (Guard, String) {
    require_peers();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("node")
        .arg(server_everything())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting server-everything");
    let guard = Guard::new(child);
    let listening = wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(listening, "server-everything did not listen on {port}");
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

#[test]
fn url_lists_and_calls_a_streamable_http_server() {
    let (_guard, url) = everything_over_http();
    let listed = run(&["list", "--url", &url], &[]);
    assert_eq!(listed.code(), Some(0), "stderr: {}", listed.stderr);
    assert!(
        listed.stdout.lines().any(|line| line.starts_with("echo ")),
        "{}",
        listed.stdout
    );
    let called = run(
        &[
            "call",
            "--json",
            "--url",
            &url,
            "--header",
            "X-Test: yes",
            "echo",
            r#"{"message": "over http"}"#,
        ],
        &[],
    );
    assert_eq!(called.code(), Some(0), "stderr: {}", called.stderr);
    let envelope = called.json();
    assert_eq!(envelope["outcome"], "ok");
    assert_eq!(envelope["url"], url.as_str());
    assert_eq!(envelope["result"]["content"][0]["text"], "Echo: over http");
}

#[test]
fn url_and_a_server_command_together_are_refused() {
    let ran = run(
        &["list", "--url", "http://127.0.0.1:1/mcp", "--", "true"],
        &[],
    );
    assert_eq!(ran.code(), Some(125), "stderr: {}", ran.stderr);
    let ran = run(
        &[
            "list",
            "--header",
            "nocolon",
            "--url",
            "http://127.0.0.1:1/mcp",
        ],
        &[],
    );
    assert_eq!(ran.code(), Some(125), "stderr: {}", ran.stderr);
    assert!(ran.stderr.contains("NAME: VALUE"), "{}", ran.stderr);
}

#[test]
fn a_url_nothing_listens_on_is_not_sent_125() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let ran = run(
        &[
            "call",
            "--url",
            &format!("http://127.0.0.1:{port}/mcp"),
            "echo",
        ],
        &[],
    );
    assert_eq!(ran.code(), Some(125), "stderr: {}", ran.stderr);
    assert!(ran.stderr.contains(&port.to_string()), "{}", ran.stderr);
}
