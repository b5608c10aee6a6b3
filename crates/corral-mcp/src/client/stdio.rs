//! The stdio wire: newline-delimited JSON-RPC over a pair of byte streams
//! (a server's stdin and stdout, or any streams handed to
//! [`Connection::attach`](super::Connection::attach)). One writer task drains
//! the outbound queue; one reader task reads frames (and the server's
//! standard error, into a bounded tail) until the stream ends.

use std::{io, sync::Arc};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::mpsc,
};
use tokio_util::sync::CancellationToken;

use super::{
    dispatch::{cancelled_notification, dispatch},
    shared::{Core, Outbound, lock},
};
use crate::frame::{Framer, Piece};

/// Why the writer stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriterEnd {
    /// Told to (teardown).
    Stopped,
    /// The queue was closed and drained.
    QueueClosed,
    /// A write failed.
    Failed(String),
}

/// Why the reader stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReaderEnd {
    /// End of file.
    Eof,
    /// A read failed.
    Failed(String),
}

/// Writes queued frames, and the cancellations owed, until stopped, the
/// queue closes or a write fails. Dropping `out` on return closes the
/// server's stdin.
pub(crate) async fn write<W: AsyncWrite + Unpin>(
    core: Arc<Core>,
    mut queue: mpsc::Receiver<Outbound>,
    mut out: W,
    stop: CancellationToken,
) -> WriterEnd {
    loop {
        let mut batch = Vec::new();
        for (id, why) in core.take_cancels() {
            batch.extend(cancelled_notification(&id, &why));
            batch.push(b'\n');
        }
        if batch.is_empty() {
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => return WriterEnd::Stopped,
                () = core.wake_writer.notified() => continue,
                next = queue.recv() => next,
            };
            let Some(frame) = next else {
                return WriterEnd::QueueClosed;
            };
            if let Some(id) = &frame.request
                && !core.mark_written(id)
            {
                // Its call gave up before it was written: never send it.
                continue;
            }
            if let Some(id) = &frame.request {
                tracing::debug!(%id, "request written");
            }
            batch = frame.line;
            batch.push(b'\n');
        }
        let written = async {
            out.write_all(&batch).await?;
            out.flush().await
        };
        tokio::select! {
            biased;
            () = stop.cancelled() => return WriterEnd::Stopped,
            result = written => {
                if let Err(error) = result {
                    return WriterEnd::Failed(error.to_string());
                }
            }
        }
    }
}

/// Reads frames from `input` until it ends, and the server's standard error
/// (if given) into the core's tail. Malformed frames are dropped and counted;
/// nothing but the end of `input` ends the loop.
pub(crate) async fn read<R, E>(
    core: Arc<Core>,
    mut input: R,
    mut stderr: Option<E>,
    max_frame_bytes: usize,
) -> ReaderEnd
where
    R: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
{
    let mut framer = Framer::new(max_frame_bytes);
    let mut err_buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            // Standard error first: what a server wrote there before it
            // exited is read before the end of its output ends the loop
            // (both are ready at once; in random order the tail was lost).
            // A server that floods it delays only its own answers.
            biased;
            read = read_some(stderr.as_mut(), &mut err_buf) => match read {
                Some(read) if read > 0 => lock(&core.stderr).push(&err_buf[..read]),
                _ => stderr = None,
            },
            read = input.read_buf(framer.read_buffer()) => {
                let eof = match read {
                    Ok(read) => read == 0,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return ReaderEnd::Failed(error.to_string()),
                };
                while let Some(piece) = framer.next_piece() {
                    take(&core, &piece);
                }
                if eof {
                    if let Some(piece) = framer.finish() {
                        take(&core, &piece);
                    }
                    return ReaderEnd::Eof;
                }
            }
        }
    }
}

fn take(core: &Core, piece: &Piece<'_>) {
    match piece {
        Piece::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
        Piece::Line(line) => dispatch(core, line),
        Piece::TooLong { len } => {
            tracing::debug!(len, "dropped an over-long frame from the server");
            super::shared::bump(&core.counters.too_long);
        }
    }
}

/// One read of `stream`; pending for ever without one. `None` on error.
async fn read_some<E: AsyncRead + Unpin>(stream: Option<&mut E>, buf: &mut [u8]) -> Option<usize> {
    match stream {
        Some(stream) => stream.read(buf).await.ok(),
        None => std::future::pending().await,
    }
}
