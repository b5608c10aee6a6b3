//! What a call and a connection can end in. Plain data at the bottom of the
//! client runtime: the connection, the manager and the command line all speak
//! these words.
//!
//! The outcome model is honest about what the client cannot know: once a
//! request was written, a deadline or a cancellation only stops *waiting*.
//! The server may have done the work, or part of it; cancelling locally
//! undoes nothing it did. So such a call ends in
//! [`CallError::OutcomeUnknown`], and the runtime never sends it again.

use std::{fmt, time::SystemTime};

use crate::message::Id;

/// Why a connection ended (what started its teardown).
///
/// ```
/// use corral_mcp::client::Ended;
///
/// assert_eq!(Ended::Disconnected.to_string(), "the connection was closed");
/// assert_ne!(Ended::Disconnected, Ended::Shutdown);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The handshake failed or timed out.
    Handshake(String),
    /// The connect itself was cancelled.
    ConnectCancelled,
    /// [`Connection::close`](super::Connection::close) or the manager's
    /// `disconnect`.
    Disconnected,
    /// The manager's `shutdown`.
    Shutdown,
    /// The owner dropped the connection (or its manager) without closing it.
    Dropped,
    /// The server's output ended (end of file or a read error).
    ReadLoopEnded(String),
    /// The server process exited (crashed) while connected.
    ServerExited(String),
    /// Writing to the server failed.
    WriteFailed(String),
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Handshake(why) => write!(f, "the handshake failed: {why}"),
            Self::ConnectCancelled => f.write_str("the connect was cancelled"),
            Self::Disconnected => f.write_str("the connection was closed"),
            Self::Shutdown => f.write_str("the client runtime shut down"),
            Self::Dropped => f.write_str("the connection was dropped"),
            Self::ReadLoopEnded(why) => write!(f, "the server's output ended ({why})"),
            Self::ServerExited(how) => write!(f, "the server exited ({how})"),
            Self::WriteFailed(why) => write!(f, "writing to the server failed ({why})"),
        }
    }
}

/// How a call that did not return a result ended.
///
/// ```
/// use corral_mcp::client::{CallError, TaskEnd};
///
/// let not_sent = CallError::NotSent { reason: "the connection was closed".into() };
/// // Safe to try again: the server never saw it.
/// assert!(!not_sent.effects_unknown());
/// let lost = CallError::Task { task_id: "t-1".into(), end: TaskEnd::Lost, reason: "expired".into() };
/// assert_eq!(lost.task_id(), Some("t-1"));
/// assert_eq!(lost.to_string(), "task t-1 cannot be found again: expired");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The request was never written: the server cannot have acted on it.
    /// Safe to try again.
    #[error("not sent: {reason}")]
    NotSent {
        /// Why.
        reason: String,
    },
    /// The request was written, and no answer came: the deadline passed, the
    /// call was cancelled or dropped, or the connection ended. The server may
    /// have done all, part or none of the work; `notifications/cancelled` was
    /// sent for it where the connection still lived. Never retried by the
    /// runtime.
    #[error(
        "outcome unknown for request {request_id} (written at {}): {reason}; \
         the server may have acted on it, and cancelling undoes nothing",
        humantime(*written_at)
    )]
    OutcomeUnknown {
        /// The request's id.
        request_id: Id,
        /// When it was written.
        written_at: SystemTime,
        /// Why the answer is missing.
        reason: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("the server answered with error {code}: {message}")]
    Rpc {
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
        /// The error's `data`, if any.
        data: Option<serde_json::Value>,
    },
    /// The server answered with a result of the wrong shape.
    #[error("the server's answer is not a valid result: {0}")]
    InvalidResult(String),
    /// The call ran as a task (the Tasks extension, SEP-2663) that did not
    /// complete: it failed, was cancelled, was given up by this client (a
    /// `tasks/cancel` was sent), or cannot be found again. Never retried.
    #[error("task {task_id} {end}: {reason}")]
    Task {
        /// The task's id (a bearer token of its owner: `corral mcp task
        /// get` reads it again).
        task_id: String,
        /// How it ended for this client.
        end: TaskEnd,
        /// What the server or the client said.
        reason: String,
    },
}

