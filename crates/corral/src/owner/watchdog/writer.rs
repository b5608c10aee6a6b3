//! The writer thread: the blocking writes of what the owner could not
//! write at once, and the resync after messages were dropped.

use std::{
    io::Write,
    os::unix::net::UnixStream,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc::{Receiver, TryRecvError},
    },
};

use super::state::{Shared, lock, snapshot};

/// The thread that owns the socket and does the (blocking) writes.
pub(super) struct Writer {
    pub(super) stream: Arc<UnixStream>,
    pub(super) queue: Receiver<Vec<u8>>,
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) resync: Arc<AtomicBool>,
    pub(super) watched: Shared,
}

impl Writer {
    /// Writes what is queued until the owner drops its side (shutdown, or a
    /// replaced helper) or the socket breaks; when the queue is empty and
    /// messages were dropped, writes the whole state instead.
    pub(super) fn run(self) {
        loop {
            let line = match self.queue.try_recv() {
                Ok(line) => line,
                // Also when the owner shuts down: the helper's last state
                // must be the true one.
                Err(_) if self.resync.load(Ordering::SeqCst) => {
                    let watched = lock(&self.watched);
                    // Under the lock: every later change is queued after
                    // this state and applies on top of it.
                    self.resync.store(false, Ordering::SeqCst);
                    let lines = snapshot(&watched);
                    self.queued.fetch_add(lines.len(), Ordering::SeqCst);
                    lines
                }
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => match self.queue.recv() {
                    Ok(line) => line,
                    Err(_) => return,
                },
            };
            let written = (&*self.stream).write_all(&line);
            // Counted until written: senders do not write past it meanwhile.
            self.queued.fetch_sub(line.len(), Ordering::SeqCst);
            if written.is_err() {
                return;
            }
        }
    }
}
