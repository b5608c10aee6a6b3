//! One command, from a checked request to its result: spawned as an owned
//! tree, its stdin written and closed, its output read while it runs (kept
//! head and tail, and in a ring for a background reader), progress sent,
//! and the result built once the *tree* is done (not when its pipes close:
//! whatever the leader leaves behind is ended, and a survivor holding a
//! pipe only cuts the final read short).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use corral::{BackendChoice, Finished, Leftovers, Outcome, Stdio};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{
    Progress, ProgressSink,
    output::{HeadTail, Ring, last_lines},
    request::Program,
    roots::Cwd,
};

/// How long the output is still read once the tree is gone.
const DRAIN: Duration = Duration::from_millis(250);
/// At most one progress notification this often.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);
/// What a background run keeps of each stream for `read_run`.
pub(crate) const RING: usize = 1 << 20;
/// The note on a result whose effects are unknown.
pub(crate) const EFFECTS_NOTE: &str = "the command was stopped before it finished: what it did \
     outside this machine (requests sent, files written elsewhere) is not undone, and nothing \
     was retried";

/// A run as the server decided it: the request with every limit applied.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub program: Program,
    /// The directory, opened and checked: the run enters it by descriptor.
    pub cwd: Cwd,
    pub env: Vec<(String, String)>,
    pub stdin: String,
    pub timeout: Duration,
    pub kill_after: Duration,
    pub final_bound: Duration,
    pub max_output: usize,
    pub backend: BackendChoice,
    /// The user every run takes on (`serve --user`).
    pub user: Option<u32>,
    /// The primary group every run takes on.
    pub group: Option<u32>,
    /// Limits on the run's whole tree.
    pub tree_limits: corral::Limits,
    /// The limits that applied, for the result (`limits`).
    pub limits: Value,
}

impl Plan {
    /// The command line for humans and the audit log.
    pub(crate) fn describe(&self) -> Value {
        match &self.program {
            Program::Argv(argv) => json!({"argv": argv}),
            Program::Shell(shell) => json!({"shell": shell}),
        }
    }
}

/// What is kept of a run's output while it runs.
#[derive(Debug)]
pub(crate) struct Kept {
    pub stdout: HeadTail,
    pub stderr: HeadTail,
    pub stdout_ring: Ring,
    pub stderr_ring: Ring,
    /// The latest bytes of either stream, for progress messages.
    recent: Ring,
}

impl Kept {
    pub(crate) fn new(max_output: usize, ring: usize) -> Self {
        Self {
            stdout: HeadTail::new(max_output),
            stderr: HeadTail::new(max_output),
            stdout_ring: Ring::new(ring),
            stderr_ring: Ring::new(ring),
            recent: Ring::new(4096),
        }
    }

    fn push(&mut self, stream: Stream, data: &[u8]) {
        match stream {
            Stream::Stdout => {
                self.stdout.push(data);
                self.stdout_ring.push(data);
            }
            Stream::Stderr => {
                self.stderr.push(data);
                self.stderr_ring.push(data);
            }
        }
        self.recent.push(data);
    }

    fn bytes(&self) -> u64 {
        self.stdout.total() + self.stderr.total()
    }
}

#[derive(Debug, Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Locks, surviving a poisoned mutex (a panicked reader loses nothing kept).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How a run ended, as the tool reports it.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    /// The structured result.
    pub result: Value,
    /// The short human-readable version.
    pub text: String,
    /// Whether corral itself failed (the command never ran): a tool error.
    pub failed: bool,
}

