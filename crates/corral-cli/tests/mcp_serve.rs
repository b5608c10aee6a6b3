//! `corral mcp serve` end to end: the real `corral` binary as the server,
//! the official Python SDK as the client (`tests/mcp-peers/serve_client.py`),
//! over stdio and streamable HTTP, in both protocol eras. Processes are
//! checked by identity (pid and start time), never by name.

mod mcp_common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use corral_tests::{Guard, Lines, Owned, Proc, Scratch, wait_until};
use mcp_common::*;
use rustix::process::Signal;
use serde_json::{Value, json};

/// How long one client script or one server start may take.
const LIMIT: Duration = Duration::from_secs(60);

/// The script of tests (a) and (b): list the tools, run `echo hi`.
fn echo_script() -> String {
    json!([{"list": true}, {"call": "run", "arguments": {"argv": ["echo", "hi"]}}]).to_string()
}

/// Runs `serve_client.py ARGS` to its end; its stdout's JSON lines.
fn client(args: &[&str]) -> Vec<Value> {
    require_peers();
    let mut child = Owned(
        Command::new(python())
            .arg(peer("serve_client.py"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting serve_client.py"),
    );
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait(&mut child);
    let stdout = stdout.join().expect("stdout");
    let stderr = stderr.join().expect("stderr");
    assert!(
        status.success(),
        "serve_client.py failed ({status}): {stdout}\n{stderr}"
    );
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn drain(stream: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stream) = stream {
            let _ = stream.read_to_string(&mut text);
        }
        text
    })
}

fn wait(child: &mut Owned) -> ExitStatus {
    let mut status = None;
    wait_until(LIMIT, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status.unwrap_or_else(|| panic!("no exit within {LIMIT:?}"))
}

/// The event of `events` named `name` (the first).
fn event<'a>(events: &'a [Value], name: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == name)
        .unwrap_or_else(|| panic!("no {name:?} event in {events:#?}"))
}

/// Checks the answer to `run {"argv": ["echo", "hi"]}`.
fn assert_echo_hi(events: &[Value]) {
    let tools = &event(events, "tools")["tools"];
    for tool in ["run", "list_runs", "read_run", "wait_run", "kill_run"] {
        assert!(
            tools.as_array().is_some_and(|t| t.contains(&json!(tool))),
            "{tools}"
        );
    }
    let result = event(events, "result");
    assert_eq!(result["is_error"], false, "{result:#}");
    let structured = &result["structured"];
    assert_eq!(structured["outcome"], "exited", "{result:#}");
    assert_eq!(structured["exit_code"], 0, "{result:#}");
    assert_eq!(structured["stdout"], "hi\n", "{result:#}");
}

/// The status code of a raw `initialize` POST to `server` with `headers`.
fn raw_post(server: &HttpServer, headers: &[(&str, &str)]) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    .to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        server.authority(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(server.authority()).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).expect("timeout");
    stream.write_all(request.as_bytes()).expect("write");
    let mut head = [0u8; 4096];
    let mut read = 0;
    // The status line and the headers come first; the body may stream.
    while read < head.len() {
        let n = stream.read(&mut head[read..]).expect("read");
        if n == 0 {
            break;
        }
        read += n;
        if head[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&head[..read]).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    (status, text)
}

#[test]
fn stdio_lists_the_tools_and_runs_echo_in_both_eras() {
    let corral = wrapper();
    let corral = corral.to_str().expect("UTF-8 path");
    for mode in ["auto", "legacy"] {
        let events = client(&["--mode", mode, &echo_script(), "--", corral, "mcp", "serve"]);
        let expected = if mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(event(&events, "connected")["protocol_version"], expected);
        assert_echo_hi(&events);
        event(&events, "closed");
    }
}

#[test]
fn http_with_the_token_runs_echo_in_both_eras() {
    let server = HttpServer::start(&[]);
    assert_eq!(
        server.token.len(),
        64,
        "a generated token is 32 bytes in hex"
    );
    for mode in ["auto", "legacy"] {
        let events = client(&[
            "--mode",
            mode,
            "--url",
            &server.url,
            "--token",
            &server.token,
            &echo_script(),
        ]);
        assert_echo_hi(&events);
    }
    let status = server.stop();
    assert_eq!(status.code(), Some(0), "SIGTERM stops the server with 0");
}

