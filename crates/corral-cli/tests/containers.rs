//! corral where agents run: in container shapes the test makes itself
//! (`corral_tests::shapes`: an unprivileged container, a container with a
//! delegated cgroup, a bubblewrap sandbox, and one test of bubblewrap
//! started from a nested cgroup; docs/containers.md). Each test
//! runs itself again inside the shape (this binary, `--exact` its own name,
//! with `CORRAL_SHAPE_INNER` naming the shape), and the inner run does the
//! work: the backend corral picks and why, the containment matrix's fixtures
//! ending with nothing left in the namespace and a bystander untouched,
//! limits, `corral mcp wrap` and `corral mcp serve`. Where the kernel
//! refuses a shape, the test says `SKIPPED: SHAPE: REASON`.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::PathBuf,
    process::{Child, Stdio},
    time::Duration,
};

use common::{corral, corral_path, private_ledger};
use corral_tests::{
    Bystander, Guard, Lines, Proc, READY_TIMEOUT, parse_ready, shapes::Shape, stat, wait_until,
};
use rustix::process::Signal;
use serde_json::{Value, json};

/// Names the shape the inner run is in.
const INNER: &str = "CORRAL_SHAPE_INNER";
/// The most one inner run may take.
const INNER_LIMIT: Duration = Duration::from_secs(120);
/// corral's bound after it is told to end a tree: the grace (`-k`) and
/// scheduling slack on a loaded 2-core machine.
const ENDED: Duration = Duration::from_secs(10);

/// Runs `body` inside `shape`: in the outer run, makes the shape and runs
/// this test (`test`, its full name) there; in the inner run, `body`.
fn in_shape(shape: Shape, test: &str, body: fn(Shape)) {
    if let Some(inner) = std::env::var_os(INNER) {
        let inner = Shape::named(&inner.to_string_lossy()).expect("a known shape");
        assert_eq!(inner, shape, "{test} ran in the wrong shape");
        body(shape);
        return;
    }
    let lane = match shape.lane(&test.replace("::", "-")) {
        Ok(lane) => lane,
        Err(reason) => {
            corral_tests::skipped(format!("{}: {reason}", shape.name()));
            return;
        }
    };
    let exe = std::env::current_exe().expect("this test binary");
    let mut child = lane
        .command(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(INNER, shape.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running this test in the shape");
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let mut guard = Guard::new(child);
    let status = guard.wait_exit(INNER_LIMIT);
    let stdout = stdout.join().expect("the stdout reader");
    let stderr = stderr.join().expect("the stderr reader");
    // The inner run's lines, `SKIPPED:` ones included, become this test's.
    print!("{stdout}");
    eprint!("{stderr}");
    let status = status.unwrap_or_else(|| panic!("{test} did not end within {INNER_LIMIT:?}"));
    assert!(status.success(), "{test} failed in the shape ({status})");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the inner run did not run {test}"
    );
    let left = lane.leftover_cgroups();
    assert!(
        left.is_empty(),
        "cgroups left in the delegated one: {left:?}"
    );
}

/// Reads a pipe to the end on a thread.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// A program of corral-tests (`fixture`, `mcp-fixture`): cargo builds every
/// binary of the workspace into one directory, beside `corral` (also in an
/// archive nextest unpacks elsewhere).
fn beside_corral(name: &str) -> PathBuf {
    let path = corral_path().with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: build it (cargo build -p corral-tests --bins)",
        path.display()
    );
    path
}

/// Every process alive in this PID namespace (zombies are not) but this
/// one, its ancestors (bubblewrap's init) and `spared`.
fn namespace_processes(spared: &[Proc]) -> Vec<(Proc, String)> {
    let mut ancestors = vec![std::process::id() as i32];
    let mut pid = ancestors[0];
    while let Some(parent) = stat(pid).map(|s| s.ppid).filter(|&p| p > 0) {
        ancestors.push(parent);
        pid = parent;
    }
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !ancestors.contains(pid))
        .filter_map(Proc::of)
        .filter(|p| p.is_alive() && !spared.contains(p))
        .map(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{}/cmdline", p.pid))
                .unwrap_or_default()
                .replace('\0', " ");
            (p, comm)
        })
        .collect()
}

