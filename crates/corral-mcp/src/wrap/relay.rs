//! The two pumps: client → server and server → client, each reading lines,
//! dropping malformed ones with one line on standard error (rate-limited, see
//! `notelimit`), tracking request ids (in a capped table, see
//! `inflight`), and forwarding the rest byte for byte, in order.
//!
//! Both pumps share one [`Shared`]: the in-flight table and the counters,
//! behind a mutex that is never held across an `.await`.

use std::{
    io,
    sync::{Mutex, MutexGuard, PoisonError},
};

use serde::Serialize;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::Notify,
};

use super::{
    inflight::{InFlight, MAX_IN_FLIGHT, Matched, Side},
    notelimit::{Admit, NoteLimit},
};
use crate::{
    frame::{Framer, Piece, READ_CHUNK},
    message::{self, Id, Malformed, Message},
};

/// The JSON-RPC error code of the relay's own answers: the TypeScript SDK's
/// `ConnectionClosed`, in the range JSON-RPC leaves to implementations.
pub const SERVER_GONE_CODE: i32 = -32000;

/// Frames relayed in one direction: [`RelayStats`] holds one each way.
///
/// ```
/// use corral_mcp::DirectionStats;
///
/// let stats = DirectionStats { frames: 3, bytes: 120, dropped: 1 };
/// let frames_read = stats.frames + stats.dropped;
/// assert_eq!(frames_read, 4);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// Frames forwarded.
    pub frames: u64,
    /// Bytes forwarded, newlines included.
    pub bytes: u64,
    /// Frames dropped as malformed (blank lines are skipped uncounted).
    pub dropped: u64,
}

/// What the relay did: [`WrapExit::relay`](crate::WrapExit::relay).
///
/// ```
/// use corral_mcp::RelayStats;
///
/// // What a host may want to warn about after a relay.
/// fn warnings(stats: &RelayStats) -> Vec<String> {
///     let mut warnings = Vec::new();
///     let dropped = stats.client_to_server.dropped + stats.server_to_client.dropped;
///     if dropped > 0 {
///         warnings.push(format!("{dropped} malformed frames dropped"));
///     }
///     if stats.in_flight_answered > 0 {
///         warnings.push(format!("{} requests answered by the relay", stats.in_flight_answered));
///     }
///     warnings
/// }
/// assert!(warnings(&RelayStats::default()).is_empty());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RelayStats {
    /// From the client to the server.
    pub client_to_server: DirectionStats,
    /// From the server to the client.
    pub server_to_client: DirectionStats,
    /// Client requests the relay answered with an error because the server
    /// was gone.
    pub in_flight_answered: u64,
    /// Client requests left unanswered because the client's side was gone.
    pub in_flight_unanswered: u64,
    /// Server requests the client had not answered when the relay ended.
    pub server_requests_unanswered: u64,
    /// Requests cancelled by their sender (`notifications/cancelled`).
    pub cancelled: u64,
    /// Responses whose id matched no request in flight (forwarded anyway).
    pub unmatched_responses: u64,
    /// Requests that reused an id still in flight.
    pub reused_ids: u64,
}

/// Where the one-line notes about dropped frames go.
pub type Notes = Box<dyn Fn(&str) + Send + Sync>;

/// State shared by the two pumps.
pub struct Shared {
    state: Mutex<State>,
    max_frame_bytes: usize,
    notes: Notes,
    /// Signalled once when writing to the client fails.
    pub(crate) client_broken: Notify,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("max_frame_bytes", &self.max_frame_bytes)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    inflight: InFlight,
    stats: RelayStats,
    /// The server → client pump is in the middle of a write: a partial frame
    /// may be on the client's pipe, so nothing else may be written after it.
    client_mid_write: bool,
    client_broken: bool,
    notes: NoteLimit,
}

/// Why a pump stopped.
#[derive(Debug)]
pub enum PumpEnd {
    /// End of input.
    Eof,
    /// Reading failed (treated as end of input).
    ReadFailed,
    /// Writing failed ([`OnWriteError::Stop`] only).
    WriteFailed,
}