#[test]
fn http_without_the_token_is_401_and_a_foreign_origin_is_403() {
    let server = HttpServer::start(&[]);
    let bearer = format!("Bearer {}", server.token);

    let (status, head) = raw_post(&server, &[]);
    assert_eq!(status, 401, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    let (status, head) = raw_post(&server, &[("Authorization", "Bearer not-the-token")]);
    assert_eq!(status, 401, "{head}");

    let (status, head) = raw_post(
        &server,
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
    );
    assert_eq!(status, 403, "{head}");
    let own = format!("http://{}", server.authority());
    let (status, head) = raw_post(&server, &[("Authorization", &bearer), ("Origin", &own)]);
    assert_eq!(status, 200, "{head}");
    let (status, head) = raw_post(&server, &[("Authorization", &bearer)]);
    assert_eq!(status, 200, "{head}");
    drop(server);
}

#[test]
fn allowed_origins_and_a_token_file_replace_the_defaults() {
    let scratch = Scratch::new("serve-token");
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "  file-token-1234\n").expect("write token");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let server = HttpServer::start(&[
        "--token-file",
        token_file.to_str().expect("UTF-8"),
        "--allowed-origin",
        "https://app.example",
    ]);
    assert_eq!(server.token, "", "a token from a file is not printed");
    let bearer = "Bearer file-token-1234";
    let (status, _) = raw_post(
        &server,
        &[("Authorization", bearer), ("Origin", "https://app.example")],
    );
    assert_eq!(status, 200);
    let own = format!("http://{}", server.authority());
    let (status, _) = raw_post(&server, &[("Authorization", bearer), ("Origin", &own)]);
    assert_eq!(status, 403, "the defaults are replaced");
}

