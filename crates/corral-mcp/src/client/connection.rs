//! One connection: its wire (a server spawned as an owned tree, an adopted
//! one, or bare streams), its two tasks, the handshake, and the one
//! teardown every exit path reaches.
//!
//! A connection is run by a supervisor task from the first step: it spawns
//! the server, starts the writer and the reader, runs the handshake, serves,
//! and tears down. Whatever ends the connection (a failed or cancelled
//! handshake, a caller that dropped the connect, `close`, the manager's
//! shutdown, the handle dropped, the server's output ending, the server
//! exiting, a failed write), the supervisor runs [`teardown`] and only then
//! publishes the result. A caller who cancels (or drops) a connect or a
//! close never cuts the teardown short: it runs in the supervisor, and a
//! caller still waiting hears back after it finished.
//!
//! The teardown's postcondition: the writer and reader tasks finished, the
//! outbound queue dropped, every waiting call answered (not sent, or outcome
//! unknown), the server's whole tree gone (stdin closed, `close_grace`, then
//! corral's policy: `SIGTERM`, grace, `SIGKILL`, final bound), and the
//! connection removed from its manager. Over HTTP there is no tree: the
//! teardown ends the session (`DELETE`, within `close_grace`) and closes
//! every open answer.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use corral::{Control, Finished, Input, Output};
use rmcp::model::{CallToolResult, ListToolsResult, Tool};
use serde_json::{Map, Value, json};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::{oneshot, watch},
    task::JoinHandle,
    time::{Instant, timeout},
};
use tokio_util::sync::CancellationToken;

use super::{
    core::{Core, ReadStats, lock},
    handshake::{PeerInfo, handshake},
    http::{self, Endpoint},
    lines::{self, ReaderEnd, WriterEnd},
    options::{CallOptions, ConnectOptions, HttpOptions},
    outcome::{CallError, ConnectError, Ended},
    tasks::{self, Alive, TaskCount},
};
use crate::message::Id;

/// How long the server's output is still read once its tree is gone (every
/// writer is gone then, so end of file comes at once unless a survivor holds
/// the pipe).
const DRAIN: Duration = Duration::from_millis(250);

/// What the teardown did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Teardown {
    /// What started it.
    pub ended: Ended,
    /// The server's tree: how it ended and what the cleanup did (`None` for
    /// a connection over bare streams, or a server that never started).
    pub finished: Option<Finished>,
    /// What the reader read, dropped and answered.
    pub stats: ReadStats,
    /// How long the teardown took.
    pub took: Duration,
}

/// How a connection reaches its server.
pub(crate) enum Launch {
    /// Spawn this command as an owned tree (its stdio is set to pipes).
    Spawn(corral::Command),
    /// A tree spawned by the caller with piped stdin and stdout.
    Adopt(corral::Child),
    /// Bare streams; no process to end.
    Streams {
        input: Box<dyn AsyncRead + Send + Unpin>,
        output: Box<dyn AsyncWrite + Send + Unpin>,
    },
    /// A streamable HTTP endpoint; no process to end.
    Http { url: String, options: HttpOptions },
}

/// Called once the teardown finished, before it is published (the manager
/// removes the connection here).
pub(crate) type OnEnd = Box<dyn FnOnce(&Teardown) + Send>;

/// Who asked the connection to end, and why.
#[derive(Debug, Clone, Default)]
pub(crate) struct Closer {
    reason: Arc<Mutex<Option<Ended>>>,
    token: CancellationToken,
}

impl Closer {
    /// Asks for the teardown; the first reason wins.
    pub(crate) fn close(&self, why: Ended) {
        lock(&self.reason).get_or_insert(why);
        self.token.cancel();
    }

    fn reason(&self) -> Ended {
        lock(&self.reason).clone().unwrap_or(Ended::Dropped)
    }
}

/// Closes the connection when dropped (the handle's drop is synchronous: it
/// only cancels a token the supervisor watches).
#[derive(Debug)]
struct CloseOnDrop(Closer);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close(Ended::Dropped);
    }
}

/// What the supervisor hands the caller once the handshake succeeded.
struct Connected {
    core: Arc<Core>,
    peer: PeerInfo,
    pid: Option<i32>,
    guard: CloseOnDrop,
}

/// A live connection to one MCP server.
///
/// Dropping it ends the connection (the whole teardown runs in its
/// supervisor task; see [`Connection::close`] to wait for it).
#[derive(Debug)]
pub struct Connection {
    core: Arc<Core>,
    peer: PeerInfo,
    pid: Option<i32>,
    closer: Closer,
    done: watch::Receiver<Option<Arc<Teardown>>>,
    _guard: CloseOnDrop,
}

