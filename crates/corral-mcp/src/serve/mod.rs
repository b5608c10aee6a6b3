//! `corral mcp serve`: an MCP server whose tools run commands as owned
//! trees.
//!
//! PLACEHOLDER until branch `serve` is merged: the real `Runner`,
//! `ServeOptions`, `CorralServer` and `ServeError` come from there; this
//! stub only has their shapes (and no tools) so that the transports and the
//! command line build. At the merge, keep the other side of this file and
//! add `pub mod transport;`.

pub mod transport;

use std::{path::PathBuf, time::Duration};

use corral::BackendChoice;
use rmcp::{
    ServerHandler,
    model::{ServerCapabilities, ServerConfig},
};

/// What the server allows (placeholder shape).
#[derive(Debug, Clone)]
#[non_exhaustive]
#[allow(missing_docs)]
pub struct ServeOptions {
    pub roots: Vec<PathBuf>,
    pub max_concurrent: usize,
    pub reject_when_busy: bool,
    pub max_output: usize,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub kill_after: Duration,
    pub final_bound: Duration,
    pub backend: BackendChoice,
    pub audit: Option<PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            max_concurrent: 8,
            reject_when_busy: false,
            max_output: 1 << 20,
            default_timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(3600),
            kill_after: Duration::from_secs(2),
            final_bound: Duration::from_secs(1),
            backend: BackendChoice::Auto,
            audit: None,
        }
    }
}

/// Why the server cannot start (placeholder).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A root cannot be used.
    #[error("--root {path}: {why}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// The server's state (placeholder: runs nothing).
#[derive(Debug, Clone)]
pub struct Runner {
    _options: ServeOptions,
}

impl Runner {
    /// A runner with `options`.
    ///
    /// # Errors
    /// Never (placeholder).
    pub fn new(options: ServeOptions) -> Result<Self, ServeError> {
        Ok(Self { _options: options })
    }

    /// Ends every run.
    pub async fn shutdown(&self) {}
}

/// rmcp's server handler over a [`Runner`] (placeholder: no tools).
#[derive(Debug, Clone)]
pub struct CorralServer {
    _runner: Runner,
}

impl CorralServer {
    /// The handler of `runner`.
    pub fn new(runner: Runner) -> Self {
        Self { _runner: runner }
    }
}

impl ServerHandler for CorralServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}
