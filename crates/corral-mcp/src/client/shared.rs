//! What a connection's handles, writer and reader share: the requests
//! waiting for an answer, the outbound queue, the cancellations owed to the
//! server, the read counters and the tail of the server's standard error.
//!
//! One lock orders a call's life: the writer marks a request *written*
//! under the `pending` lock right before writing it (and skips it if its
//! call is gone), and a call that gives up removes itself under the same
//! lock. So a call knows for certain whether its request may have reached
//! the server ([`CallError::OutcomeUnknown`]) or cannot have
//! ([`CallError::NotSent`]).

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
    time::SystemTime,
};

use serde_json::{Map, Value, json};
use tokio::{
    sync::{Notify, mpsc, oneshot},
    time::{Instant, sleep_until},
};

use super::{
    elicitation::Elicitation,
    headers::ToolParams,
    options::CallOptions,
    outcome::{CallError, Ended},
};
use crate::message::Id;

/// A frame for the writer. `request` is the id of one of our requests (the
/// writer marks it written, or skips it when its call is gone); `answer`
/// marks an answer to a request of the server (on HTTP, at most
/// [`HTTP_ANSWERS_IN_FLIGHT`](crate::client::HTTP_ANSWERS_IN_FLIGHT) of
/// those are on their way at once).
#[derive(Debug)]
pub(crate) struct Outbound {
    pub request: Option<Id>,
    pub answer: bool,
    pub line: Vec<u8>,
}

/// The server's answer to a request, or why none will come.
#[derive(Debug)]
pub(crate) enum Reply {
    Result(Value),
    Error {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The connection ended first.
    Closed {
        reason: String,
        written: Option<SystemTime>,
    },
}

#[derive(Debug)]
struct Pending {
    reply: oneshot::Sender<Reply>,
    written: Option<SystemTime>,
    progress: Option<Arc<Notify>>,
}

/// What the reader dropped or answered, by kind.
///
/// ```
/// use corral_mcp::client::ReadStats;
///
/// // What a host may warn about once a connection ended.
/// fn warning(stats: &ReadStats) -> Option<String> {
///     let dropped = stats.dropped();
///     (dropped > 0).then(|| format!("{dropped} of {} frames dropped ({} not JSON)", stats.messages + dropped, stats.not_json))
/// }
/// assert_eq!(warning(&ReadStats::default()), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct ReadStats {
    /// Well-formed messages read.
    pub messages: u64,
    /// Lines that were not JSON, or not UTF-8.
    pub not_json: u64,
    /// JSON values other than an object.
    pub not_object: u64,
    /// An `id` of the wrong type (or `null` outside an error response).
    pub bad_id: u64,
    /// A `method` that is not a string.
    pub bad_method: u64,
    /// Objects that are not a JSON-RPC message (neither request,
    /// notification nor response; a response with neither `result` nor
    /// `error`; a duplicated key).
    pub not_a_message: u64,
    /// Frames over the size cap.
    pub too_long: u64,
    /// Responses to an id no call waits for (unknown, or already settled).
    pub unknown_id: u64,
    /// Requests from the server, answered (`ping`) or refused
    /// (method not found).
    pub server_requests: u64,
    /// Answers to server requests dropped because the outbound queue was
    /// full or, over HTTP, because
    /// [`HTTP_ANSWERS_IN_FLIGHT`](crate::client::HTTP_ANSWERS_IN_FLIGHT)
    /// answers were already on their way.
    pub answers_dropped: u64,
    /// Messages other than requests (notifications, answers to the
    /// server) that HTTP could not deliver or the server refused with an
    /// HTTP status (a request's own failure goes to its call).
    pub http_errors: u64,
}

impl ReadStats {
    /// Every dropped frame.
    pub fn dropped(&self) -> u64 {
        self.not_json
            + self.not_object
            + self.bad_id
            + self.bad_method
            + self.not_a_message
            + self.too_long
            + self.unknown_id
    }
}

