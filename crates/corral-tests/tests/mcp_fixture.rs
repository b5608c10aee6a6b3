//! Drives the `mcp-fixture` binary over real pipes (and one real TCP
//! connection) and checks the answers the corral-mcp tests rely on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use corral_tests::{Guard, Proc, Scratch, wait_until};
use serde_json::{Value, json};

/// How long any single answer may take.
const ANSWER: Duration = Duration::from_secs(10);

/// A running `mcp-fixture`: its stdin, its stdout lines (read on a thread),
/// and a guard that kills it (and whatever it is told of) on drop.
struct Fixture {
    guard: Guard,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Fixture {
    fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(corral_tests::bin_path!("mcp-fixture"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning mcp-fixture");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            guard: Guard::new(child),
            stdin,
            lines,
        }
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{msg}").expect("writing to the fixture");
        stdin.flush().expect("flushing the fixture's stdin");
    }

    fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
    }

    /// The next stdout line, verbatim.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(ANSWER)
            .expect("a line from the fixture in time")
    }

    /// The next stdout line, as JSON.
    fn recv(&self) -> Value {
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }
}

fn initialize(version: &str) -> Value {
    json!({ "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "t", "version": "0" } })
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({ "name": tool, "arguments": arguments })
}

#[test]
fn legacy_handshake_echoes_a_known_version_and_defaults_otherwise() {
    let mut f = Fixture::spawn(&[]);
    f.request(1, "initialize", initialize("2025-03-26"));
    let answer = f.recv();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(answer["result"]["serverInfo"]["name"], "mcp-fixture");
    assert_eq!(answer["result"]["capabilities"], json!({ "tools": {} }));
    f.request(2, "initialize", initialize("1999-01-01"));
    assert_eq!(f.recv()["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn discover_answers_the_modern_era() {
    let mut f = Fixture::spawn(&[]);
    f.request(7, "server/discover", json!({}));
    let answer = f.recv();
    assert_eq!(answer["id"], 7);
    let result = &answer["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result["ttlMs"], 0);
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-fixture"
    );
}

#[test]
fn legacy_flag_refuses_discover_with_the_given_code() {
    let mut f = Fixture::spawn(&["--legacy", "--discover-error-code", "-32000"]);
    f.request(1, "server/discover", json!({}));
    let answer = f.recv();
    assert_eq!(answer["error"]["code"], -32000);
    assert!(answer.get("result").is_none());
    f.request(2, "initialize", initialize("2025-11-25"));
    assert_eq!(f.recv()["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn echo_is_answered_while_a_sleep_runs_and_end_of_stdin_exits_0() {
    let mut f = Fixture::spawn(&[]);
    f.request(1, "tools/call", call("sleep", json!({ "seconds": 30 })));
    f.request(2, "tools/call", call("echo", json!({ "message": "hello" })));
    let answer = f.recv();
    assert_eq!(answer["id"], 2, "the echo overtakes the sleep: {answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "hello");
    assert_eq!(answer["result"]["isError"], false);
    f.request(3, "tools/call", call("nope", json!({})));
    let answer = f.recv();
    assert_eq!(answer["result"]["content"][0]["text"], "unknown tool nope");
    assert_eq!(answer["result"]["isError"], true);
    f.request(4, "resources/list", json!({}));
    assert_eq!(f.recv()["error"]["code"], -32601);
    f.stdin = None;
    let status = f.guard.wait_exit(ANSWER).expect("exit at the end of stdin");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn garbage_follows_the_handshake_and_call_answers_come_twice() {
    let mut f = Fixture::spawn(&["--garbage", "--garbage-big", "4096"]);
    f.request(1, "initialize", initialize("2025-11-25"));
    assert_eq!(f.recv()["id"], 1);
    let garbage: Vec<String> = (0..11).map(|_| f.line()).collect();
    assert_eq!(garbage[0], "this is not json");
    assert_eq!(garbage[8].len(), 4096, "the big line has the asked size");
    let big: Value = serde_json::from_str(&garbage[8]).expect("the big line is JSON");
    assert_eq!(big["method"], "notifications/message");
    assert_eq!(
        serde_json::from_str::<Value>(&garbage[9]).expect("JSON")["id"],
        "srv-ping"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&garbage[10]).expect("JSON")["id"],
        "srv-unknown"
    );
    f.request(2, "tools/call", call("echo", json!({ "message": "twice" })));
    let (first, second) = (f.recv(), f.recv());
    assert_eq!(first, second);
    assert_eq!(first["id"], 2);
}

#[test]
fn helpers_are_recorded_by_identity_and_can_be_killed_by_it() {
    let scratch = Scratch::new("mcp-fixture-pids");
    let pids_file = scratch.path("pids.json");
    let pids_arg = pids_file.to_str().expect("a UTF-8 path");
    let mut f = Fixture::spawn(&["--helpers", "--pids", pids_arg]);
    // The pids file is written before the fixture reads stdin.
    f.request(1, "initialize", initialize("2025-11-25"));
    assert_eq!(f.recv()["id"], 1);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(&pids_file).expect("the pids file")).expect("JSON");
    let proc_of = |v: &Value| Proc {
        pid: i32::try_from(v["pid"].as_i64().expect("a pid")).expect("an i32 pid"),
        start_time: v["start_time"].as_u64().expect("a start time"),
    };
    let server = proc_of(&doc["server"]);
    assert_eq!(Some(server), f.guard.procs.first().copied());
    let helpers: Vec<Proc> = doc["helpers"]
        .as_array()
        .expect("a helpers array")
        .iter()
        .map(proc_of)
        .collect();
    assert_eq!(helpers.len(), 3);
    f.guard.extend(helpers.iter().copied());
    for helper in &helpers {
        assert!(helper.is_alive(), "helper {helper:?} runs");
    }
    for helper in &helpers {
        assert!(helper.kill(), "helper {helper:?} killed by pidfd");
    }
    assert!(
        wait_until(ANSWER, || helpers.iter().all(|h| !h.is_alive())),
        "every helper is gone after SIGKILL"
    );
}

#[test]
fn http_initialize_is_answered_as_one_sse_event_with_a_session() {
    let f = Fixture::spawn(&["--http", "127.0.0.1:0"]);
    let listening = f.line();
    let url = listening
        .strip_prefix("listening http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("a listening line: {listening:?}"));
    let mut stream = post(
        url,
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize("2025-06-18") }),
    );
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("reading the answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("headers and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: text/event-stream"), "{head}");
    assert!(head.contains("Mcp-Session-Id: fixture-session"), "{head}");
    let data = body
        .strip_prefix("event: message\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("one SSE event: {body:?}"));
    let msg: Value = serde_json::from_str(data).expect("JSON data");
    assert_eq!(msg["id"], 1);
    assert_eq!(msg["result"]["protocolVersion"], "2025-06-18");
}

/// Sends one `POST /mcp` with `body` on a new connection to `addr`.
fn post(addr: &str, body: &Value) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connecting to the fixture");
    stream
        .set_read_timeout(Some(ANSWER))
        .expect("a read timeout");
    let body = body.to_string();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("sending the request");
    stream
}

#[test]
fn http_a_held_stream_cancelled_before_it_closes_is_noted_closed_when_it_does() {
    let scratch = Scratch::new("mcp-fixture-http-cancel");
    let log = scratch.path("log");
    let log_str = log.to_str().expect("a UTF-8 path");
    let f = Fixture::spawn(&[
        "--http",
        "127.0.0.1:0",
        "--log",
        log_str,
        "--hold-ms",
        "20000",
    ]);
    let listening = f.line();
    let addr = listening
        .strip_prefix("listening http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("a listening line: {listening:?}"))
        .to_owned();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let held = post(
        &addr,
        &json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call("echo", json!({ "message": "held" })) }),
    );
    let mut head = String::new();
    BufReader::new(&held)
        .read_line(&mut head)
        .expect("the held answer's status line");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The cancellation first, the stream still open (a client that posts it
    // before its closed stream reaches the server).
    let mut cancel = post(
        &addr,
        &json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 7 } }),
    );
    let mut accepted = String::new();
    cancel
        .read_to_string(&mut accepted)
        .expect("the cancellation's answer");
    assert!(accepted.starts_with("HTTP/1.1 202"), "{accepted}");
    let seen = "fixture: cancelled request 7 before its stream closed";
    assert!(
        wait_until(ANSWER, || read().contains(seen)),
        "the fixture did not see the cancellation: {}",
        read()
    );
    drop(held);
    assert!(
        wait_until(ANSWER, || read()
            .contains("fixture: stream closed for request 7")),
        "the closed stream was not noted: {}",
        read()
    );
}