impl CallError {
    /// Whether the server may have acted on the request.
    pub fn effects_unknown(&self) -> bool {
        match self {
            Self::OutcomeUnknown { .. } => true,
            Self::Task { end, .. } => *end != TaskEnd::Failed,
            _ => false,
        }
    }

    /// The id of the task the call ran as, if it became one.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::Task { task_id, .. } => Some(task_id),
            _ => None,
        }
    }
}

/// How a call that ran as a task ended without its result.
///
/// ```
/// use corral_mcp::client::TaskEnd;
///
/// assert_eq!(TaskEnd::GivenUp.to_string(), "was given up");
/// assert_eq!(TaskEnd::Working.to_string(), "is still working");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskEnd {
    /// The server says it failed (`status: "failed"`, its error inlined).
    Failed,
    /// The server says it was cancelled (by a `tasks/cancel` or by the
    /// server itself).
    Cancelled,
    /// This client stopped following it (cancelled, its deadline passed):
    /// a `tasks/cancel` was sent, within a bound; what the run did before
    /// is not undone.
    GivenUp,
    /// It cannot be found again: the server no longer knows it (expired,
    /// restarted, another credential), or every poll failed.
    Lost,
    /// It still works (or waits for input): read once
    /// ([`Connection::read_task`](super::Connection::read_task)), not
    /// waited for.
    Working,
}

impl fmt::Display for TaskEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Failed => "failed",
            Self::Cancelled => "was cancelled",
            Self::GivenUp => "was given up",
            Self::Lost => "cannot be found again",
            Self::Working => "is still working",
        })
    }
}

/// Seconds since the epoch, with milliseconds: enough to correlate with a
/// server's log without a date crate.
fn humantime(at: SystemTime) -> String {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(since) => format!(
            "{}.{:03} s after the epoch",
            since.as_secs(),
            since.subsec_millis()
        ),
        Err(_) => "before the epoch".into(),
    }
}

/// Why a connection could not be made. The server's whole tree is gone when
/// this is returned.
///
/// ```
/// use corral_mcp::client::{ConnectError, Manager};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manager = Manager::new();
/// let error = manager.disconnect("github").await.unwrap_err();
/// assert!(matches!(&error, ConnectError::Unknown(name) if name == "github"));
/// assert_eq!(error.to_string(), "no connection named \"github\"");
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// No server command was given.
    #[error("no MCP server command given")]
    NoCommand,
    /// The server could not be started.
    #[error("cannot start the MCP server")]
    Spawn(#[source] corral::Error),
    /// The handshake failed; `stderr` is the tail of the server's standard
    /// error.
    #[error("the MCP handshake failed: {why}{}", stderr_note(stderr))]
    Handshake {
        /// What went wrong.
        why: String,
        /// The tail of the server's standard error (may be empty).
        stderr: String,
    },
    /// The connect was cancelled.
    #[error("the connect was cancelled")]
    Cancelled,
    /// The HTTP endpoint could not be used.
    #[error("the MCP endpoint {url} cannot be used: {why}")]
    Http {
        /// The endpoint.
        url: String,
        /// Why.
        why: String,
    },
    /// A name is already connected in the manager.
    #[error("a connection named {0:?} exists already; disconnect it first")]
    NameTaken(String),
    /// The manager has shut down.
    #[error("the client runtime has shut down")]
    ShutDown,
    /// Reconnecting failed `attempts` times in a row.
    #[error(
        "the server failed {attempts} reconnect attempt(s) in a row (last: {last}); \
         ask again with Manager::reconnect"
    )]
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: String,
    },
    /// The name was disconnected (and maybe connected again) while this
    /// connect or reconnect ran; its server was closed again.
    #[error("the connection {0:?} was disconnected or replaced while it was being made")]
    Superseded(String),
    /// No connection of that name.
    #[error("no connection named {0:?}")]
    Unknown(String),
}

fn stderr_note(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!(
            "\nthe server's standard error ended with:\n{}",
            stderr.trim_end()
        )
    }
}