/// Counters, bumped by the reader.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub messages: AtomicU64,
    pub not_json: AtomicU64,
    pub not_object: AtomicU64,
    pub bad_id: AtomicU64,
    pub bad_method: AtomicU64,
    pub not_a_message: AtomicU64,
    pub too_long: AtomicU64,
    pub unknown_id: AtomicU64,
    pub server_requests: AtomicU64,
    pub answers_dropped: AtomicU64,
    pub http_errors: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The last bytes of a stream.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    cap: usize,
}

impl Tail {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            cap,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(self.cap)..];
        let over = (self.bytes.len() + data.len()).saturating_sub(self.cap);
        self.bytes.drain(..over.min(self.bytes.len()));
        self.bytes.extend(data);
    }

    pub(crate) fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut all = Vec::with_capacity(a.len() + b.len());
        all.extend_from_slice(a);
        all.extend_from_slice(b);
        String::from_utf8_lossy(&all).into_owned()
    }
}

/// What the listed tools mean for the HTTP headers of a call.
#[derive(Debug, Default)]
pub(crate) struct Tools {
    /// Whether the transport is HTTP (the only one that mirrors headers).
    pub http: bool,
    /// The `x-mcp-header` parameters of each valid tool.
    pub params: ToolParams,
    /// The tools rejected for their annotations, and why.
    pub rejected: HashMap<String, String>,
}