/// Runs `plan` to its end (or `cancel`'s), keeping output in `kept`.
pub(crate) async fn execute(
    plan: &Plan,
    cancel: CancellationToken,
    kept: Arc<Mutex<Kept>>,
    progress: Option<ProgressSink>,
) -> Ended {
    let started = Instant::now();
    let (program, args): (String, Vec<String>) = match &plan.program {
        Program::Argv(argv) => match argv.split_first() {
            Some((program, args)) => (program.clone(), args.to_vec()),
            None => return spawn_failed(plan, "argv is empty".into(), started),
        },
        Program::Shell(shell) => ("/bin/sh".into(), vec!["-c".into(), shell.clone()]),
    };
    let mut command = corral::Command::new(&program);
    command
        .args(&args)
        .current_dir_fd(plan.cwd.dir())
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .stderr(Stdio::Piped)
        .timeout(plan.timeout)
        .grace(plan.kill_after)
        .final_bound(plan.final_bound)
        .backend(plan.backend)
        .limits(plan.tree_limits)
        // What the leader leaves behind (a `setsid` job holding stdout) is
        // ended when it exits: the answer waits for the tree, not the pipe.
        .leftovers(Leftovers::Terminate)
        // A client's command never reaches the server's terminal (reading
        // it, or pushing input into it with TIOCSTI as another user).
        .new_session(true)
        .cancel_on(cancel);
    for (key, value) in &plan.env {
        command.env(key, value);
    }
    if let Some(uid) = plan.user {
        command.user(uid);
    }
    if let Some(gid) = plan.group {
        command.group(gid);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return spawn_failed(plan, format!("{program}: {error}"), started),
    };
    let stdin = child.take_stdin();
    let stdout = child.take_stdout();
    let stderr = child.take_stderr();
    let feed = async {
        if let Some(mut stdin) = stdin {
            // A command that does not read its input must not hold the run:
            // a write error (it exited) is fine, and dropping closes it.
            let _ = stdin.write_all(plan.stdin.as_bytes()).await;
        }
    };
    let read_out = read(stdout, Stream::Stdout, &kept);
    let read_err = read(stderr, Stream::Stderr, &kept);
    let report = report_progress(&kept, progress);
    let mut readers = std::pin::pin!(async { tokio::join!(read_out, read_err) });
    let waiting = child.wait();
    let mut read_all = false;
    let finished = {
        let mut waiting = std::pin::pin!(waiting);
        let mut feed = std::pin::pin!(feed);
        let mut report = std::pin::pin!(report);
        let mut fed = false;
        loop {
            tokio::select! {
                finished = &mut waiting => break finished,
                () = &mut feed, if !fed => fed = true,
                _ = &mut readers, if !read_all => read_all = true,
                () = &mut report => {}
            }
        }
    };
    // The tree is gone: every writer of the pipes is gone, so they end now
    // unless a survivor holds one; bounded either way.
    if !read_all && tokio::time::timeout(DRAIN, &mut readers).await.is_err() {
        tracing::debug!("a survivor holds the run's output; the read was cut short");
    }
    match finished {
        Ok(finished) => ended(plan, &finished, &kept, started.elapsed()),
        Err(error) => spawn_failed(
            plan,
            format!("supervising the command failed: {error}"),
            started,
        ),
    }
}

/// Reads `stream` into `kept` until it ends.
async fn read<R: AsyncRead + Unpin>(stream: Option<R>, which: Stream, kept: &Mutex<Kept>) {
    let Some(mut stream) = stream else { return };
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(read) => lock(kept).push(which, &buf[..read]),
        }
    }
}

/// Sends the latest output lines every [`PROGRESS_EVERY`] while it changes.
async fn report_progress(kept: &Mutex<Kept>, progress: Option<ProgressSink>) {
    let Some(sink) = progress else {
        return std::future::pending().await;
    };
    let mut sent = 0u64;
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let (bytes, message) = {
            let kept = lock(kept);
            let bytes = kept.bytes();
            let recent = kept.recent.read(0, usize::MAX);
            (bytes, last_lines(&recent.data, 5, 1024))
        };
        if bytes > sent {
            sent = bytes;
            sink(Progress { bytes, message });
        }
    }
}