/// Waits until nothing but `spared` is left in the namespace; panics with
/// what is left. The wait is for corral's watchdog helper, which corral
/// does not wait for: it exits by itself once corral has. Whatever a tree
/// left would run on (the fixtures sleep for 600 s).
fn assert_namespace_empty(spared: &[Proc], limit: Duration, context: &str) {
    let mut left = Vec::new();
    let empty = wait_until(limit, || {
        left = namespace_processes(spared);
        left.is_empty()
    });
    assert!(empty, "{context}: left in the namespace: {left:#?}");
}

/// `corral capabilities --json` inside the shape.
fn capabilities() -> Value {
    let output = corral()
        .args(["capabilities", "--json"])
        .output()
        .expect("corral capabilities");
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("capabilities JSON")
}

fn backend_detail(capabilities: &Value, backend: &str) -> (bool, String) {
    let entry = capabilities["backends"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["backend"] == backend))
        .unwrap_or_else(|| panic!("{backend} not listed in {capabilities:#}"));
    (
        entry["available"] == true,
        entry["detail"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Whether the shape hands corral a writable cgroup.
fn delegated(shape: Shape) -> bool {
    shape == Shape::Delegated
}

fn inner_capabilities(shape: Shape) {
    let capabilities = capabilities();
    println!("{}: {capabilities:#}", shape.name());
    let (cgroup, why) = backend_detail(&capabilities, "cgroup");
    if delegated(shape) {
        assert!(cgroup, "the cgroup backend is unavailable: {why}");
        assert_eq!(capabilities["auto"], "cgroup", "{capabilities:#}");
        assert_eq!(capabilities["cgroup_parent"], "/sys/fs/cgroup");
    } else {
        assert!(!cgroup, "the cgroup backend is available: {why}");
        let read_only = why.contains("/sys/fs/cgroup")
            && why.contains("Read-only file system")
            && why.contains("mounted read-only here");
        // Bubblewrap started below the root cgroup sees the bound mount's
        // root from outside its cgroup namespace (see
        // `bubblewrap_nested_refuses_a_mount_from_outside_its_cgroup_namespace`).
        let outside = shape == Shape::Bubblewrap && outside_the_namespace(&why);
        assert!(
            read_only || outside,
            "the reason does not name the read-only cgroup and the fix: {why}"
        );
        assert_eq!(capabilities["auto"], "subreaper", "{capabilities:#}");
    }
    let (subreaper, why) = backend_detail(&capabilities, "subreaper");
    assert!(subreaper, "{why}");
    assert!(
        capabilities["watchdog"]
            .as_str()
            .is_some_and(|w| w.starts_with("on")),
        "{capabilities:#}"
    );
}

/// Whether `why` says the v2 mount shows a cgroup outside this cgroup
/// namespace, with the fix.
fn outside_the_namespace(why: &str) -> bool {
    why.contains("shows the cgroup /..") && why.contains("mount -t cgroup2")
}

/// How the test ends a run: corral's own deadline is never reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// SIGTERM to corral once the tree is ready: corral ends the tree and
    /// exits 143.
    Term,
    /// The leader exits by itself; corral ends what it left and exits 0.
    LeaderExits,
    /// SIGKILL to corral once the tree is ready: the watchdog ends it.
    OwnerDeath,
}

/// `corral run -k 300ms -t 600 -- fixture ARGS` inside the shape, ended as
/// `end` says: every process it listed ready is gone within the bound,
/// nothing else is left in the namespace, and a bystander started before it
/// (outside the tree) still runs.
fn run_fixture(args: &[&str], end: End) {
    let fixture = beside_corral("fixture");
    let bystander = Bystander::spawn(&fixture);
    let mut command = corral();
    private_ledger(&mut command, "run");
    let mut child = command
        .args(["run", "-k", "300ms", "-t", "600", "--"])
        .arg(&fixture)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn corral");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    let mut guard = Guard::new(child);
    let corral_proc = Proc::of(guard.child().id() as i32).expect("corral runs");
    let ready = lines.next(READY_TIMEOUT).expect("the readiness line");
    let tree = parse_ready(&ready);
    guard.extend(tree.iter().copied());
    let expected = match end {
        End::Term => {
            assert!(corral_proc.signal(Signal::TERM));
            Some(143)
        }
        End::LeaderExits => Some(0),
        End::OwnerDeath => {
            assert!(corral_proc.signal(Signal::KILL));
            None
        }
    };
    let status = guard.wait_exit(ENDED).expect("corral ends");
    assert_eq!(status.code(), expected, "{status}");
    let context = format!("{args:?} ended by {end:?}");
    // corral's word is that the tree is gone when it exits; the watchdog's
    // that it ends the tree within the policy's bound after corral dies.
    if end == End::OwnerDeath {
        let gone = wait_until(ENDED, || tree.iter().all(|p| !p.is_alive()));
        assert!(gone, "{context}: the watchdog left {tree:?}");
    } else {
        let alive: Vec<&Proc> = tree.iter().filter(|p| p.is_alive()).collect();
        assert!(
            alive.is_empty(),
            "{context}: corral exited, leaving {alive:?}"
        );
    }
    assert_namespace_empty(&[bystander.proc()], ENDED, &context);
    assert!(bystander.is_running(), "{context}: the bystander was ended");
}

/// The limit `flag` inside the shape: refused (125) with the read-only
/// cgroup named where it is read-only; `--cpu-time` (no controller needed)
/// enforced where it is delegated, and a limit whose controller this host
/// binds to cgroup v1 refused naming that.
fn inner_limits(shape: Shape) {
    let fixture = beside_corral("fixture");
    let run = |limit: &[&str], args: &[&str]| {
        let mut command = corral();
        private_ledger(&mut command, "limits");
        command
            .arg("run")
            .args(limit)
            .args(["-t", "60", "--"])
            .arg(&fixture)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("corral run")
    };
    let spent = run(&["--cpu-time", "300ms"], &["spin", "1"]);
    let said = String::from_utf8_lossy(&spent.stderr);
    if delegated(shape) {
        assert_eq!(spent.status.code(), Some(152), "{said}");
        let procs = run(&["--max-procs", "10"], &["exit", "0"]);
        let said = String::from_utf8_lossy(&procs.stderr);
        assert_eq!(procs.status.code(), Some(125), "{said}");
        assert!(said.contains("pids controller"), "{said}");
    } else {
        assert_eq!(spent.status.code(), Some(125), "{said}");
        assert!(
            said.contains("Read-only file system") && said.contains("cpu time"),
            "{said}"
        );
    }
    assert_namespace_empty(&[], ENDED, "limits");
}

/// A JSON-RPC line to `stdin`.
fn send(stdin: &mut impl Write, message: &Value) {
    writeln!(stdin, "{message}").expect("write a frame");
    stdin.flush().expect("flush");
}

/// The next frame on `stdout` whose `id` is `id`.
fn response(stdout: &mut impl BufRead, id: u64) -> Value {
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).expect("read a frame");
        assert!(n > 0, "stdout ended before the answer to {id}");
        let value: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a frame ({e}): {line}"));
        if value["id"] == id {
            return value;
        }
    }
}

