//! How a `corral` subcommand exits: one status enum, one mapping to exit
//! codes, one help table per supervising subcommand, for every front end.
//!
//! | Variant            | Code    | `corral run` | `corral mcp wrap` |
//! |--------------------|---------|--------------|-------------------|
//! | `Exited(c)`        | `c`     | the command exited by itself with `c` (with `--preserve-status`, also after a timeout) | the server exited by itself with `c`; 0 when the client closed the connection and the tree was ended |
//! | `TimedOut`         | 124     | the time limit passed and the tree was ended, whatever `--signal` was | — |
//! | `Failed`           | 125     | corral itself failed: bad option or duration, no containment possible, report | the same |
//! | `CannotInvoke`     | 126     | the command was found but cannot be executed | the server command, the same |
//! | `NotFound`         | 127     | the command was not found | the server command, the same |
//! | `Signaled(N)`      | 128+N   | the command died of signal N (with `--preserve-status`, also corral's own after a timeout) | the server died of signal N that corral did not send |
//! | `Signaled(9)`      | 137     | also: `--max-memory` was exceeded (the kernel's out-of-memory kill) | — |
//! | `Signaled(24)`     | 152     | `--cpu-time` was spent and the tree was ended (as `ulimit -t`'s `SIGXCPU`) | — |
//! | `Interrupted(N)`   | 128+N   | corral received signal N (a dead parent counts as `SIGTERM`) and ended the tree | the same (the client's death counts as `SIGTERM`) |
//!
//! `corral mcp call` and `corral mcp list` exit by their [`CallOutcome`]
//! ([`Status::of_call`]): `ok` 0, `tool_error` and `error` 1 (`Exited(1)`),
//! `unknown` 124 (`TimedOut`), `not_sent` 125 (`Failed`).
//!
//! [`RUN`], [`WRAP`], [`CALL`] and [`LIST`] are these tables as `--help`
//! prints them.

use corral::{Error, Exit, Limit, Outcome, Signal, SpawnFailure};
use corral_mcp::Ending;
use serde::Serialize;

/// How corral exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The command's own exit code (or 0 for a relay the client closed).
    Exited(u8),
    /// The time limit passed.
    TimedOut,
    /// corral itself failed.
    Failed,
    /// Found but not executable.
    CannotInvoke,
    /// Not found.
    NotFound,
    /// The command died of this signal.
    Signaled(Signal),
    /// corral received this signal and ended the tree.
    Interrupted(Signal),
}

/// A subcommand's exit statuses as `--help` lists them.
#[derive(Debug)]
pub struct Table {
    /// The heading.
    pub title: &'static str,
    /// `(code, meaning)`, in the order shown.
    pub rows: &'static [(&'static str, &'static str)],
}

/// `corral run`'s statuses.
pub const RUN: Table = Table {
    title: "Exit status (as timeout(1)):",
    rows: &[
        ("N", "the command's own exit status"),
        (
            "124",
            "the time limit passed (whatever --signal was, also after SIGKILL)",
        ),
        (
            "125",
            "corral itself failed: bad option or duration, no containment",
        ),
        ("126", "the command was found but cannot be executed"),
        ("127", "the command was not found"),
        (
            "128+N",
            "the command died of signal N, or corral received signal N",
        ),
        (
            "137",
            "also: --max-memory was exceeded and the kernel killed the tree (128+SIGKILL)",
        ),
        (
            "152",
            "--cpu-time was spent and the tree was ended (128+SIGXCPU, as ulimit -t)",
        ),
    ],
};

/// `corral mcp wrap`'s statuses.
pub const WRAP: Table = Table {
    title: "Exit status:",
    rows: &[
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
    ],
};