/// The result of a command that never ran.
fn spawn_failed(plan: &Plan, why: String, started: Instant) -> Ended {
    let result = json!({
        "outcome": "spawn_failed",
        "error": why,
        "command": plan.describe(),
        "cwd": plan.cwd,
        "duration_ms": millis(started.elapsed()),
        "effects_unknown": false,
    });
    Ended {
        text: format!("the command could not be started: {why}"),
        result,
        failed: true,
    }
}

/// How `ended_by` names a limit.
fn limit_name(limit: corral::Limit) -> &'static str {
    match limit {
        corral::Limit::Memory => "max_memory",
        corral::Limit::Processes => "max_processes",
        _ => "cpu_time",
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The result of a run that ran.
fn ended(plan: &Plan, finished: &Finished, kept: &Mutex<Kept>, took: Duration) -> Ended {
    let kept = lock(kept);
    let report = &finished.report;
    let (outcome, code, signal, ended_by) = match finished.outcome {
        Outcome::Exited { code } => ("exited", Some(code), None, None),
        Outcome::Signaled { signal } => ("signaled", None, Some(signal.to_string()), None),
        Outcome::TimedOut => ("timed_out", None, None, Some("timeout")),
        Outcome::Cancelled => ("cancelled", None, None, Some("cancel")),
        Outcome::LimitExceeded { limit } => ("limit_exceeded", None, None, Some(limit_name(limit))),
        // A kind of ending added to corral later: its effects are unknown.
        _ => ("cancelled", None, None, Some("cancel")),
    };
    let unknown = finished.outcome.effects_unknown();
    let mut limits = plan.limits.clone();
    limits["ended_by"] = json!(ended_by);
    let cleanup = serde_json::to_value(report).unwrap_or(Value::Null);
    let stdout = kept.stdout.text();
    let stderr = kept.stderr.text();
    let mut result = json!({
        "outcome": outcome,
        "command": plan.describe(),
        "cwd": plan.cwd,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_bytes": kept.stdout.total(),
        "stderr_bytes": kept.stderr.total(),
        "stdout_dropped": kept.stdout.dropped(),
        "stderr_dropped": kept.stderr.dropped(),
        "cleanup": cleanup,
        "duration_ms": millis(took),
        "effects_unknown": unknown,
        "limits": limits,
    });
    if let Some(code) = code {
        result["exit_code"] = json!(code);
    }
    if let Some(signal) = &signal {
        result["signal"] = json!(signal);
    }
    if unknown {
        result["note"] = json!(EFFECTS_NOTE);
    }
    let headline = match (outcome, code, &signal) {
        ("exited", Some(code), _) => format!("exited with status {code} after {} ms", millis(took)),
        ("signaled", _, Some(signal)) => format!("killed by {signal} after {} ms", millis(took)),
        ("timed_out", ..) => format!(
            "timed out after {:?}; its whole tree was ended ({} signal(s) sent, {} survivor(s)). {EFFECTS_NOTE}",
            plan.timeout,
            report.signals.len(),
            report.survivors.len()
        ),
        _ => format!(
            "cancelled after {} ms; its whole tree was ended ({} survivor(s)). {EFFECTS_NOTE}",
            millis(took),
            report.survivors.len()
        ),
    };
    let mut text = headline;
    for (name, body, total) in [
        ("stdout", &stdout, kept.stdout.total()),
        ("stderr", &stderr, kept.stderr.total()),
    ] {
        if total > 0 {
            text.push_str(&format!(
                "\n--- {name} ({total} bytes) ---\n{}",
                summary(body)
            ));
        }
    }
    Ended {
        result,
        text,
        failed: false,
    }
}

/// The start and the end of a long output, for the text content (the whole
/// kept output is in the structured content).
fn summary(text: &str) -> String {
    const SHOW: usize = 2048;
    if text.len() <= 2 * SHOW {
        return text.to_owned();
    }
    let head: String = text.chars().take(SHOW).collect();
    let tail: String = {
        let chars: Vec<char> = text.chars().collect();
        chars[chars.len().saturating_sub(SHOW)..].iter().collect()
    };
    format!("{head}\n[...]\n{tail}")
}