fn initialize(stdin: &mut impl Write, stdout: &mut impl BufRead) {
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "containers", "version": "0"}}}),
    );
    let answer = response(stdout, 0);
    assert!(
        answer["result"]["protocolVersion"].is_string(),
        "{answer:#}"
    );
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
}

fn call(stdin: &mut impl Write, stdout: &mut impl BufRead, tool: &str, arguments: Value) -> Value {
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}),
    );
    response(stdout, 1)
}

/// Starts `corral ARGS` with stdin and stdout piped.
fn start(
    args: &[&std::ffi::OsStr],
) -> (
    Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let mut command = corral();
    private_ledger(&mut command, "mcp");
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn corral");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    (child, stdin, stdout)
}

/// `corral mcp wrap` over the misbehaving MCP fixture (`mcp-fixture
/// --helpers`: a setsid child holding stdout, a TERM-ignorer, a
/// double-forked daemon): one call answered, then the end of stdin ends the
/// server and every helper, the report says no survivors.
fn inner_mcp_wrap(shape: Shape) {
    let scratch = corral_tests::Scratch::new("wrap");
    let (report, pids) = (scratch.path("report.json"), scratch.path("pids.json"));
    let bystander = Bystander::spawn(beside_corral("fixture"));
    let server = beside_corral("mcp-fixture");
    let args: Vec<&std::ffi::OsStr> = vec![
        "mcp".as_ref(),
        "wrap".as_ref(),
        "--kill-after".as_ref(),
        "300ms".as_ref(),
        "--report".as_ref(),
        report.as_os_str(),
        "--".as_ref(),
        server.as_os_str(),
        "--helpers".as_ref(),
        "--pids".as_ref(),
        pids.as_os_str(),
    ];
    let (child, mut stdin, mut stdout) = start(&args);
    let mut guard = Guard::new(child);
    initialize(&mut stdin, &mut stdout);
    let answer = call(
        &mut stdin,
        &mut stdout,
        "echo",
        json!({"message": "in a shape"}),
    );
    assert!(answer.to_string().contains("in a shape"), "{answer:#}");
    let written: Value =
        serde_json::from_slice(&std::fs::read(&pids).expect("the fixture's pids")).expect("JSON");
    let helpers: Vec<Proc> = written["helpers"]
        .as_array()
        .expect("helpers")
        .iter()
        .map(|h| Proc {
            pid: h["pid"].as_i64().expect("pid") as i32,
            start_time: h["start_time"].as_u64().expect("start_time"),
        })
        .collect();
    assert_eq!(helpers.len(), 3, "{written:#}");
    guard.extend(helpers.iter().copied());
    drop(stdin);
    let status = guard.wait_exit(ENDED).expect("the relay ends");
    assert_eq!(status.code(), Some(0), "{status}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("the report")).expect("JSON");
    assert_eq!(report["survivors"], json!([]), "{report:#}");
    let backend = if delegated(shape) {
        "cgroup"
    } else {
        "subreaper"
    };
    assert_eq!(report["backend"], backend, "{report:#}");
    assert_namespace_empty(&[bystander.proc()], ENDED, shape.name());
    assert!(bystander.is_running(), "the bystander was ended");
}

/// `corral mcp serve` on stdio: one `run` call of a tree that leaves a
/// setsid job holding stdout is answered when the tree is done, and the end
/// of stdin ends the server with nothing left.
fn inner_mcp_serve(shape: Shape) {
    let (child, mut stdin, mut stdout) = start(&["mcp".as_ref(), "serve".as_ref()]);
    let mut guard = Guard::new(child);
    initialize(&mut stdin, &mut stdout);
    let answer = call(
        &mut stdin,
        &mut stdout,
        "run",
        json!({"shell": "setsid sleep 600 & echo hi", "timeout": 60}),
    );
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["stdout"], "hi\n", "{answer:#}");
    assert_eq!(result["cleanup"]["survivors"], json!([]), "{answer:#}");
    drop(stdin);
    let status = guard.wait_exit(ENDED).expect("the server ends");
    assert_eq!(status.code(), Some(0), "{status}");
    assert_namespace_empty(&[], ENDED, shape.name());
}

