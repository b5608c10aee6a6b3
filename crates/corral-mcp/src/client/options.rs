//! What a connection and a call are allowed: deadlines, caps, the shutdown
//! bounds and the reconnect budget. Plain data with the defaults the
//! runtime's documentation names.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use tokio_util::sync::CancellationToken;

use super::elicitation::Elicitation;
use crate::frame::DEFAULT_MAX_FRAME_BYTES;

/// The default deadline of `server/discover` (2026-07-28 era).
pub const DEFAULT_DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);
/// The default deadline of `initialize` (2025-11-25 and earlier).
pub const DEFAULT_INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server gets to exit after its stdin was closed, before its
/// tree is terminated.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// The default capacity of a connection's outbound queue (messages).
pub const DEFAULT_QUEUE: usize = 64;
/// The default cap on requests waiting for their answer per connection.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// How much of the server's standard error is kept (its tail), for the
/// message of a failed handshake.
pub const DEFAULT_STDERR_TAIL: usize = 4096;

/// How one connection behaves.
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::client::{ConnectOptions, Elicitation};
///
/// let mut options = ConnectOptions::default();
/// // A server that only speaks 2025-11-25, slow to start.
/// options.legacy_only = true;
/// options.initialize_timeout = Duration::from_secs(60);
/// options.elicitation = Some(Elicitation::decline());
/// options.tasks = true;
/// assert_eq!(options.client_name, "corral");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// Deadline of the `server/discover` probe.
    pub discover_timeout: Duration,
    /// Deadline of the legacy `initialize` (and of nothing else).
    pub initialize_timeout: Duration,
    /// Deadline of the whole handshake, both steps: each step's own deadline
    /// is cut to what is left of it. `None`: the steps' deadlines only.
    pub handshake_timeout: Option<Duration>,
    /// Skip the `server/discover` probe and speak `initialize` at once (for
    /// servers known to be legacy).
    pub legacy_only: bool,
    /// Cap on one incoming frame; a longer one is dropped and counted.
    pub max_frame_bytes: usize,
    /// Capacity of the outbound queue; a caller waits for room (within its
    /// deadline) when it is full.
    pub queue: usize,
    /// Cap on requests waiting for their answer; one more is refused
    /// ([`CallError::NotSent`](super::CallError::NotSent)).
    pub max_in_flight: usize,
    /// How long the server gets to exit after its stdin is closed, before
    /// corral's policy ends its tree (`SIGTERM`, grace, `SIGKILL`, final
    /// bound: set on the [`corral::Command`]).
    pub close_grace: Duration,
    /// How much of the server's standard error is kept (its tail).
    pub stderr_tail: usize,
    /// The client's name and version sent in the handshake.
    pub client_name: String,
    /// See [`ConnectOptions::client_name`].
    pub client_version: String,
    /// The reconnect budget for a server that crashed.
    pub reconnect: Reconnect,
    /// How the server's elicitation requests are answered: with a handler,
    /// the connection declares the `elicitation` capability and answers
    /// them (on the wire, and inside `input_required` results); `None`
    /// (the default): not declared, and refused.
    pub elicitation: Option<Elicitation>,
    /// Declare the Tasks extension (`io.modelcontextprotocol/tasks`,
    /// SEP-2663) in every request's `_meta` under protocol 2026-07-28
    /// (never under 2025-11-25, whose tasks are another thing): the server
    /// may then answer a `tools/call` with a task, which
    /// [`Connection::call_tool`](super::Connection::call_tool) follows to
    /// its end. Off by default.
    pub tasks: bool,
    /// Cancels the connect itself (the handshake); the connection is torn
    /// down before the connect returns.
    pub cancel: CancellationToken,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            discover_timeout: DEFAULT_DISCOVER_TIMEOUT,
            initialize_timeout: DEFAULT_INITIALIZE_TIMEOUT,
            handshake_timeout: None,
            legacy_only: false,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            queue: DEFAULT_QUEUE,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            close_grace: DEFAULT_CLOSE_GRACE,
            stderr_tail: DEFAULT_STDERR_TAIL,
            client_name: "corral".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            reconnect: Reconnect::default(),
            elicitation: None,
            tasks: false,
            cancel: CancellationToken::new(),
        }
    }
}

/// How often, and how soon, a crashed server is started again.
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::client::{ConnectOptions, Reconnect};
///
/// let mut options = ConnectOptions::default();
/// let mut reconnect = Reconnect::default();
/// reconnect.attempts = 5;
/// reconnect.backoff = Duration::from_millis(100);
/// options.reconnect = reconnect;
/// assert!(options.reconnect.max_backoff >= options.reconnect.backoff);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconnect {
    /// Attempts after a crash before the connection is reported failed
    /// (until asked again with [`Manager::reconnect`](super::Manager::reconnect)).
    /// Zero: never reconnect by itself.
    pub attempts: u32,
    /// The first backoff; each later one doubles, capped at `max_backoff`,
    /// and is jittered down by up to half.
    pub backoff: Duration,
    /// The cap on one backoff.
    pub max_backoff: Duration,
    /// How long a connection must have lived for its crash to start a fresh
    /// budget. A server that dies right after every handshake keeps spending
    /// the same budget, so it cannot make the runtime spawn more than
    /// `attempts` servers.
    pub stable_after: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            stable_after: Duration::from_secs(60),
        }
    }
}