/// What a pump does when writing fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnWriteError {
    /// Stop and return [`PumpEnd::WriteFailed`].
    Stop,
    /// Keep reading (and tracking) and discard the output, so the writer on
    /// the other end never blocks on a full pipe; signal
    /// `Shared::client_broken`.
    Discard,
}

impl Shared {
    /// Shared state for frames of at most `max_frame_bytes`; notes about
    /// dropped frames go to `notes`.
    pub fn new(max_frame_bytes: usize, notes: Notes) -> Self {
        Self {
            state: Mutex::default(),
            max_frame_bytes,
            notes,
            client_broken: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters so far.
    pub fn stats(&self) -> RelayStats {
        self.lock().stats
    }

    #[cfg(test)]
    /// How many requests from `sender` are in flight.
    pub fn in_flight(&self, sender: Side) -> usize {
        self.lock().inflight.count(sender)
    }

    #[cfg(test)]
    /// Whether the client's output can still take a clean frame.
    pub fn client_writable(&self) -> bool {
        let state = self.lock();
        !state.client_mid_write && !state.client_broken
    }

    /// Handles one piece read from `from`, appending what to forward to `out`.
    fn accept(&self, state: &mut State, from: Side, piece: Piece<'_>, out: &mut Vec<u8>) {
        let line = match piece {
            Piece::TooLong { len } => {
                let max = self.max_frame_bytes;
                return self.drop_frame(state, from, &Malformed::TooLong { len, max }, &[]);
            }
            Piece::Line(line) if line.iter().all(u8::is_ascii_whitespace) => return,
            Piece::Line(line) => line,
        };
        let message = match message::classify(line) {
            Ok(message) => message,
            Err(malformed) => return self.drop_frame(state, from, &malformed, line),
        };
        match message {
            Message::Request { id, method } => {
                let forgotten = state.inflight.forgotten();
                if !state.inflight.request(from, id, &method) {
                    state.stats.reused_ids += 1;
                }
                if state.inflight.forgotten() > forgotten {
                    self.note(
                        state,
                        &format!(
                            "corral mcp: over {MAX_IN_FLIGHT} requests from the {} in flight: \
                             forgot the oldest (its late answer is still forwarded)",
                            from.name()
                        ),
                    );
                }
            }
            Message::Notification {
                cancels: Some(id), ..
            } => {
                if state.inflight.cancel(from, &id) {
                    state.stats.cancelled += 1;
                }
            }
            Message::Notification { .. } | Message::Response { id: None } => {}
            Message::Response { id: Some(id) } => {
                if state.inflight.response(from, &id) == Matched::Unknown {
                    state.stats.unmatched_responses += 1;
                }
            }
        }
        let direction = direction(&mut state.stats, from);
        direction.frames += 1;
        direction.bytes += line.len() as u64 + 1;
        out.extend_from_slice(line);
        out.push(b'\n');
    }

    fn drop_frame(&self, state: &mut State, from: Side, why: &Malformed, line: &[u8]) {
        direction(&mut state.stats, from).dropped += 1;
        let preview = if line.is_empty() {
            String::new()
        } else {
            const SHOWN: usize = 80;
            let head = String::from_utf8_lossy(&line[..line.len().min(SHOWN)]);
            let more = if line.len() > SHOWN { "..." } else { "" };
            format!(": {head:?}{more}")
        };
        self.note(
            state,
            &format!(
                "corral mcp: dropped a frame from the {}: {why}{preview}",
                from.name()
            ),
        );
    }

    /// Writes a note, unless more than the rate limit's share came this
    /// second; the first note after a burst says how many were held back.
    fn note(&self, state: &mut State, note: &str) {
        match state.notes.admit(std::time::Instant::now()) {
            Admit::Suppress => {}
            Admit::Write { suppressed: 0 } => (self.notes)(note),
            Admit::Write { suppressed } => {
                (self.notes)(&format!(
                    "corral mcp: {suppressed} more notes held back (over the rate limit)"
                ));
                (self.notes)(note);
            }
        }
    }

    /// Answers every client request in flight with an error saying
    /// `message`, oldest first; counts answered and unanswered requests and
    /// the server's requests left open. Writes nothing if the client's output
    /// is broken or holds a partial frame.
    ///
    /// # Cancel safety
    /// Not cancel safe: cancelled mid-write, a partial frame may be left on
    /// `writer`. The requests are counted as unanswered first.
    pub async fn answer_in_flight<W: AsyncWrite + Unpin>(&self, writer: &mut W, message: &str) {
        let (pending, writable) = {
            let mut state = self.lock();
            let pending = state.inflight.take(Side::Client);
            let server_open = state.inflight.take(Side::Server).len() as u64;
            state.stats.server_requests_unanswered += server_open;
            state.stats.in_flight_unanswered += pending.len() as u64;
            (pending, !state.client_mid_write && !state.client_broken)
        };
        if pending.is_empty() || !writable {
            return;
        }
        let mut out = Vec::new();
        for request in &pending {
            out.extend(error_response(&request.id, message));
        }
        let written = async {
            writer.write_all(&out).await?;
            writer.flush().await
        };
        if written.await.is_ok() {
            let mut state = self.lock();
            state.stats.in_flight_unanswered -= pending.len() as u64;
            state.stats.in_flight_answered += pending.len() as u64;
        }
    }
}

fn direction(stats: &mut RelayStats, from: Side) -> &mut DirectionStats {
    match from {
        Side::Client => &mut stats.client_to_server,
        Side::Server => &mut stats.server_to_client,
    }
}

/// The relay's own error response to request `id`, with its newline.
pub fn error_response(id: &Id, message: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a Id,
        error: ErrorObject<'a>,
    }
    #[derive(Serialize)]
    struct ErrorObject<'a> {
        code: i32,
        message: &'a str,
        data: Data,
    }
    #[derive(Serialize)]
    struct Data {
        source: &'static str,
    }
    let response = Response {
        jsonrpc: "2.0",
        id,
        error: ErrorObject {
            code: SERVER_GONE_CODE,
            message,
            data: Data {
                source: "corral mcp wrap",
            },
        },
    };
    let mut bytes = serde_json::to_vec(&response).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Relays lines from `reader` (sent by `from`) to `writer` until end of
/// input. Complete frames read together are written together, so a busy
/// stream is written in large batches and an idle one at once.
///
/// # Cancel safety
/// Not cancel safe: cancelled mid-write, a partial frame may be left on
/// `writer` (for the server → client direction the shared state records it,
/// see [`Shared::client_writable`]).
pub async fn pump<R, W>(
    from: Side,
    reader: &mut R,
    writer: &mut W,
    shared: &Shared,
    on_write_error: OnWriteError,
) -> PumpEnd
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut framer = Framer::new(shared.max_frame_bytes);
    let mut out = Vec::with_capacity(READ_CHUNK);
    let mut writable = true;
    loop {
        let eof = match reader.read_buf(framer.read_buffer()).await {
            Ok(read) => read == 0,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return PumpEnd::ReadFailed,
        };
        {
            let mut state = shared.lock();
            while let Some(piece) = framer.next_piece() {
                shared.accept(&mut state, from, piece, &mut out);
            }
            if eof && let Some(piece) = framer.finish() {
                shared.accept(&mut state, from, piece, &mut out);
            }
        }
        if !out.is_empty() && writable {
            let to_client = from == Side::Server;
            if to_client {
                shared.lock().client_mid_write = true;
            }
            let written = async {
                writer.write_all(&out).await?;
                writer.flush().await
            };
            let result = written.await;
            if to_client {
                let mut state = shared.lock();
                state.client_mid_write = false;
                state.client_broken |= result.is_err();
            }
            if result.is_err() {
                match on_write_error {
                    OnWriteError::Stop => return PumpEnd::WriteFailed,
                    OnWriteError::Discard => {
                        writable = false;
                        shared.client_broken.notify_one();
                    }
                }
            }
        }
        out.clear();
        if eof {
            return PumpEnd::Eof;
        }
    }
}

#[cfg(test)]
mod tests;
