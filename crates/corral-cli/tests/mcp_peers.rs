//! The guard between real MCP peers: the official Python SDK's stdio client,
//! `@modelcontextprotocol/server-everything`, and our fixture server (on the
//! Python SDK) that leaves helpers behind. Peers are installed by
//! `scripts/install-mcp-peers`; without them these tests fail.

mod mcp_common;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use corral_tests::{Guard, Owned, Proc, Scratch, wait_until};
use mcp_common::*;
use rustix::process::Signal;
use serde_json::Value;

const CLIENT_LIMIT: Duration = Duration::from_secs(60);

/// Runs the client to completion; returns its lines.
fn run_client(args: &[&str], server: &[&Path], env: &[(&str, &Path)]) -> Vec<Value> {
    let mut child = Owned(
        client(args, server, env)
            .spawn()
            .expect("starting client.py"),
    );
    let lines = json_lines(child.stdout.take().expect("client stdout"));
    let mut all = Vec::new();
    while let Some(line) = lines.next(CLIENT_LIMIT) {
        all.push(line);
    }
    let status = child.wait().expect("waiting for client.py");
    assert!(
        status.success(),
        "client.py failed ({status}); said {all:#?}"
    );
    all
}

fn event<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|line| line["event"] == name)
        .unwrap_or_else(|| panic!("no {name:?} event in {lines:#?}"))
}

fn assert_clean(report: &Value) {
    assert_eq!(
        report["survivors"],
        Value::Array(vec![]),
        "survivors in {report:#}"
    );
}

#[test]
fn server_everything_through_the_guard_then_nothing_of_it_remains() {
    require_peers();
    let scratch = Scratch::new("everything");
    let (report, pidfile) = (scratch.path("report.json"), scratch.path("leader.pid"));
    let mut guard = Guard::default();
    // The shell records the leader's pid, then becomes node (same pid).
    let script = "echo $$ > \"$1\"; exec node \"$2\" stdio";
    let lines = run_client(
        &[],
        &[
            &wrapper(),
            Path::new("mcp"),
            Path::new("wrap"),
            Path::new("--report"),
            &report,
            Path::new("--"),
            Path::new("sh"),
            Path::new("-c"),
            Path::new(script),
            Path::new("sh"),
            &pidfile,
            &server_everything(),
        ],
        &[],
    );
    let connected = event(&lines, "connected");
    // The client probed `server/discover` first; the legacy server refused it
    // and the `initialize` fallback went through the guard as well.
    assert_eq!(connected["protocol_version"], "2025-11-25");
    let tools = connected["tools"].as_array().expect("tools");
    assert!(tools.contains(&Value::from("echo")), "{tools:?}");
    assert_eq!(event(&lines, "echo")["text"], "Echo: hello through corral");

    let report = read_json(&report, Duration::from_secs(10));
    assert_eq!(report["version"], 1);
    assert_eq!(report["ended_by"], "client_closed");
    assert_eq!(report["exit_status"], 0);
    assert_clean(&report);
    let relay = &report["relay"];
    // discover, initialize, initialized, tools/list, tools/call.
    assert!(
        relay["client_to_server"]["frames"].as_u64() >= Some(5),
        "{relay}"
    );
    assert_eq!(relay["client_to_server"]["dropped"], 0);
    assert_eq!(relay["server_to_client"]["dropped"], 0);
    assert_eq!(relay["in_flight_answered"], 0);

    // Independently of the report: the leader recorded by the shell is gone.
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("leader pid file")
        .trim()
        .parse()
        .expect("a pid");
    assert_eq!(report["server"]["pid"], pid);
    let leader = proc_from_json(&report["server"]);
    guard.extend([leader]);
    assert!(
        !leader.is_alive(),
        "server-everything's leader {pid} is still running"
    );
}

#[test]
fn the_2026_discover_era_and_the_legacy_handshake_both_pass() {
    require_peers();
    let scratch = Scratch::new("eras");
    let mut guard = Guard::default();
    let fixture = peer("fixture_server.py");
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let report = scratch.path(&format!("{mode}.json"));
        let lines = run_client(
            &["--mode", mode],
            &[
                &wrapper(),
                Path::new("mcp"),
                Path::new("wrap"),
                Path::new("--report"),
                &report,
                Path::new("--"),
                &python(),
                &fixture,
            ],
            &[],
        );
        assert_eq!(
            event(&lines, "connected")["protocol_version"],
            version,
            "mode {mode}"
        );
        assert_eq!(event(&lines, "echo")["text"], "Echo: hello through corral");
        let report = read_json(&report, Duration::from_secs(10));
        assert_clean(&report);
        assert_eq!(report["relay"]["client_to_server"]["dropped"], 0);
        assert_eq!(report["relay"]["server_to_client"]["dropped"], 0);
        guard.extend([proc_from_json(&report["server"])]);
    }
}