/// Runs `corral mcp serve ARGS` that must refuse to start.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(wrapper())
        .args(["mcp", "serve"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running corral mcp serve");
    assert!(output.stdout.is_empty(), "stdout is for MCP frames only");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_remote_address_without_allow_remote_is_refused_with_125() {
    let (code, stderr) = refused(&["--http", "0.0.0.0:0"]);
    assert_eq!(code, Some(125), "{stderr}");
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    let (code, stderr) = refused(&["--http", "localhost:80"]);
    assert_eq!(code, Some(125), "{stderr}");
    assert!(stderr.contains("IP:PORT"), "{stderr}");
}

#[test]
fn a_token_file_open_to_others_is_refused_with_125() {
    let scratch = Scratch::new("serve-open-token");
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "secret\n").expect("write token");
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let stderr = token_file_refused(&[&token_file]);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    let path = token_file.to_str().expect("UTF-8");
    let (code, stderr) = refused(&["--token-file", path]);
    assert_eq!(code, Some(125), "--token-file without --http: {stderr}");
}

/// A shell fragment that writes `PID START_TIME` of process `$pid_expr`
/// into `file` (atomically), read from `/proc/PID/stat` while it runs.
fn record_identity(pid_expr: &str, file: &Path) -> String {
    let file = file.display();
    format!(
        "echo {pid_expr} $(cut -d' ' -f22 /proc/{pid_expr}/stat) > {file}.tmp && mv {file}.tmp {file}"
    )
}

/// The process a [`record_identity`] file names, once it exists.
fn identity(file: &Path) -> Proc {
    let mut text = String::new();
    wait_until(LIMIT, || {
        text = std::fs::read_to_string(file).unwrap_or_default();
        !text.is_empty()
    });
    identity_of(&text)
}

/// The process of a `PID START_TIME` line.
fn identity_of(line: &str) -> Proc {
    let mut fields = line.split_whitespace();
    let pid = fields.next().and_then(|p| p.parse().ok());
    let start_time = fields.next().and_then(|s| s.parse().ok());
    match (pid, start_time) {
        (Some(pid), Some(start_time)) => Proc { pid, start_time },
        _ => panic!("not an identity line: {line:?}"),
    }
}

/// Waits (bounded) until none of `procs` runs; panics naming survivors.
fn assert_gone(procs: &[Proc], bound: Duration, what: &str) {
    let gone = wait_until(bound, || procs.iter().all(|p| !p.is_alive()));
    let alive: Vec<&Proc> = procs.iter().filter(|p| p.is_alive()).collect();
    // Clean up what the assertion is about to report.
    let _guard = Guard::of(procs.iter().copied());
    assert!(
        gone && alive.is_empty(),
        "{what}: still running after {bound:?}: {alive:?}"
    );
}

#[test]
fn a_background_job_holding_stdout_neither_delays_the_answer_nor_survives() {
    let corral = wrapper();
    let corral = corral.to_str().expect("UTF-8 path");
    // setsid in a non-interactive shell execs sleep in place: $! is sleep.
    let shell = "setsid sleep 600 & echo $! $(cut -d' ' -f22 /proc/$!/stat)";
    let script = json!([{"call": "run", "arguments": {"shell": shell, "timeout": 30}}]).to_string();
    let started = Instant::now();
    let events = client(&[&script, "--", corral, "mcp", "serve"]);
    let took = started.elapsed();
    let result = event(&events, "result");
    let structured = &result["structured"];
    assert_eq!(structured["outcome"], "exited", "{result:#}");
    let escaped = identity_of(structured["stdout"].as_str().expect("stdout"));
    assert!(
        took < Duration::from_secs(20),
        "the answer waited for the background job ({took:?})"
    );
    assert_gone(
        &[escaped],
        Duration::from_secs(5),
        "the setsid background job",
    );
}

#[test]
fn a_cancelled_call_ends_its_tree_in_both_eras() {
    let server = HttpServer::start(&[]);
    for mode in ["auto", "legacy"] {
        let scratch = Scratch::new(&format!("serve-cancel-{mode}"));
        let file = scratch.path("sleeper");
        let shell = format!("{}; exec sleep 30", record_identity("$$", &file));
        let script = json!([
            {"call": "run", "arguments": {"shell": shell}, "cancel_after": 3},
            {"call": "list_runs", "arguments": {}},
        ])
        .to_string();
        let events = client(&[
            "--mode",
            mode,
            "--url",
            &server.url,
            "--token",
            &server.token,
            &script,
        ]);
        event(&events, "cancelled");
        let sleeper = identity(&file);
        // The server stays up (the HTTP server outlives this client): only
        // the cancellation can have ended the tree.
        assert_gone(
            &[sleeper],
            Duration::from_secs(10),
            &format!("the cancelled run ({mode})"),
        );
        let listed = events
            .iter()
            .find(|e| e["event"] == "result" && e["tool"] == "list_runs")
            .unwrap_or_else(|| panic!("the server answered nothing after the cancel: {events:#?}"));
        assert_eq!(listed["is_error"], false, "{listed:#}");
    }
    assert_eq!(server.stop().code(), Some(0));
}

#[test]
fn runs_do_not_survive_a_server_killed_with_sigkill() {
    require_peers();
    let mut server = HttpServer::start(&[]);
    let scratch = Scratch::new("serve-sigkill");
    let (foreground, background) = (scratch.path("foreground"), scratch.path("background"));
    let run = |file: &Path, background: bool| {
        json!({"call": "run", "arguments": {
            "shell": format!("{}; exec sleep 600", record_identity("$$", file)),
            "background": background, "timeout": 600}})
    };
    let events = client(&[
        "--url",
        &server.url,
        "--token",
        &server.token,
        &json!([run(&background, true)]).to_string(),
    ]);
    assert_eq!(event(&events, "result")["is_error"], false, "{events:#?}");
    // The foreground call never ends by itself: its client is left waiting.
    let _caller = Owned(
        Command::new(python())
            .arg(peer("serve_client.py"))
            .args(["--url", &server.url, "--token", &server.token])
            .arg(json!([run(&foreground, false)]).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting serve_client.py"),
    );
    let runs = [identity(&foreground), identity(&background)];
    assert!(runs.iter().all(Proc::is_alive), "{runs:?}");
    server.child.kill().expect("SIGKILL to our child");
    let _ = server.child.wait();
    assert_gone(
        &runs,
        Duration::from_secs(10),
        "a run of the SIGKILLed server",
    );
}

/// `corral mcp serve ARGS` on stdio, all pipes, driven by hand.
struct StdioServer {
    child: Owned,
    stdin: Option<std::process::ChildStdin>,
    stdout: Lines,
    stderr: std::thread::JoinHandle<String>,
}

impl StdioServer {
    fn start(args: &[&str]) -> Self {
        let mut child = Owned(
            Command::new(wrapper())
                .args(["mcp", "serve"])
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting corral mcp serve"),
        );
        let stdin = child.stdin.take();
        let stdout = Lines::new(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take());
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write a frame");
        stdin.flush().expect("flush");
    }

    /// The next line of stdout, which must be a JSON-RPC message.
    fn next(&self) -> Value {
        let line = self.stdout.next(LIMIT).expect("a frame on stdout");
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout is not a frame ({e}): {line}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        value
    }

    /// The response to request `id` (notifications before it are skipped).
    fn response(&self, id: u64) -> Value {
        loop {
            let value = self.next();
            if value["id"] == id {
                return value;
            }
        }
    }

    fn handshake(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "hand", "version": "0"}}}),
        );
        assert!(self.response(0)["result"]["protocolVersion"].is_string());
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        self.response(id)
    }
}

#[test]
fn with_v_stdout_carries_only_frames_and_closing_stdin_exits_0() {
    let mut server = StdioServer::start(&["-v"]);
    server.handshake();
    let answer = server.call(1, "run", json!({"argv": ["echo", "hi"]}));
    assert_eq!(
        answer["result"]["structuredContent"]["stdout"], "hi\n",
        "{answer:#}"
    );
    server.stdin = None;
    let status = wait(&mut server.child);
    assert_eq!(status.code(), Some(0));
    // Nothing else came on stdout; the logs went to stderr.
    assert!(server.stdout.next(Duration::from_millis(100)).is_none());
    let stderr = server.stderr.join().expect("stderr");
    assert!(!stderr.is_empty(), "-v logs to stderr");
}

