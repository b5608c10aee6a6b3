//! Signals sent to corral itself, and the death of its parent.
//!
//! `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` end the whole tree. A signal
//! that was ignored when corral started (`nohup` ignores `SIGHUP`; a
//! non-interactive shell ignores `SIGINT` and `SIGQUIT` for background jobs)
//! gets no handler, so it stays ignored and the command inherits that: an
//! installed handler would be reset to the default by `exec`. The death of
//! corral's parent arrives as `SIGTERM` (`PR_SET_PDEATHSIG`).

use anyhow::Context;
use corral::{
    Signal,
    host::{self, ParentWatch, SignalWatch},
};

/// The signals that end the tree.
pub const HANDLED: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// Handlers for the [`HANDLED`] signals that were not ignored at start-up.
/// Needs a runtime with its I/O driver enabled.
///
/// # Errors
/// If a disposition cannot be read or a handler cannot be installed.
pub fn install() -> anyhow::Result<SignalWatch> {
    SignalWatch::install(&HANDLED).context("installing the signal handlers")
}

/// Has the kernel send `SIGTERM` to corral when its parent dies. `parent` is
/// the parent pid read first thing at start-up. Returns `false` if the parent
/// is already gone.
///
/// # Errors
/// If the kernel refuses the setting.
pub fn watch_parent(parent: i32) -> anyhow::Result<bool> {
    let watch = host::signal_on_parent_death(Signal::TERM, parent)
        .context("arming the parent-death signal")?;
    Ok(watch == ParentWatch::Armed)
}
