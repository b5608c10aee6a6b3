//! What each MCP client leaves behind: five stdio clients, one leaky server,
//! measured in the same run.
//!
//! The server is `tests/mcp-peers/fixture_server.py` (the official Python
//! SDK's `MCPServer`) run by `.venv-mcp/bin/python`, with
//! `CORRAL_MCP_FIXTURE_PIDS=FILE`: before it serves it starts three helpers
//! that a client signalling only the server (or its process group) misses
//! (a `setsid` child holding the server's stdout, a `SIGTERM` ignorer, a
//! double-forked daemon) and writes the identities {pid, start time} of
//! itself and the three to FILE.
//!
//! Each client connects, lists the tools, calls `echo`, and closes the
//! connection the normal way:
//!
//! 1. the official Python SDK (`tests/mcp-peers/client.py`, its own
//!    process; `async with Client(...)` then out);
//! 2. the official TypeScript SDK (`tests/mcp-peers/client.mjs` under
//!    `node`: `Client` + `StdioClientTransport`, `client.close()`);
//! 3. `rmcp` with its own `TokioChildProcess`, `client.cancel()`;
//! 4. `rmcp` with corral's `CorralProcess`, `client.cancel()`;
//! 5. corral's `Manager`: `connect`, `list_tools`, `call_tool`,
//!    `disconnect`.
//!
//! corral's rows give the tree a 500 ms grace from `SIGTERM` to `SIGKILL`
//! and keep the default close grace (2 s, as the Python SDK's). The close is
//! timed by the client itself (the SDKs' `close_seconds` line, the awaited
//! call in process). When it has returned (for 1 and 2: when the client
//! process has exited) the four processes are checked by identity through
//! `/proc/PID/stat` (same start time, not a zombie), and again after a
//! settle of 3 s, longer than any SDK's own shutdown (the TypeScript SDK's
//! is at most 4 s *inside* its `close`, which is awaited). Then every
//! survivor is killed by identity (pidfd, start time re-checked). Clients
//! run round-robin, the order rotating every round; no warm-up round.
//!
//! The bench fails (exit 1) if a client could not do its part, or if
//! either corral row left anything alive after the settle.
//!
//! ```text
//! cargo bench -p corral-tests --bench mcp_clients               # 5 rounds
//! cargo bench -p corral-tests --bench mcp_clients -- --quick    # 1 round
//! ```
//! Results: `mcp_clients.json` in the results directory (`--results DIR`,
//! `CORRAL_BENCH_RESULTS`, else `docs/bench/`). The peers are installed by
//! `scripts/install-mcp-peers`; without them the bench fails.

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use corral_mcp::client::{CallOptions, ConnectOptions, Manager, Server, rmcp::CorralProcess};
use corral_tests::{
    Guard, Proc, Scratch,
    bench::{Knobs, machine_line, median, ms, ms_f64, p90, write_results},
    wait_until_async,
};
use rmcp::{ServiceExt as _, model::CallToolRequestParams};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The variable that makes the fixture start its helpers.
const PIDS_ENV: &str = "CORRAL_MCP_FIXTURE_PIDS";
/// The fixture's processes, in the order of its file.
const NAMES: [&str; 4] = ["server", "setsid_child", "term_ignorer", "daemon"];
/// How long after the close the processes are checked the second time.
const SETTLE: Duration = Duration::from_secs(3);
/// corral's grace from `SIGTERM` to `SIGKILL` (the ignorer needs the kill).
const GRACE: Duration = Duration::from_millis(500);
/// Bounds one step (a connect, a call, a close) in process.
const STEP: Duration = Duration::from_secs(30);
/// Bounds one client process, from its start to its exit.
const CLIENT_BOUND: Duration = Duration::from_secs(60);
/// How long the fixture's file may take to appear.
const PIDS_BOUND: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    PythonSdk,
    TypeScriptSdk,
    RmcpChildProcess,
    RmcpCorralProcess,
    CorralManager,
}

const CLIENTS: [Client; 5] = [
    Client::PythonSdk,
    Client::TypeScriptSdk,
    Client::RmcpChildProcess,
    Client::RmcpCorralProcess,
    Client::CorralManager,
];

