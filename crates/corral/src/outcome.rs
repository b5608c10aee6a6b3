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
///
/// ```
/// use corral::{Limit, Outcome, Signal};
/// let outcomes = [
///     Outcome::Exited { code: 0 },
///     Outcome::Signaled { signal: Signal::KILL },
///     Outcome::TimedOut,
///     Outcome::Cancelled,
///     Outcome::LimitExceeded { limit: Limit::Memory },
/// ];
/// let unknown: Vec<bool> = outcomes.iter().map(Outcome::effects_unknown).collect();
/// assert_eq!(unknown, [false, false, true, true, true]);
/// assert_eq!(outcomes.iter().filter(|o| o.success()).count(), 1);
/// ```
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

/// What started the cleanup ([`CleanupReport::trigger`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use std::time::Duration;
/// use corral::{Command, Trigger};
/// let finished = Command::new("sleep").arg("60").timeout(Duration::from_secs(1)).run().await?;
/// assert_eq!(finished.report.trigger, Trigger::TimedOut);
/// # Ok(()) }
/// ```
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

/// One signal sent during the cleanup ([`CleanupReport::signals`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use std::time::Duration;
/// let finished = corral::Command::new("sleep")
///     .arg("60")
///     .timeout(Duration::from_secs(1))
///     .run()
///     .await?;
/// for sent in &finished.report.signals {
///     println!("{:?} after {:?}, to {:?} processes", sent.signal, sent.at, sent.delivered);
/// }
/// assert_eq!(finished.report.signals[0].signal, corral::Signal::TERM);
/// # Ok(()) }
/// ```
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

/// What the cleanup did ([`Finished::report`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// let finished = corral::Command::new("sh").args(["-c", "sleep 100 & exit 0"]).run().await?;
/// let report = &finished.report;
/// // The leader exited and left a `sleep`: the cleanup ended it.
/// assert_eq!(report.trigger, corral::Trigger::LeaderExited);
/// assert!(report.survivors.is_empty(), "left running: {:?}", report.survivors);
/// println!("{} backend, {} signals, cleanup {:?}, notes {:?}",
///          report.backend, report.signals.len(), report.cleanup_time, report.notes);
/// # Ok(()) }
/// ```
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

/// The result of a supervised call ([`Command::run`](crate::Command::run),
/// [`Child::wait`](crate::Child::wait)).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use corral::{Exit, Outcome};
/// let finished = corral::Command::new("git").args(["rev-parse", "HEAD"]).run().await?;
/// if finished.outcome.success() {
///     println!("HEAD is {}", finished.stdout.text().trim());
/// } else {
///     eprintln!("git failed ({:?}): {}", finished.leader, finished.stderr.text());
/// }
/// assert_eq!(finished.outcome == Outcome::Exited { code: 0 }, finished.leader == Some(Exit::Code(0)));
/// # Ok(()) }
/// ```
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
