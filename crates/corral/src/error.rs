use std::{io, path::PathBuf};

use crate::{
    backend::Backend,
    limits::{LimitError, LimitKind},
};

/// Why spawning the command failed ([`Error::Spawn`]).
///
/// ```no_run
/// # async fn demo() {
/// use corral::{Error, SpawnFailure};
/// match corral::Command::new("no-such-program").spawn() {
///     Err(Error::Spawn { failure: SpawnFailure::NotFound, program, .. }) => {
///         eprintln!("install {program} first");
///     }
///     other => panic!("{other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnFailure {
    /// No such program (not on `PATH`, or the path does not exist).
    NotFound,
    /// The program exists but cannot be executed (permissions, not a binary).
    NotExecutable,
    /// The working directory does not exist or is not a directory.
    BadCwd,
    /// Anything else the kernel refused (limits, memory).
    Other,
}

/// Errors of the `corral` library. Each message says what to change.
///
/// ```
/// // `spawn` needs a tokio runtime (its supervisor is a task); outside one,
/// // nothing is started.
/// let error = corral::Command::new("true").spawn().unwrap_err();
/// assert!(matches!(error, corral::Error::NoRuntime));
/// assert!(error.to_string().contains("#[tokio::main]"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The command could not be started; nothing was left running.
    #[error("cannot run {program:?}: {}", spawn_hint(*.failure, .source))]
    Spawn {
        /// The program as given.
        program: String,
        /// What kind of failure.
        failure: SpawnFailure,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A backend that was asked for explicitly cannot be used here.
    #[error("backend {backend} is not available: {reason}")]
    BackendUnavailable {
        /// The backend asked for.
        backend: Backend,
        /// Why it is unavailable, and what would make it available.
        reason: String,
    },
    /// A stream was given a [`Stdio`](crate::Stdio) it cannot have (standard
    /// input captured); nothing was started.
    #[error("invalid {stream}: {reason}")]
    InvalidStdio {
        /// `stdin`, `stdout` or `stderr`.
        stream: &'static str,
        /// What is wrong, and what to use instead.
        reason: &'static str,
    },
    /// [`Command::spawn`](crate::Command::spawn) was called outside a tokio
    /// runtime; nothing was started.
    #[error(
        "corral spawns within a tokio runtime (its supervisor is a task of it); call spawn from \
         inside one, e.g. under #[tokio::main] or Runtime::block_on"
    )]
    NoRuntime,
    /// [`Child::wait`](crate::Child::wait) was called again after it had
    /// returned the call's result.
    #[error("the call's result was already taken by an earlier wait")]
    AlreadyWaited,
    /// The limits asked for are not valid values (zero processes, a
    /// negative CPU share, a per-process limit above the hard limit);
    /// nothing was started.
    #[error("invalid limits: {0}")]
    InvalidLimits(#[from] LimitError),
    /// A limit cannot be enforced on this host (a controller missing, a
    /// parent cgroup that holds processes, a backend without cgroups), and
    /// best effort was not asked for; nothing was started.
    #[error("cannot enforce the {limit} limit: {reason}")]
    LimitUnavailable {
        /// The limit.
        limit: LimitKind,
        /// Why, and what would fix it.
        reason: String,
    },
    /// Setting up or tearing down a cgroup failed.
    #[error("cgroup {}: {source}", path.display())]
    Cgroup {
        /// The cgroup directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The crash ledger's directory is not trusted (it, or a directory above
    /// it, could have been written by another user, or it is a symlink), or
    /// cannot be opened. Nothing in it was read or acted on.
    #[error("ledger directory {}: {reason}", path.display())]
    LedgerRefused {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it and how to fix it.
        reason: String,
    },
    /// Another operating-system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What corral was doing.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// This process has SIGCHLD ignored (or `SA_NOCLDWAIT`): the kernel would
    /// reap the leader by itself and free its pid while corral still names
    /// it, so nothing is spawned.
    #[error(
        "SIGCHLD is ignored in this process, so the kernel reaps children itself and their \
         pids could be reused while corral signals them; restore SIGCHLD's default \
         disposition before spawning (a parent may have left it ignored)"
    )]
    ChildrenAutoreaped,
    /// The supervising task ended without a result (the runtime shut down or
    /// the task panicked). Its tree was killed synchronously.
    #[error("the supervisor task ended without a result (runtime shutting down?)")]
    SupervisorLost,
}

fn spawn_hint(failure: SpawnFailure, source: &io::Error) -> String {
    match failure {
        SpawnFailure::NotFound => format!("not found ({source}); check the name and PATH"),
        SpawnFailure::NotExecutable => {
            format!("not executable ({source}); check its permissions and format")
        }
        SpawnFailure::BadCwd => format!("bad working directory ({source})"),
        SpawnFailure::Other => source.to_string(),
    }
}
