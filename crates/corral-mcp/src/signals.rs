//! Signals sent to the relay, and the death of its parent (the MCP client).
//!
//! `SIGINT`, `SIGTERM` and `SIGHUP` start the same shutdown as the client
//! closing the connection. A signal ignored when the relay started (as
//! `nohup` leaves `SIGHUP`) gets no handler and stays ignored. The parent's
//! death arrives as `SIGTERM` (`PR_SET_PDEATHSIG`).

use std::{future::poll_fn, task::Poll};

use corral::{
    Signal,
    host::{self, ParentWatch},
};
use tokio::signal::unix::{self, SignalKind};

use crate::Error;

/// The signals that shut the server down.
pub const HANDLED: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// The handled signals, as streams.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    streams: Vec<(Signal, unix::Signal)>,
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
        let mut streams = Vec::with_capacity(HANDLED.len());
        for signal in HANDLED {
            if host::is_ignored(signal).map_err(setup("reading a signal disposition"))? {
                tracing::debug!(%signal, "ignored at start-up: left ignored");
                continue;
            }
            let stream = unix::signal(SignalKind::from_raw(signal.number()))
                .map_err(setup("installing a signal handler"))?;
            streams.push((signal, stream));
        }
        // Armed only once SIGTERM has a handler, or the parent's death would
        // kill the relay without a shutdown.
        if let Some(parent) = parent {
            let armed = streams.iter().any(|&(signal, _)| signal == Signal::TERM);
            if armed {
                let watch = host::signal_on_parent_death(Signal::TERM, parent)
                    .map_err(setup("arming the parent-death signal"))?;
                if watch == ParentWatch::AlreadyGone {
                    return Err(Error::ParentGone);
                }
            } else if host::parent_pid() != parent {
                return Err(Error::ParentGone);
            }
        }
        Ok(Self { streams })
    }

    /// Waits for the next handled signal; pending for ever if there are none.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub(crate) async fn recv(&mut self) -> Signal {
        poll_fn(|cx| {
            for (signal, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*signal);
                }
            }
            Poll::Pending
        })
        .await
    }
}
