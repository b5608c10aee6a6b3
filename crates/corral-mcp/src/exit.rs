//! Why the relay ended and the status it exits with.
//!
//! | Variant            | Code  | When |
//! |--------------------|-------|------|
//! | `ClientClosed`     | 0     | the client closed the connection (end of our stdin, or our stdout broke); the server's tree was ended |
//! | `ServerExited(n)`  | n     | the server exited by itself with status n while the client was connected |
//! | `ServerSignaled(s)`| 128+s | the server was killed by signal s that corral did not send |
//! | `Interrupted(s)`   | 128+s | the relay received signal s (`SIGINT`, `SIGTERM`, `SIGHUP`; the client's death counts as `SIGTERM`) and shut the server down |
//! | `Failed`           | 125   | corral itself failed: bad option, no containment, report file, I/O setup |
//! | `CannotInvoke`     | 126   | the server command was found but cannot be executed |
//! | `NotFound`         | 127   | the server command was not found |

use corral::{Exit, Outcome, Signal};
use serde::Serialize;

/// How the relay exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// A clean shutdown after the client closed.
    ClientClosed,
    /// The server's own exit status.
    ServerExited(u8),
    /// The server died of this signal.
    ServerSignaled(Signal),
    /// The relay received this signal and shut the server down.
    Interrupted(Signal),
    /// corral itself failed.
    Failed,
    /// The server command cannot be executed.
    CannotInvoke,
    /// The server command was not found.
    NotFound,
}

/// The exit statuses as `--help` lists them.
pub const TABLE: &[(&str, &str)] = &[
    (
        "0",
        "the client closed the connection and the server's tree was ended",
    ),
    ("N", "the server exited by itself with status N"),
    (
        "128+N",
        "the server died of signal N, or the relay received signal N (client death: SIGTERM)",
    ),
    (
        "125",
        "corral itself failed (bad option, containment, report file)",
    ),
    ("126", "the server command cannot be executed"),
    ("127", "the server command was not found"),
];

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::ClientClosed => 0,
            Self::ServerExited(code) => code,
            Self::ServerSignaled(signal) | Self::Interrupted(signal) => {
                u8::try_from(128 + signal.number()).unwrap_or(255)
            }
            Self::Failed => 125,
            Self::CannotInvoke => 126,
            Self::NotFound => 127,
        }
    }

    /// The status for a relay that ended with `ending`; `received` is the
    /// signal behind [`Ending::Interrupted`], `outcome` and `leader` how the
    /// server's call ended ([`corral::Finished`]).
    pub fn of(
        ending: Ending,
        received: Option<Signal>,
        outcome: Outcome,
        leader: Option<Exit>,
    ) -> Self {
        match ending {
            Ending::ClientClosed | Ending::ClientGone => Self::ClientClosed,
            Ending::Interrupted => Self::Interrupted(received.unwrap_or(Signal::TERM)),
            Ending::ServerExited | Ending::ServerClosedOutput | Ending::ServerClosedInput => {
                Self::of_server(outcome, leader)
            }
        }
    }

    /// The server's own status: its exit code or 128+signal; after corral had
    /// to stop it, how the leader died.
    fn of_server(outcome: Outcome, leader: Option<Exit>) -> Self {
        let of_code = |code: i32| u8::try_from(code).map_or(Self::Failed, Self::ServerExited);
        match (outcome, leader) {
            (Outcome::Exited { code }, _) | (_, Some(Exit::Code(code))) => of_code(code),
            (Outcome::Signaled { signal }, _) | (_, Some(Exit::Signal(signal))) => {
                Self::ServerSignaled(signal)
            }
            _ => Self::Failed,
        }
    }
}

/// What ended the relay.
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

/// The message of the relay's error response to a request the server will
/// never answer.
pub fn unanswered_message(ending: Ending, received: Option<Signal>, outcome: Outcome) -> String {
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
