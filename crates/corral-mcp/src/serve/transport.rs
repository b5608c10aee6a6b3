//! How `corral mcp serve` reaches its client: this process's standard
//! streams ([`stdio`]), or streamable HTTP at [`PATH`] ([`http`]) behind a
//! bearer token and an `Origin` check ([`HttpAuth`]). On HTTP, the token
//! a request carries names its [`Principal`] (one token per client); on
//! stdio there is one client, [`Principal::default`].
//!
//! Both speak either era of the protocol: rmcp's server answers
//! `server/discover` (`2026-07-28`) and `initialize` (`2025-11-25`) alike.
//! On HTTP, legacy clients get a session (`Mcp-Session-Id`); `2026-07-28`
//! requests are served statelessly, and closing a request's response stream
//! cancels it.
//!
//! # Cancellation
//! Both functions return when `stop` is cancelled (or the client goes, on
//! stdio). Ending the runs is the caller's job (`Runner::shutdown`), after
//! these return: the transports only stop answering.
//!
//! ```no_run
//! use corral_mcp::serve::{
//!     CorralServer, Principal, Runner, ServeOptions,
//!     transport::{self, Client, HttpAuth},
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(http: bool) -> Result<(), Box<dyn std::error::Error>> {
//! let server = CorralServer::new(Runner::new(ServeOptions::default())?);
//! let stop = CancellationToken::new();
//! if http {
//!     let listener = transport::listen("127.0.0.1:8765".parse()?)?;
//!     let auth = HttpAuth::with_clients(vec![
//!         Client::new(Principal::new("alice"), "a-long-random-token-for-alice"),
//!         Client::new(Principal::new("bob"), "a-long-random-token-for-bob"),
//!     ]);
//!     // http://127.0.0.1:8765/mcp until `stop` is cancelled.
//!     transport::http(server.clone(), listener, auth, stop).await?;
//! } else {
//!     transport::stdio(server.clone(), stop).await?;
//! }
//! // The transports only stop answering: end the runs.
//! server.runner().shutdown().await;
//! # Ok(())
//! # }
//! ```

use std::{collections::HashMap, convert::Infallible, io, sync::Arc, time::Duration};

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Bytes, Incoming},
    header::{self, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::{
    ServerHandler, ServiceExt,
    service::ServerInitializeError,
    transport::{
        common::http_header::HEADER_SESSION_ID,
        streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService,
            session::{SessionId, SessionManager},
        },
    },
};
use tokio::{net::TcpListener, task::JoinSet};

use crate::serve::{AnswerHold, CorralServer, Principal};
use answer_thread::AnswerThread;
use answers::{Backlog, Counted, Unwritten, Watched};
use pools::{Admission, Pools, Refused};
use sessions::Sessions;
use tokio_util::sync::CancellationToken;

/// The path of the MCP endpoint on HTTP; every other path is 404.
pub const PATH: &str = "/mcp";

/// How long a client may take to send a later request's headers on a
/// kept-alive connection (idle time included).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a request's headers (start line included) and a connection's
/// read buffer take: a request whose headers do not fit gets 431 and its
/// connection is closed, before the token is checked. (hyper's own bound is
/// its read buffer's, about 400 KiB.)
const MAX_HEADERS: usize = 64 << 10;

/// After `stop`, how long open HTTP connections get to finish their
/// response before they are dropped.
const CLOSE_BOUND: Duration = Duration::from_secs(2);