#[test]
fn sigterm_ends_a_background_run_and_exits_0() {
    let scratch = Scratch::new("serve-sigterm");
    let file = scratch.path("background");
    let mut server = StdioServer::start(&[]);
    server.handshake();
    let shell = format!("{}; exec sleep 600", record_identity("$$", &file));
    let answer = server.call(
        1,
        "run",
        json!({"shell": shell, "background": true, "timeout": 600}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer:#}");
    let run = identity(&file);
    assert!(run.is_alive());
    let pid = rustix::process::Pid::from_raw(server.child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, Signal::TERM).expect("SIGTERM to our child");
    let status = wait(&mut server.child);
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        server.stderr.join().unwrap_or_default()
    );
    // Ended before the exit, not by the watchdog afterwards.
    assert!(
        !run.is_alive(),
        "the background run outlived the server's exit"
    );
}

/// The watchdog the server `pid` started: its child that is not the run
/// `except` (the watchdog is forked early, so it shows corral's own command
/// line), by identity.
fn watchdog_of(pid: i32, except: i32) -> Option<Proc> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let child: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = corral_tests::stat(child)?;
            (stat.ppid == pid && child != except && stat.is_running()).then(|| Proc::of(child))?
        })
}

/// A server that crashed together with its watchdog leaves its runs to
/// corral's crash ledger: the next server's first spawn reaps them.
#[test]
fn a_restarted_server_reaps_its_crashed_predecessors_runs() {
    require_peers();
    if corral_tests::cgroup_parent().is_none() {
        return;
    }
    let scratch = Scratch::new("serve-restart");
    let ledger = scratch.path("ledger");
    let file = scratch.path("run");
    let env = [("CORRAL_LEDGER_DIR", ledger.as_path())];
    let mut first = HttpServer::start_with_env(&[], &env);
    let started = json!({"call": "run", "arguments": {
        "shell": format!("{}; exec sleep 600", record_identity("$$", &file)),
        "background": true, "timeout": 600}});
    let events = client(&[
        "--url",
        &first.url,
        "--token",
        &first.token,
        &json!([started]).to_string(),
    ]);
    assert_eq!(event(&events, "result")["is_error"], false, "{events:#?}");
    let run = identity(&file);
    let server =
        Proc::of(i32::try_from(first.child.id()).expect("a pid")).expect("the server runs");
    let mut watchdog = None;
    assert!(
        wait_until(LIMIT, || {
            watchdog = watchdog_of(server.pid, run.pid);
            watchdog.is_some()
        }),
        "the server's watchdog"
    );
    let watchdog = watchdog.expect("found");
    // Stopped, the server cannot replace its watchdog: both go at once.
    assert!(server.signal(Signal::STOP));
    assert!(watchdog.kill());
    assert!(
        wait_until(LIMIT, || !watchdog.is_alive()),
        "the watchdog is gone"
    );
    first.child.kill().expect("SIGKILL to our child");
    let _ = first.child.wait();
    assert!(
        run.is_alive(),
        "nobody has ended the crashed server's run yet"
    );
    // The next server reaps it: its first spawn sweeps the ledger.
    let second = HttpServer::start_with_env(&[], &env);
    let call = json!({"call": "run", "arguments": {"argv": ["true"]}});
    let events = client(&[
        "--url",
        &second.url,
        "--token",
        &second.token,
        &json!([call]).to_string(),
    ]);
    assert_eq!(event(&events, "result")["is_error"], false, "{events:#?}");
    assert_gone(&[run], Duration::from_secs(10), "the crashed server's run");
}

