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
//! - [`signal`], [`duration`], `exit`, [`backend`], `error`: the vocabulary.
//! - `sys`: the only module with syscalls and `unsafe`, one implementation
//!   per platform.
//! - [`identity`]: who a process is (pid with start time), the `/proc` walk
//!   and the process tree.
//! - [`terminate`]: the termination [`Policy`] and its pure state machine.
//! - [`capture`]: stdout/stderr kept across a kill.
//! - [`outcome`]: what a call returns, with its cleanup report.
//! - [`command`]: what to run, as plain data; [`limits`]: what it may use.
//! - [`contain`]: the three containment backends, the registry of a host's
//!   live trees.
//! - [`ledger`] and [`watchdog`] (under `owner/`): nothing outlives its owner.
//! - [`capabilities()`]: what this machine offers.
//! - `launch`: starting the leader; `supervise`: the driver that ties them
//!   together; [`Child`] (`child.rs`): the caller's handle.
//! - [`host`]: settings of a process dedicated to supervision.
//! - [`settings`]: every process-wide setting ([`Settings`]: watchdog
//!   executable, subreaper, ledger directory, start-up sweep) in one place.

#![cfg(target_os = "linux")]
// `unsafe` lives only in `sys`, each block with a `// SAFETY:` line.
#![deny(unsafe_code)]

pub mod backend;
mod capabilities;
pub mod capture;
mod child;
pub mod command;
pub mod contain;
pub mod duration;
mod error;
mod exit;
mod fault;
pub mod host;
pub mod identity;
pub mod init;
mod launch;
pub mod limits;
pub mod outcome;
mod owner;
mod rlimits;
pub mod settings;
pub mod signal;
mod supervise;
#[allow(unsafe_code)]
mod sys;
pub mod terminate;

pub use owner::{ledger, watchdog};

pub use backend::{Backend, BackendChoice};
pub use capabilities::{BackendStatus, Capabilities, LimitStatus, capabilities};
pub use capture::{Captured, OutputTap};
pub use child::{Child, ChildOutput, ChildStdin, Control};
pub use command::{Command, DEFAULT_CAPTURE_LIMIT, Leftovers, Stdio};
pub use contain::claim_subreaper;
pub use error::{Error, SpawnFailure};
pub use limits::{Limit, LimitError, LimitKind, Limits, LimitsReport};
pub use outcome::{CleanupReport, Exit, Finished, Outcome, ProcessInfo, SignalSent, Trigger};
pub use owner::disable_startup_sweep;
pub use settings::Settings;
pub use signal::{ParseSignalError, Signal};
pub use terminate::{GraceEnds, Policy};
