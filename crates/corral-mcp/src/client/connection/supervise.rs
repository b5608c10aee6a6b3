//! The supervisor task of one connection: it opens the wire, starts the
//! writer and the reader, runs the handshake, serves until something ends
//! the connection, runs the one teardown, and only then publishes it.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use corral::Stdio;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::{oneshot, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::client::{
    handshake::{PeerInfo, handshake},
    http::{self, Endpoint},
    options::{ConnectOptions, HttpOptions},
    outcome::{ConnectError, Ended},
    shared::{Core, ReadStats, lock},
    stdio::{self, ReaderEnd, WriterEnd},
};

use super::{
    Connection,
    teardown::{DRAIN, Parts, Teardown, Tree, teardown},
};
use crate::tasks::{self, Alive, TaskCount};

/// How long a connect waits for the server to answer the `GET` of its
/// standalone stream (opened only by a client that answers elicitations).
const LISTEN_OPEN: std::time::Duration = std::time::Duration::from_secs(2);

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

/// What a connection's owner gives it: where its tasks are counted, what to
/// do once it is torn down, and a token that ends it (the manager's
/// shutdown).
pub(crate) struct Owner {
    pub tasks: TaskCount,
    pub on_end: Option<OnEnd>,
    pub stop: CancellationToken,
}

impl Owner {
    /// A connection of its own (no manager).
    pub(crate) fn alone() -> Self {
        Self {
            tasks: TaskCount::default(),
            on_end: None,
            stop: CancellationToken::new(),
        }
    }
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
pub(super) struct CloseOnDrop(pub(super) Closer);

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

/// Starts a connection's supervisor and waits for the handshake.
pub(crate) async fn open(
    launch: Launch,
    options: ConnectOptions,
    owner: Owner,
) -> Result<Connection, ConnectError> {
    let (reply, answer) = oneshot::channel();
    let (done_tx, done) = watch::channel(None);
    let closer = Closer::default();
    let closing = closer.clone();
    let tasks = owner.tasks.clone();
    let reconnect = options.reconnect;
    tasks::spawn_releasing(&tasks, move |alive| {
        supervise(launch, options, owner, closing, reply, done_tx, alive)
    });
    match answer.await {
        Ok(Ok(connected)) => Ok(Connection {
            core: connected.core,
            peer: connected.peer,
            pid: connected.pid,
            closer,
            done,
            reconnect,
            _guard: connected.guard,
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(ConnectError::Cancelled),
    }
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
    owner: Owner,
    closer: Closer,
    reply: oneshot::Sender<Result<Connected, ConnectError>>,
    done: watch::Sender<Option<Arc<Teardown>>>,
    alive: Alive,
) {
    let mut reply = reply;
    let Owner {
        tasks,
        on_end,
        stop,
    } = owner;
    let done = Done {
        done,
        on_end,
        alive,
    };
    let (core, queue) = Core::new(options.queue, options.max_in_flight, options.stderr_tail);
    lock(&core.elicitation).clone_from(&options.elicitation);
    let link = match launch {
        Launch::Spawn(mut command) => {
            let spawned = command
                .stdin(Stdio::Piped)
                .stdout(Stdio::Piped)
                .stderr(Stdio::Piped)
                .spawn();
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
            Ok(endpoint) => {
                lock(&core.tools).http = true;
                Link::Http(Arc::new(endpoint))
            }
            Err(error) => return fail(reply, done, error),
        },
    };
    let stop_writer = CancellationToken::new();
    let mut listener = None;
    let (writer, reader, tree, pid, http) = match link {
        Link::Stdio(wire) => {
            let (input, output, stderr, tree, pid) = *wire;
            let writer = tasks::spawn(
                &tasks,
                stdio::write(core.clone(), queue, output, stop_writer.clone()),
            );
            let reader = tasks::spawn(
                &tasks,
                stdio::read(core.clone(), input, stderr, options.max_frame_bytes),
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
            listener = Some(started.listener);
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
    let shaken = {
        let mut shake = std::pin::pin!(handshake(&core, &options));
        // The server exited: what it wrote before may still be in the pipe,
        // so the handshake gets until the reader's end of file (bounded).
        let mut exited: Option<(Ended, Instant)> = None;
        loop {
            let drained = exited.as_ref().map(|(_, by)| *by);
            tokio::select! {
                biased;
                () = options.cancel.cancelled() => break Err(Ended::ConnectCancelled),
                () = stop.cancelled() => break Err(Ended::Shutdown),
                () = reply.closed() => break Err(Ended::ConnectCancelled),
                // Before the wire's end: an answer read just before end of
                // file completed the handshake (the end is handled once
                // connected).
                result = &mut shake => break result.map_err(Ended::Handshake),
                why = parts.ended() => match (exited.take(), &why) {
                    (None, Ended::ServerExited(_)) if parts.reader.is_some() => {
                        exited = Some((why, Instant::now() + DRAIN));
                    }
                    (Some((first, _)), _) => break Err(first),
                    (None, _) => break Err(why),
                },
                () = until(drained) => {
                    break Err(exited.take().map_or_else(|| Ended::Dropped, |(why, _)| why));
                }
            }
        }
    };
    let why = match shaken {
        Err(why) => {
            let report = teardown(&mut parts, why.clone(), &options).await;
            let stderr = lock(&core.stderr).text();
            let error = match why {
                Ended::ConnectCancelled => ConnectError::Cancelled,
                Ended::Shutdown => ConnectError::ShutDown,
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
            // Over HTTP, a client that answers the server's questions opens
            // the stream they come on, and is connected once the server
            // answered its GET (bounded: a server that holds it back is
            // not waited for).
            if let Some(listener) = listener.take()
                && options.elicitation.is_some()
            {
                let _ = tokio::time::timeout(LISTEN_OPEN, listener.open()).await;
            }
            drop(listener);
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
                        () = stop.cancelled() => Ended::Shutdown,
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

/// Sleeps until `deadline`; pending for ever without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
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
            why: "the server's stdin and stdout must be pipes (corral::Stdio::Piped)".into(),
            stderr: String::new(),
        });
    };
    let stderr = child
        .take_stderr()
        .map(|stderr| Box::new(stderr) as Box<dyn AsyncRead + Send + Unpin>);
    let control = child.control();
    let tree = Tree {
        control,
        wait: Box::pin(async move { child.wait().await }),
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