/// `corral mcp serve ARGS` that must refuse to start, and at once: its exit
/// code and stderr. A server still starting after `bound` fails the test
/// (and is killed).
fn refused_within(args: &[&str], bound: Duration) -> (Option<i32>, String) {
    let mut child = Owned(
        Command::new(wrapper())
            .args(["mcp", "serve"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting corral mcp serve"),
    );
    let stderr = drain(child.stderr.take());
    let mut status = None;
    wait_until(bound, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    drop(child);
    let stderr = stderr.join().expect("stderr");
    let status = status.unwrap_or_else(|| {
        panic!("corral mcp serve {args:?} was still starting after {bound:?}: {stderr}")
    });
    assert!(
        !stderr.contains("listening on"),
        "a refused server listened: {stderr}"
    );
    (status.code(), stderr)
}

/// `corral mcp serve --http 127.0.0.1:0 --token-file PATH...`, which must
/// refuse to start within 10 s with status 125: its stderr.
fn token_file_refused(paths: &[&Path]) -> String {
    let mut args = vec!["--http", "127.0.0.1:0"];
    for path in paths {
        args.extend(["--token-file", path.to_str().expect("UTF-8")]);
    }
    let (code, stderr) = refused_within(&args, Duration::from_secs(10));
    assert_eq!(code, Some(125), "{stderr}");
    stderr
}

/// `corral mcp serve --audit PATH`, which must refuse to start within 10 s
/// with status 125: its stderr.
fn audit_file_refused(path: &Path) -> String {
    let path = path.to_str().expect("UTF-8");
    let (code, stderr) = refused_within(&["--audit", path], Duration::from_secs(10));
    assert_eq!(code, Some(125), "{stderr}");
    stderr
}

/// A scratch directory anyone may write in (mode 1777, like /tmp).
fn shared_dir(name: &str) -> Scratch {
    let scratch = Scratch::new(name);
    std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    scratch
}

/// A token file of ours: `text`, mode 0600.
fn own_token(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write token");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// The user that plays the other local user: `nobody`.
const NOBODY: u32 = 65534;

/// A root server must not take a token another user chose: `nobody` writes
/// a private token file (mode 0600, its own) into a directory anyone may
/// write in, and names it as if it were root's. Served, `nobody` would run
/// commands as root with it.
#[test]
fn a_token_file_another_user_wrote_is_refused_by_a_root_server() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a token file of another user needs root to plant");
        return;
    }
    let scratch = shared_dir("serve-foreign-token");
    let token_file = scratch.path("corral-token");
    assert!(
        as_nobody("umask 077; echo known > \"$1\"", &[&token_file]),
        "nobody wrote its token file"
    );
    let stderr = token_file_refused(&[&token_file]);
    let path = token_file.to_str().expect("UTF-8");
    for part in [
        path,
        "owned by nobody (uid 65534)",
        "mode 600",
        "chown root",
    ] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
}

/// A FIFO as the token file is refused at once: opened without blocking, it
/// cannot hold start-up until somebody writes into it.
#[test]
fn a_fifo_as_the_token_file_is_refused_at_once() {
    let scratch = Scratch::new("serve-fifo-token");
    let fifo = scratch.path("token");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let stderr = token_file_refused(&[&fifo]);
    assert!(stderr.contains("not a regular file (a FIFO)"), "{stderr}");
}

/// A symlink to a good token file is refused (whoever can change the link
/// chooses the token); the file itself is served.
#[test]
fn a_symlink_to_a_token_file_is_refused_and_the_file_itself_served() {
    let scratch = Scratch::new("serve-link-token");
    let good = scratch.path("good.token");
    own_token(&good, "good-token-5678\n");
    let link = scratch.path("link.token");
    std::os::unix::fs::symlink(&good, &link).expect("symlink");
    let stderr = token_file_refused(&[&link]);
    assert!(stderr.contains("a symbolic link"), "{stderr}");
    let server = HttpServer::start(&["--token-file", good.to_str().expect("UTF-8")]);
    let (status, head) = raw_post(&server, &[("Authorization", "Bearer good-token-5678")]);
    assert_eq!(status, 200, "{head}");
    assert_eq!(server.stop().code(), Some(0));
}

/// Runs `sh -c SCRIPT sh ARGS...` as `nobody`; true when it succeeded.
fn as_nobody(script: &str, args: &[&Path]) -> bool {
    use std::os::unix::process::CommandExt as _;
    Command::new("/bin/sh")
        .args(["-c", script, "sh"])
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .status()
        .expect("running sh as nobody")
        .success()
}

/// Whoever can change the token files' directory decides which client a
/// token names: root's `alice.token` and `bob.token` in a directory owned
/// by `nobody` (which could swap them) are refused, naming the directory.
/// So is a directory above the file that `nobody` owns, and one writable by
/// group without the sticky bit.
#[test]
fn a_token_file_in_a_directory_another_user_can_change_is_refused() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a directory of another user needs root to make");
        return;
    }
    let scratch = shared_dir("serve-foreign-dir");
    let theirs = scratch.path("theirs");
    assert!(
        as_nobody("mkdir -m 755 \"$1\"", &[&theirs]),
        "nobody made its directory"
    );
    let (alice, bob) = (theirs.join("alice.token"), theirs.join("bob.token"));
    own_token(&alice, "alice-token-0123456789\n");
    own_token(&bob, "bob-token-9876543210\n");
    let shown = theirs.to_str().expect("UTF-8");
    let stderr = token_file_refused(&[&alice, &bob]);
    for part in [
        &format!("in the directory {shown}, owned by nobody (uid 65534)"),
        "mkdir -m 700",
    ] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
    // A directory of root's inside nobody's: nobody can swap it whole.
    let inner = theirs.join("root-owned");
    std::fs::create_dir(&inner).expect("mkdir");
    let token = inner.join("carol.token");
    own_token(&token, "carol-token-0123456789\n");
    let stderr = token_file_refused(&[&token]);
    assert!(
        stderr.contains(&format!("in the directory {shown}, owned by nobody")),
        "{stderr}"
    );
    // root's own directory, open to its group without the sticky bit.
    let shared = scratch.path("group-writable");
    std::fs::create_dir(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).expect("chmod");
    let token = shared.join("dave.token");
    own_token(&token, "dave-token-0123456789\n");
    let stderr = token_file_refused(&[&token]);
    let shown = shared.to_str().expect("UTF-8");
    for part in [
        &format!("in the directory {shown} (owned by root (uid 0), mode 775)"),
        &format!("chmod go-w {shown}"),
    ] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
    // Made private, the same directory serves.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let server = HttpServer::start(&["--token-file", token.to_str().expect("UTF-8")]);
    let (status, head) = raw_post(
        &server,
        &[("Authorization", "Bearer dave-token-0123456789")],
    );
    assert_eq!(status, 200, "{head}");
    assert_eq!(server.stop().code(), Some(0));
}