impl Connection {
    /// Spawns `command` as an owned tree (every backend of corral; its
    /// stdin, stdout and stderr are set to pipes) and connects to it.
    ///
    /// # Errors
    /// [`ConnectError`]; the server's whole tree is gone when it is
    /// returned.
    ///
    /// # Cancel safety
    /// Dropping the future (or cancelling `options.cancel`) tears the
    /// connection down; with the token, the error comes after the teardown
    /// finished.
    pub async fn spawn(
        command: corral::Command,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError> {
        open(Launch::Spawn(command), options, &TaskCount::default(), None).await
    }

    /// Connects to a server the caller spawned with corral (stdin and stdout
    /// piped; stderr piped too if its tail should explain a failed
    /// handshake). The connection owns the tree from now on.
    ///
    /// # Errors
    /// As [`Connection::spawn`].
    pub async fn adopt(
        child: corral::Child,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError> {
        open(Launch::Adopt(child), options, &TaskCount::default(), None).await
    }

    /// Connects over bare streams (no process: the teardown closes `output`
    /// and waits up to `close_grace` for `input` to end).
    ///
    /// # Errors
    /// As [`Connection::spawn`].
    pub async fn attach<R, W>(
        input: R,
        output: W,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let launch = Launch::Streams {
            input: Box::new(input),
            output: Box::new(output),
        };
        open(launch, options, &TaskCount::default(), None).await
    }

    /// Connects to a streamable HTTP endpoint (`http://` only: no TLS in
    /// this build). The teardown ends the session (`DELETE`, within
    /// `close_grace`) and closes every open answer.
    ///
    /// # Errors
    /// [`ConnectError::Http`] for a URL or header that cannot be used, or a
    /// server that cannot be reached; [`ConnectError::Handshake`] for a
    /// server that refuses the handshake. Every task is gone when it is
    /// returned.
    ///
    /// # Cancel safety
    /// As [`Connection::spawn`].
    pub async fn http(
        url: &str,
        http: HttpOptions,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError> {
        let launch = Launch::Http {
            url: url.to_owned(),
            options: http,
        };
        open(launch, options, &TaskCount::default(), None).await
    }

    /// What the handshake learnt.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer
    }

    /// The server's pid (the leader of its tree), if this connection started
    /// or adopted one.
    pub fn server_pid(&self) -> Option<i32> {
        self.pid
    }

    /// What the reader read and dropped so far.
    pub fn stats(&self) -> ReadStats {
        self.core.stats()
    }

    /// Requests waiting for their answer.
    pub fn in_flight(&self) -> usize {
        self.core.in_flight()
    }

    /// Why the connection ended, once it did.
    pub fn ended(&self) -> Option<Ended> {
        self.core.ended()
    }

    /// Sends any request and waits for its result.
    ///
    /// # Errors
    /// [`CallError`]: not sent, outcome unknown, or the server's error.
    ///
    /// # Cancel safety
    /// Dropping the future gives the call up: if the request was written,
    /// `notifications/cancelled` is sent for it; if not, it is never
    /// written. Nothing is ever sent twice.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<Value, CallError> {
        self.core.request(method, params, options).await
    }

    /// Calls a tool. A result with `isError: true` is the tool's own error
    /// and comes back as `Ok`.
    ///
    /// Nothing is retried, ever: a deadline, a cancellation or a dropped
    /// future after the request was written gives
    /// [`CallError::OutcomeUnknown`], and what the server did is not undone.
    ///
    /// # Errors
    /// As [`Connection::request`], and [`CallError::InvalidResult`].
    ///
    /// # Cancel safety
    /// As [`Connection::request`].
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let mut params = json!({"name": name});
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        let result = self
            .core
            .request("tools/call", Some(params), options)
            .await?;
        serde_json::from_value(result).map_err(|error| CallError::InvalidResult(error.to_string()))
    }

