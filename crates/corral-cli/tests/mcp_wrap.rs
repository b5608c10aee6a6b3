//! `corral mcp wrap` end to end with small shell servers: the relay's
//! framing, exit statuses, signals, parent death and shutdown steps. No MCP
//! peers needed.

mod mcp_common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::{Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use corral_tests::{Guard, Owned, Proc, Scratch, wait_until};
use mcp_common::*;
use rustix::process::Signal;
use serde_json::Value;

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#;
const NOTE: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The relay with `options`, then `--report REPORT -- server...`, all pipes.
fn relay(options: &[&str], report: &Path, server: &[&str]) -> Owned {
    let child = Command::new(wrapper())
        .args(WRAP)
        .args(options)
        .arg("--report")
        .arg(report)
        .arg("--")
        .args(server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting corral mcp wrap");
    Owned(child)
}

/// Waits for the relay to exit (bounded) and returns its status, stdout and
/// stderr.
fn finish(mut child: Owned, limit: Duration) -> (ExitStatus, String, String) {
    drop(child.stdin.take());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_string(&mut text);
        }
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let mut status = None;
    wait_until(limit, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    let status = status.unwrap_or_else(|| panic!("the relay did not exit within {limit:?}"));
    (
        status,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

fn leader(report: &Value) -> Proc {
    proc_from_json(&report["server"])
}

#[test]
fn stdout_carries_only_valid_frames_with_verbose_logs_and_a_noisy_server() {
    let scratch = Scratch::new("noisy");
    let report = scratch.path("report.json");
    // Logs to stdout, sends a batch, then echoes what it reads.
    let server = r#"echo "Server starting on stdio..."; echo '[{"jsonrpc":"2.0","method":"x"}]'; while IFS= read -r line; do printf '%s\n' "$line"; done"#;
    let mut child = relay(
        &["-v", "--max-frame-bytes", "1048576"],
        &report,
        &["sh", "-c", server],
    );
    let mut stdin = child.stdin.take().expect("stdin");
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"big\",\"params\":\"{}\"}}",
        "x".repeat(2 << 20)
    );
    let writer = std::thread::spawn(move || {
        for line in [REQUEST, "not json from the client", &big, NOTE] {
            stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.write_all(b"\n"))?;
        }
        // CRLF and a frame split across writes.
        stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"crlf\"}\r\n{\"jsonrpc\":")?;
        stdin.flush()?;
        std::thread::sleep(Duration::from_millis(50));
        stdin.write_all(b"\"2.0\",\"method\":\"split\"}\n")
    });
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(lines.next().expect("a frame").expect("reading a frame"));
    }
    writer
        .join()
        .expect("writer thread")
        .expect("writing to the relay");
    child.stdout = None;
    let (status, _, stderr) = finish(child, Duration::from_secs(10));
    assert_eq!(
        got,
        [
            REQUEST.to_owned(),
            NOTE.to_owned(),
            r#"{"jsonrpc":"2.0","method":"crlf"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"split"}"#.to_owned()
        ]
    );
    assert_eq!(status.code(), Some(0), "{stderr}");
    for needle in [
        "dropped a frame from the server: not JSON",
        "\"Server starting on stdio...\"",
        "dropped a frame from the server: not a JSON object but an array",
        "dropped a frame from the client: not JSON",
        "over the cap of 1048576",
        "spawned the MCP server",
        "closed the server's stdin",
    ] {
        assert!(
            stderr.contains(needle),
            "{needle:?} not in stderr:\n{stderr}"
        );
    }
    let report = read_json(&report, Duration::from_secs(5));
    assert_eq!(report["ended_by"], "client_closed");
    assert_eq!(report["relay"]["client_to_server"]["dropped"], 2);
    assert_eq!(report["relay"]["server_to_client"]["dropped"], 2);
    assert_eq!(report["relay"]["client_to_server"]["frames"], 4);
    assert!(!leader(&report).is_alive());
    assert_clean(&report);
}

#[test]
fn a_server_that_dies_answers_requests_in_flight_and_gives_its_status() {
    let scratch = Scratch::new("dies");
    let report = scratch.path("report.json");
    let mut child = relay(&[], &report, &["sh", "-c", "read -r line; exit 3"]);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{REQUEST}\n").as_bytes())
        .expect("writing");
    let stdout = child.stdout.take().expect("stdout");
    let answer = BufReader::new(stdout)
        .lines()
        .next()
        .expect("an answer")
        .expect("reading");
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32000);
    assert_eq!(
        answer["error"]["message"],
        "MCP server exited with status 3 before answering"
    );
    child.stdin = Some(stdin);
    let (status, _, _) = finish(child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(3));
    let report = read_json(&report, Duration::from_secs(5));
    assert_eq!(report["exit_status"], 3);
    assert_eq!(report["relay"]["in_flight_answered"], 1);
    assert!(
        report["ended_by"]
            .as_str()
            .is_some_and(|e| e.starts_with("server_")),
        "{report:#}"
    );
}

