//! `corral mcp wrap`'s own part of the report (the envelope is
//! [`kit::report`](crate::kit::report)). Schema in `docs/mcp.md`, pinned by
//! the `report_schema` test.

use std::{ffi::OsString, time::Duration};

use corral::{Outcome, Signal};
use corral_mcp::{Ending, Leader, RelayStats, WrapExit};
use serde::Serialize;

use crate::kit::{
    exit::Status,
    report::{Cleanup, Envelope, secs},
};

/// The report of `corral mcp wrap`.
pub type Report = Envelope<Detail>;

/// The fields only `corral mcp wrap` has.
#[derive(Debug, Serialize)]
pub struct Detail {
    /// What ended the relay; `null` if the server never started.
    pub ended_by: Option<Ending>,
    /// The signal the relay received, if that ended it.
    pub received_signal: Option<Signal>,
    /// The server's leader (`{"pid": N, "start_time": T}`), if it started.
    pub server: Option<Leader>,
    /// How the server's call ended (`exited`, `signaled`, `cancelled`);
    /// `null` if it never started.
    pub outcome: Option<Outcome>,
    /// How long things took.
    pub durations: Durations,
    /// The relay's counters.
    pub relay: RelayStats,
    /// Why the relay failed, if it did.
    pub error: Option<String>,
}

/// Fractional seconds.
#[derive(Debug, Default, Serialize)]
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

/// The report of a relay that ran.
pub fn of_exit(command: &[OsString], exit: &WrapExit, status: Status, total: Duration) -> Report {
    let detail = Detail {
        ended_by: Some(exit.ending),
        received_signal: exit.received,
        server: Some(exit.server),
        outcome: Some(exit.finished.outcome),
        durations: Durations {
            relay: exit.durations.relay,
            shutdown: exit.durations.shutdown,
            cleanup: exit.durations.cleanup,
            total,
        },
        relay: exit.relay,
        error: None,
    };
    let cleanup = Cleanup::of(&exit.finished, Vec::new());
    Envelope::new(command, status, cleanup, detail)
}

/// The report of a relay that failed (`error`, with its causes).
pub fn of_error(command: &[OsString], error: String, status: Status, total: Duration) -> Report {
    let detail = Detail {
        ended_by: None,
        received_signal: None,
        server: None,
        outcome: None,
        durations: Durations {
            total,
            ..Durations::default()
        },
        relay: RelayStats::default(),
        error: Some(error),
    };
    Envelope::new(command, status, Cleanup::default(), detail)
}
