//! What the tests of `corral mcp wrap` (`mcp_wrap`, `mcp_peers`) share
//! beyond the `corral_tests` library: the wrapper, the MCP peers, and the
//! JSON the fixture and the client write. Include with `mod mcp_common;`.

#![allow(dead_code)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{ChildStdout, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use corral_tests::{Lines, Owned, Proc, wait_until};
use serde_json::Value;

/// The repository root: from this package's directory as the test runner
/// gives it at run time (cargo-nextest remaps it for an archive, as the
/// unprivileged pass uses), else as it was built.
pub fn repo() -> PathBuf {
    corral_tests::manifest_dir!().join("../..")
}

/// The `corral` binary under test (where cargo-nextest says it is, else
/// where cargo built it); the relay is `corral mcp wrap` ([`WRAP`]).
pub fn wrapper() -> PathBuf {
    corral_tests::bin_path!("corral")
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

/// A process from a `{"pid": N, "start_time": T}` object.
pub fn proc_from_json(value: &Value) -> Proc {
    Proc {
        pid: value["pid"].as_i64().expect("pid") as i32,
        start_time: value["start_time"].as_u64().expect("start_time"),
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
        .map(|name| ((*name).to_owned(), proc_from_json(&pids[*name])))
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

/// Reads JSON lines from a child's stdout on a thread (a line that is not
/// JSON becomes the string `not JSON: LINE`).
pub fn json_lines(stdout: ChildStdout) -> Lines<Value> {
    Lines::parsed(stdout, |line| {
        serde_json::from_str(&line).unwrap_or_else(|_| Value::String(format!("not JSON: {line}")))
    })
}

/// Waiting for a client's event lines.
pub trait Events {
    /// Lines until the one whose `event` is `event`; panics if it does not
    /// come within `limit`.
    fn until(&self, event: &str, limit: Duration) -> Value;
}

impl Events for Lines<Value> {
    fn until(&self, event: &str, limit: Duration) -> Value {
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

/// A `corral mcp serve --http 127.0.0.1:0 EXTRA...` that is listening, with
/// the URL and the random bearer token it printed.
pub struct HttpServer {
    pub child: Owned,
    pub url: String,
    pub token: String,
    _stderr: corral_tests::Lines,
}

impl HttpServer {
    /// How long the server gets to say it listens, and to exit after `stop`.
    const LIMIT: Duration = Duration::from_secs(60);

    pub fn start(extra: &[&str]) -> Self {
        Self::start_with_env(extra, &[])
    }

    pub fn start_with_env(extra: &[&str], env: &[(&str, &Path)]) -> Self {
        let mut child = Owned(
            Command::new(wrapper())
                .args(["mcp", "serve", "--http", "127.0.0.1:0"])
                .args(extra)
                .envs(env.iter().map(|(key, value)| (*key, *value)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting corral mcp serve"),
        );
        let stderr = corral_tests::Lines::new(child.stderr.take().expect("stderr"));
        let mut token = String::new();
        let url = loop {
            let line = stderr
                .next(Self::LIMIT)
                .unwrap_or_else(|| panic!("corral mcp serve said no 'listening on' line"));
            if let Some(t) = line.strip_prefix("corral mcp serve: bearer token: ") {
                token = t.to_owned();
            }
            if let Some(url) = line.strip_prefix("corral mcp serve: listening on ") {
                break url.to_owned();
            }
        };
        Self {
            child,
            url,
            token,
            _stderr: stderr,
        }
    }

    /// `host:port` of the listener.
    pub fn authority(&self) -> &str {
        let rest = self.url.strip_prefix("http://").expect("http URL");
        rest.split('/').next().expect("authority")
    }

    /// The listener's address.
    pub fn address(&self) -> SocketAddr {
        self.authority().parse().expect("an address")
    }

    /// SIGTERM, then its exit status.
    pub fn stop(mut self) -> ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .expect("SIGTERM to our child");
        let mut status = None;
        wait_until(Self::LIMIT, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        status.unwrap_or_else(|| panic!("no exit within {:?}", Self::LIMIT))
    }
}