/// A token file with a second name (a hard link) is refused: the other name
/// may sit in a directory another user can change.
#[test]
fn a_hard_linked_token_file_is_refused() {
    let scratch = Scratch::new("serve-linked-token");
    let token = scratch.path("erin.token");
    own_token(&token, "erin-token-0123456789\n");
    std::fs::hard_link(&token, scratch.path("other-name")).expect("link");
    let stderr = token_file_refused(&[&token]);
    assert!(stderr.contains("2 names for one file"), "{stderr}");
}

/// An audit log `nobody` made first (mode 666, in a directory anyone may
/// write in, like /tmp) would let `nobody` read every record, secrets in
/// `argv` too, and rewrite them: a root server refuses it, names its owner,
/// mode and the fix, and writes nothing into it.
#[test]
fn an_audit_file_another_user_made_is_refused() {
    if !corral_tests::is_root() {
        corral_tests::skipped("an audit file of another user needs root to plant");
        return;
    }
    let scratch = shared_dir("serve-foreign-audit");
    let audit = scratch.path("audit.jsonl");
    assert!(
        as_nobody("umask 0; : > \"$1\"", &[&audit]),
        "nobody made the audit file"
    );
    let stderr = audit_file_refused(&audit);
    let path = audit.to_str().expect("UTF-8");
    for part in [
        format!("--audit {path}: owned by nobody (uid 65534) (mode 666)").as_str(),
        "chown root",
        "chmod 600",
    ] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
    assert_eq!(std::fs::read(&audit).expect("read").len(), 0, "written to");
}

/// Audit records hold command lines, secrets in `argv` too: an audit file
/// of the server's own that group or others may read is refused, with the
/// fix, and nothing is written into it.
#[test]
fn an_audit_file_others_can_read_is_refused() {
    let scratch = Scratch::new("serve-open-audit");
    let audit = scratch.path("audit.jsonl");
    std::fs::write(&audit, "").expect("write");
    std::fs::set_permissions(&audit, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let stderr = audit_file_refused(&audit);
    let path = audit.to_str().expect("UTF-8");
    assert!(
        stderr.contains(&format!("--audit {path}: open to group or others")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("chmod 600 {path}")), "{stderr}");
    assert_eq!(std::fs::read(&audit).expect("read").len(), 0, "written to");
}

/// `nobody`'s symlink from the audit path to root's private file: a root
/// server refuses it and the file it names is untouched.
#[test]
fn a_symlink_as_the_audit_file_is_refused_and_its_target_untouched() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a victim file of root's needs root");
        return;
    }
    let private = Scratch::new("serve-audit-victim");
    let victim = private.path("victim");
    own_token(&victim, "root's own\n");
    let scratch = shared_dir("serve-link-audit");
    let link = scratch.path("x.log");
    assert!(
        as_nobody("ln -s \"$1\" \"$2\"", &[&victim, &link]),
        "nobody made the link"
    );
    let stderr = audit_file_refused(&link);
    assert!(stderr.contains("a symbolic link"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("read"),
        "root's own\n"
    );
}

/// The server's own audit file (mode 600) is appended to, its earlier lines
/// kept; a missing one is made with mode 600.
#[test]
fn a_private_audit_file_is_appended_to_and_a_new_one_is_private() {
    let scratch = Scratch::new("serve-own-audit");
    let token = scratch.path("frank.token");
    own_token(&token, "frank-token-0123456789\n");
    let old = scratch.path("old.jsonl");
    own_token(&old, "{\"earlier\":true}\n");
    let new = scratch.path("new.jsonl");
    for audit in [&old, &new] {
        let server = HttpServer::start(&[
            "--token-file",
            token.to_str().expect("UTF-8"),
            "--root",
            scratch.0.to_str().expect("UTF-8"),
            "--audit",
            audit.to_str().expect("UTF-8"),
        ]);
        let result = call_as(
            &server,
            "frank-token-0123456789",
            "run",
            &json!({"argv": ["echo", "hi"]}),
        );
        assert_eq!(result["isError"], false, "{result:#}");
        assert_eq!(server.stop().code(), Some(0));
    }
    let lines = std::fs::read_to_string(&old).expect("read");
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0], "{\"earlier\":true}");
    let record: Value = serde_json::from_str(lines[1]).expect("a record");
    assert_eq!(record["argv"], json!(["echo", "hi"]), "{record}");
    let mode = std::fs::metadata(&new).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