/// The tests of one shape, each a test of its own.
macro_rules! shape_tests {
    ($module:ident, $shape:expr) => {
        mod $module {
            use super::*;

            const SHAPE: Shape = $shape;

            /// Runs `body` in the shape as the test `name` of this module.
            fn run(name: &str, body: fn(Shape)) {
                in_shape(SHAPE, &format!("{}::{name}", stringify!($module)), body);
            }

            #[test]
            fn capabilities_name_the_backend_and_why() {
                run("capabilities_name_the_backend_and_why", inner_capabilities);
            }

            #[test]
            fn a_setsid_child_is_ended() {
                run("a_setsid_child_is_ended", |_| {
                    run_fixture(&["setsid"], End::Term)
                });
            }

            #[test]
            fn a_double_forked_daemon_is_ended() {
                run("a_double_forked_daemon_is_ended", |_| {
                    run_fixture(&["daemon"], End::Term)
                });
            }

            #[test]
            fn background_jobs_are_ended() {
                run("background_jobs_are_ended", |_| {
                    run_fixture(&["fork", "4"], End::Term)
                });
            }

            #[test]
            fn term_ignorers_some_in_sessions_of_their_own_are_ended() {
                run(
                    "term_ignorers_some_in_sessions_of_their_own_are_ended",
                    |_| run_fixture(&["tree-ignore", "6"], End::Term),
                );
            }

            #[test]
            fn what_an_exiting_leader_leaves_is_ended() {
                run("what_an_exiting_leader_leaves_is_ended", |_| {
                    run_fixture(&["leave-children", "4"], End::LeaderExits)
                });
            }

            #[test]
            fn a_held_stdout_pipe_does_not_hold_corral() {
                run("a_held_stdout_pipe_does_not_hold_corral", |_| {
                    run_fixture(&["hold-stdout"], End::LeaderExits)
                });
            }

            #[test]
            fn a_fork_storm_is_ended() {
                run("a_fork_storm_is_ended", |_| {
                    run_fixture(&["fork-storm", "200"], End::Term)
                });
            }

            #[test]
            fn owner_death_the_watchdog_ends_the_tree() {
                run("owner_death_the_watchdog_ends_the_tree", |_| {
                    run_fixture(&["tree-ignore", "6"], End::OwnerDeath)
                });
            }

            #[test]
            fn limits_are_refused_or_enforced_with_the_reason() {
                run(
                    "limits_are_refused_or_enforced_with_the_reason",
                    inner_limits,
                );
            }

            #[test]
            fn mcp_wrap_ends_the_servers_helpers() {
                run("mcp_wrap_ends_the_servers_helpers", inner_mcp_wrap);
            }

            #[test]
            fn mcp_serve_answers_a_run() {
                run("mcp_serve_answers_a_run", inner_mcp_serve);
            }
        }
    };
}

