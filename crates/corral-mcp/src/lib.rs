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
//! This crate is the library; `corral mcp wrap` (crate `corral-cli`) is its
//! command line, which turns the [`WrapExit`] into an exit status and a JSON
//! report.
//!
//! ```no_run
//! # async fn demo() -> Result<(), corral_mcp::WrapError> {
//! let options = corral_mcp::WrapOptions::new(["npx", "-y", "@modelcontextprotocol/server-everything"]);
//! // The signals that shut the server down (none here).
//! let signals = corral::host::SignalWatch::default();
//! let exit = corral_mcp::wrap(options, signals).await?;
//! println!("ended by {:?}, survivors: {:?}", exit.ending, exit.finished.report.survivors);
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! Shared by the relay and the client:
//! - [`frame`]: splitting the byte stream into lines, with a size cap.
//! - [`message`]: what a line is (request, notification, response) or why
//!   it is malformed.
//!
//! `wrap/`, the relay (its public types are re-exported here):
//! - `wrap`: the server process, the relay's end, the shutdown; `options`:
//!   what it is asked to do ([`WrapOptions`]); `error`: why it could not
//!   ([`WrapError`]); `stdio`: the relay process's own standard streams.
//! - `inflight`: requests waiting for their response.
//! - `relay`: the two pumps and their counters ([`RelayStats`]);
//!   `notelimit`: the rate limit on their notes.
//! - `ending`: what ended the relay and what it did ([`Ending`],
//!   [`WrapExit`]), plain data.
//!
//! Beside it:
//! - [`client`]: the MCP client runtime; [`client::rmcp`]: an `rmcp`
//!   transport whose server is an owned tree (the swap for rmcp's
//!   `TokioChildProcess`).
//! - [`serve`]: `corral mcp serve`, the command-running MCP server.
//! - [`guard`]: `corral mcp guard`, every host's MCP server entries put
//!   behind `corral mcp wrap` and back.
//! - [`private_file`]: opening a file only the server's user or root could
//!   have written (`corral mcp serve`'s token files and audit log).

#![forbid(unsafe_code)]
#![cfg(target_os = "linux")]
#![warn(missing_docs)]

pub mod client;
pub mod frame;
pub mod guard;
pub mod message;
pub mod private_file;
pub mod serve;
mod tasks;
mod wrap;

pub use wrap::{
    ending::{Durations, Ending, Leader, WrapExit},
    error::WrapError,
    options::{DEFAULT_CLOSE_GRACE, DEFAULT_FINAL_BOUND, DEFAULT_KILL_AFTER, WrapOptions},
    relay::{DirectionStats, RelayStats},
    wrap, wrap_with,
};
