use std::io;

/// Errors of [`wrap`](crate::wrap). The front end maps them to an exit
/// status (`corral mcp wrap`: 127 / 126 for a server command that is not
/// found / not executable, 125 for everything else). Starting the server of
/// an rmcp [`CorralProcess`](crate::client::rmcp::CorralProcess) fails with
/// the same `Spawn` and `Setup`.
///
/// ```
/// use corral_mcp::{WrapError, WrapOptions};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let no_command = WrapOptions::new(Vec::<String>::new());
/// let signals = corral::host::SignalWatch::default();
/// let result = corral_mcp::wrap_with(no_command, signals, tokio::io::empty(), tokio::io::sink()).await;
/// let Err(error) = result else { panic!("a relay without a server") };
/// assert!(matches!(error, WrapError::NoCommand));
/// // The message says what to change.
/// assert!(error.to_string().contains("put it after `--`"));
/// # }
/// ```
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
