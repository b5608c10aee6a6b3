//! `corral mcp wrap`: a stdio guard between an MCP client and a stdio MCP
//! server that runs the server as an owned process tree and reaps all of it.
//!
//! MCP clients start stdio servers through wrappers (`npx`, `uvx`, `sh -c`)
//! and, on shutdown, close the server's stdin and signal the one process they
//! started. Whatever it started lives on. The guard sits in the client's
//! configuration in front of the server command, relays newline-delimited
//! JSON-RPC both ways without reordering or rewriting it, drops malformed
//! frames (one line on stderr each, at most ten a second), answers the client's requests in flight
//! when the server dies, and on shutdown follows the MCP stdio lifecycle for
//! the *whole tree*: close stdin, wait, `SIGTERM`, wait, `SIGKILL`, final
//! bound. It never depends on one protocol version: the relay reads only the
//! JSON-RPC envelope, so `initialize` (`2025-11-25`) and `server/discover`
//! (`2026-07-28`) pass alike.
//!
//! ```no_run
//! # async fn demo() -> Result<(), corral_mcp::Error> {
//! let mut options = corral_mcp::WrapOptions::new(["npx", "-y", "@modelcontextprotocol/server-everything"]);
//! options.handle_signals = true;
//! options.parent = Some(corral::host::parent_pid());
//! let exit = corral_mcp::wrap(options).await?;
//! std::process::exit(exit.status.code().into());
//! # }
//! ```
//!
//! # Layout
//! - [`frame`]: splitting the byte stream into lines, with a size cap.
//! - [`message`]: what a line is (request, notification, response) or why
//!   it is malformed.
//! - [`inflight`]: requests waiting for their response.
//! - [`relay`]: the two pumps and their counters; [`notelimit`]: the rate
//!   limit on their notes.
//! - `wrap`: the server process, the relay's end, the shutdown.
//! - [`exit`](ExitStatus): exit statuses; `report`: the JSON report;
//!   `signals`, `stdio`: the relay process's own signals and streams.

#![cfg(target_os = "linux")]

#[cfg(feature = "cli")]
pub mod cli;
mod error;
mod exit;
pub mod frame;
pub mod inflight;
pub mod message;
pub mod notelimit;
mod options;
pub mod relay;
mod report;
mod signals;
mod stdio;
mod wrap;

pub use error::Error;
pub use exit::{Ending, ExitStatus, TABLE as EXIT_TABLE};
pub use options::{DEFAULT_CLOSE_GRACE, DEFAULT_FINAL_BOUND, DEFAULT_KILL_AFTER, WrapOptions};
pub use relay::{DirectionStats, RelayStats};
pub use report::{Durations, Leader, REPORT_VERSION, Report};
pub use signals::HANDLED as HANDLED_SIGNALS;
pub use wrap::{WrapExit, wrap, wrap_with};

/// An error with its sources, joined by `: `.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
