//! Settings of the supervising process itself, for programs that dedicate a
//! process to supervision (the `corral` command).

use std::io;

use crate::{Signal, sys};

/// Whether `signal` is ignored by this process right now (as `nohup` leaves
/// `SIGHUP`, or a shell leaves `SIGINT` for background jobs). A supervisor
/// should leave such a signal ignored, so its command inherits that.
///
/// # Errors
/// If the disposition cannot be read (an invalid signal).
pub fn is_ignored(signal: Signal) -> io::Result<bool> {
    sys::is_ignored(signal)
}

/// Whether the parent was still alive once the parent-death signal was armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentWatch {
    /// Armed: `signal` arrives when the parent dies.
    Armed,
    /// The parent had already died (this process was re-parented): act as if
    /// the signal had arrived.
    AlreadyGone,
}

/// Asks the kernel to send `signal` to this process when its parent dies
/// (`PR_SET_PDEATHSIG`), then checks against `parent` (the parent pid read at
/// start-up) that the parent did not die before that took effect.
///
/// # Errors
/// If the kernel refuses the setting.
pub fn signal_on_parent_death(signal: Signal, parent: i32) -> io::Result<ParentWatch> {
    Ok(if sys::parent_death_signal(signal, parent)? {
        ParentWatch::Armed
    } else {
        ParentWatch::AlreadyGone
    })
}

/// This process's parent's pid, as read now.
pub fn parent_pid() -> i32 {
    sys::getppid()
}