/// `corral mcp call`'s statuses.
pub const CALL: Table = Table {
    title: "Exit status:",
    rows: &[
        ("0", "the tool answered (outcome ok)"),
        (
            "1",
            "the tool reported an error (isError; its text on stdout, outcome tool_error), \
             or the server answered with a JSON-RPC error or an invalid result \
             (on stderr, outcome error)",
        ),
        (
            "124",
            "outcome unknown: the request was written, then --timeout passed or a signal \
             came; the server may have acted on it",
        ),
        (
            "125",
            "not sent: bad option or ARGS_JSON, the server could not be started or \
             connected, or a signal came first",
        ),
    ],
};

/// `corral mcp list`'s statuses.
pub const LIST: Table = Table {
    title: "Exit status:",
    rows: &[
        ("0", "the tools were listed"),
        (
            "1",
            "the server answered with a JSON-RPC error or an invalid result",
        ),
        (
            "124",
            "--timeout passed, or a signal came, before the answer",
        ),
        (
            "125",
            "not sent: bad option, the server could not be started or connected, \
             or a signal came first",
        ),
    ],
};

/// `corral mcp serve`'s statuses.
pub const SERVE: Table = Table {
    title: "Exit status:",
    rows: &[
        (
            "0",
            "stopped (SIGINT, SIGTERM, SIGHUP, the parent's death, or the stdio client left) \
             and every run's tree was ended",
        ),
        (
            "125",
            "corral itself failed: bad option, token file, address in use, transport error",
        ),
    ],
};

/// `corral mcp guard`'s statuses.
pub const GUARD: Table = Table {
    title: "Exit status:",
    rows: &[
        (
            "0",
            "done: every selected file was read (status) or changed as needed (on, off)",
        ),
        (
            "1",
            "some file was left alone (it does not parse, belongs to another user, or \
             cannot be written; each is named on stderr) or a --server matched no entry; \
             the other files were done",
        ),
        (
            "125",
            "corral itself failed: bad option or WRAP OPTIONS, HOME unset, no project \
             directory",
        ),
    ],
};

/// How a request of `corral mcp call` or `list` ended: the `outcome` of its
/// JSON envelope, and its exit status ([`Status::of_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The server answered with a result (not an error).
    Ok,
    /// The tool's result says `isError: true`.
    ToolError,
    /// The server answered with a JSON-RPC error, or a result that is not
    /// one.
    Error,
    /// The request was written and no answer came (deadline, signal, the
    /// connection ended): the server may have acted on it.
    Unknown,
    /// The request was never written (spawn, handshake, connection, option,
    /// or a signal first): the server cannot have acted on it.
    NotSent,
}

impl Table {
    /// The table as the text of `--help`.
    pub fn help(&self) -> String {
        let mut text = format!("{}\n", self.title);
        for (code, meaning) in self.rows {
            text.push_str(&format!("  {code:<6} {meaning}\n"));
        }
        text
    }
}