/// The fixture's helpers through the client alone and through the guard.
fn helpers_run(backend: Option<&str>) {
    require_peers();
    let scratch = Scratch::new(&format!("helpers-{}", backend.unwrap_or("direct")));
    let (report, pids) = (scratch.path("report.json"), scratch.path("pids.json"));
    let mut guard = Guard::default();
    let fixture = peer("fixture_server.py");
    let env = [("CORRAL_MCP_FIXTURE_PIDS", pids.as_path())];
    let wrapper = wrapper();
    let mut server: Vec<&Path> = Vec::new();
    if let Some(backend) = backend {
        server.extend([
            wrapper.as_path(),
            Path::new("mcp"),
            Path::new("wrap"),
            Path::new("--backend"),
            Path::new(backend),
        ]);
        server.extend([Path::new("--kill-after"), Path::new("500ms")]);
        server.extend([Path::new("--report"), report.as_path(), Path::new("--")]);
    }
    let python = python();
    server.extend([python.as_path(), fixture.as_path()]);
    let lines = run_client(&[], &server, &env);
    assert_eq!(event(&lines, "echo")["text"], "Echo: hello through corral");
    let procs = fixture_procs(&read_json(&pids, Duration::from_secs(5)));
    guard.extend(procs.iter().map(|(_, p)| *p));

    if backend.is_none() {
        // The SDK closes stdin and signals only the server's process group:
        // the setsid child and the double-forked daemon live on.
        let survivors: Vec<&str> = procs
            .iter()
            .filter(|(_, p)| p.is_alive())
            .map(|(name, _)| name.as_str())
            .collect();
        assert!(
            survivors.contains(&"setsid_child") && survivors.contains(&"daemon"),
            "expected the escapes to survive the client alone, running: {survivors:?}"
        );
        // Killed by identity through pidfds (and again by the guard on drop).
        let killed = guard.kill_running();
        assert!(!killed.is_empty());
        return;
    }
    let report = read_json(&report, Duration::from_secs(10));
    assert_clean(&report);
    assert_eq!(
        report["backend"],
        backend.filter(|b| *b != "auto").unwrap_or("cgroup")
    );
    let running: Vec<&String> = procs
        .iter()
        .filter(|(_, p)| p.is_alive())
        .map(|(name, _)| name)
        .collect();
    assert!(
        running.is_empty(),
        "still running after the guard: {running:?}"
    );
}

#[test]
fn helpers_survive_the_python_client_alone() {
    helpers_run(None);
}

#[test]
fn helpers_are_reaped_through_the_guard_with_cgroups() {
    let cgroups = corral::capabilities()
        .backends
        .iter()
        .any(|status| status.backend == corral::Backend::Cgroup && status.available);
    if !cgroups {
        // An ordinary user without a delegated cgroup: the subreaper test
        // below covers the guard.
        eprintln!(
            "SKIPPED: no usable cgroup here: the cgroup backend is exercised by the root run"
        );
        return;
    }
    helpers_run(Some("cgroup"));
}

#[test]
fn helpers_are_reaped_through_the_guard_with_the_subreaper() {
    helpers_run(Some("subreaper"));
}

