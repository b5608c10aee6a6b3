//! What the server holds for clients that do not read their answers: the
//! answer bytes taken from rmcp and not yet written to a socket are
//! counted server-wide ([`Backlog`]), and a connection whose socket takes
//! no byte for a while is closed ([`Unwritten::stalled`]).
//!
//! An answer sits whole in memory until its last byte is written (hyper
//! keeps the body's frame until then): these bounds are what frees it.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Body as Answer;

/// Answer bytes held for every connection together, and the cap on them.
#[derive(Debug)]
pub(super) struct Backlog {
    limit: usize,
    held: AtomicUsize,
}

impl Backlog {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// Counts `bytes` more, unless others are already held and the total
    /// would pass the cap (one answer larger than the cap alone passes).
    fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                let total = held.saturating_add(bytes);
                (held == 0 || total <= self.limit).then_some(total)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(bytes))
            });
    }
}

/// One connection's answer bytes not yet written, and since when its socket
/// has taken none of them.
#[derive(Debug)]
pub(super) struct Unwritten {
    backlog: Arc<Backlog>,
    held: AtomicUsize,
    stalled_since: Mutex<Option<Instant>>,
}

impl Unwritten {
    pub(super) fn new(backlog: Arc<Backlog>) -> Self {
        Self {
            backlog,
            held: AtomicUsize::new(0),
            stalled_since: Mutex::new(None),
        }
    }

    fn take(&self, bytes: usize) -> bool {
        if !self.backlog.take(bytes) {
            return false;
        }
        self.held.fetch_add(bytes, Ordering::AcqRel);
        true
    }

    /// The socket took `bytes` (answer bytes, or the HTTP framing around
    /// them: a little early, never late).
    fn wrote(&self, bytes: usize) {
        let mut given = 0;
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                given = held.min(bytes);
                Some(held - given)
            });
        self.backlog.give(given);
        *self.stall() = None;
    }

    /// The socket took nothing of what hyper has to write (an answer, or
    /// its last framing bytes): the stall starts now unless it already had.
    fn blocked(&self) {
        self.stall().get_or_insert_with(Instant::now);
    }

    fn stall(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.stalled_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns once the socket has taken no byte for `bound` while bytes
    /// were waiting for it (checked every `bound / 4`).
    pub(super) async fn stalled(&self, bound: Duration) {
        let mut tick = tokio::time::interval((bound / 4).max(Duration::from_millis(10)));
        loop {
            tick.tick().await;
            if self.stall().is_some_and(|since| since.elapsed() >= bound) {
                return;
            }
        }
    }
}

impl Drop for Unwritten {
    fn drop(&mut self) {
        self.backlog.give(*self.held.get_mut());
    }
}

/// Why an answer was dropped.
#[derive(Debug, thiserror::Error)]
#[error("answer dropped: the server holds too many unwritten answer bytes")]
pub(super) struct Dropped;

/// An answer body whose frames count against its connection's [`Unwritten`]
/// until written; a frame beyond the [`Backlog`]'s cap ends the connection.
pub(super) struct Counted {
    inner: Answer,
    unwritten: Arc<Unwritten>,
}

impl Counted {
    pub(super) fn new(inner: Answer, unwritten: Arc<Unwritten>) -> Self {
        Self { inner, unwritten }
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Dropped>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let bytes = frame.data_ref().map_or(0, Bytes::len);
                if self.unwritten.take(bytes) {
                    Poll::Ready(Some(Ok(frame)))
                } else {
                    tracing::info!(
                        bytes,
                        "answer dropped: the unwritten-answer budget is spent"
                    );
                    Poll::Ready(Some(Err(Dropped)))
                }
            }
            Poll::Ready(Some(Err(never))) => match never {},
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A socket that tells its connection's [`Unwritten`] what it took.
pub(super) struct Watched<T> {
    inner: T,
    unwritten: Arc<Unwritten>,
}

impl<T> Watched<T> {
    pub(super) fn new(inner: T, unwritten: Arc<Unwritten>) -> Self {
        Self { inner, unwritten }
    }

    fn count(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match &written {
            Poll::Ready(Ok(bytes)) => self.unwritten.wrote(*bytes),
            Poll::Pending => self.unwritten.blocked(),
            Poll::Ready(Err(_)) => {}
        }
        written
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.count(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.count(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
