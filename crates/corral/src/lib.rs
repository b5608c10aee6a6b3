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
//! Shared words at the bottom, each in a file named after it; every module
//! imports only from modules below it (`scripts/check-layers` checks it).
//! A module whose public items are all re-exported here is private: each
//! public type has one path.
//! - `signal` ([`Signal`]), [`duration`], `exit`, `backend` ([`Backend`]),
//!   `error`: the vocabulary.
//! - `sys`: the only module with syscalls and `unsafe`, one implementation
//!   per platform.
//! - [`identity`]: who a process is (pid with start time), the `/proc` walk
//!   and the process tree.
//! - `terminate`: the termination [`Policy`] and its pure state machine.
//! - `capture`: stdout/stderr kept across a kill ([`Captured`]).
//! - `outcome`: what a call returns ([`Finished`]), with its cleanup report.
//! - `command`: what to run ([`Command`]), as plain data; `limits`: what it
//!   may use ([`Limits`]).
//! - `contain`: the three containment backends, the registry of a host's
//!   live trees.
//! - [`ledger`] and [`watchdog`] (under `owner/`): nothing outlives its owner.
//! - [`capabilities()`]: what this machine offers.
//! - `plan`: a command checked for everything that can be refused before
//!   anything is created; `launch`: starting the leader; `supervise`: the driver that ties them
//!   together; [`Child`] (`child.rs`): the caller's handle.
//! - [`host`]: settings of a process dedicated to supervision.
//! - [`settings`]: every process-wide setting ([`settings::Settings`]: watchdog
//!   executable, subreaper, ledger directory, start-up sweep) in one place.

#![cfg(target_os = "linux")]
#![warn(missing_docs)]
// `unsafe` lives only in `sys`, each block with a `// SAFETY:` line.
#![deny(unsafe_code)]

mod backend;
mod capabilities;
mod capture;
mod child;
mod command;
mod contain;
pub mod duration;
mod error;
mod exit;
mod fault;
pub mod host;
pub mod identity;
pub mod init;
mod launch;
mod limits;
mod outcome;
mod owner;
mod plan;
mod rlimits;
pub mod settings;
mod signal;
mod supervise;
#[allow(unsafe_code)]
mod sys;
mod terminate;

pub use owner::{ledger, watchdog};

pub use backend::{Backend, BackendChoice};
pub use capabilities::{BackendStatus, Capabilities, LimitStatus, capabilities};
pub use capture::{Captured, OutputTap};
pub use child::{Child, ChildOutput, ChildStdin, Control};
pub use command::{Command, DEFAULT_CAPTURE_LIMIT, Leftovers, Stdio};
pub use contain::CGROUP_PARENT_VARIABLE;
pub use error::{Error, SpawnFailure};
pub use limits::{
    Limit, LimitError, LimitKind, Limits, LimitsReport, MAX_CPUS, MIN_CPUS, NotApplied, parse_size,
};
pub use outcome::{CleanupReport, Exit, Finished, Outcome, ProcessInfo, SignalSent, Trigger};
pub use signal::{ParseSignalError, Signal};
pub use terminate::{GraceEnds, Policy};
