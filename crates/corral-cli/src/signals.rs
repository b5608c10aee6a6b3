//! Signals sent to corral itself, and the death of its parent.
//!
//! `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` end the whole tree. A signal
//! that was ignored when corral started (`nohup` ignores `SIGHUP`; a
//! non-interactive shell ignores `SIGINT` and `SIGQUIT` for background jobs)
//! gets no handler, so it stays ignored and the command inherits that: an
//! installed handler would be reset to the default by `exec`. The death of
//! corral's parent arrives as `SIGTERM` (`PR_SET_PDEATHSIG`).

use std::{future::poll_fn, task::Poll};

use anyhow::Context;
use corral::{
    Signal,
    host::{self, ParentWatch},
};
use tokio::signal::unix::{self, SignalKind};

/// The signals that end the tree.
pub const HANDLED: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// The handled signals that were not ignored at start-up, as streams.
#[derive(Debug)]
pub struct Watch {
    streams: Vec<(Signal, unix::Signal)>,
}

impl Watch {
    /// Installs handlers for the [`HANDLED`] signals that are not ignored.
    /// Needs a runtime with its I/O driver enabled.
    ///
    /// # Errors
    /// If a disposition cannot be read or a handler cannot be installed.
    pub fn install() -> anyhow::Result<Self> {
        let mut streams = Vec::with_capacity(HANDLED.len());
        for signal in HANDLED {
            let ignored = host::is_ignored(signal)
                .with_context(|| format!("reading the disposition of {signal}"))?;
            if ignored {
                tracing::debug!(%signal, "ignored at start-up: left ignored");
                continue;
            }
            let stream = unix::signal(SignalKind::from_raw(signal.number()))
                .with_context(|| format!("installing a handler for {signal}"))?;
            streams.push((signal, stream));
        }
        Ok(Self { streams })
    }

    /// Waits for the next handled signal. Pending for ever if every one was
    /// ignored at start-up.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Signal {
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
