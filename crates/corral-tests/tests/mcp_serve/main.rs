//! `corral_mcp::serve` through the official Rust SDK's client (`rmcp`),
//! in process over a pipe: every outcome, output kept on timeout, a
//! `setsid` job holding stdout, cancellation, background runs, cwd escapes,
//! the concurrency limit, bad input, the audit log.

mod bounds;
mod client_tasks;
mod command_tools;
mod harness;
mod limits;
mod place;
mod runs;
mod sessions;
mod tasks;