/// Why a transport stopped abnormally.
///
/// ```
/// use corral_mcp::serve::transport::TransportError;
///
/// let error = TransportError::Handshake("the client sent no initialize".into());
/// assert_eq!(
///     error.to_string(),
///     "the MCP handshake on stdin/stdout failed: the client sent no initialize"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The MCP handshake on stdio failed (not a client that simply left).
    #[error("the MCP handshake on stdin/stdout failed: {0}")]
    Handshake(String),
    /// The MCP service task failed.
    #[error("the MCP service stopped abnormally: {0}")]
    Service(String),
    /// The listener's own address cannot be read.
    #[error("reading the listening address: {0}")]
    Listener(#[source] io::Error),
    /// The thread that builds the answers cannot be started.
    #[error("starting the thread that builds the answers: {0}")]
    AnswerThread(#[source] io::Error),
}

/// Who may use the HTTP endpoint.
///
/// ```
/// use corral_mcp::serve::{
///     Principal,
///     transport::{Client, HttpAuth},
/// };
///
/// // Two clients, each with its own token (and runs).
/// let two = HttpAuth::with_clients(vec![
///     Client::new(Principal::new("alice"), "alice-token-0123456789"),
///     Client::new(Principal::new("bob"), "bob-token-9876543210"),
/// ]);
/// assert_eq!(two.clients.len(), 2);
/// // One client, `default`, from loopback only.
/// let mut auth = HttpAuth::new("a-long-random-token");
/// assert_eq!(auth.clients[0].principal, Principal::default());
/// assert!(auth.allowed_origins.is_empty() && !auth.any_host);
/// // Behind a proxy that serves it as https://mcp.example.com.
/// auth.allowed_origins = vec!["https://mcp.example.com".into()];
/// auth.any_host = true;
/// // Its tokens never show in logs.
/// assert!(!format!("{auth:?}").contains("a-long-random-token"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpAuth {
    /// The clients: every request must carry `Authorization: Bearer TOKEN`
    /// with one of their tokens (compared in constant time with each);
    /// otherwise 401 with `WWW-Authenticate: Bearer`. The request then acts
    /// as that client's [`Principal`]: the handler finds it in the request's
    /// extensions. Tokens must differ (a token names one client).
    pub clients: Vec<Client>,
    /// A request carrying an `Origin` header must name one of these
    /// (compared whole, ASCII case-insensitively), otherwise 403. Empty:
    /// `http://127.0.0.1:PORT`, `http://localhost:PORT` and
    /// `http://[::1]:PORT`, with the listener's port.
    pub allowed_origins: Vec<String>,
    /// Accept any `Host` header. Off (the default), only loopback hosts
    /// (`localhost`, `127.0.0.1`, `::1`) are served, against DNS rebinding;
    /// turn it on only for a server meant to be reached from elsewhere.
    pub any_host: bool,
}

/// One client of the HTTP endpoint: its token and the principal it names.
///
/// ```
/// use corral_mcp::serve::{Principal, transport::Client};
///
/// // `--token-file alice.token`: the client `alice`.
/// let alice = Client::new(Principal::new("alice"), "a-long-random-token");
/// assert_eq!(alice.principal.name(), "alice");
/// assert!(format!("{alice:?}").contains("<redacted>"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Client {
    /// Whom a request with this token acts as.
    pub principal: Principal,
    /// The bearer token.
    pub token: String,
}

impl Client {
    /// The client `principal`, known by `token`.
    pub fn new(principal: Principal, token: impl Into<String>) -> Self {
        Self {
            principal,
            token: token.into(),
        }
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("principal", &self.principal)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl HttpAuth {
    /// One client, [`Principal::default`], known by `token`; the loopback
    /// origins and hosts only.
    pub fn new(token: impl Into<String>) -> Self {
        Self::with_clients(vec![Client::new(Principal::default(), token)])
    }

    /// These clients, each known by its own token; the loopback origins and
    /// hosts only.
    pub fn with_clients(clients: Vec<Client>) -> Self {
        Self {
            clients,
            allowed_origins: Vec::new(),
            any_host: false,
        }
    }
}

impl std::fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAuth")
            .field("clients", &self.clients)
            .field("allowed_origins", &self.allowed_origins)
            .field("any_host", &self.any_host)
            .finish()
    }
}

/// The origins allowed by default for a listener on `port`.
pub(crate) fn loopback_origins(port: u16) -> Vec<String> {
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect()
}

/// How many connections and sessions the HTTP transport keeps, and for how
/// long. Nobody without the token can take what a client with it needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpLimits {
    /// How long a new connection has to send a request that passes the
    /// gate (its headers: the gate reads no body); then it is closed.
    pub first_request: Duration,
    /// Connections open that have not passed the gate yet, at most; a new
    /// one beyond closes the oldest of them.
    pub waiting: usize,
    /// Connections open whose request passed the gate, at most; a request
    /// that passes the gate on a new connection beyond gets 503. With more
    /// than one client, one client holds at most half of them.
    pub admitted: usize,
    /// A connection whose socket takes no byte for this long while an
    /// answer waits for it is closed, and its answers dropped.
    pub write_stall: Duration,
    /// Answer bytes not yet written, all connections together, at most: an
    /// answer beyond is dropped and its connection closed (one answer
    /// larger than this alone is sent).
    pub unwritten: usize,
    /// Legacy (`initialize`) sessions live at once, at most; `initialize`
    /// beyond is refused (HTTP 500 naming the cap). With more than one
    /// client, one client holds at most half of them (beyond: 503).
    pub sessions: usize,
    /// A legacy session with no message for this long ends; its id then
    /// gets 404.
    pub session_idle: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            first_request: Duration::from_secs(5),
            waiting: 512,
            admitted: 256,
            write_stall: Duration::from_secs(10),
            unwritten: 64 << 20,
            sessions: 256,
            session_idle: Duration::from_secs(300),
        }
    }
}

