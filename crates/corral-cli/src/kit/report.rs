//! The JSON report of every supervising subcommand (`--report`,
//! `--report-fd`): one envelope, versioned, with the parts every subcommand
//! shares (the command, the exit status, the tree's cleanup as the library
//! reported it) once, and a command-specific part beside them, flattened into
//! the same object. Schemas: `docs/report.md` (`corral run`, pinned by
//! `tests/golden/report.json`) and `docs/mcp.md` (`corral mcp wrap`, pinned
//! by the `report_schema` test).

use std::{ffi::OsString, path::PathBuf, time::Duration};

use corral::{Backend, CleanupReport, Exit, Finished, LimitsReport, ProcessInfo, SignalSent};
use serde::{Serialize, Serializer};

use crate::{kit::exit::Status, text::printable};

/// The schema version of every report; bumped on any incompatible change.
pub const VERSION: u32 = 1;

/// A report, version [`VERSION`]: the shared fields, then the subcommand's
/// own (`detail`) at the same level.
#[derive(Debug, Serialize)]
pub struct Envelope<D> {
    /// Always [`VERSION`].
    pub version: u32,
    /// The command and its arguments (lossy UTF-8).
    pub command: Vec<String>,
    /// The status corral exited with.
    pub exit_status: u8,
    /// What the cleanup of the tree did.
    #[serde(flatten)]
    pub cleanup: Cleanup,
    /// The subcommand's own fields.
    #[serde(flatten)]
    pub detail: D,
}

impl<D: Serialize> Envelope<D> {
    /// The envelope around `detail`.
    pub fn new(command: &[OsString], status: Status, cleanup: Cleanup, detail: D) -> Self {
        Self {
            version: VERSION,
            command: command
                .iter()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect(),
            exit_status: status.code(),
            cleanup,
            detail,
        }
    }
}

/// The library's [`CleanupReport`] (and how the leader ended), as every
/// report shows it; all empty when the command never ran.
#[derive(Debug, Default, Serialize)]
pub struct Cleanup {
    /// How the leader itself ended (`{"code": N}` or `{"signal": "SIGTERM"}`),
    /// if it was reaped.
    pub leader: Option<Exit>,
    /// The containment backend, if the command started.
    pub backend: Option<Backend>,
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
    /// Anything worth knowing that is not an error: the front end's `notes`
    /// first, then the library's.
    pub notes: Vec<String>,
    /// What the tree's limits did (only when limits were asked for): which
    /// applied, which not and why, refused forks, out-of-memory kills, CPU
    /// time used and throttled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsReport>,
}

impl Cleanup {
    /// The cleanup of a call that ran.
    pub fn of(finished: &Finished, notes: Vec<String>) -> Self {
        let report = &finished.report;
        Self {
            leader: finished.leader,
            backend: Some(report.backend),
            signals: report.signals.clone(),
            escalated: report.escalated,
            survivors: report.survivors.clone(),
            left_cgroup: report.moved_out.clone(),
            cgroup: report.cgroup.clone(),
            notes: notes.into_iter().chain(report.notes.clone()).collect(),
            limits: report.limits.clone(),
        }
    }
}

/// Serialises a duration as fractional seconds (`#[serde(serialize_with)]`).
///
/// # Errors
/// As the serializer's.
pub fn secs<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

/// Says on standard error what was left of the tree: members killed by
/// identity after leaving the leaf cgroup, and survivors of `SIGKILL` and
/// `--final-bound` (`final_bound`). `whose` names the tree ("", "of the
/// server "); `hint` follows the first list (how to prevent it).
pub fn tell_leftovers(report: &CleanupReport, whose: &str, hint: &str, final_bound: Duration) {
    let list = |procs: &[ProcessInfo]| -> String {
        let names: Vec<String> = procs
            .iter()
            .map(|p| format!("{} ({})", p.pid, printable(&p.command)))
            .collect();
        names.join(", ")
    };
    if !report.moved_out.is_empty() {
        say!(
            "{} process(es) {whose}had moved out of the leaf cgroup and were killed by \
             identity: {}{hint}",
            report.moved_out.len(),
            list(&report.moved_out)
        );
    }
    if !report.survivors.is_empty() {
        say!(
            "{} process(es) {whose}survived SIGKILL and --final-bound {final_bound:?}: {}",
            report.survivors.len(),
            list(&report.survivors)
        );
    }
}
