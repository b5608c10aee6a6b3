//! How a relay ended, as plain data: what ended it ([`Ending`]), what the
//! server's tree did ([`WrapExit`]), and the message a client gets for a
//! request the server will never answer. The exit status and the JSON report
//! are the front end's (`corral mcp wrap` builds both from a [`WrapExit`]).

use std::time::Duration;

use corral::{Finished, Outcome, Signal};
use serde::Serialize;

use super::relay::RelayStats;

/// What ended the relay.
///
/// ```
/// use corral_mcp::Ending;
///
/// // The server's side ended it: its requests in flight get the relay's
/// // own error answer.
/// assert!(Ending::ServerExited.by_server());
/// assert!(!Ending::ClientClosed.by_server());
/// // The report names it in snake_case.
/// assert_eq!(serde_json::to_value(Ending::ClientGone)?, "client_gone");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// End of our standard input: the client closed the connection.
    ClientClosed,
    /// Writing to our standard output failed: the client is gone.
    ClientGone,
    /// The relay received a signal (or its parent died).
    Interrupted,
    /// The server's leader exited.
    ServerExited,
    /// The server closed its standard output while running.
    ServerClosedOutput,
    /// The server stopped reading its standard input.
    ServerClosedInput,
}

impl Ending {
    /// Whether the server's side ended the relay (its in-flight requests
    /// will never be answered by it).
    pub fn by_server(self) -> bool {
        matches!(
            self,
            Self::ServerExited | Self::ServerClosedOutput | Self::ServerClosedInput
        )
    }
}

/// What a relay did, start to end: returned by [`wrap`](crate::wrap).
///
/// A host reads it to say what happened (`corral mcp wrap` turns it into an
/// exit status and a JSON report):
///
/// ```
/// use corral_mcp::WrapExit;
///
/// fn summary(exit: &WrapExit) -> String {
///     let relay = &exit.relay;
///     format!(
///         "{:?} after {:?} (shutdown {:?}): server pid {}, {} frames in, {} out, \
///          {} requests answered by the relay, {} processes survived",
///         exit.ending,
///         exit.durations.total,
///         exit.durations.shutdown,
///         exit.server.pid,
///         relay.client_to_server.frames,
///         relay.server_to_client.frames,
///         relay.in_flight_answered,
///         exit.finished.report.survivors.len(),
///     )
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WrapExit {
    /// What ended the relay.
    pub ending: Ending,
    /// The signal the relay received, if that ended it.
    pub received: Option<Signal>,
    /// The server's leader.
    pub server: Leader,
    /// The server's call, with its cleanup report.
    pub finished: Finished,
    /// The relay's counters.
    pub relay: RelayStats,
    /// How long things took.
    pub durations: Durations,
}

/// Who the server's leader was: its pid with its start time, which together
/// name one process even after the pid is reused.
///
/// ```
/// use corral_mcp::Leader;
///
/// let leader = Leader { pid: 4242, start_time: 1_000 };
/// // The report names both.
/// assert_eq!(
///     serde_json::to_value(leader)?,
///     serde_json::json!({"pid": 4242, "start_time": 1000}),
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Leader {
    /// Its pid.
    pub pid: i32,
    /// Its start time (`/proc/PID/stat` field 22, clock ticks after boot).
    pub start_time: u64,
}

/// How long the parts of a relay took.
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::Durations;
///
/// let durations = Durations {
///     relay: Duration::from_secs(30),
///     shutdown: Duration::from_millis(40),
///     ..Durations::default()
/// };
/// // The shutdown is the part after the relay's end.
/// assert!(durations.shutdown < durations.relay);
/// assert_eq!(durations.cleanup, Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Durations {
    /// From the spawn until the relay's end was detected.
    pub relay: Duration,
    /// From then until the server's tree was gone (or the final bound
    /// passed): close grace, `SIGTERM`, `SIGKILL`.
    pub shutdown: Duration,
    /// The library's cleanup of the tree (from its trigger, the leader's
    /// exit or the cancellation, until the tree was empty).
    pub cleanup: Duration,
    /// Everything, from the call of [`wrap`](crate::wrap) to its return.
    pub total: Duration,
}

/// The message of the relay's error response to a request the server will
/// never answer.
pub(crate) fn unanswered_message(
    ending: Ending,
    received: Option<Signal>,
    outcome: Outcome,
) -> String {
    match ending {
        _ if ending.by_server() => match outcome {
            Outcome::Exited { code } => {
                format!("MCP server exited with status {code} before answering")
            }
            Outcome::Signaled { signal } => format!(
                "MCP server was killed by signal {} ({signal}) before answering",
                signal.number()
            ),
            _ => "MCP server closed its connection and was stopped by corral before answering"
                .to_owned(),
        },
        Ending::Interrupted => format!(
            "MCP server was shut down before answering: corral received {}",
            received.unwrap_or(Signal::TERM)
        ),
        _ => {
            "MCP server was shut down before answering: the client closed the connection".to_owned()
        }
    }
}

#[cfg(test)]
mod tests;