/// The shared state of one connection.
#[derive(Debug)]
pub(crate) struct Core {
    next_id: AtomicI64,
    pending: Mutex<HashMap<Id, Pending>>,
    max_in_flight: usize,
    /// The queue's sending side; taken at teardown.
    out: Mutex<Option<mpsc::Sender<Outbound>>>,
    /// Requests given up after they were written: the writer owes the server
    /// a `notifications/cancelled` (and, on HTTP, closes their streams).
    cancels: Mutex<Vec<(Id, String)>>,
    pub wake_writer: Notify,
    /// Why the connection ended, once its teardown started.
    closed: Mutex<Option<Ended>>,
    /// `_meta` every request carries (2026-07-28: protocol version, client
    /// info and capabilities).
    meta: Mutex<Option<Map<String, Value>>>,
    /// The protocol version the handshake settled on (the HTTP transport
    /// sends it as `MCP-Protocol-Version`).
    protocol_version: Mutex<Option<String>>,
    /// Over HTTP: the `x-mcp-header` parameters of each tool the latest
    /// `tools/list` gave, and the tools it rejected (with why).
    pub tools: Mutex<Tools>,
    /// How the server's elicitation requests are answered, if at all.
    pub elicitation: Mutex<Option<Elicitation>>,
    pub counters: Counters,
    pub stderr: Mutex<Tail>,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Core {
    pub(crate) fn new(
        queue: usize,
        max_in_flight: usize,
        stderr_tail: usize,
    ) -> (Arc<Self>, mpsc::Receiver<Outbound>) {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let core = Self {
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            max_in_flight: max_in_flight.max(1),
            out: Mutex::new(Some(tx)),
            cancels: Mutex::new(Vec::new()),
            wake_writer: Notify::new(),
            closed: Mutex::new(None),
            meta: Mutex::new(None),
            protocol_version: Mutex::new(None),
            tools: Mutex::new(Tools::default()),
            elicitation: Mutex::new(None),
            counters: Counters::default(),
            stderr: Mutex::new(Tail::new(stderr_tail)),
        };
        (Arc::new(core), rx)
    }

    pub(crate) fn stats(&self) -> ReadStats {
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ReadStats {
            messages: get(&c.messages),
            not_json: get(&c.not_json),
            not_object: get(&c.not_object),
            bad_id: get(&c.bad_id),
            bad_method: get(&c.bad_method),
            not_a_message: get(&c.not_a_message),
            too_long: get(&c.too_long),
            unknown_id: get(&c.unknown_id),
            server_requests: get(&c.server_requests),
            answers_dropped: get(&c.answers_dropped),
            http_errors: get(&c.http_errors),
        }
    }

    pub(crate) fn set_meta(&self, meta: Map<String, Value>) {
        *lock(&self.meta) = Some(meta);
    }

    /// Handshake: the protocol version in use from now on.
    pub(crate) fn set_protocol_version(&self, version: &str) {
        *lock(&self.protocol_version) = Some(version.to_owned());
    }

    pub(crate) fn protocol_version(&self) -> Option<String> {
        lock(&self.protocol_version).clone()
    }

    pub(crate) fn ended(&self) -> Option<Ended> {
        lock(&self.closed).clone()
    }

    /// The id given to the latest request on this connection (the
    /// handshake's included), if any.
    pub(crate) fn last_request_id(&self) -> Option<Id> {
        let next = self.next_id.load(Ordering::Relaxed);
        (next > 1).then(|| Id::Number(i128::from(next - 1)))
    }

    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Writer: marks `id` written now; false if its call is gone (skip it).
    pub(crate) fn mark_written(&self, id: &Id) -> bool {
        match lock(&self.pending).get_mut(id) {
            Some(pending) => {
                pending.written = Some(SystemTime::now());
                true
            }
            None => false,
        }
    }

    /// Writer: the cancellations owed, oldest first.
    pub(crate) fn take_cancels(&self) -> Vec<(Id, String)> {
        std::mem::take(&mut *lock(&self.cancels))
    }

    /// Reader: delivers an answer; false if no call waits for `id`.
    ///
    /// Only a written request can be answered: an "answer" to one still in
    /// the queue (a server guessing the next id) is dropped, so no caller
    /// ever gets a result for a request that was never sent.
    pub(crate) fn settle(&self, id: &Id, reply: Reply) -> bool {
        let mut pending = lock(&self.pending);
        if pending.get(id).is_none_or(|p| p.written.is_none()) {
            return false;
        }
        match pending.remove(id) {
            Some(pending) => {
                // A call that gave up at this very moment drops its receiver.
                let _ = pending.reply.send(reply);
                true
            }
            None => false,
        }
    }

    /// Whether a call still waits for the answer to `id`.
    pub(crate) fn waits_for(&self, id: &Id) -> bool {
        lock(&self.pending).contains_key(id)
    }

    /// Transport: the request `id` provably never left this process (the
    /// connection to the server could not even be opened): its call ends as
    /// not sent, whatever the writer marked.
    pub(crate) fn unsent(&self, id: &Id, reason: String) -> bool {
        match lock(&self.pending).remove(id) {
            Some(pending) => {
                let _ = pending.reply.send(Reply::Closed {
                    reason,
                    written: None,
                });
                true
            }
            None => false,
        }
    }

    /// Reader: no answer will come for `id` (its HTTP stream ended without
    /// one): the call ends as the connection's end would end it, not sent
    /// or outcome unknown. False if no call waits for `id`.
    pub(crate) fn unanswered(&self, id: &Id, reason: String) -> bool {
        match lock(&self.pending).remove(id) {
            Some(pending) => {
                let written = pending.written;
                let _ = pending.reply.send(Reply::Closed { reason, written });
                true
            }
            None => false,
        }
    }

    /// Reader: a progress notification for the request `id`.
    pub(crate) fn progress(&self, id: &Id) {
        if let Some(notify) = lock(&self.pending).get(id).and_then(|p| p.progress.clone()) {
            notify.notify_one();
        }
    }

    /// Queues a notification without waiting; false if the queue is full
    /// or closed.
    pub(crate) fn try_send(&self, line: Vec<u8>) -> bool {
        self.try_queue(false, line)
    }

    /// Queues an answer to a request of the server without waiting; false
    /// if the queue is full or closed.
    pub(crate) fn try_answer(&self, line: Vec<u8>) -> bool {
        self.try_queue(true, line)
    }

    fn try_queue(&self, answer: bool, line: Vec<u8>) -> bool {
        let sender = lock(&self.out).clone();
        sender.is_some_and(|sender| {
            sender
                .try_send(Outbound {
                    request: None,
                    answer,
                    line,
                })
                .is_ok()
        })
    }

    /// Teardown, first step: no new frame is queued, and every waiting call
    /// is told why (with whether its request was written). Idempotent; the
    /// first reason wins.
    pub(crate) fn close(&self, why: &Ended) {
        {
            let mut closed = lock(&self.closed);
            if closed.is_none() {
                *closed = Some(why.clone());
            }
        }
        lock(&self.out).take();
        let reason = self.ended().unwrap_or_else(|| why.clone()).to_string();
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for pending in pending {
            let _ = pending.reply.send(Reply::Closed {
                reason: reason.clone(),
                written: pending.written,
            });
        }
        self.wake_writer.notify_one();
    }

    /// The frame of request `number`: `params` (an object, or none) with
    /// the connection's `_meta` and, if `progress`, a `progressToken`.
    fn encode(
        &self,
        number: i64,
        method: &str,
        params: Option<Value>,
        progress: bool,
    ) -> Result<Vec<u8>, CallError> {
        let mut params = match params {
            Some(Value::Object(map)) => map,
            Some(other) => {
                return Err(CallError::NotSent {
                    reason: format!("the parameters must be a JSON object, not {other}"),
                });
            }
            None => Map::new(),
        };
        let meta_extra = lock(&self.meta).clone();
        if progress || meta_extra.is_some() {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                if progress {
                    meta.insert("progressToken".into(), json!(number));
                }
                for (key, value) in meta_extra.unwrap_or_default() {
                    meta.entry(key).or_insert(value);
                }
            }
        }
        let mut frame = json!({"jsonrpc": "2.0", "id": number, "method": method});
        if !params.is_empty() {
            frame["params"] = Value::Object(params);
        }
        serde_json::to_vec(&frame).map_err(|error| CallError::NotSent {
            reason: format!("cannot encode the request: {error}"),
        })
    }