impl Status {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Exited(code) => code,
            Self::TimedOut => 124,
            Self::Failed => 125,
            Self::CannotInvoke => 126,
            Self::NotFound => 127,
            Self::Signaled(signal) | Self::Interrupted(signal) => signal_code(signal),
        }
    }

    /// The status of a `corral mcp call` or `list` that ended in `outcome`.
    pub fn of_call(outcome: CallOutcome) -> Self {
        match outcome {
            CallOutcome::Ok => Self::Exited(0),
            CallOutcome::ToolError | CallOutcome::Error => Self::Exited(1),
            CallOutcome::Unknown => Self::TimedOut,
            CallOutcome::NotSent => Self::Failed,
        }
    }

    /// The status for a command that could not be started.
    pub fn of_spawn_error(error: &Error) -> Self {
        match error {
            Error::Spawn {
                failure: SpawnFailure::NotFound,
                ..
            } => Self::NotFound,
            Error::Spawn {
                failure: SpawnFailure::NotExecutable,
                ..
            } => Self::CannotInvoke,
            _ => Self::Failed,
        }
    }

    /// The status of a finished `corral run`. `received` is the signal corral
    /// got (if any) that made it end the tree.
    pub fn of_run(
        outcome: Outcome,
        leader: Option<Exit>,
        preserve_status: bool,
        received: Option<Signal>,
    ) -> Self {
        match outcome {
            Outcome::Exited { code } => of_code(code),
            Outcome::Signaled { signal } => Self::Signaled(signal),
            Outcome::TimedOut if preserve_status => match leader {
                Some(Exit::Code(code)) => of_code(code),
                Some(Exit::Signal(signal)) => Self::Signaled(signal),
                // Not reaped (stuck past the final bound): nothing to preserve.
                None => Self::TimedOut,
            },
            Outcome::TimedOut => Self::TimedOut,
            Outcome::Cancelled => Self::Interrupted(received.unwrap_or(Signal::TERM)),
            Outcome::LimitExceeded { limit } => Self::of_limit(limit, leader),
            _ => Self::Failed,
        }
    }

    /// The status of a tree a limit ended: 137 for memory, as a shell shows
    /// an out-of-memory kill; 152 for CPU time, as `ulimit -t` ends a
    /// process (`SIGXCPU`); for processes, the command's own status (it
    /// failed by itself after a refused fork).
    pub fn of_limit(limit: Limit, leader: Option<Exit>) -> Self {
        match (limit, leader) {
            (Limit::Memory, _) => Self::Signaled(Signal::KILL),
            (Limit::CpuTime, _) => Self::Signaled(Signal::XCPU),
            (_, Some(Exit::Code(code))) => of_code(code),
            (_, Some(Exit::Signal(signal))) => Self::Signaled(signal),
            (_, None) => Self::Failed,
        }
    }

    /// The status as GNU `timeout` gives it (corral run as `timeout`): after
    /// a timeout, 128+9 if the command died of `SIGKILL` (`-s KILL`, or the
    /// escalation after `-k`), as GNU reports a forced kill; after a signal
    /// corral received and passed on, the command's own status (GNU exits
    /// as its command did, never by the signal it received); otherwise the
    /// same as [`Status::of_run`]'s.
    pub fn as_gnu(self, leader: Option<Exit>) -> Self {
        match (self, leader) {
            (Self::TimedOut, Some(Exit::Signal(Signal::KILL))) => Self::Signaled(Signal::KILL),
            (Self::Interrupted(_), Some(Exit::Code(code))) => of_code(code),
            (Self::Interrupted(_), Some(Exit::Signal(signal))) => Self::Signaled(signal),
            _ => self,
        }
    }

    /// The status of a `corral mcp wrap` that ended with `ending`; `received`
    /// is the signal behind [`Ending::Interrupted`], `outcome` and `leader`
    /// how the server's call ended.
    pub fn of_wrap(
        ending: Ending,
        received: Option<Signal>,
        outcome: Outcome,
        leader: Option<Exit>,
    ) -> Self {
        match ending {
            Ending::Interrupted => Self::Interrupted(received.unwrap_or(Signal::TERM)),
            // The server's own status: its exit code or 128+signal; after
            // corral had to stop it, how the leader died.
            _ if ending.by_server() => match (outcome, leader) {
                (Outcome::LimitExceeded { limit }, _) => Self::of_limit(limit, leader),
                (Outcome::Exited { code }, _) | (_, Some(Exit::Code(code))) => of_code(code),
                (Outcome::Signaled { signal }, _) | (_, Some(Exit::Signal(signal))) => {
                    Self::Signaled(signal)
                }
                _ => Self::Failed,
            },
            // The client closed the connection (or went away).
            _ => Self::Exited(0),
        }
    }
}

/// An exit code as a status; one that does not fit (an unreaped leader's
/// `-1`) is corral's failure.
fn of_code(code: i32) -> Status {
    u8::try_from(code).map_or(Status::Failed, Status::Exited)
}

/// `128 + N`, what a shell reports for a process killed by signal N.
fn signal_code(signal: Signal) -> u8 {
    u8::try_from(128 + signal.number()).unwrap_or(255)
}

#[cfg(test)]
mod tests;
