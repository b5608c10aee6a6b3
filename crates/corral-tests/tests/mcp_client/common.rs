//! What the client runtime's tests share: the fixture server as a corral
//! command, the identities it records, and the postcondition of a teardown
//! (the runtime's tasks back at their baseline, every process of the
//! server's tree gone, by identity).

use std::{path::PathBuf, time::Duration};

use corral_mcp::client::{ConnectOptions, live_tasks};
use corral_tests::{Guard, Proc, Scratch};
use serde_json::Value;

/// How long a tree may take to be gone after a teardown returned (it is
/// gone when the teardown returns; this bounds a wrong answer).
pub const GONE: Duration = Duration::from_secs(10);

/// The fixture binary.
pub fn fixture() -> PathBuf {
    corral_tests::bin_path!("mcp-fixture")
}

/// A scratch directory and the files the fixture writes there.
pub struct Files {
    pub dir: Scratch,
}

impl Files {
    pub fn new(name: &str) -> Self {
        Self {
            dir: Scratch::new(name),
        }
    }

    pub fn pids(&self) -> PathBuf {
        self.dir.path("pids.json")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.path("log.jsonl")
    }

    pub fn spawns(&self) -> PathBuf {
        self.dir.path("spawns")
    }

    /// The fixture with `--pids`, `--log` and `--spawn-log` into this
    /// directory, and `args`.
    pub fn command(&self, args: &[&str]) -> corral::Command {
        let mut command = corral::Command::new(fixture());
        command
            .backend(corral_tests::containing_backend())
            .arg("--pids")
            .arg(self.pids())
            .arg("--log")
            .arg(self.log())
            .arg("--spawn-log")
            .arg(self.spawns())
            .args(args)
            .grace(Duration::from_millis(500))
            .final_bound(Duration::from_secs(2));
        command
    }

    /// The server and its helpers, once the pids file exists (the fixture
    /// writes it before it reads its first line).
    pub fn tree(&self) -> Vec<Proc> {
        assert!(
            corral_tests::wait_until(Duration::from_secs(10), || self.pids().exists()),
            "the fixture wrote no pids file"
        );
        let text = std::fs::read_to_string(self.pids()).expect("reading the pids file");
        let json: Value = serde_json::from_str(&text).expect("the pids file is JSON");
        let proc_of = |value: &Value| Proc {
            pid: i32::try_from(value["pid"].as_i64().expect("pid")).expect("a pid"),
            start_time: value["start_time"].as_u64().expect("start_time"),
        };
        let mut procs = vec![proc_of(&json["server"])];
        procs.extend(
            json["helpers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(proc_of),
        );
        procs
    }

    /// Servers started so far (one line each in the spawn log).
    pub fn spawn_count(&self) -> usize {
        self.spawned().len()
    }

    /// Every server started so far, by identity.
    pub fn spawned(&self) -> Vec<Proc> {
        std::fs::read_to_string(self.spawns())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (pid, start) = line.trim().split_once(' ')?;
                Some(Proc {
                    pid: pid.parse().ok()?,
                    start_time: start.parse().ok()?,
                })
            })
            .collect()
    }

    /// The frames the fixture received, as JSON.
    pub fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

/// Guards `procs` (killed by identity if the test fails) and asserts none
/// of them runs now: the teardown returned, so the tree must be gone.
pub fn assert_gone_now(procs: &[Proc]) {
    let alive: Vec<&Proc> = procs.iter().filter(|p| p.is_alive()).collect();
    let _guard = Guard::of(procs.iter().copied());
    assert!(
        alive.is_empty(),
        "still running after the teardown returned: {alive:?}"
    );
}

/// Asserts the processes are gone within [`GONE`] (for paths where nothing
/// returns at the end of the teardown: a dropped handle).
pub async fn assert_gone_soon(procs: &[Proc]) {
    let _guard = Guard::of(procs.iter().copied());
    let gone = corral_tests::wait_until_async(GONE, || procs.iter().all(|p| !p.is_alive())).await;
    let alive: Vec<&Proc> = procs.iter().filter(|p| p.is_alive()).collect();
    assert!(
        gone,
        "still running {GONE:?} after the connection was dropped: {alive:?}"
    );
}

/// Short deadlines so failure paths end quickly.
pub fn quick() -> ConnectOptions {
    let mut options = ConnectOptions::default();
    options.discover_timeout = Duration::from_secs(5);
    options.initialize_timeout = Duration::from_secs(10);
    options.close_grace = Duration::from_millis(300);
    options
}

/// The runtime's live tasks in this whole test process (nextest runs each
/// test in a process of its own).
pub fn tasks() -> usize {
    live_tasks()
}

/// `{"message": text}` as tool arguments.
pub fn message(text: &str) -> Option<serde_json::Map<String, Value>> {
    Some(serde_json::Map::from_iter([(
        "message".to_owned(),
        Value::from(text),
    )]))
}

/// `{"seconds": secs}` as tool arguments.
pub fn seconds(secs: f64) -> Option<serde_json::Map<String, Value>> {
    Some(serde_json::Map::from_iter([(
        "seconds".to_owned(),
        Value::from(secs),
    )]))
}

/// `manager.shutdown()`, bounded: a shutdown that never returns fails the
/// test in 30 s instead of hanging it.
pub async fn shutdown(
    manager: &corral_mcp::client::Manager,
) -> Vec<(String, Option<std::sync::Arc<corral_mcp::client::Teardown>>)> {
    tokio::time::timeout(Duration::from_secs(30), manager.shutdown())
        .await
        .expect("the manager's shutdown returned within 30 s")
}

/// A fixture serving streamable HTTP, killed by identity when dropped.
pub struct Served {
    pub url: String,
    _guard: Guard,
}

/// Starts `mcp-fixture --http 127.0.0.1:0 --log FILE ARGS` and waits for
/// its `listening` line.
pub fn serve_http(files: &Files, args: &[&str]) -> Served {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(fixture())
        .args(["--http", "127.0.0.1:0", "--log"])
        .arg(files.log())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        // Its notes go to the log too.
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawning mcp-fixture --http");
    let stdout = child.stdout.take().expect("piped stdout");
    let guard = Guard::new(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("reading the listening line");
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("not a listening line: {line:?}"))
        .to_owned();
    Served { url, _guard: guard }
}