    /// Queues a request whose answer nobody waits for (the `tasks/cancel`
    /// of a call dropped while it followed its task), without waiting:
    /// synchronous, so a `Drop` can call it. Its answer is read and
    /// dropped; the connection's end forgets it. False if it could not be
    /// queued (the queue is full or closed, or too many requests wait).
    pub(crate) fn request_detached(&self, method: &str, params: Value) -> bool {
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = Id::Number(i128::from(number));
        let Ok(line) = self.encode(number, method, Some(params), false) else {
            return false;
        };
        let (reply, _nobody) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if self.ended().is_some() || pending.len() >= self.max_in_flight {
                return false;
            }
            pending.insert(
                id.clone(),
                Pending {
                    reply,
                    written: None,
                    progress: None,
                },
            );
        }
        let sender = lock(&self.out).clone();
        let queued = sender.is_some_and(|sender| {
            sender
                .try_send(Outbound {
                    request: Some(id.clone()),
                    answer: false,
                    line,
                })
                .is_ok()
        });
        if queued {
            self.wake_writer.notify_one();
        } else {
            lock(&self.pending).remove(&id);
        }
        queued
    }

    /// Sends a request and waits for its answer within `options`.
    ///
    /// # Cancel safety
    /// Dropping the future gives the call up: if the request was written, a
    /// `notifications/cancelled` for it is queued for the server; if not, it
    /// is never written.
    pub(crate) async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<Value, CallError> {
        let number = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = Id::Number(i128::from(number));
        let progress = options.idle_timeout.map(|_| Arc::new(Notify::new()));
        let line = self.encode(number, method, params, progress.is_some())?;

        let (reply, mut answer) = oneshot::channel();
        {
            if let Some(why) = self.ended() {
                return Err(CallError::NotSent {
                    reason: why.to_string(),
                });
            }
            let mut pending = lock(&self.pending);
            if pending.len() >= self.max_in_flight {
                return Err(CallError::NotSent {
                    reason: format!(
                        "{} requests are already waiting for an answer on this connection \
                         (ConnectOptions::max_in_flight)",
                        pending.len()
                    ),
                });
            }
            pending.insert(
                id.clone(),
                Pending {
                    reply,
                    written: None,
                    progress: progress.clone(),
                },
            );
        }
        let mut call = Abandon {
            core: self,
            id: id.clone(),
            armed: true,
        };
        let hard = options
            .timeout
            .and_then(|limit| Instant::now().checked_add(limit));
        let cancel = options.cancel.clone().unwrap_or_default();

        // Queue it, within the deadline.
        let sender = lock(&self.out).clone();
        let Some(sender) = sender else {
            return call.give_up("the connection is closing", &mut answer);
        };
        let queued = tokio::select! {
            biased;
            () = cancel.cancelled() => Err("cancelled"),
            () = until(hard) => Err("the deadline passed"),
            sent = sender.send(Outbound { request: Some(id.clone()), answer: false, line }) => {
                sent.map_err(|_| "the connection is closing")
            }
        };
        drop(sender);
        if let Err(why) = queued {
            return call.give_up(why, &mut answer);
        }
        self.wake_writer.notify_one();

        // Wait for the answer.
        let mut idle = options
            .idle_timeout
            .and_then(|idle| Instant::now().checked_add(idle));
        let reply = loop {
            let ends = match (idle, hard) {
                (Some(idle), Some(hard)) => Some(idle.min(hard)),
                (idle, hard) => idle.or(hard),
            };
            tokio::select! {
                biased;
                reply = &mut answer => break reply,
                () = cancel.cancelled() => return call.give_up("cancelled", &mut answer),
                () = until(ends) => return call.give_up("the deadline passed", &mut answer),
                () = notified(progress.as_deref()) => {
                    idle = options
                        .idle_timeout
                        .and_then(|limit| Instant::now().checked_add(limit));
                }
            }
        };
        call.armed = false;
        match reply {
            Ok(reply) => answered(&id, reply),
            // The sender was dropped without an answer: only `close` does
            // that after sending `Closed`, so this is unreachable in
            // practice; the request's fate is unknown.
            Err(_) => Err(CallError::OutcomeUnknown {
                request_id: id,
                written_at: SystemTime::now(),
                reason: "the connection ended".into(),
            }),
        }
    }
}