impl Client {
    fn label(self) -> &'static str {
        match self {
            Client::PythonSdk => "Python SDK (mcp) stdio client",
            Client::TypeScriptSdk => "TypeScript SDK StdioClientTransport",
            Client::RmcpChildProcess => "rmcp TokioChildProcess",
            Client::RmcpCorralProcess => "rmcp + corral CorralProcess",
            Client::CorralManager => "corral Manager",
        }
    }

    fn is_corral(self) -> bool {
        matches!(self, Client::RmcpCorralProcess | Client::CorralManager)
    }
}

/// One measured run.
#[derive(Debug, Clone)]
struct Sample {
    close: Duration,
    alive_at_close: usize,
    /// The names of what was still alive after the settle.
    left: Vec<&'static str>,
}

/// Where the peers are.
struct Peers {
    python: PathBuf,
    dir: PathBuf,
}

impl Peers {
    fn find() -> Result<Self, String> {
        let repo = corral_tests::manifest_dir!().join("../..");
        let peers = Self {
            python: repo.join(".venv-mcp/bin/python"),
            dir: repo.join("tests/mcp-peers"),
        };
        let needed = [
            peers.python.clone(),
            peers.file("fixture_server.py"),
            peers.file("client.py"),
            peers.file("client.mjs"),
            peers.file("node_modules/@modelcontextprotocol/sdk/package.json"),
        ];
        let missing: Vec<String> = needed
            .iter()
            .filter(|p| !p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(peers)
        } else {
            Err(format!(
                "the MCP peers are not installed (missing: {}): run scripts/install-mcp-peers",
                missing.join(", ")
            ))
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn server(&self) -> PathBuf {
        self.file("fixture_server.py")
    }
}

/// The fixture's four processes, by identity, once its file is complete
/// (it is renamed into place); `None` if it never appeared.
async fn fixture_procs(pids: &Path, bound: Duration) -> Option<Vec<(&'static str, Proc)>> {
    let mut value = None;
    wait_until_async(bound, || {
        value = std::fs::read(pids)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        value.is_some()
    })
    .await;
    let value = value?;
    NAMES
        .into_iter()
        .map(|name| {
            let proc = Proc {
                pid: i32::try_from(value[name]["pid"].as_i64()?).ok()?,
                start_time: value[name]["start_time"].as_u64()?,
            };
            Some((name, proc))
        })
        .collect()
}

fn alive(procs: &[(&'static str, Proc)]) -> Vec<&'static str> {
    procs
        .iter()
        .filter(|(_, proc)| proc.is_alive())
        .map(|(name, _)| *name)
        .collect()
}

async fn within<T, E: std::fmt::Display>(
    what: &str,
    future: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    tokio::time::timeout(STEP, future)
        .await
        .map_err(|_| format!("{what} took longer than {STEP:?}"))?
        .map_err(|e| format!("{what}: {e}"))
}

fn echo_arguments() -> serde_json::Map<String, Value> {
    let value = serde_json::json!({ "message": "hello through corral" });
    value.as_object().cloned().unwrap_or_default()
}

fn check_echo(answer: &str) -> Result<(), String> {
    if answer.contains("Echo: hello through corral") {
        Ok(())
    } else {
        Err(format!("echo answered {answer}"))
    }
}

/// A client in its own process (an SDK's), which prints `connected`, `echo`
/// and `closed` lines; returns the close time it measured. Its standard
/// error (and the server's, inherited) goes to `stderr`.
async fn external(
    program: &Path,
    args: &[PathBuf],
    pids: &Path,
    stderr: &Path,
) -> Result<Duration, String> {
    let log = std::fs::File::create(stderr).map_err(|e| format!("creating {stderr:?}: {e}"))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env(PIDS_ENV, pids)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawning {}: {e}", program.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let talk = async {
        let mut lines = BufReader::new(stdout).lines();
        let mut events: HashMap<String, Value> = HashMap::new();
        while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if let Some(name) = event["event"].as_str() {
                events.insert(name.to_owned(), event.clone());
            }
        }
        let status = child.wait().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((events, status))
    };
    let (events, status) = tokio::time::timeout(CLIENT_BOUND, talk)
        .await
        .map_err(|_| format!("the client ran longer than {CLIENT_BOUND:?}"))??;
    let tail = || {
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    };
    if !status.success() {
        return Err(format!("the client exited with {status}: {}", tail()));
    }
    let tools = events.get("connected").map(|e| e["tools"].to_string());
    if !tools.is_some_and(|t| t.contains("\"echo\"")) {
        return Err(format!("no tools listed with echo: {}", tail()));
    }
    check_echo(&events.get("echo").map_or(String::new(), |e| e.to_string()))?;
    let seconds = events
        .get("closed")
        .and_then(|e| e["close_seconds"].as_f64())
        .ok_or_else(|| format!("no closed line: {}", tail()))?;
    Ok(Duration::from_secs_f64(seconds))
}

/// An rmcp client over `transport`: connect, list, echo, `cancel`; returns
/// how long `cancel` took.
async fn rmcp_client<T, E, A>(transport: T) -> Result<Duration, String>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = within("the handshake", ().serve(transport)).await?;
    let tools = within("tools/list", client.list_all_tools()).await?;
    if !tools.iter().any(|tool| tool.name == "echo") {
        return Err("no echo tool listed".to_owned());
    }
    let params = CallToolRequestParams::new("echo").with_arguments(echo_arguments());
    let result = within("tools/call echo", client.call_tool(params)).await?;
    check_echo(&serde_json::to_string(&result).unwrap_or_default())?;
    let closing = Instant::now();
    within("cancel", client.cancel()).await?;
    Ok(closing.elapsed())
}

/// The fixture as a corral command.
fn corral_fixture(peers: &Peers, pids: &Path) -> corral::Command {
    let mut command = corral::Command::new(&peers.python);
    command.arg(peers.server()).env(PIDS_ENV, pids).grace(GRACE);
    command
}

/// Runs `client` once against a fresh fixture; returns the close time.
async fn drive(client: Client, peers: &Peers, dir: &Scratch) -> Result<Duration, String> {
    let pids = dir.path("pids.json");
    let stderr = dir.path("stderr.log");
    match client {
        Client::PythonSdk => {
            let args = [
                peers.file("client.py"),
                PathBuf::from("--"),
                peers.python.clone(),
                peers.server(),
            ];
            external(&peers.python, &args, &pids, &stderr).await
        }
        Client::TypeScriptSdk => {
            let args = [
                peers.file("client.mjs"),
                PathBuf::from("--"),
                peers.python.clone(),
                peers.server(),
            ];
            external(Path::new("node"), &args, &pids, &stderr).await
        }
        Client::RmcpChildProcess => {
            let mut command = tokio::process::Command::new(&peers.python);
            command.arg(peers.server()).env(PIDS_ENV, &pids);
            let log =
                std::fs::File::create(&stderr).map_err(|e| format!("creating {stderr:?}: {e}"))?;
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("spawning the fixture: {e}"))?;
            rmcp_client(transport).await
        }
        Client::RmcpCorralProcess => {
            let (transport, _) = CorralProcess::builder(corral_fixture(peers, &pids))
                .stderr(corral::Stdio::Null)
                .spawn()
                .map_err(|e| format!("spawning the fixture: {e}"))?;
            rmcp_client(transport).await
        }
        Client::CorralManager => {
            let manager = Manager::new();
            let server = Server::Stdio(corral_fixture(peers, &pids));
            within(
                "connect",
                manager.connect("fixture", server, ConnectOptions::default()),
            )
            .await?;
            let options = CallOptions::timeout(STEP);
            let tools = within("tools/list", manager.list_tools("fixture", &options)).await?;
            if !tools.iter().any(|tool| tool.name == "echo") {
                return Err("no echo tool listed".to_owned());
            }
            let result = within(
                "tools/call echo",
                manager.call_tool("fixture", "echo", Some(echo_arguments()), &options),
            )
            .await?;
            check_echo(&serde_json::to_string(&result).unwrap_or_default())?;
            let closing = Instant::now();
            within("disconnect", manager.disconnect("fixture")).await?;
            Ok(closing.elapsed())
        }
    }
}

/// One run: drive the client, count the fixture's processes alive at the
/// close and after the settle, then kill every survivor by identity.
async fn one(client: Client, peers: &Peers, round: usize) -> Result<Sample, String> {
    let dir = Scratch::new(&format!("mcp-clients-{round}-{client:?}"));
    let driven = drive(client, peers, &dir).await;
    // The file is there before the handshake; after a failure, look once.
    let bound = if driven.is_ok() {
        PIDS_BOUND
    } else {
        Duration::ZERO
    };
    let procs = fixture_procs(&dir.path("pids.json"), bound).await;
    // Kills, on every return below, whatever of the tree still runs.
    let _guard = Guard::of(procs.iter().flatten().map(|(_, proc)| *proc));
    let close = driven?;
    let procs = procs.ok_or("the fixture wrote no pids file")?;
    let alive_at_close = alive(&procs).len();
    tokio::time::sleep(SETTLE).await;
    Ok(Sample {
        close,
        alive_at_close,
        left: alive(&procs),
    })
}

fn main() -> ExitCode {
    let knobs = Knobs::from_env();
    corral_tests::bench::run_checked(run(&knobs))
}

async fn run(knobs: &Knobs) -> ExitCode {
    let rounds = knobs.rounds_or(5, 1);
    println!(
        "mcp_clients: connect, list, echo, close; {rounds} interleaved rounds; \
         survivors of 4 (server + 3 escaping helpers) checked {} s after the close",
        SETTLE.as_secs()
    );
    println!("{}", machine_line());
    let peers = match Peers::find() {
        Ok(peers) => peers,
        Err(error) => {
            println!("failures: 1\n  {error}");
            return ExitCode::FAILURE;
        }
    };

    let mut samples: HashMap<Client, Vec<Sample>> = HashMap::new();
    let mut failures = Vec::new();
    for round in 0..rounds {
        for j in 0..CLIENTS.len() {
            let client = CLIENTS[(round + j) % CLIENTS.len()];
            match one(client, &peers, round).await {
                Ok(sample) => {
                    eprintln!(
                        "  round {round} {:<36} close {:>9} ms  alive@close {}/4  alive@+{}s {}/4 {:?}",
                        client.label(),
                        ms(sample.close),
                        sample.alive_at_close,
                        SETTLE.as_secs(),
                        sample.left.len(),
                        sample.left,
                    );
                    samples.entry(client).or_default().push(sample);
                }
                Err(error) => {
                    eprintln!("  round {round} {}: FAILED: {error}", client.label());
                    failures.push(format!("{}: {error}", client.label()));
                }
            }
        }
    }

    println!();
    println!(
        "| client | runs | survivors of 4 after {} s (min-max) | alive at close (max) | left running | close median (ms) | close p90 (ms) |",
        SETTLE.as_secs()
    );
    println!("|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for client in CLIENTS {
        let Some(runs) = samples.get(&client) else {
            continue;
        };
        let closes: Vec<Duration> = runs.iter().map(|s| s.close).collect();
        let survivors = runs.iter().map(|s| s.left.len());
        let (min, max) = (
            survivors.clone().min().unwrap_or(0),
            survivors.max().unwrap_or(0),
        );
        let at_close = runs.iter().map(|s| s.alive_at_close).max().unwrap_or(0);
        let left: BTreeSet<&str> = runs.iter().flat_map(|s| s.left.iter().copied()).collect();
        let left: Vec<&str> = left.into_iter().collect();
        println!(
            "| {} | {} | {min}-{max} | {at_close} | {} | {} | {} |",
            client.label(),
            runs.len(),
            if left.is_empty() {
                "-".to_owned()
            } else {
                left.join(", ")
            },
            ms(median(&closes)),
            ms(p90(&closes)),
        );
        if client.is_corral() && max > 0 {
            failures.push(format!(
                "{}: left {max} of 4 running ({})",
                client.label(),
                left.join(", ")
            ));
        }
        rows.push(serde_json::json!({
            "contender": client.label(),
            "corral": client.is_corral(),
            "samples": runs.len(),
            "of": NAMES.len(),
            "settle_secs": SETTLE.as_secs_f64(),
            "survivors_min": min,
            "survivors_max": max,
            "alive_at_close_max": at_close,
            "left": left,
            "close_median_ms": ms_f64(median(&closes)),
            "close_p90_ms": ms_f64(p90(&closes)),
        }));
    }
    println!();
    println!(
        "survivors: the fixture's server and helpers alive (same start time, not a zombie) \
         {} s after the close returned; killed by identity after each run",
        SETTLE.as_secs()
    );
    let written = write_results("mcp_clients", rows);
    if failures.is_empty() && written.is_ok() {
        println!("failures: none");
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failures.len());
        for failure in failures {
            println!("  {failure}");
        }
        ExitCode::FAILURE
    }
}
