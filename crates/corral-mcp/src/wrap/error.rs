use std::io;

/// Errors of [`wrap`](crate::wrap). The front end maps them to an exit
/// status (`corral mcp wrap`: 127 / 126 for a server command that is not
/// found / not executable, 125 for everything else). Starting the server of
/// an rmcp [`CorralProcess`](crate::client::rmcp::CorralProcess) fails with
/// the same `Spawn` and `Setup`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WrapError {
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
    /// Setting up the relay's own standard streams failed.
    #[error("{what}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}