/// The listen queue asked for; the kernel caps it (`net.core.somaxconn`,
/// 4096 by default).
const LISTEN_QUEUE: u32 = 4096;

/// A listener on `address` for [`http`], with a deep listen queue: a flood
/// of connections waits there for the pools, instead of the kernel
/// dropping the connects of clients with the token (they would retry only
/// after 1 s, then 3 s).
///
/// # Errors
/// When `address` cannot be bound (in use, not ours).
pub fn listen(address: std::net::SocketAddr) -> io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_QUEUE)
}

/// Serves `server` over this process's stdin and stdout (newline-delimited
/// JSON-RPC) until the client closes stdin or `stop` is cancelled. Nothing
/// else may write to stdout meanwhile.
///
/// # Errors
/// When the handshake fails for another reason than the client leaving, or
/// the service task panics.
pub async fn stdio<S: ServerHandler>(
    server: S,
    stop: CancellationToken,
) -> Result<(), TransportError> {
    let service = stop.child_token();
    let running = tokio::select! {
        running = server.serve_with_ct(rmcp::transport::stdio_pipes(), service.clone()) => running,
        () = stop.cancelled() => return Ok(()),
    };
    let running = match running {
        Ok(running) => running,
        // The client left (or we are stopping) before the handshake ended.
        Err(ServerInitializeError::ConnectionClosed(why)) => {
            tracing::debug!(%why, "client left before the handshake");
            return Ok(());
        }
        Err(ServerInitializeError::Cancelled) => return Ok(()),
        Err(error) => return Err(TransportError::Handshake(error.to_string())),
    };
    let reason = running
        .waiting()
        .await
        .map_err(|error| TransportError::Service(error.to_string()))?;
    tracing::debug!(?reason, "stdio service ended");
    Ok(())
}

/// Serves `server` as streamable HTTP at [`PATH`] on `listener` (HTTP/1.1,
/// no TLS: put a TLS proxy in front for anything but loopback) until `stop`
/// is cancelled; then open connections get 2 seconds to finish. Each
/// request passes the [`HttpAuth`] checks before rmcp sees it. Every
/// session gets its own clone of `server`.
///
/// Answers are built on a thread of their own (`transport/answer_thread.rs`):
/// building a large one takes no turn of the caller's runtime.
///
/// # Errors
/// When the listener's address cannot be read, or the answer thread cannot
/// be started. Failed accepts are logged and retried.
pub async fn http(
    server: CorralServer,
    listener: TcpListener,
    auth: HttpAuth,
    stop: CancellationToken,
) -> Result<(), TransportError> {
    serve_http(server, listener, auth, stop).await
}

/// [`http`] for any handler.
pub(crate) async fn serve_http<S>(
    server: S,
    listener: TcpListener,
    auth: HttpAuth,
    stop: CancellationToken,
) -> Result<(), TransportError>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    serve_http_with(server, listener, auth, HttpLimits::default(), stop).await
}