/// `corral mcp call --url URL` with `token` as the bearer: the tool's result
/// (`structuredContent`, `isError`, `content`).
fn call_as(server: &HttpServer, token: &str, tool: &str, arguments: &Value) -> Value {
    let output = Command::new(wrapper())
        .args([
            "mcp",
            "call",
            "--json",
            "--timeout",
            "60s",
            "--url",
            &server.url,
        ])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args([tool, &arguments.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("running corral mcp call");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let envelope: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "corral mcp call {tool}: no envelope ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(
        envelope["result"].is_object(),
        "corral mcp call {tool}: no result: {envelope:#}"
    );
    envelope["result"].clone()
}

/// The text of a tool result.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A server with two clients, `alice` and `bob`, each with its own token
/// file, and an audit log in `scratch` (`audit.jsonl`); the tokens.
fn two_clients(scratch: &Scratch) -> (HttpServer, &'static str, &'static str) {
    let (alice, bob) = ("alice-token-0123456789", "bob-token-9876543210");
    let (alice_file, bob_file) = (scratch.path("alice.token"), scratch.path("bob.token"));
    own_token(&alice_file, alice);
    own_token(&bob_file, bob);
    let server = HttpServer::start(&[
        "--token-file",
        alice_file.to_str().expect("UTF-8"),
        "--token-file",
        bob_file.to_str().expect("UTF-8"),
        "--root",
        scratch.0.to_str().expect("UTF-8"),
        "--audit",
        scratch.path("audit.jsonl").to_str().expect("UTF-8"),
    ]);
    (server, alice, bob)
}

/// Starts a background run as `token`; its id.
fn start_background(server: &HttpServer, token: &str, arguments: Value) -> String {
    let mut arguments = arguments;
    arguments["background"] = json!(true);
    let started = call_as(server, token, "run", &arguments);
    assert_eq!(started["isError"], false, "{started:#}");
    started["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no run id: {started:#}"))
        .to_owned()
}