    /// Lists the server's tools (every page, each under `options`).
    ///
    /// # Errors
    /// As [`Connection::call_tool`].
    pub async fn list_tools(&self, options: &CallOptions) -> Result<Vec<Tool>, CallError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        // A server that pages for ever is cut off.
        for _ in 0..1000 {
            let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
            let result = self.core.request("tools/list", params, options).await?;
            let page: ListToolsResult = serde_json::from_value(result)
                .map_err(|error| CallError::InvalidResult(error.to_string()))?;
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(tools),
            }
        }
        Err(CallError::InvalidResult(
            "tools/list: more than 1,000 pages".into(),
        ))
    }

    /// Closes the connection and waits for the teardown. Later calls get
    /// [`CallError::NotSent`]; calls in flight get
    /// [`CallError::OutcomeUnknown`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future does not stop the teardown, which
    /// runs in the connection's supervisor task.
    pub async fn close(&self) -> Option<Arc<Teardown>> {
        self.closer.close(Ended::Disconnected);
        self.closed().await
    }

    /// Closes with `why` (the manager's reasons).
    pub(crate) async fn close_for(&self, why: Ended) -> Option<Arc<Teardown>> {
        self.closer.close(why);
        self.closed().await
    }

    /// Waits until the connection ended, whatever ended it, and its
    /// teardown finished. `None` if the runtime shut down first (its tasks
    /// were dropped; corral then ends the tree on its own).
    pub async fn closed(&self) -> Option<Arc<Teardown>> {
        let mut done = self.done.clone();
        done.wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|done| done.clone())
    }
}