/// [`serve_http`] within `limits`.
pub(crate) async fn serve_http_with<S>(
    server: S,
    listener: TcpListener,
    auth: HttpAuth,
    limits: HttpLimits,
    stop: CancellationToken,
) -> Result<(), TransportError>
where
    S: ServerHandler + Clone + Send + Sync + 'static,
{
    let port = listener
        .local_addr()
        .map_err(TransportError::Listener)?
        .port();
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    if auth.any_host {
        config = config.disable_allowed_hosts();
    }
    let sessions = Sessions::new(limits.sessions, limits.session_idle);
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), Arc::clone(&sessions), config);
    let origins = if auth.allowed_origins.is_empty() {
        loopback_origins(port)
    } else {
        auth.allowed_origins.clone()
    };
    // With more than one client, none takes all the places: one holds at
    // most half of the admitted connections and of the sessions.
    let share = |cap: usize| {
        if auth.clients.len() > 1 {
            (cap / 2).max(1)
        } else {
            cap
        }
    };
    let gate = Arc::new(Gate {
        clients: auth.clients.clone(),
        origins,
        mcp,
        sessions,
        owners: tokio::sync::Mutex::default(),
        sessions_per_client: share(limits.sessions),
        session_idle: limits.session_idle,
    });
    let pools = Arc::new(Pools::new(limits, share(limits.admitted)));
    let backlog = Arc::new(Backlog::new(limits.unwritten));
    let answer_thread = Arc::new(AnswerThread::start().map_err(TransportError::AnswerThread)?);
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        // The listener is never left unread: the pools bound the open
        // connections (and so the descriptors), and a new connection
        // closes the oldest one that has not passed the gate.
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, a connection reset before accept:
                    // the listener itself is fine; do not spin.
                    tracing::warn!(%error, "accepting an HTTP connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        tracing::debug!(%peer, "HTTP connection");
        let admission = Arc::new(pools.enter());
        let unwritten = Arc::new(Unwritten::new(Arc::clone(&backlog)));
        let gate = Arc::clone(&gate);
        let answer_thread = Arc::clone(&answer_thread);
        let stop = stop.clone();
        connections.spawn(async move {
            let closed = admission.closed.clone();
            let first_request = {
                let admission = Arc::clone(&admission);
                async move {
                    tokio::time::sleep(limits.first_request).await;
                    if admission.admitted() {
                        std::future::pending::<()>().await;
                    }
                }
            };
            let service = {
                let admission = Arc::clone(&admission);
                let unwritten = Arc::clone(&unwritten);
                service_fn(move |request| {
                    let unwritten = Arc::clone(&unwritten);
                    let answer_thread = Arc::clone(&answer_thread);
                    let hold = AnswerHold::default();
                    let answer =
                        Arc::clone(&gate).serve(request, Arc::clone(&admission), hold.clone());
                    async move {
                        let response = answer.await?;
                        let answer =
                            |body| answer_thread.answer(Counted::new(body, unwritten), hold);
                        Ok::<_, Infallible>(response.map(answer))
                    }
                })
            };
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_header_size(MAX_HEADERS)
                .max_buf_size(MAX_HEADERS);
            let socket = Watched::new(stream, Arc::clone(&unwritten));
            let connection = builder.serve_connection(TokioIo::new(socket), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%peer, %error, "HTTP connection ended");
                    }
                }
                () = closed.cancelled() => {
                    tracing::debug!(%peer, "closed: the oldest connection not past the gate");
                }
                () = first_request => {
                    tracing::debug!(%peer, "closed: no request passed the gate in time");
                }
                () = unwritten.stalled(limits.write_stall) => {
                    tracing::info!(%peer, "closed: the client read none of its answer in time");
                }
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_BOUND, connection).await;
                }
            }
            admission.leave();
        });
        // On a current-thread runtime, the new connection reads the request
        // already sent before the next accept can close it.
        tokio::task::yield_now().await;
    }
    drop(listener);
    // Each connection bounds its own close; this bound only guards against
    // a task that never returns.
    let _ = tokio::time::timeout(CLOSE_BOUND * 2, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

type Body = BoxBody<Bytes, Infallible>;

/// The checks in front of rmcp's service.
struct Gate<S> {
    clients: Vec<Client>,
    origins: Vec<String>,
    mcp: StreamableHttpService<S, Sessions>,
    sessions: Arc<Sessions>,
    /// Each legacy session, with the principal whose `initialize` made it:
    /// a request carrying its id as anyone else is answered as for an
    /// unknown session. Entries of ended sessions are dropped on each
    /// insert, so it holds at most as many as [`HttpLimits::sessions`].
    owners: tokio::sync::Mutex<HashMap<SessionId, Principal>>,
    /// Legacy sessions one principal holds at once, at most.
    sessions_per_client: usize,
    session_idle: Duration,
}

impl<S: ServerHandler + Send + 'static> Gate<S> {
    async fn serve(
        self: Arc<Self>,
        mut request: Request<Incoming>,
        admission: Arc<Admission>,
        hold: AnswerHold,
    ) -> Result<Response<Body>, Infallible> {
        if request.uri().path() != PATH {
            return Ok(plain(
                StatusCode::NOT_FOUND,
                "not found: the MCP endpoint is /mcp\n",
            ));
        }
        if let Some(origin) = request.headers().get(header::ORIGIN)
            && !self.origin_allowed(origin)
        {
            tracing::debug!(?origin, "origin refused");
            return Ok(plain(
                StatusCode::FORBIDDEN,
                "forbidden: this Origin is not allowed\n",
            ));
        }
        let Some(principal) = self.authorized(request.headers().get(header::AUTHORIZATION)) else {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send Authorization: Bearer TOKEN\n",
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"corral\""),
            );
            return Ok(response);
        };
        match admission.admit(&principal) {
            Ok(()) => {}
            Err(Refused::Client(held)) => {
                return Ok(plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "busy: this client holds {held} authenticated connections, the most one \
                         client may; close one or retry\n"
                    ),
                ));
            }
            Err(Refused::Full | Refused::Closing) => {
                return Ok(plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "busy: too many authenticated connections are open; close one or retry\n",
                ));
            }
        }
        // A session id carries no rights: a session is used only by the
        // principal that made it.
        let session = request.headers().get(HEADER_SESSION_ID).cloned();
        if let Some(id) = &session
            && !self.owned_by(id, &principal).await
        {
            return Ok(unknown_session());
        }
        let delete = request.method() == Method::DELETE;
        // rmcp hands the request's parts, extensions included, to the
        // handler: the call runs as this principal, and leaves its run's
        // permit in `hold` until the answer is built.
        request.extensions_mut().insert(principal.clone());
        request.extensions_mut().insert(hold);
        let response = self.mcp.handle(request).await;
        match session {
            Some(id) if delete && response.status().is_success() => {
                if let Ok(id) = id.to_str() {
                    self.owners.lock().await.remove(id);
                }
            }
            Some(_) => {}
            // An answer without a session id that names one made a session.
            None => {
                if let Some(id) = response.headers().get(HEADER_SESSION_ID)
                    && let Ok(id) = id.to_str()
                    && let Err(held) = self.bind(SessionId::from(id), principal).await
                {
                    return Ok(plain(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!(
                            "busy: this client holds {held} sessions, the most one client may: \
                             end one (DELETE), wait until one is idle for {:?}, or use protocol \
                             2026-07-28, which needs no session\n",
                            self.session_idle
                        ),
                    ));
                }
            }
        }
        Ok(response)
    }

    /// Whether the session `id` was made by `principal` (false for an id
    /// never given out).
    async fn owned_by(&self, id: &HeaderValue, principal: &Principal) -> bool {
        let Ok(id) = id.to_str() else {
            return false;
        };
        self.owners.lock().await.get(id) == Some(principal)
    }

    /// Records the new session `id` as `principal`'s; when that principal
    /// holds its share already, ends the session instead and says how many
    /// it holds.
    async fn bind(&self, id: SessionId, principal: Principal) -> Result<(), usize> {
        // The lock is held while the live sessions are read: a session made
        // meanwhile is not dropped as ended.
        let mut owners = self.owners.lock().await;
        let live = self.sessions.live().await;
        owners.retain(|id, _| live.contains(id));
        let held = owners.values().filter(|owner| **owner == principal).count();
        if held >= self.sessions_per_client {
            drop(owners);
            if let Err(error) = self.sessions.close_session(&id).await {
                tracing::warn!(%error, "ending a session beyond a client's share");
            }
            return Err(held);
        }
        owners.insert(id, principal);
        Ok(())
    }

    fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        self.origins
            .iter()
            .any(|allowed| allowed.as_bytes().eq_ignore_ascii_case(origin.as_bytes()))
    }

    /// The principal whose token `header` carries. Every client's token is
    /// compared, whichever matches: the time taken does not say which.
    fn authorized(&self, header: Option<&HeaderValue>) -> Option<Principal> {
        let value = header?.as_bytes();
        let scheme = b"bearer ";
        if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return None;
        }
        let given = value[scheme.len()..].trim_ascii();
        let mut found = None;
        for client in &self.clients {
            if same_secret(given, client.token.as_bytes()) {
                found = Some(client.principal.clone());
            }
        }
        found
    }
}

/// Whether `given` equals `secret`, in a time that depends only on their
/// lengths (the token's length is no secret: corral's own are 64 hex digits).
fn same_secret(given: &[u8], secret: &[u8]) -> bool {
    if given.len() != secret.len() {
        return false;
    }
    let difference = given
        .iter()
        .zip(secret)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

/// rmcp's answer for a session it does not know, word for word.
fn unknown_session() -> Response<Body> {
    let mut response =
        Response::new(Full::new(Bytes::from_static(b"Not Found: Session not found")).boxed());
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

fn plain(status: StatusCode, text: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(Full::new(text.into()).boxed());
    *response.status_mut() = status;
    // A refused request does not keep its connection.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

mod answer_thread;
mod answers;
mod pools;
mod sessions;
#[cfg(test)]
mod tests;
