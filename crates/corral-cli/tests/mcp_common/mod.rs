//! Helpers for the tests of `corral mcp wrap` (`mcp_wrap`, `mcp_peers`);
//! include with `mod mcp_common;`.
//!
//! Processes are named by identity ([`Proc`]: pid plus start time from
//! `/proc/PID/stat`) and signalled only through a pidfd after re-checking
//! that identity. Tests never signal anything by name. Every process a test
//! starts or learns of is killed on drop ([`Guard`]), failures included.

#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
use serde_json::Value;

/// The repository root: from this package's directory as the test runner
/// gives it at run time (cargo-nextest remaps it for an archive, as the
/// unprivileged pass uses), else as it was built.
pub fn repo() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
}

/// The `corral` binary under test (where cargo-nextest says it is, else
/// where cargo built it); the relay is `corral mcp wrap` ([`WRAP`]).
pub fn wrapper() -> PathBuf {
    std::env::var_os("NEXTEST_BIN_EXE_corral").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_corral")),
        PathBuf::from,
    )
}

/// The subcommand after [`wrapper`].
pub const WRAP: [&str; 2] = ["mcp", "wrap"];

/// The venv's Python, with the official `mcp` package.
pub fn python() -> PathBuf {
    repo().join(".venv-mcp/bin/python")
}

/// `tests/mcp-peers/NAME`.
pub fn peer(name: &str) -> PathBuf {
    repo().join("tests/mcp-peers").join(name)
}

/// server-everything's entry point (run with `node ENTRY stdio`, no npx).
pub fn server_everything() -> PathBuf {
    peer("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// Fails (never skips) when the peers are not installed.
pub fn require_peers() {
    let missing: Vec<String> = [python(), server_everything()]
        .into_iter()
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "the MCP peers are not installed (missing or not accessible: {}): \
         run scripts/install-mcp-peers",
        missing.join(", ")
    );
}

/// A scratch directory, removed on drop.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("corral-mcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Self(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A process by identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub start_time: u64,
}

/// `(state, start time)` from `/proc/PID/stat`.
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((
        fields.first()?.chars().next()?,
        fields.get(19)?.parse().ok()?,
    ))
}

impl Proc {
    /// The identity of `pid` now, if it exists.
    pub fn of(pid: i32) -> Option<Self> {
        stat(pid).map(|(_, start_time)| Self { pid, start_time })
    }

    /// From a `{"pid": N, "start_time": T}` object.
    pub fn from_json(value: &Value) -> Self {
        Self {
            pid: value["pid"].as_i64().expect("pid") as i32,
            start_time: value["start_time"].as_u64().expect("start_time"),
        }
    }

    /// Whether this very process is alive (not a zombie, not reused).
    pub fn is_running(&self) -> bool {
        stat(self.pid).is_some_and(|(state, start)| {
            start == self.start_time && !matches!(state, 'Z' | 'X' | 'x')
        })
    }

    /// Sends `signal` through a pidfd if this is still the same process.
    /// Returns whether it was sent.
    pub fn signal(&self, signal: Signal) -> bool {
        let Some(pid) = Pid::from_raw(self.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        // The pidfd pins whatever has the pid now: check that it is ours.
        if !self.is_running() {
            return false;
        }
        pidfd_send_signal(&pidfd, signal).is_ok()
    }
}

/// A child process killed and reaped on drop (our unreaped child: its pid
/// cannot have been reused).
#[derive(Debug)]
pub struct Owned(pub Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Owned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Owned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Kills, on drop, every process it was told of that is still running.
#[derive(Debug, Default)]
pub struct Guard {
    procs: Vec<Proc>,
}

impl Guard {
    pub fn watch(&mut self, procs: impl IntoIterator<Item = Proc>) {
        self.procs.extend(procs);
    }

    /// Kills what is still running now; returns what was.
    pub fn kill_running(&mut self) -> Vec<Proc> {
        let running: Vec<Proc> = self
            .procs
            .iter()
            .copied()
            .filter(Proc::is_running)
            .collect();
        for proc in &running {
            proc.signal(Signal::KILL);
        }
        running
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill_running();
    }
}

/// Polls `predicate` every 5 ms until it holds (→ true) or `limit` passes.
pub fn wait_until(limit: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if predicate() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a JSON file once it exists and parses (written atomically by the
/// relay and the fixture).
pub fn read_json(path: &Path, limit: Duration) -> Value {
    let mut value = None;
    wait_until(limit, || {
        value = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        value.is_some()
    });
    value.unwrap_or_else(|| panic!("no JSON in {} within {limit:?}", path.display()))
}

/// The fixture's helpers file: server, setsid_child, term_ignorer, daemon.
pub fn fixture_procs(pids: &Value) -> Vec<(String, Proc)> {
    ["server", "setsid_child", "term_ignorer", "daemon"]
        .iter()
        .map(|name| ((*name).to_owned(), Proc::from_json(&pids[*name])))
        .collect()
}

/// `client.py ARGS -- SERVER...` with stdout piped, stderr inherited.
pub fn client(args: &[&str], server: &[&Path], env: &[(&str, &Path)]) -> Command {
    let mut command = Command::new(python());
    command
        .arg(peer("client.py"))
        .args(args)
        .arg("--")
        .args(server);
    for (key, value) in env {
        command.env(key, value);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// Reads JSON lines from a child's stdout on a thread.
pub struct Lines(mpsc::Receiver<Value>);

impl Lines {
    pub fn new(stdout: ChildStdout) -> Self {
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| Value::String(format!("not JSON: {line}")));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        Self(receiver)
    }

    /// The next line, or `None` at end of output or after `limit`.
    pub fn next(&self, limit: Duration) -> Option<Value> {
        self.0.recv_timeout(limit).ok()
    }

    /// Lines until the one whose `event` is `event`; panics if it does not
    /// come within `limit`.
    pub fn until(&self, event: &str, limit: Duration) -> Value {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(value) if value["event"] == event => return value,
                Some(_) => {}
                None => panic!("no {event:?} line from the client within {limit:?}"),
            }
        }
    }
}

/// The report names no survivors, and its cgroup (if any) is gone.
pub fn assert_clean(report: &Value) {
    assert_eq!(
        report["survivors"],
        Value::Array(vec![]),
        "survivors in {report:#}"
    );
    if let Some(cgroup) = report["cgroup"].as_str() {
        assert!(
            !Path::new(cgroup).exists(),
            "the cgroup {cgroup} was left behind"
        );
    }
}