/// Starts a connection's supervisor and waits for the handshake.
pub(crate) async fn open(
    launch: Launch,
    options: ConnectOptions,
    tasks: &TaskCount,
    on_end: Option<OnEnd>,
) -> Result<Connection, ConnectError> {
    let (reply, answer) = oneshot::channel();
    let (done_tx, done) = watch::channel(None);
    let closer = Closer::default();
    let count = tasks.clone();
    let closing = closer.clone();
    tasks::spawn_releasing(tasks, move |alive| {
        supervise(
            launch, options, count, closing, reply, done_tx, on_end, alive,
        )
    });
    match answer.await {
        Ok(Ok(connected)) => Ok(Connection {
            core: connected.core,
            peer: connected.peer,
            pid: connected.pid,
            closer,
            done,
            _guard: connected.guard,
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(ConnectError::Cancelled),
    }
}

type Waiting = Pin<Box<dyn Future<Output = Result<Finished, corral::Error>> + Send>>;

/// The server's tree while the connection holds it.
struct Tree {
    control: Control,
    wait: Waiting,
    finished: Option<Finished>,
}

/// Everything the teardown ends.
struct Parts {
    core: Arc<Core>,
    stop_writer: CancellationToken,
    writer: Option<JoinHandle<WriterEnd>>,
    reader: Option<JoinHandle<ReaderEnd>>,
    tree: Option<Tree>,
    supervise_failed: Option<String>,
    /// The HTTP endpoint, whose session the teardown ends.
    http: Option<Arc<Endpoint>>,
}

impl Parts {
    /// Waits for the first of: the writer ending, the reader ending, the
    /// tree's leader exiting. Pending for ever once all have.
    async fn ended(&mut self) -> Ended {
        let writer = async {
            match self.writer.as_mut() {
                Some(writer) => writer.await,
                None => std::future::pending().await,
            }
        };
        let reader = async {
            match self.reader.as_mut() {
                Some(reader) => reader.await,
                None => std::future::pending().await,
            }
        };
        let tree = async {
            match self.tree.as_mut() {
                Some(tree) if tree.finished.is_none() => (&mut tree.wait).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            end = writer => {
                self.writer = None;
                match end {
                    Ok(WriterEnd::Failed(why)) => Ended::WriteFailed(why),
                    Ok(end) => Ended::WriteFailed(format!("the writer stopped ({end:?})")),
                    Err(error) => Ended::WriteFailed(format!("the writer task failed: {error}")),
                }
            }
            end = reader => {
                self.reader = None;
                match end {
                    Ok(ReaderEnd::Eof) => Ended::ReadLoopEnded("end of file".into()),
                    Ok(ReaderEnd::Failed(why)) => Ended::ReadLoopEnded(why),
                    Err(error) => Ended::ReadLoopEnded(format!("the reader task failed: {error}")),
                }
            }
            result = tree => match result {
                Ok(finished) => {
                    let how = format!("{:?}", finished.outcome);
                    if let Some(tree) = self.tree.as_mut() {
                        tree.finished = Some(finished);
                    }
                    Ended::ServerExited(how)
                }
                Err(error) => {
                    if let Some(tree) = self.tree.as_mut() {
                        // Not waited on again: corral lost the child.
                        tree.wait = Box::pin(std::future::pending());
                    }
                    self.supervise_failed = Some(error.to_string());
                    Ended::ServerExited(format!("supervising it failed: {error}"))
                }
            },
        }
    }
}

/// The connection's whole life, in its supervisor task.
#[allow(clippy::too_many_arguments)]
async fn supervise(
    launch: Launch,
    options: ConnectOptions,
    tasks: TaskCount,
    closer: Closer,
    reply: oneshot::Sender<Result<Connected, ConnectError>>,
    done: watch::Sender<Option<Arc<Teardown>>>,
    on_end: Option<OnEnd>,
    alive: Alive,
) {
    let mut reply = reply;
    let done = Done {
        done,
        on_end,
        alive,
    };
    let (core, queue) = Core::new(options.queue, options.max_in_flight, options.stderr_tail);
    let link = match launch {
        Launch::Spawn(command) => {
            let spawned = command
                .stdin(Input::Piped)
                .stdout(Output::Piped)
                .stderr(Output::Piped)
                .spawn()
                .await;
            match spawned {
                Ok(child) => match piped(child) {
                    Ok(parts) => Link::Stdio(Box::new(parts)),
                    Err(error) => return fail(reply, done, error),
                },
                Err(error) => return fail(reply, done, ConnectError::Spawn(error)),
            }
        }
        Launch::Adopt(child) => match piped(child) {
            Ok(parts) => Link::Stdio(Box::new(parts)),
            Err(error) => return fail(reply, done, error),
        },
        Launch::Streams { input, output } => {
            Link::Stdio(Box::new((input, output, None, None, None)))
        }
        Launch::Http { url, options: http } => match Endpoint::new(&url, &http) {
            Ok(endpoint) => Link::Http(Arc::new(endpoint)),
            Err(error) => return fail(reply, done, error),
        },
    };
    let stop_writer = CancellationToken::new();
    let (writer, reader, tree, pid, http) = match link {
        Link::Stdio(wire) => {
            let (input, output, stderr, tree, pid) = *wire;
            let writer = tasks::spawn(
                &tasks,
                lines::write(core.clone(), queue, output, stop_writer.clone()),
            );
            let reader = tasks::spawn(
                &tasks,
                lines::read(core.clone(), input, stderr, options.max_frame_bytes),
            );
            (writer, reader, tree, pid, None)
        }
        Link::Http(endpoint) => {
            let started = http::start(
                &tasks,
                &core,
                queue,
                endpoint.clone(),
                stop_writer.clone(),
                options.max_frame_bytes,
            );
            (started.writer, started.reader, None, None, Some(endpoint))
        }
    };
    let mut parts = Parts {
        core: core.clone(),
        stop_writer,
        writer: Some(writer),
        reader: Some(reader),
        tree,
        supervise_failed: None,
        http,
    };

    // The handshake, against everything that may end it first.
    let handshaking = handshake(&core, &options);
    tokio::pin!(handshaking);
    let shaken = tokio::select! {
        biased;
        () = options.cancel.cancelled() => Err(Ended::ConnectCancelled),
        () = reply.closed() => Err(Ended::ConnectCancelled),
        why = parts.ended() => answered_before(why, handshaking.as_mut()).await,
        result = &mut handshaking => result.map_err(Ended::Handshake),
    };
    let why = match shaken {
        Err(why) => {
            let report = teardown(&mut parts, why.clone(), &options).await;
            let stderr = lock(&core.stderr).text();
            let error = match why {
                Ended::ConnectCancelled => ConnectError::Cancelled,
                // A server that cannot be reached says so, not its handshake.
                Ended::Handshake(why) => match parts
                    .http
                    .as_ref()
                    .and_then(|endpoint| Some((endpoint.url().to_owned(), endpoint.failure()?)))
                {
                    Some((url, failure)) => ConnectError::Http { url, why: failure },
                    None => ConnectError::Handshake { why, stderr },
                },
                other => ConnectError::Handshake {
                    why: other.to_string(),
                    stderr,
                },
            };
            // The caller hears back only after the teardown finished.
            done.finish(report);
            let _ = reply.send(Err(error));
            return;
        }
        Ok(peer) => {
            let connected = Connected {
                core: core.clone(),
                peer,
                pid,
                guard: CloseOnDrop(closer.clone()),
            };
            match reply.send(Ok(connected)) {
                Ok(()) => {
                    // Serve until something ends the connection.
                    tokio::select! {
                        biased;
                        () = closer.token.cancelled() => closer.reason(),
                        why = parts.ended() => why,
                    }
                }
                // The caller stopped waiting at this very moment (dropping
                // the unanswered handle only cancels a token).
                Err(_) => Ended::ConnectCancelled,
            }
        }
    };
    let report = teardown(&mut parts, why, &options).await;
    done.finish(report);
}

/// The server went during the handshake (its output ended, or its leader
/// exited): if it answered first, that answer is already read or still in
/// its pipe, and the handshake succeeded (serving then sees the end at
/// once). Waits at most [`DRAIN`] for it; else the end is the reason.
async fn answered_before(
    why: Ended,
    handshaking: Pin<&mut impl Future<Output = Result<PeerInfo, String>>>,
) -> Result<PeerInfo, Ended> {
    match timeout(DRAIN, handshaking).await {
        Ok(Ok(peer)) => Ok(peer),
        _ => Err(why),
    }
}

/// How the supervisor ends: the manager's hook, the task stops counting,
/// then the teardown is published (so whoever it wakes sees the task count
/// back at its baseline).
struct Done {
    done: watch::Sender<Option<Arc<Teardown>>>,
    on_end: Option<OnEnd>,
    alive: Alive,
}

impl Done {
    fn finish(self, report: Teardown) {
        if let Some(on_end) = self.on_end {
            on_end(&report);
        }
        drop(self.alive);
        self.done.send_replace(Some(Arc::new(report)));
    }
}

/// A connection that never got a wire.
fn fail(reply: oneshot::Sender<Result<Connected, ConnectError>>, done: Done, error: ConnectError) {
    let report = Teardown {
        ended: Ended::Handshake(error.to_string()),
        finished: None,
        stats: ReadStats::default(),
        took: Duration::ZERO,
    };
    done.finish(report);
    let _ = reply.send(Err(error));
}

/// A server's wire, before its tasks start.
enum Link {
    Stdio(Box<Wire>),
    Http(Arc<Endpoint>),
}

type Wire = (
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
    Option<Box<dyn AsyncRead + Send + Unpin>>,
    Option<Tree>,
    Option<i32>,
);

/// The pipes and the tree of a spawned server.
fn piped(mut child: corral::Child) -> Result<Wire, ConnectError> {
    let pid = child.id();
    let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
        // Dropping the child ends its tree.
        return Err(ConnectError::Handshake {
            why: "the server's stdin and stdout must be pipes (corral::Input::Piped, \
                  corral::Output::Piped)"
                .into(),
            stderr: String::new(),
        });
    };
    let stderr = child
        .take_stderr()
        .map(|stderr| Box::new(stderr) as Box<dyn AsyncRead + Send + Unpin>);
    let control = child.control();
    let tree = Tree {
        control,
        wait: Box::pin(child.wait()),
        finished: None,
    };
    Ok((
        Box::new(stdout),
        Box::new(stdin),
        stderr,
        Some(tree),
        Some(pid),
    ))
}

/// The one teardown. Not cancellable half-way: it runs in the supervisor
/// task, which nothing aborts.
async fn teardown(parts: &mut Parts, why: Ended, options: &ConnectOptions) -> Teardown {
    let started = Instant::now();
    tracing::debug!(%why, "tearing the connection down");
    // No new frame; every waiting call hears why.
    parts.core.close(&why);
    // The writer stops and drops the server's stdin: the MCP shutdown's
    // first step.
    parts.stop_writer.cancel();
    if let Some(writer) = parts.writer.take() {
        let _ = writer.await;
    }
    // HTTP: end the session, then close every open answer (aborting the
    // reader drops its exchanges).
    if let Some(endpoint) = parts.http.as_ref() {
        endpoint.end_session(&parts.core, options.close_grace).await;
        if let Some(exchanges) = parts.reader.take() {
            exchanges.abort();
            let _ = exchanges.await;
        }
    }
    // Wait for the server to exit, then end whatever is left of its tree.
    if let Some(tree) = parts.tree.as_mut()
        && tree.finished.is_none()
        && parts.supervise_failed.is_none()
    {
        let result = match timeout(options.close_grace, &mut tree.wait).await {
            Ok(result) => result,
            Err(_) => {
                tracing::debug!("the server outlived its stdin: ending its tree");
                tree.control.terminate();
                (&mut tree.wait).await
            }
        };
        match result {
            Ok(finished) => tree.finished = Some(finished),
            Err(error) => parts.supervise_failed = Some(error.to_string()),
        }
    }
    // The reader: with the tree gone every writer of the pipe is gone, so
    // end of file comes at once; a pipe held elsewhere is cut off.
    if let Some(mut reader) = parts.reader.take() {
        let drain = if parts.tree.is_some() {
            DRAIN
        } else {
            options.close_grace
        };
        if timeout(drain, &mut reader).await.is_err() {
            reader.abort();
            let _ = reader.await;
        }
    }
    Teardown {
        ended: parts.core.ended().unwrap_or(why),
        finished: parts.tree.as_mut().and_then(|tree| tree.finished.take()),
        stats: parts.core.stats(),
        took: started.elapsed(),
    }
}

/// The request id type, for callers matching [`CallError::OutcomeUnknown`].
pub type RequestId = Id;
