//! `corral` runs a command as an **owned process tree** and ends all of it on
//! time.
//!
//! Agent runtimes start CLIs, shell commands and MCP servers through wrappers
//! (`sh -c`, `npx`, `uvx`), so they start *trees*. Signalling the direct child
//! or its process group leaves behind whatever escaped: background jobs,
//! `setsid` children, double-forked daemons, children that ignore `SIGTERM`.
//! corral contains the whole tree (cgroup v2, a child subreaper, or a process
//! group), terminates it with a [`Policy`] (signal, grace, `SIGKILL`, final
//! bound), reports what survived, keeps the output, and never signals a process
//! that was not part of the tree.
//!
//! ```no_run
//! # async fn demo() -> Result<(), corral::Error> {
//! use std::time::Duration;
//! let finished = corral::Command::new("sh")
//!     .args(["-c", "setsid sleep 1000 & echo started; sleep 1000"])
//!     .timeout(Duration::from_secs(1))
//!     .grace(Duration::from_millis(500))
//!     .run()
//!     .await?;
//! assert_eq!(finished.outcome, corral::Outcome::TimedOut);
//! assert!(finished.report.survivors.is_empty());
//! assert_eq!(finished.stdout.bytes, b"started\n");
//! # Ok(()) }
//! ```
//!
//! # Effects are not undone
//! Terminating a local process does not undo what it already did elsewhere: a
//! request it sent, a file it wrote. A call that ends [`Outcome::TimedOut`] or
//! [`Outcome::Cancelled`] reports its effects as unknown
//! ([`Outcome::effects_unknown`]), and corral never retries anything by itself.
//!
//! # Layout
//! - [`command`]: what to run, as plain data.
//! - [`contain`]: the three containment backends and their probe.
//! - [`terminate`]: the termination [`Policy`] and its pure state machine.
//! - [`identity`]: who a process is (pid with start time), read from `/proc`.
//! - [`capture`]: stdout/stderr kept across a kill.
//! - [`outcome`]: what a call returns, with its cleanup report.
//! - `supervise`: the driver that ties them together.
//! - `sys`: the only module with syscalls and `unsafe`.

#![cfg(target_os = "linux")]

pub mod capture;
pub mod command;
pub mod contain;
pub mod duration;
mod error;
mod fault;
pub mod host;
pub mod identity;
mod launch;
pub mod ledger;
pub mod outcome;
mod owner;
mod signal;
mod supervise;
mod sys;
pub mod terminate;
pub mod watchdog;

pub use capture::{Captured, OutputTap};
pub use command::{Command, DEFAULT_CAPTURE_LIMIT, Input, Leftovers, Output};
pub use contain::{
    Backend, BackendChoice, BackendStatus, Capabilities, capabilities, claim_subreaper,
};
pub use error::{Error, SpawnFailure};
pub use outcome::{CleanupReport, Exit, Finished, Outcome, ProcessInfo, SignalSent, Trigger};
pub use owner::disable_startup_sweep;
pub use signal::{ParseSignalError, Signal};
pub use supervise::{Child, ChildOutput, ChildStdin};
pub use terminate::Policy;
