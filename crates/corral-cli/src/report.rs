//! The JSON report of `--report` / `--report-fd`: a versioned document built
//! from [`corral::Finished`], or from a failure to start. Its schema is in
//! `docs/report.md` and pinned by `tests/golden/report.json`.

use std::{
    ffi::OsString,
    fs::File,
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use corral::{Backend, Exit, Finished, Outcome, ProcessInfo, SignalSent};
use serde::{Serialize, Serializer};

use crate::exit::Status;

/// The schema version; bumped on any incompatible change.
pub const VERSION: u32 = 1;

/// The report, version [`VERSION`].
#[derive(Debug, Serialize)]
pub struct Report {
    /// Always [`VERSION`].
    pub version: u32,
    /// The command and its arguments (lossy UTF-8).
    pub command: Vec<String>,
    /// How the run ended.
    pub outcome: OutcomeDoc,
    /// The status corral exited with.
    pub exit_status: u8,
    /// How the leader itself ended (`{"code": N}` or `{"signal": "SIGTERM"}`),
    /// if it was reaped.
    pub leader: Option<Exit>,
    /// Whether what the command did before it was stopped is unknown.
    pub effects_unknown: bool,
    /// The containment backend, if the command started.
    pub backend: Option<Backend>,
    /// How long things took.
    pub durations: Durations,
    /// Every signal corral sent to the tree, in order.
    pub signals: Vec<SignalSent>,
    /// Whether `SIGKILL` was needed.
    pub escalated: bool,
    /// Processes still alive when the final bound passed.
    pub survivors: Vec<ProcessInfo>,
    /// Members that had moved themselves out of the leaf cgroup and were
    /// killed by identity at the end (`{"pid", "start_time", "command"}`).
    pub left_cgroup: Vec<ProcessInfo>,
    /// The leaf cgroup used, if any.
    pub cgroup: Option<PathBuf>,
    /// Anything worth knowing that is not an error.
    pub notes: Vec<String>,
}

/// The `outcome` field: the library's outcome, or why nothing ran.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum OutcomeDoc {
    /// `exited`, `signaled`, `timed_out` or `cancelled`.
    Ran(Outcome),
    /// The command never ran.
    NotRun(NotRun),
}

/// Why the command never ran.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotRun {
    /// It could not be started (not found, not executable, no containment).
    SpawnFailed {
        /// The error, as corral printed it.
        error: String,
    },
    /// corral's parent was gone before the command started.
    NotStarted {
        /// Why.
        reason: String,
    },
}

/// Fractional seconds.
#[derive(Debug, Serialize)]
pub struct Durations {
    /// From the spawn until the end began (exit, time limit or signal).
    #[serde(serialize_with = "secs")]
    pub run: Duration,
    /// From then until the tree was empty (or the final bound passed).
    #[serde(serialize_with = "secs")]
    pub cleanup: Duration,
    /// All of corral's work for the command, spawn to report.
    #[serde(serialize_with = "secs")]
    pub total: Duration,
}

fn secs<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

fn lossy(command: &[OsString]) -> Vec<String> {
    command
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect()
}

impl Report {
    /// The report of a run that started.
    pub fn of_finished(
        command: &[OsString],
        finished: &Finished,
        status: Status,
        total: Duration,
        notes: Vec<String>,
    ) -> Self {
        let report = &finished.report;
        Self {
            version: VERSION,
            command: lossy(command),
            outcome: OutcomeDoc::Ran(finished.outcome),
            exit_status: status.code(),
            leader: finished.leader,
            effects_unknown: finished.outcome.effects_unknown(),
            backend: Some(report.backend),
            durations: Durations {
                run: report.run_time,
                cleanup: report.cleanup_time,
                total,
            },
            signals: report.signals.clone(),
            escalated: report.escalated,
            survivors: report.survivors.clone(),
            left_cgroup: report.left_cgroup.clone(),
            cgroup: report.cgroup.clone(),
            notes: notes.into_iter().chain(report.notes.clone()).collect(),
        }
    }

    /// The report of a command that never ran.
    pub fn not_run(command: &[OsString], why: NotRun, status: Status, total: Duration) -> Self {
        Self {
            version: VERSION,
            command: lossy(command),
            outcome: OutcomeDoc::NotRun(why),
            exit_status: status.code(),
            leader: None,
            effects_unknown: false,
            backend: None,
            durations: Durations {
                run: Duration::ZERO,
                cleanup: Duration::ZERO,
                total,
            },
            signals: Vec::new(),
            escalated: false,
            survivors: Vec::new(),
            left_cgroup: Vec::new(),
            cgroup: None,
            notes: Vec::new(),
        }
    }
}

/// Where the report goes, opened before the command starts so that a bad
/// path fails early (125) instead of after the run.
#[derive(Debug)]
pub struct Sink {
    name: String,
    file: File,
}

/// Keeps `--report-fd N` from the command: close-on-exec, set before the
/// watchdog is forked and the command spawned, so nothing but corral can
/// write into the report. Standard input, output and error (0-2) are the
/// command's own streams and are left alone. A descriptor that is not open
/// is left for [`Sink::open`] to refuse.
pub fn keep_from_command(fd: Option<u32>) {
    if let Some(fd) = fd
        .and_then(|fd| i32::try_from(fd).ok())
        .filter(|&fd| fd > 2)
        && let Err(error) = corral::host::close_on_exec(fd)
    {
        tracing::debug!(fd, %error, "cannot set close-on-exec on the report descriptor");
    }
}

impl Sink {
    /// Opens `--report FILE` (created or truncated) or `--report-fd N`.
    ///
    /// # Errors
    /// If the file cannot be created or the descriptor is not open for
    /// writing.
    pub fn open(path: Option<&Path>, fd: Option<u32>) -> anyhow::Result<Option<Self>> {
        if let Some(path) = path {
            let file = File::create(path).with_context(|| {
                format!(
                    "cannot create the report file {} (--report)",
                    path.display()
                )
            })?;
            return Ok(Some(Self {
                name: path.display().to_string(),
                file,
            }));
        }
        let Some(fd) = fd else { return Ok(None) };
        // Reopening through /proc keeps this safe code: no raw descriptor is
        // adopted. Works for files and pipes, not for sockets.
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(format!("/proc/self/fd/{fd}"))
            .with_context(|| {
                format!("file descriptor {fd} is not open for writing a report (--report-fd)")
            })?;
        Ok(Some(Self {
            name: format!("file descriptor {fd}"),
            file,
        }))
    }

    /// Writes the report as pretty JSON with a final newline.
    ///
    /// # Errors
    /// If writing fails.
    pub fn write(mut self, report: &Report) -> anyhow::Result<()> {
        let mut text = serde_json::to_vec_pretty(report).context("serialising the report")?;
        text.push(b'\n');
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .with_context(|| format!("cannot write the report to {}", self.name))
    }
}