shape_tests!(unprivileged_container, Shape::Unprivileged);
shape_tests!(delegated_container, Shape::Delegated);
shape_tests!(bubblewrap, Shape::Bubblewrap);

/// A bubblewrap sandbox started in a cgroup below the caller's (as a
/// desktop session's programs are), with the host's v2 mount bound writable:
/// that mount shows the hierarchy from outside the sandbox's cgroup
/// namespace (its root reads `/..`), so its mount point is not the
/// sandbox's cgroup. corral refuses the cgroup backend, naming that and the
/// fix, and the escapes still end through the subreaper; before, it took the
/// mount point for its own cgroup and made its leaves in the host's root
/// cgroup, outside the sandbox's.
#[test]
fn bubblewrap_nested_refuses_a_mount_from_outside_its_cgroup_namespace() {
    in_shape(
        Shape::BubblewrapNested,
        "bubblewrap_nested_refuses_a_mount_from_outside_its_cgroup_namespace",
        |_| {
            let capabilities = capabilities();
            let (cgroup, why) = backend_detail(&capabilities, "cgroup");
            assert!(!cgroup, "the cgroup backend is available: {why}");
            assert!(outside_the_namespace(&why), "{why}");
            assert_eq!(capabilities["auto"], "subreaper", "{capabilities:#}");
            run_fixture(&["setsid"], End::Term);
        },
    );
}
