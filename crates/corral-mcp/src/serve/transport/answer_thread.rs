//! The answer thread: where rmcp's streamed answers are built, off the
//! runtime thread that accepts connections and serves requests.
//!
//! rmcp turns a message into its JSON (and its SSE event) inside its answer
//! body's `poll_frame`, in one go: an answer of 12 MB (1 MiB of NUL bytes,
//! JSON-escaped) took about 0.6 s in a debug build under load. On the
//! server's current-thread runtime nothing else ran meanwhile; the accept
//! loop takes one connection per turn of the runtime, and a client's
//! connection waited in the listen queue behind 100 connections whose
//! answers were being built, for over a minute (docs/flakes.md (28)).
//!
//! So an answer whose size is not known up front (a stream: rmcp's SSE
//! answers) is polled on a thread of its own, with a runtime of its own, and
//! its frames come back through a channel of one. An answer already built
//! (a body of known size: an error, a refusal, a JSON answer) is written as
//! it is. One thread builds one answer at a time, as the runtime's thread
//! did: what is built and not yet counted in the unwritten-answer budget is
//! at most the one frame being built, since each frame is counted (and
//! dropped beyond the budget, [`Counted`]) here, as soon as it is built.
//!
//! # Cancellation
//! A connection that drops its answer (closed, or its client gone) drops the
//! receiving end; the forwarding task sees it, at once if it is waiting for
//! a frame, and drops rmcp's body, which cancels rmcp's request as before.
//! Dropping the [`AnswerThread`] stops its runtime: the bodies still being
//! forwarded are dropped on that thread, and their answers end there.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::{runtime::Handle, sync::mpsc};
use tokio_util::sync::CancellationToken;

use super::answers::{Counted, Dropped};
use crate::serve::AnswerHold;

/// A thread whose runtime polls the answers handed to it.
pub(super) struct AnswerThread {
    handle: Handle,
    stop: CancellationToken,
}

impl AnswerThread {
    /// Starts the thread.
    ///
    /// # Errors
    /// When the runtime or the thread cannot be made.
    pub(super) fn start() -> io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("corral-answers".into())
            .spawn(move || runtime.block_on(stopped.cancelled()))?;
        Ok(Self { handle, stop })
    }

    /// `body` as the connection writes it: as it is when its size is known
    /// (it is built), else polled on this thread. `hold` is let go of as
    /// soon as the answer is built, or a frame of it.
    pub(super) fn answer(&self, body: Counted, hold: AnswerHold) -> Answer {
        let size = body.size_hint();
        if size.exact().is_some() {
            hold.release();
            return Answer::Built(body);
        }
        let (frames, receiver) = mpsc::channel(1);
        self.handle.spawn(forward(body, frames, hold));
        Answer::Forwarded { receiver, size }
    }
}

impl Drop for AnswerThread {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Polls `body` and sends its frames, until it ends, fails, or nobody
/// receives them any more; lets go of `hold` after each frame built.
async fn forward(
    mut body: Counted,
    frames: mpsc::Sender<Result<Frame<Bytes>, Dropped>>,
    hold: AnswerHold,
) {
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            () = frames.closed() => return,
        };
        hold.release();
        let Some(frame) = frame else {
            return;
        };
        let failed = frame.is_err();
        if frames.send(frame).await.is_err() || failed {
            return;
        }
    }
}

/// An answer body, on the connection's side.
pub(super) enum Answer {
    /// Built already: written as it is.
    Built(Counted),
    /// Built on the answer thread: its frames, as they come.
    Forwarded {
        receiver: mpsc::Receiver<Result<Frame<Bytes>, Dropped>>,
        size: SizeHint,
    },
}

impl Body for Answer {
    type Data = Bytes;
    type Error = Dropped;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Dropped>>> {
        match self.get_mut() {
            Self::Built(body) => Pin::new(body).poll_frame(cx),
            Self::Forwarded { receiver, .. } => receiver.poll_recv(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Built(body) => body.is_end_stream(),
            Self::Forwarded { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Built(body) => body.size_hint(),
            Self::Forwarded { size, .. } => *size,
        }
    }
}

#[cfg(test)]
mod tests;
