//! Signals sent to the relay, and the death of its parent (the MCP client).
//!
//! `SIGINT`, `SIGTERM` and `SIGHUP` start the same shutdown as the client
//! closing the connection. A signal ignored when the relay started (as
//! `nohup` leaves `SIGHUP`) gets no handler and stays ignored. The parent's
//! death arrives as `SIGTERM` (`PR_SET_PDEATHSIG`).

use corral::{
    Signal,
    host::{self, ParentWatch, SignalWatch},
};

use crate::Error;

/// The signals that shut the server down.
pub const HANDLED: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// The handled signals, as one source.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    signals: SignalWatch,
}

impl Watch {
    /// Installs handlers for the [`HANDLED`] signals not ignored at start-up;
    /// with `parent`, then arms the parent-death signal.
    ///
    /// # Errors
    /// [`Error::Setup`] if a handler cannot be installed,
    /// [`Error::ParentGone`] if the parent has already died.
    pub(crate) fn install(parent: Option<i32>) -> Result<Self, Error> {
        let setup = |what| move |source| Error::Setup { what, source };
        let signals =
            SignalWatch::install(&HANDLED).map_err(setup("installing a signal handler"))?;
        // Armed only once SIGTERM has a handler, or the parent's death would
        // kill the relay without a shutdown.
        if let Some(parent) = parent {
            if signals.handles(Signal::TERM) {
                let watch = host::signal_on_parent_death(Signal::TERM, parent)
                    .map_err(setup("arming the parent-death signal"))?;
                if watch == ParentWatch::AlreadyGone {
                    return Err(Error::ParentGone);
                }
            } else if host::parent_pid() != parent {
                return Err(Error::ParentGone);
            }
        }
        Ok(Self { signals })
    }

    /// Waits for the next handled signal; pending for ever if there are none.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub(crate) async fn recv(&mut self) -> Signal {
        self.signals.recv().await
    }
}
