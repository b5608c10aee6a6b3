//! What a supervised call returns: how it ended, its output, and the cleanup
//! report.

use std::{path::PathBuf, time::Duration};

use serde::Serialize;

use crate::{
    backend::Backend,
    capture::Captured,
    limits::{Limit, LimitsReport},
    signal::Signal,
};
pub use crate::{exit::Exit, identity::ProcessInfo};

/// How the call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The leader exited by itself with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// The leader was killed by a signal that corral did not send.
    Signaled {
        /// The signal.
        signal: Signal,
    },
    /// The time limit passed; the tree was terminated.
    TimedOut,
    /// The call was cancelled (token, [`Child::terminate`](crate::child::Child::terminate)
    /// or drop); the tree was terminated.
    Cancelled,
    /// A [`Limit`] ended the tree: the kernel killed it for its memory, its
    /// leader failed after forks were refused, or corral ended it when its
    /// CPU-time budget was spent.
    LimitExceeded {
        /// Which limit.
        limit: Limit,
    },
}

impl Outcome {
    /// Whether the leader exited by itself with code 0, as
    /// [`std::process::ExitStatus::success`].
    ///
    /// ```
    /// assert!(corral::Outcome::Exited { code: 0 }.success());
    /// assert!(!corral::Outcome::TimedOut.success());
    /// ```
    pub fn success(&self) -> bool {
        matches!(self, Self::Exited { code: 0 })
    }

    /// The leader's exit code, if it exited by itself ([`Outcome::Exited`]),
    /// as [`std::process::ExitStatus::code`].
    ///
    /// ```
    /// assert_eq!(corral::Outcome::Exited { code: 3 }.code(), Some(3));
    /// assert_eq!(corral::Outcome::Cancelled.code(), None);
    /// ```
    pub fn code(&self) -> Option<i32> {
        match self {
            Self::Exited { code } => Some(*code),
            _ => None,
        }
    }

    /// Whether what the command did before it was stopped is unknown. True for
    /// [`Outcome::TimedOut`], [`Outcome::Cancelled`] and
    /// [`Outcome::LimitExceeded`]: the command may have completed part of
    /// its work, sent requests, written files. corral never retries; the
    /// caller decides.
    pub fn effects_unknown(&self) -> bool {
        matches!(
            self,
            Self::TimedOut | Self::Cancelled | Self::LimitExceeded { .. }
        )
    }
}

/// What started the cleanup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Trigger {
    /// The leader exited; the cleanup is for what it left behind.
    LeaderExited,
    /// The time limit passed.
    TimedOut,
    /// The cancellation token fired or [`Child::terminate`](crate::child::Child::terminate) was called.
    Cancelled,
    /// The [`Child`](crate::child::Child) handle was dropped.
    Dropped,
    /// The tree's CPU-time budget ([`Limits::cpu_time`](crate::limits::Limits::cpu_time)) was spent.
    LimitExceeded,
}

/// One signal sent during the cleanup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignalSent {
    /// Time after the spawn.
    #[serde(serialize_with = "crate::duration::secs")]
    pub at: Duration,
    /// The signal.
    pub signal: Signal,
    /// How many processes it was delivered to; `None` where the kernel
    /// delivers it without naming them (`cgroup.kill`).
    pub delivered: Option<usize>,
}

/// What the cleanup did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CleanupReport {
    /// The containment backend used.
    pub backend: Backend,
    /// What started the cleanup.
    pub trigger: Trigger,
    /// Every signal sent, in order.
    pub signals: Vec<SignalSent>,
    /// Whether `SIGKILL` was needed.
    pub escalated: bool,
    /// Processes still alive when the final bound passed (empty when all went
    /// well).
    pub survivors: Vec<ProcessInfo>,
    /// Members that had moved themselves out of the leaf cgroup (a process
    /// allowed to write another cgroup's `cgroup.procs`: root, or the owner
    /// of a delegated subtree) and still ran at the end: each was sent
    /// `SIGKILL` by identity. Empty with the other backends.
    pub moved_out: Vec<ProcessInfo>,
    /// Processes deliberately left running ([`Leftovers::Release`](crate::command::Leftovers::Release)).
    pub released: Vec<ProcessInfo>,
    /// The cgroup used, if any.
    pub cgroup: Option<PathBuf>,
    /// Whether that cgroup directory could not be removed (only with
    /// survivors).
    pub cgroup_not_removed: bool,
    /// From the spawn to the trigger.
    #[serde(serialize_with = "crate::duration::secs")]
    pub run_time: Duration,
    /// From the trigger until the tree was empty (or the final bound passed).
    #[serde(serialize_with = "crate::duration::secs")]
    pub cleanup_time: Duration,
    /// Anything worth knowing that is not an error (a fallback taken, a
    /// signal that found the process already gone).
    pub notes: Vec<String>,
    /// What the tree's limits did, when it had any
    /// ([`Command::limits`](crate::command::Command::limits)).
    pub limits: Option<LimitsReport>,
}

/// The result of a supervised call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Finished {
    /// How the call ended.
    pub outcome: Outcome,
    /// How the leader itself ended, if it could be reaped (after a timeout it
    /// usually died of corral's signal).
    pub leader: Option<Exit>,
    /// Captured standard output (empty unless [`Stdio::Capture`](crate::Stdio::Capture)).
    pub stdout: Captured,
    /// Captured standard error (empty unless [`Stdio::Capture`](crate::Stdio::Capture)).
    pub stderr: Captured,
    /// What the cleanup did.
    pub report: CleanupReport,
}
