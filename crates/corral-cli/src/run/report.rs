//! `corral run`'s own part of the report (the envelope is
//! [`kit::report`](crate::kit::report)). Schema in `docs/report.md`, pinned
//! by `tests/golden/report.json`.

use std::{ffi::OsString, time::Duration};

use corral::{Finished, Outcome};
use serde::Serialize;

use crate::kit::{
    exit::Status,
    report::{Cleanup, Envelope, secs},
};

/// The report of `corral run`.
pub type Report = Envelope<Detail>;

/// The fields only `corral run` has.
#[derive(Debug, Serialize)]
pub struct Detail {
    /// How the run ended.
    pub outcome: OutcomeDoc,
    /// Whether what the command did before it was stopped is unknown.
    pub effects_unknown: bool,
    /// How long things took.
    pub durations: Durations,
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

/// The report of a run that started.
pub fn of_finished(
    command: &[OsString],
    finished: &Finished,
    status: Status,
    total: Duration,
    notes: Vec<String>,
) -> Report {
    let detail = Detail {
        outcome: OutcomeDoc::Ran(finished.outcome),
        effects_unknown: finished.outcome.effects_unknown(),
        durations: Durations {
            run: finished.report.run_time,
            cleanup: finished.report.cleanup_time,
            total,
        },
    };
    Envelope::new(command, status, Cleanup::of(finished, notes), detail)
}

/// The report of a command that never ran.
pub fn not_run(command: &[OsString], why: NotRun, status: Status, total: Duration) -> Report {
    let detail = Detail {
        outcome: OutcomeDoc::NotRun(why),
        effects_unknown: false,
        durations: Durations {
            run: Duration::ZERO,
            cleanup: Duration::ZERO,
            total,
        },
    };
    Envelope::new(command, status, Cleanup::default(), detail)
}