/// Another client's background run is as good as absent: `bob` neither
/// lists nor reads, waits for or ends `alice`'s run, and is told "not found"
/// in the very words of an id never given out.
#[test]
fn another_client_neither_sees_nor_reads_waits_for_nor_ends_a_run() {
    let scratch = Scratch::new("serve-principals");
    let (server, alice, bob) = two_clients(&scratch);
    let id = start_background(
        &server,
        alice,
        json!({"shell": "echo SECRET-OF-A; exec sleep 600", "timeout": 600}),
    );
    let mut read = Value::Null;
    assert!(
        wait_until(LIMIT, || {
            read = call_as(&server, alice, "read_run", &json!({"id": id}));
            text_of(&read).contains("SECRET-OF-A")
        }),
        "alice reads her run's output: {read:#}"
    );

    let listed = call_as(&server, bob, "list_runs", &json!({}));
    assert_eq!(listed["isError"], false, "{listed:#}");
    assert_eq!(
        listed["structuredContent"]["runs"],
        json!([]),
        "bob lists alice's run: {listed:#}"
    );
    let never = "run-00000000000000000000000000000000";
    for (tool, arguments) in [
        ("read_run", json!({"id": id})),
        ("wait_run", json!({"id": id, "timeout": 1})),
        ("kill_run", json!({"id": id})),
    ] {
        let answer = call_as(&server, bob, tool, &arguments);
        let mut unknown = arguments.clone();
        unknown["id"] = json!(never);
        let expected = call_as(&server, bob, tool, &unknown);
        assert_eq!(expected["isError"], true, "{expected:#}");
        assert!(
            text_of(&expected).contains("no background run"),
            "{expected:#}"
        );
        assert_eq!(answer["isError"], true, "bob's {tool}: {answer:#}");
        assert_eq!(
            text_of(&answer),
            text_of(&expected).replace(never, &id),
            "bob's {tool} of alice's run answers otherwise than for an unknown id"
        );
        assert!(!text_of(&answer).contains("SECRET"), "{answer:#}");
    }

    // Bob's kill_run ended nothing: alice's run still runs, and is hers.
    let mine = call_as(&server, alice, "list_runs", &json!({}));
    let runs = mine["structuredContent"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{mine:#}");
    assert_eq!(runs[0]["id"], json!(id));
    assert_eq!(runs[0]["state"], "running", "{mine:#}");
    let killed = call_as(&server, alice, "kill_run", &json!({"id": id}));
    assert_eq!(killed["isError"], false, "{killed:#}");
    assert_eq!(server.stop().code(), Some(0));
}

/// The finished runs kept are kept per client: 17 finished runs of `bob`
/// push out bob's oldest, never `alice`'s result. The audit line of each
/// run names its client.
#[test]
fn another_clients_runs_do_not_push_out_a_finished_result() {
    let scratch = Scratch::new("serve-principals-keep");
    let (server, alice, bob) = two_clients(&scratch);
    let wait = |token: &str, id: &str| {
        let waited = call_as(
            &server,
            token,
            "wait_run",
            &json!({"id": id, "timeout": 30}),
        );
        assert_eq!(
            waited["structuredContent"]["outcome"], "exited",
            "{waited:#}"
        );
    };
    let hers = start_background(&server, alice, json!({"argv": ["echo", "A-RESULT"]}));
    wait(alice, &hers);
    let mut his = Vec::new();
    for _ in 0..17 {
        let id = start_background(&server, bob, json!({"argv": ["true"]}));
        wait(bob, &id);
        his.push(id);
    }
    let read = call_as(&server, alice, "read_run", &json!({"id": hers}));
    assert_eq!(
        read["isError"], false,
        "alice's result was pushed out: {read:#}"
    );
    assert_eq!(
        read["structuredContent"]["stdout"]["data"], "A-RESULT\n",
        "{read:#}"
    );
    // Bob's own cap still holds: his oldest went.
    let oldest = call_as(&server, bob, "read_run", &json!({"id": his[0]}));
    assert_eq!(oldest["isError"], true, "{oldest:#}");
    let newest = call_as(&server, bob, "read_run", &json!({"id": his[16]}));
    assert_eq!(newest["isError"], false, "{newest:#}");
    assert_eq!(server.stop().code(), Some(0));
    // Each run's line was written before its result was published.
    let audit = std::fs::read_to_string(scratch.path("audit.jsonl")).expect("the audit log");
    let lines: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).expect("an audit line"))
        .collect();
    let of = |principal: &str| {
        lines
            .iter()
            .filter(|line| line["principal"] == principal)
            .map(|line| line["run_id"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(of("alice"), [hers], "{audit}");
    assert_eq!(of("bob"), his, "{audit}");
}

/// Run ids are 128 random bits: two ids in a row share no counter.
#[test]
fn run_ids_are_unguessable() {
    let scratch = Scratch::new("serve-run-ids");
    let (server, alice, _) = two_clients(&scratch);
    let ids: Vec<String> = (0..2)
        .map(|_| start_background(&server, alice, json!({"argv": ["true"]})))
        .collect();
    for id in &ids {
        let hex = id.strip_prefix("run-").unwrap_or_else(|| panic!("{id}"));
        assert!(
            hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "not run- and 32 hex digits: {id}"
        );
    }
    let differing = ids[0]
        .bytes()
        .zip(ids[1].bytes())
        .filter(|(a, b)| a != b)
        .count();
    // Random ids differ in about 30 of 32 digits; a counter in one or two.
    assert!(differing >= 8, "{ids:?} differ in only {differing} places");
    assert_eq!(server.stop().code(), Some(0));
}

/// A symbolic link in another user's directory, pointing at a directory of
/// root's, chooses the file: refused for a token file and for the audit
/// log (whose target root's file is left untouched).
#[test]
fn a_link_in_a_directory_another_user_can_change_is_refused() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a directory of another user needs root to make");
        return;
    }
    let scratch = shared_dir("serve-foreign-link");
    // root's own directory and files: each would pass on its own.
    let roots = scratch.path("roots");
    std::fs::create_dir(&roots).expect("mkdir");
    let token = roots.join("alice.token");
    own_token(&token, "alice-token-0123456789\n");
    let log = roots.join("audit.jsonl");
    own_token(&log, "{\"before\":true}\n");
    // nobody's directory, with a link to root's.
    let theirs = scratch.path("theirs");
    let link = theirs.join("link");
    assert!(
        as_nobody(
            "mkdir -m 755 \"$1\" && ln -s \"$2\" \"$3\"",
            &[&theirs, &roots, &link]
        ),
        "nobody made its directory and link"
    );
    let shown = theirs.to_str().expect("UTF-8");
    let stderr = token_file_refused(&[&link.join("alice.token")]);
    assert!(
        stderr.contains(&format!("in the directory {shown}, owned by nobody")),
        "{stderr}"
    );
    let stderr = audit_file_refused(&link.join("audit.jsonl"));
    assert!(
        stderr.contains(&format!("in the directory {shown}, owned by nobody")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&log).expect("read"),
        "{\"before\":true}\n"
    );
    // The same files through root's own names serve.
    let server = HttpServer::start(&["--token-file", token.to_str().expect("UTF-8")]);
    let (status, head) = raw_post(
        &server,
        &[("Authorization", "Bearer alice-token-0123456789")],
    );
    assert_eq!(status, 200, "{head}");
    assert_eq!(server.stop().code(), Some(0));
}