/// What a reply means for the caller.
fn answered(id: &Id, reply: Reply) -> Result<Value, CallError> {
    match reply {
        Reply::Result(value) => Ok(value),
        Reply::Error {
            code,
            message,
            data,
        } => Err(CallError::Rpc {
            code,
            message,
            data,
        }),
        Reply::Closed {
            reason,
            written: None,
        } => Err(CallError::NotSent { reason }),
        Reply::Closed {
            reason,
            written: Some(written_at),
        } => Err(CallError::OutcomeUnknown {
            request_id: id.clone(),
            written_at,
            reason,
        }),
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn notified(notify: Option<&Notify>) {
    match notify {
        Some(notify) => notify.notified().await,
        None => std::future::pending().await,
    }
}

/// A call still waiting; dropping it gives the call up.
struct Abandon<'a> {
    core: &'a Arc<Core>,
    id: Id,
    armed: bool,
}

impl Abandon<'_> {
    /// Gives the call up for `why`: not sent if it was never written; else
    /// outcome unknown, and a cancellation is owed to the server. If the
    /// answer raced in meanwhile, that answer stands.
    fn give_up(
        &mut self,
        why: &str,
        answer: &mut oneshot::Receiver<Reply>,
    ) -> Result<Value, CallError> {
        self.armed = false;
        match self.remove(why) {
            Some(None) => Err(CallError::NotSent {
                reason: format!("{why} before the request was written"),
            }),
            Some(Some(written_at)) => Err(CallError::OutcomeUnknown {
                request_id: self.id.clone(),
                written_at,
                reason: why.into(),
            }),
            // Settled meanwhile: the reader delivered the answer (or the
            // teardown its reason) just now.
            None => match answer.try_recv() {
                Ok(reply) => answered(&self.id, reply),
                Err(_) => Err(CallError::OutcomeUnknown {
                    request_id: self.id.clone(),
                    written_at: SystemTime::now(),
                    reason: why.into(),
                }),
            },
        }
    }

    /// Removes the call; `Some(written)` if it was still waiting.
    fn remove(&self, why: &str) -> Option<Option<SystemTime>> {
        let pending = lock(&self.core.pending).remove(&self.id)?;
        if pending.written.is_some() {
            lock(&self.core.cancels).push((self.id.clone(), why.to_string()));
            self.core.wake_writer.notify_one();
        }
        Some(pending.written)
    }
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.remove("the call was dropped");
        }
    }
}
