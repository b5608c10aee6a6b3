//! Signals sent to a supervising corral process, and the death of its
//! parent, for every subcommand.
//!
//! The handled signals end the whole tree. A signal that was ignored when
//! corral started (`nohup` ignores `SIGHUP`; a non-interactive shell ignores
//! `SIGINT` and `SIGQUIT` for background jobs) gets no handler, so it stays
//! ignored and the command inherits that: an installed handler would be
//! reset to the default by `exec`. The death of corral's parent arrives as
//! `SIGTERM` (`PR_SET_PDEATHSIG`).

use anyhow::Context;
use corral::{
    Signal,
    host::{self, ParentWatch, SignalWatch},
};

/// The signals that end `corral run`'s tree.
pub const RUN: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// The signals that shut `corral mcp wrap`'s server down, as the client
/// closing the connection does.
pub const WRAP: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// What [`install`] found.
#[derive(Debug)]
pub enum Watch {
    /// The handlers are installed, and the parent's death is watched.
    Armed(SignalWatch),
    /// The parent was already gone: act as if `SIGTERM` had arrived, before
    /// anything starts.
    ParentGone,
}

/// Installs handlers for those of `handled` not ignored at start-up, then
/// has the kernel send `SIGTERM` when the parent dies. `parent` is the parent
/// pid read first thing at start-up. Needs a runtime with its I/O driver.
///
/// # Errors
/// If a disposition cannot be read, a handler cannot be installed or the
/// kernel refuses the parent-death setting.
pub fn install(handled: &[Signal], parent: i32) -> anyhow::Result<Watch> {
    let signals = SignalWatch::install(handled).context("installing the signal handlers")?;
    // Armed only once SIGTERM has a handler, or the parent's death would
    // kill corral without a cleanup. Without one (SIGTERM ignored at
    // start-up), the parent's death is not watched, but a parent already
    // gone still counts.
    let gone = if signals.handles(Signal::TERM) {
        host::signal_on_parent_death(Signal::TERM, parent)
            .context("arming the parent-death signal")?
            == ParentWatch::AlreadyGone
    } else {
        host::parent_pid() != parent
    };
    Ok(if gone {
        Watch::ParentGone
    } else {
        Watch::Armed(signals)
    })
}
