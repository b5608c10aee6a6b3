use std::{io, path::PathBuf};

use crate::ExitStatus;

/// Errors of `corral mcp wrap`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No server command was given.
    #[error(
        "no MCP server command given: put it after `--`, e.g. \
         corral mcp wrap -- npx -y @modelcontextprotocol/server-everything"
    )]
    NoCommand,
    /// The server could not be started; nothing is left running.
    #[error("cannot start the MCP server")]
    Spawn(#[source] corral::Error),
    /// Supervising the server failed.
    #[error("supervising the MCP server failed")]
    Supervise(#[source] corral::Error),
    /// The report file cannot be created.
    #[error("cannot create the report file {} (--report)", path.display())]
    Report {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Setting up the relay's own standard streams or signals failed.
    #[error("{what}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The parent (the MCP client) died before the server was started.
    #[error("the parent process (the MCP client) is already gone; the server was not started")]
    ParentGone,
}

impl Error {
    /// The exit status this error maps to: 127 / 126 for a server command
    /// that is not found / not executable, 143 (`SIGTERM`) for a parent
    /// already gone, 125 for everything else.
    pub fn exit_status(&self) -> ExitStatus {
        use corral::SpawnFailure;
        match self {
            Self::Spawn(corral::Error::Spawn { failure, .. }) => match failure {
                SpawnFailure::NotFound => ExitStatus::NotFound,
                SpawnFailure::NotExecutable => ExitStatus::CannotInvoke,
                _ => ExitStatus::Failed,
            },
            Self::ParentGone => ExitStatus::Interrupted(corral::Signal::TERM),
            _ => ExitStatus::Failed,
        }
    }
}
