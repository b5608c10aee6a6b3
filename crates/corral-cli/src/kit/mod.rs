//! The front-end kit: what every `corral` subcommand that supervises a tree
//! shares, so that a fix lands once. Each subcommand's module (`run`, `mcp`)
//! only does its own work.
//!
//! - `startup`: the watchdog hook, the supervisor set-up, the runtime, the
//!   exit code.
//! - `signals`: signal handlers and the parent-death signal.
//! - `logging`: the log subscriber on standard error.
//! - `exit`: the exit-status enum, its mappings and the `--help` tables.
//! - `report`: the report envelope (shared fields once, the subcommand's own
//!   beside them).
//! - `sink`: `--report` / `--report-fd`, written atomically.
//! - `limits`: the resource-limit options on the whole tree.

pub mod exit;
pub mod limits;
pub mod logging;
pub mod report;
pub mod signals;
pub mod sink;
pub mod startup;