/// Starts the client through the guard with short bounds, calls a slow tool,
/// and SIGKILLs the client mid-call; returns how long the tree took to go.
fn kill_client_mid_call(
    name: &str,
    server: &[&Path],
    slow: &[&str],
    pids: Option<&Path>,
) -> Duration {
    require_peers();
    let scratch = Scratch::new(name);
    let report = scratch.path("report.json");
    let mut guard = Guard::default();
    let wrapper = wrapper();
    let mut command: Vec<&Path> = vec![&wrapper, Path::new("mcp"), Path::new("wrap")];
    for arg in [
        "--close-grace",
        "500ms",
        "--kill-after",
        "500ms",
        "--final-bound",
        "1s",
        "--report",
    ] {
        command.push(Path::new(arg));
    }
    command.extend([report.as_path(), Path::new("--")]);
    command.extend(server);
    let env: Vec<(&str, &Path)> = pids
        .map(|p| ("CORRAL_MCP_FIXTURE_PIDS", p))
        .into_iter()
        .collect();
    let mut args = vec!["--slow"];
    args.extend(slow);
    let mut child = Owned(
        client(&args, &command, &env)
            .spawn()
            .expect("starting client.py"),
    );
    let lines = json_lines(child.stdout.take().expect("client stdout"));
    lines.until("calling_slow", CLIENT_LIMIT);
    // Give the request time to reach the server through the relay.
    std::thread::sleep(Duration::from_millis(300));
    let mut tree: Vec<Proc> = match pids {
        Some(pids) => fixture_procs(&read_json(pids, Duration::from_secs(5)))
            .into_iter()
            .map(|(_, p)| p)
            .collect(),
        None => Vec::new(),
    };
    guard.extend(tree.iter().copied());
    child.kill().expect("SIGKILL to the client");
    let killed = Instant::now();
    let _ = child.wait();

    let report = read_json(&report, Duration::from_secs(10));
    let leader = proc_from_json(&report["server"]);
    tree.push(leader);
    guard.extend([leader]);
    let bound = Duration::from_millis(500 + 500 + 1000);
    let slack = Duration::from_millis(1000);
    let gone = wait_until(bound + slack, || tree.iter().all(|p| !p.is_alive()));
    let took = killed.elapsed();
    assert!(
        gone,
        "the tree outlived the bound: running {:?}",
        guard.kill_running()
    );
    assert_clean(&report);
    let ended_by = report["ended_by"].as_str().unwrap_or_default();
    assert!(
        ["client_closed", "interrupted"].contains(&ended_by),
        "{report:#}"
    );
    assert!(
        report["durations"]["shutdown"].as_f64() < Some(bound.as_secs_f64()),
        "{report:#}"
    );
    took
}

#[test]
fn client_killed_mid_call_the_fixture_tree_is_gone_within_the_bound() {
    let scratch = Scratch::new("kill-fixture-pids");
    let pids = scratch.path("pids.json");
    let python = python();
    let fixture = peer("fixture_server.py");
    let took = kill_client_mid_call(
        "kill-fixture",
        &[&python, &fixture],
        &["sleep", r#"{"seconds": 60}"#],
        Some(&pids),
    );
    eprintln!("the fixture's tree was gone {took:?} after the client's SIGKILL");
}

#[test]
fn client_killed_mid_call_server_everything_is_gone_within_the_bound() {
    let entry = server_everything();
    let took = kill_client_mid_call(
        "kill-everything",
        &[Path::new("node"), &entry, Path::new("stdio")],
        &[
            "trigger-long-running-operation",
            r#"{"duration": 60, "steps": 60}"#,
        ],
        None,
    );
    eprintln!("server-everything was gone {took:?} after the client's SIGKILL");
}

#[test]
fn a_server_killed_mid_call_gets_the_request_answered_with_the_cause() {
    require_peers();
    let scratch = Scratch::new("server-dies");
    let (report, pids) = (scratch.path("report.json"), scratch.path("pids.json"));
    let mut guard = Guard::default();
    let python = python();
    let fixture = peer("fixture_server.py");
    let wrapper = wrapper();
    let command: Vec<&Path> = vec![
        &wrapper,
        Path::new("mcp"),
        Path::new("wrap"),
        Path::new("--kill-after"),
        Path::new("500ms"),
        Path::new("--report"),
        &report,
        Path::new("--"),
        &python,
        &fixture,
    ];
    let env = [("CORRAL_MCP_FIXTURE_PIDS", pids.as_path())];
    let mut child = Owned(
        client(&["--slow", "sleep", r#"{"seconds": 60}"#], &command, &env)
            .spawn()
            .expect("starting client.py"),
    );
    let lines = json_lines(child.stdout.take().expect("client stdout"));
    lines.until("calling_slow", CLIENT_LIMIT);
    std::thread::sleep(Duration::from_millis(300));
    let procs = fixture_procs(&read_json(&pids, Duration::from_secs(5)));
    guard.extend(procs.iter().map(|(_, p)| *p));
    let server = procs[0].1;
    assert!(
        server.signal(Signal::KILL),
        "could not signal the fixture server"
    );

    let slow = lines.until("slow", Duration::from_secs(10));
    let error = slow["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("MCP server was killed by signal 9 (SIGKILL) before answering"),
        "{slow}"
    );
    lines.until("closed", Duration::from_secs(10));
    let _ = child.wait();
    let report = read_json(&report, Duration::from_secs(10));
    assert_eq!(report["exit_status"], 137, "{report:#}");
    assert_eq!(report["relay"]["in_flight_answered"], 1);
    assert_clean(&report);
    assert!(procs.iter().all(|(_, p)| !p.is_alive()));
}
