//! The JSON report of `--report`: versioned, built from the library's
//! [`corral::Finished`] plus the relay's counters. Schema in `docs/mcp.md`,
//! pinned by the `report_schema` test.

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use corral::{Backend, Exit, Outcome, ProcessInfo, Signal, SignalSent};
use serde::{Serialize, Serializer};

use crate::{Ending, Error, RelayStats, WrapExit};

/// The schema version; bumped on any incompatible change.
pub const REPORT_VERSION: u32 = 1;

/// The report, version [`REPORT_VERSION`].
#[derive(Debug, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Always [`REPORT_VERSION`].
    pub version: u32,
    /// The server command (lossy UTF-8).
    pub command: Vec<String>,
    /// What ended the relay; `null` if the server never started.
    pub ended_by: Option<Ending>,
    /// The signal the relay received, if that ended it.
    pub received_signal: Option<Signal>,
    /// The server's leader (`{"pid": N, "start_time": T}`, start time in
    /// clock ticks after boot), if it started.
    pub server: Option<Leader>,
    /// The status the relay exited with.
    pub exit_status: u8,
    /// How the server's call ended (`exited`, `signaled`, `cancelled`);
    /// `null` if it never started.
    pub outcome: Option<Outcome>,
    /// How the leader itself ended, if it was reaped.
    pub leader: Option<Exit>,
    /// The containment backend.
    pub backend: Option<Backend>,
    /// How long things took.
    pub durations: Durations,
    /// Every signal sent to the tree, in order.
    pub signals: Vec<SignalSent>,
    /// Whether `SIGKILL` was needed.
    pub escalated: bool,
    /// Processes still alive when the final bound passed (empty when all
    /// went well).
    pub survivors: Vec<ProcessInfo>,
    /// Members that had moved themselves out of the leaf cgroup and were
    /// killed by identity at the end (`{"pid", "start_time", "command"}`).
    pub left_cgroup: Vec<ProcessInfo>,
    /// The leaf cgroup used, if any.
    pub cgroup: Option<PathBuf>,
    /// Anything worth knowing that is not an error.
    pub notes: Vec<String>,
    /// The relay's counters.
    pub relay: RelayStats,
    /// Why the relay failed, if it did.
    pub error: Option<String>,
}

/// Who the server's leader was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Leader {
    /// Its pid.
    pub pid: i32,
    /// Its start time (`/proc/PID/stat` field 22).
    pub start_time: u64,
}

/// Fractional seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Durations {
    /// From the spawn until the relay's end was detected.
    #[serde(serialize_with = "secs")]
    pub relay: Duration,
    /// From then until the server's tree was gone (or the final bound
    /// passed): close grace, `SIGTERM`, `SIGKILL`.
    #[serde(serialize_with = "secs")]
    pub shutdown: Duration,
    /// The library's cleanup of the tree (from its trigger, the leader's
    /// exit or the cancellation, until the tree was empty).
    #[serde(serialize_with = "secs")]
    pub cleanup: Duration,
    /// Everything, start to report.
    #[serde(serialize_with = "secs")]
    pub total: Duration,
}

fn secs<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

fn lossy(command: &[std::ffi::OsString]) -> Vec<String> {
    command
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect()
}

impl Report {
    /// The report of a relay that ran.
    pub fn of_exit(command: &[std::ffi::OsString], exit: &WrapExit) -> Self {
        let cleanup = &exit.finished.report;
        Self {
            version: REPORT_VERSION,
            command: lossy(command),
            ended_by: Some(exit.ending),
            received_signal: exit.received,
            server: Some(Leader {
                pid: exit.server.0,
                start_time: exit.server.1,
            }),
            exit_status: exit.status.code(),
            outcome: Some(exit.finished.outcome),
            leader: exit.finished.leader,
            backend: Some(cleanup.backend),
            durations: exit.durations,
            signals: cleanup.signals.clone(),
            escalated: cleanup.escalated,
            survivors: cleanup.survivors.clone(),
            left_cgroup: cleanup.left_cgroup.clone(),
            cgroup: cleanup.cgroup.clone(),
            notes: cleanup.notes.clone(),
            relay: exit.relay,
            error: None,
        }
    }

    /// The report of a relay that failed.
    pub fn of_error(command: &[std::ffi::OsString], error: &Error, total: Duration) -> Self {
        Self {
            version: REPORT_VERSION,
            command: lossy(command),
            ended_by: None,
            received_signal: None,
            server: None,
            exit_status: error.exit_status().code(),
            outcome: None,
            leader: None,
            backend: None,
            durations: Durations {
                total,
                ..Durations::default()
            },
            signals: Vec::new(),
            escalated: false,
            survivors: Vec::new(),
            left_cgroup: Vec::new(),
            cgroup: None,
            notes: Vec::new(),
            relay: RelayStats::default(),
            error: Some(crate::error_chain(error)),
        }
    }
}

/// The report file, created before the server starts so that a bad path
/// fails early.
#[derive(Debug)]
pub(crate) struct Sink {
    path: PathBuf,
    file: File,
    /// Only a regular file is replaced by a rename (never `/dev/stderr`).
    regular: bool,
}

impl Sink {
    /// Creates (or truncates) `path`.
    pub(crate) fn create(path: &Path) -> Result<Self, Error> {
        let file = File::create(path).map_err(|source| Error::Report {
            path: path.to_owned(),
            source,
        })?;
        let regular = file.metadata().is_ok_and(|meta| meta.is_file());
        Ok(Self {
            path: path.to_owned(),
            file,
            regular,
        })
    }

    /// Writes the report as pretty JSON with a final newline, atomically
    /// (a sibling temporary file renamed over the path) where the directory
    /// allows, so a reader never sees half a report. A failure is told on
    /// standard error: the exit status belongs to the relay.
    pub(crate) fn write(mut self, report: &Report) {
        let mut text = serde_json::to_vec_pretty(report).unwrap_or_default();
        text.push(b'\n');
        if self.regular {
            let mut temp = self.path.clone().into_os_string();
            temp.push(format!(".tmp-{}", std::process::id()));
            let temp = PathBuf::from(temp);
            let atomic = File::create(&temp)
                .and_then(|mut file| file.write_all(&text).and_then(|()| file.sync_all()))
                .and_then(|()| std::fs::rename(&temp, &self.path));
            if atomic.is_ok() {
                return;
            }
            let _ = std::fs::remove_file(&temp);
        }
        if let Err(error) = self
            .file
            .write_all(&text)
            .and_then(|()| self.file.sync_all())
        {
            eprintln!(
                "corral mcp: cannot write the report to {}: {error}",
                self.path.display()
            );
        }
    }
}