#[test]
fn exit_statuses_for_failures() {
    let scratch = Scratch::new("failures");
    let report = scratch.path("report.json");
    let cases: [(&[&str], i32); 3] = [
        (&["no-such-mcp-server-xyz"], 127),
        (&["/dev/null"], 126),
        (&["/"], 126),
    ];
    for (server, code) in cases {
        let (status, stdout, stderr) = finish(relay(&[], &report, server), Duration::from_secs(10));
        assert_eq!(status.code(), Some(code), "{server:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("cannot start the MCP server"), "{stderr}");
        let report = read_json(&report, Duration::from_secs(5));
        assert_eq!(report["exit_status"], code);
        assert!(report["error"].is_string());
    }
    // No command, a bad option, a report that cannot be created: 125.
    for args in [
        &["--"][..],
        &["--close-grace", "soon", "--", "true"],
        &["--report", "/nonexistent/dir/report.json", "--", "true"],
    ] {
        let output = Command::new(wrapper())
            .args(WRAP)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(125), "{args:?}");
        assert!(output.stdout.is_empty());
    }
}

/// `--report-fd` works for `corral mcp wrap` as for `corral run`, and the
/// descriptor is corral's alone: the server (and anything it starts) does not
/// inherit it, so it cannot forge or garble the report.
#[test]
fn report_fd_receives_the_report_and_the_server_cannot_write_into_it() {
    let scratch = Scratch::new("report-fd");
    let path = scratch.path("report.json");
    // The descriptor is opened by a shell redirection; the client (stdin
    // /dev/null) closes at once, the server outlives the close grace.
    let script = r#""$0" mcp wrap --close-grace 100ms --kill-after 500ms --report-fd 3 -- sh -c 'echo forged >&3; exec sleep 1000' 3>"$1" </dev/null"#;
    let output = Command::new("sh")
        .args(["-c", script])
        .arg(wrapper())
        .arg(&path)
        .output()
        .expect("run sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(&path).expect("report written");
    assert!(
        text.starts_with('{'),
        "the server wrote into the report: {text}"
    );
    let report: Value = serde_json::from_str(&text).expect("the report is corral's JSON only");
    assert_eq!(report["exit_status"], 0);
    assert_eq!(report["ended_by"], "client_closed");
    assert!(!leader(&report).is_alive());
    assert_clean(&report);
    // Both at once is a usage error.
    let output = Command::new(wrapper())
        .args(WRAP)
        .args(["--report", "r.json", "--report-fd", "3", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(125));
}

#[test]
fn sigterm_to_the_relay_answers_in_flight_and_ends_the_tree() {
    let scratch = Scratch::new("sigterm");
    let report = scratch.path("report.json");
    // The server marks that it read the request: the relay records a request
    // in flight before it forwards it, so the SIGTERM below finds it there.
    let read = scratch.path("read");
    let server = r#"read -r line; : > "$0"; exec sleep 1000"#;
    let mut child = relay(
        &["--close-grace", "300ms"],
        &report,
        &["sh", "-c", server, read.to_str().expect("UTF-8 path")],
    );
    let relay_proc = Proc::of(child.id() as i32).expect("relay identity");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{REQUEST}\n").as_bytes())
        .expect("writing");
    let stdout = child.stdout.take().expect("stdout");
    let answers = std::thread::spawn(move || BufReader::new(stdout).lines().next());
    assert!(
        wait_until(Duration::from_secs(10), || read.exists()),
        "the server never read the request"
    );
    assert!(relay_proc.signal(Signal::TERM));
    let answer = answers
        .join()
        .expect("reader")
        .expect("an answer")
        .expect("reading");
    assert!(answer.contains("corral received SIGTERM"), "{answer}");
    child.stdin = Some(stdin);
    let (status, _, stderr) = finish(child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(143), "{stderr}");
    let report = read_json(&report, Duration::from_secs(5));
    assert_eq!(report["ended_by"], "interrupted");
    assert_eq!(report["received_signal"], "SIGTERM");
    assert_clean(&report);
    assert!(!leader(&report).is_alive());
    assert_clean(&report);
}

#[test]
fn shutdown_steps_close_grace_then_sigterm_then_sigkill() {
    let scratch = Scratch::new("steps");
    for (server, escalated) in [
        // Ignores its stdin: SIGTERM after the close grace.
        ("exec sleep 1000", false),
        // Ignores SIGTERM too: SIGKILL after kill-after.
        ("trap '' TERM; exec sleep 1000", true),
    ] {
        let report = scratch.path("report.json");
        let options = ["--close-grace", "300ms", "--kill-after", "300ms"];
        let child = relay(&options, &report, &["sh", "-c", server]);
        std::thread::sleep(Duration::from_millis(100));
        let closed = Instant::now();
        let (status, _, stderr) = finish(child, Duration::from_secs(10));
        let took = closed.elapsed();
        assert_eq!(status.code(), Some(0), "{stderr}");
        let report = read_json(&report, Duration::from_secs(5));
        assert_eq!(report["escalated"], escalated, "{report:#}");
        let signals: Vec<&str> = report["signals"]
            .as_array()
            .expect("signals")
            .iter()
            .filter_map(|s| s["signal"].as_str())
            .collect();
        let expected: &[&str] = if escalated {
            &["SIGTERM", "SIGKILL"]
        } else {
            &["SIGTERM"]
        };
        assert_eq!(signals, expected);
        let shutdown = report["durations"]["shutdown"].as_f64().unwrap_or_default();
        let least = if escalated { 0.6 } else { 0.3 };
        assert!(
            shutdown >= least && shutdown < least + 1.0,
            "shutdown took {shutdown}s"
        );
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert_clean(&report);
        assert!(!leader(&report).is_alive());
        assert_clean(&report);
    }
}

#[test]
fn the_parent_dying_shuts_the_server_down_even_with_stdin_still_open() {
    let scratch = Scratch::new("parent");
    let report = scratch.path("report.json");
    // The relay's parent is a shell that then becomes `sleep`; this test
    // keeps the relay's stdin open, so only the parent's death can end it.
    // (A background job's stdin would be /dev/null: hand it over on fd 3.)
    let script = r#"exec 3<&0; "$0" mcp wrap --report "$1" -- sleep 1000 <&3 3<&- & echo $!; exec sleep 1000"#;
    let mut parent = Owned(
        Command::new("sh")
            .args(["-c", script])
            .arg(wrapper())
            .arg(&report)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the parent shell"),
    );
    let _stdin = parent.stdin.take();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the relay's pid");
    let relay_pid: i32 = line.trim().parse().expect("a pid");
    let relay = Proc::of(relay_pid).expect("relay identity");
    let mut guard = Guard::default();
    guard.extend([relay]);
    std::thread::sleep(Duration::from_millis(300));
    parent.kill().expect("killing the parent");
    let _ = parent.wait();
    assert!(
        wait_until(Duration::from_secs(10), || !relay.is_alive()),
        "the relay outlived its parent"
    );
    let report = read_json(&report, Duration::from_secs(5));
    assert_eq!(report["ended_by"], "interrupted");
    assert_eq!(report["received_signal"], "SIGTERM");
    assert_eq!(report["exit_status"], 143);
    assert!(!leader(&report).is_alive());
    assert_clean(&report);
}

#[test]
fn a_relay_killed_outright_still_leaves_nothing_behind() {
    let scratch = Scratch::new("relay-killed");
    let (report, pidfile) = (scratch.path("report.json"), scratch.path("pids"));
    // The leader, a child and a setsid child, pids written once all started.
    let script = r#"sleep 1000 & a=$!; setsid sleep 1000 & b=$!; echo "$$ $a $b" > "$0.tmp"; mv "$0.tmp" "$0"; wait"#;
    let mut child = relay(
        &[],
        &report,
        &["sh", "-c", script, pidfile.to_str().expect("utf-8")],
    );
    let mut tree = Vec::new();
    wait_until(Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
        tree = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .filter_map(Proc::of)
            .collect();
        tree.len() == 3
    });
    assert_eq!(tree.len(), 3, "the server's pids");
    let mut guard = Guard::default();
    guard.extend(tree.iter().copied());
    child.kill().expect("SIGKILL to the relay");
    let _ = child.wait();
    // The library's watchdog ends the tree when its owner dies.
    assert!(
        wait_until(Duration::from_secs(5), || tree
            .iter()
            .all(|p| !p.is_alive())),
        "the server's tree outlived the relay's SIGKILL: {:?}",
        guard.kill_running()
    );
}

/// The report's keys, pinned: a change here is a schema change (bump
/// `REPORT_VERSION` if it is incompatible, and update docs/mcp.md).
#[test]
fn report_schema() {
    let scratch = Scratch::new("schema");
    let report = scratch.path("report.json");
    let (status, _, _) = finish(relay(&[], &report, &["true"]), Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let report = read_json(&report, Duration::from_secs(5));
    let keys = |value: &Value| -> Vec<String> {
        let mut keys: Vec<String> = value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(
        keys(&report),
        [
            "backend",
            "cgroup",
            "command",
            "durations",
            "ended_by",
            "error",
            "escalated",
            "exit_status",
            "leader",
            "left_cgroup",
            "notes",
            "outcome",
            "received_signal",
            "relay",
            "server",
            "signals",
            "survivors",
            "version"
        ]
    );
    assert_eq!(report["version"], 1);
    assert_eq!(
        keys(&report["durations"]),
        ["cleanup", "relay", "shutdown", "total"]
    );
    assert_eq!(keys(&report["server"]), ["pid", "start_time"]);
    assert_eq!(
        keys(&report["relay"]),
        [
            "cancelled",
            "client_to_server",
            "in_flight_answered",
            "in_flight_unanswered",
            "reused_ids",
            "server_requests_unanswered",
            "server_to_client",
            "unmatched_responses"
        ]
    );
    assert_eq!(
        keys(&report["relay"]["client_to_server"]),
        ["bytes", "dropped", "frames"]
    );
    // `true` exits at once, maybe before the relay's stdin closes.
    let ended_by = report["ended_by"].as_str().unwrap_or_default();
    assert!(
        ["server_exited", "client_closed"].contains(&ended_by),
        "{ended_by}"
    );
    assert_eq!(report["outcome"]["kind"], "exited");
}