/// Hears the id of the task a call runs as, as soon as the server answered
/// with one (before the call ends): a caller that may be killed can keep it
/// somewhere and read the task again later.
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// use corral_mcp::client::{CallOptions, OnTask};
///
/// let kept = Arc::new(Mutex::new(None::<String>));
/// let keep = kept.clone();
/// let mut options = CallOptions::default();
/// options.on_task = Some(OnTask::new(move |id| *keep.lock().unwrap() = Some(id.to_owned())));
/// ```
#[derive(Clone)]
pub struct OnTask(Arc<dyn Fn(&str) + Send + Sync>);

impl OnTask {
    /// Calls `tell` with the task's id.
    pub fn new(tell: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(tell))
    }

    pub(crate) fn tell(&self, task_id: &str) {
        (self.0)(task_id);
    }
}

impl std::fmt::Debug for OnTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnTask(..)")
    }
}

/// How long one call may take, and who may cancel it.
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::client::CallOptions;
/// use tokio_util::sync::CancellationToken;
///
/// let cancel = CancellationToken::new();
/// // At most 10 minutes, and at most 30 seconds without a sign of life.
/// let options = CallOptions::timeout(Duration::from_secs(600))
///     .idle(Duration::from_secs(30))
///     .cancel_on(cancel.clone());
/// assert_eq!(options.idle_timeout, Some(Duration::from_secs(30)));
/// assert!(options.cancel.is_some());
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// The hard deadline: nothing extends it.
    pub timeout: Option<Duration>,
    /// The idle deadline: reset by each progress notification of this call,
    /// never past [`CallOptions::timeout`]. Setting it asks the server for
    /// progress (a `progressToken`).
    pub idle_timeout: Option<Duration>,
    /// Cancels the call.
    pub cancel: Option<CancellationToken>,
    /// Told the task's id when the call becomes a task (see
    /// [`ConnectOptions::tasks`]).
    pub on_task: Option<OnTask>,
}

impl CallOptions {
    /// A call with a hard deadline.
    pub fn timeout(timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            ..Self::default()
        }
    }

    /// Adds an idle deadline (see [`CallOptions::idle_timeout`]).
    #[must_use]
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle_timeout = Some(idle);
        self
    }

    /// Adds a cancellation token.
    #[must_use]
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// The default bound on opening a TCP connection to an HTTP server.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time an idle pooled HTTP connection is kept.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How many answers to the server's requests may be on their way at once
/// over HTTP (each answer is its own `POST`). One more is dropped and
/// counted ([`ReadStats::answers_dropped`](super::ReadStats::answers_dropped)),
/// as when the stdio queue is full: a server that sends requests without end
/// and never answers those posts holds this many connections, no more.
pub const HTTP_ANSWERS_IN_FLIGHT: usize = 8;
/// How many idle connections to the server the HTTP client keeps for reuse.
pub const HTTP_IDLE_CONNECTIONS: usize = 16;

/// How the streamable HTTP transport reaches its server. There is no total
/// or read timeout: only the caller's deadline ([`CallOptions::timeout`])
/// cuts a call short, however long its answer is held.
///
/// ```
/// use corral_mcp::client::HttpOptions;
///
/// let options = HttpOptions::default().header("Authorization", "Bearer a-long-random-token");
/// assert_eq!(options.headers, [("Authorization".to_owned(), "Bearer a-long-random-token".to_owned())]);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Headers sent with every request (e.g. `Authorization`).
    pub headers: Vec<(String, String)>,
    /// Bound on opening a connection (not on waiting for an answer).
    pub connect_timeout: Duration,
    /// How long an idle pooled connection is kept (`None`: for ever). Only
    /// idle connections: one carrying an answer, however slow, is never
    /// idle.
    pub pool_idle_timeout: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            headers: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            pool_idle_timeout: Some(DEFAULT_POOL_IDLE_TIMEOUT),
        }
    }
}

impl HttpOptions {
    /// Adds a header sent with every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Header values are secrets (`Authorization`): only their names are shown.
impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpOptions")
            .field("headers", &names)
            .field("connect_timeout", &self.connect_timeout)
            .field("pool_idle_timeout", &self.pool_idle_timeout)
            .finish()
    }
}

/// The backoff before attempt `spent + 1`: `backoff * 2^spent`, capped at
/// `max_backoff`, jittered down by up to half.
pub(crate) fn backoff(policy: &Reconnect, spent: u32) -> Duration {
    let full = policy
        .backoff
        .checked_mul(1u32.checked_shl(spent.min(16)).unwrap_or(u32::MAX))
        .unwrap_or(policy.max_backoff)
        .min(policy.max_backoff);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    // A cheap spread in [0, 1): the low bits of the clock, mixed.
    let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    #[allow(clippy::cast_precision_loss)]
    let unit = mixed as f64 / (1u64 << 53) as f64;
    full.mul_f64(1.0 - unit / 2.0)
}
