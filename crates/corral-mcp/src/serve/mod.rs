//! `corral mcp serve`: an MCP server whose tools run commands as owned
//! trees. It keeps their output, ends whole trees (on time, on cancel, when
//! the server dies), and says honestly what it does not know.
//!
//! The front end (`corral mcp serve` in `corral-cli`) puts a [`Runner`]
//! behind an MCP transport (stdio, or streamable HTTP) through
//! [`CorralServer`], rmcp's server handler.
//!
//! # Layout
//! - `request`: a tool call's arguments, checked field by field (pure);
//!   `roots`: where a command may run; `output`: what is kept of a stream.
//! - `run`: one command, from the checked request to its result.
//! - `runs`: the background runs and the concurrency limit.
//! - `tools`: the tool definitions and the dispatch from a call to the above;
//!   `command_tools`: the operator's own tools (`--tools FILE`), each a fixed
//!   command with typed arguments.
//! - `task_store`: the runs answered as MCP tasks (the Tasks extension).
//! - `audit`: one JSON line per run; `handler`: the rmcp glue.
//! - [`transport`]: stdio, and streamable HTTP behind a bearer token.
//!
//! ```no_run
//! use corral_mcp::serve::{CorralServer, Runner, ServeOptions, transport};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut options = ServeOptions::default();
//! options.roots = vec!["/srv/checkout".into()];
//! options.max_concurrent = 4;
//! let server = CorralServer::new(Runner::new(options)?);
//! transport::stdio(server.clone(), CancellationToken::new()).await?;
//! server.runner().shutdown().await;
//! # Ok(())
//! # }
//! ```

mod audit;
mod command_tools;
mod handler;
pub(crate) mod output;
pub(crate) mod request;
pub(crate) mod roots;
mod run;
mod runs;
mod task_store;
mod tools;
pub mod transport;

use std::{path::PathBuf, sync::Arc, time::Duration};

use corral::BackendChoice;
use rmcp::model::{CallToolResponse, CallToolResult, Tool};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use command_tools::CommandTools;
pub use handler::CorralServer;

/// The default cap on each stream of a run's output kept in its result.
pub const DEFAULT_MAX_OUTPUT: usize = 1 << 20;
/// The default time limit of a run that names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The default cap on the time limit a call may ask for.
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// The default grace from `SIGTERM` to `SIGKILL`.
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(2);
/// The default number of trees alive at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 8;
/// The default time a `run` may take before it is answered with a task
/// (when the request declared the Tasks extension).
pub const DEFAULT_TASK_WINDOW: Duration = Duration::from_secs(1);
/// The default time a finished task's result is kept.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// The default number of tasks kept at once, running and finished.
pub const DEFAULT_MAX_TASKS: usize = 64;

/// What the server allows; a call may narrow each limit, never widen it.
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::serve::{DEFAULT_TIMEOUT, ServeOptions};
///
/// let mut options = ServeOptions::default();
/// assert_eq!(options.default_timeout, DEFAULT_TIMEOUT);
/// // Refuse a call beyond two trees instead of waiting; at most 10 minutes a run.
/// options.max_concurrent = 2;
/// options.reject_when_busy = true;
/// options.max_timeout = Duration::from_secs(600);
/// options.tree_limits = corral::Limits::new().max_processes(256);
/// // Never answer with a task.
/// options.task_window = None;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Directories a command may run in (its `cwd` must resolve inside one,
    /// symlinks and `..` included). Empty: the server's own working
    /// directory.
    pub roots: Vec<PathBuf>,
    /// Trees alive at once; a call beyond waits (or is refused with
    /// [`ServeOptions::reject_when_busy`]).
    pub max_concurrent: usize,
    /// Refuse a call beyond `max_concurrent` instead of waiting.
    pub reject_when_busy: bool,
    /// Cap on each stream kept in a result (head and tail kept).
    pub max_output: usize,
    /// Time limit of a run that names none.
    pub default_timeout: Duration,
    /// Cap on the time limit a run may ask for.
    pub max_timeout: Duration,
    /// Grace from `SIGTERM` to `SIGKILL` of a run that names none.
    pub kill_after: Duration,
    /// After `SIGKILL`, how long to wait before reporting survivors.
    pub final_bound: Duration,
    /// Containment backend for every run.
    pub backend: BackendChoice,
    /// Limits on each run's whole tree (processes, memory, CPU; see
    /// `corral::Limits`): the operator's, a call cannot change them.
    pub tree_limits: corral::Limits,
    /// Append one JSON line per run to this file.
    pub audit: Option<PathBuf>,
    /// Run every command as this user (`Command::user`); needs root.
    pub user: Option<u32>,
    /// Run every command with this primary group (`Command::group`).
    pub group: Option<u32>,
    /// A `run` not done within this time is answered with a task, when the
    /// request declared the Tasks extension (protocol 2026-07-28); `None`:
    /// never.
    pub task_window: Option<Duration>,
    /// How long a finished task's result is kept after its end.
    pub task_ttl: Duration,
    /// How many tasks are kept at once, running and finished.
    pub max_tasks: usize,
    /// The operator's command tools (`--tools FILE`), offered besides the
    /// generic ones (or alone, with [`ServeOptions::tools_only`]).
    pub tools: CommandTools,
    /// Offer only [`ServeOptions::tools`], not `run`, `list_runs`,
    /// `read_run`, `wait_run` and `kill_run`: a call of one of those is
    /// then a tool not found.
    pub tools_only: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            reject_when_busy: false,
            max_output: DEFAULT_MAX_OUTPUT,
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: DEFAULT_MAX_TIMEOUT,
            kill_after: DEFAULT_KILL_AFTER,
            final_bound: Duration::from_secs(1),
            backend: BackendChoice::Auto,
            tree_limits: corral::Limits::default(),
            audit: None,
            user: None,
            group: None,
            task_window: Some(DEFAULT_TASK_WINDOW),
            task_ttl: DEFAULT_TASK_TTL,
            max_tasks: DEFAULT_MAX_TASKS,
            tools: CommandTools::default(),
            tools_only: false,
        }
    }
}

/// A progress report while a run goes on: the latest output lines.
///
/// ```
/// use std::sync::Arc;
///
/// use corral_mcp::serve::{CallContext, Progress, ProgressSink};
///
/// let sink: ProgressSink = Arc::new(|progress: Progress| {
///     eprintln!("{} bytes so far: {}", progress.bytes, progress.message);
/// });
/// let mut context = CallContext::default();
/// context.progress = Some(sink);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Bytes of output so far (both streams).
    pub bytes: u64,
    /// The latest lines of output.
    pub message: String,
}

/// Where progress goes (the handler sends it as `notifications/progress`).
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// The client a call comes from: on HTTP, the one whose token the request
/// carried (`--token-file NAME.token` is client `NAME`); on stdio, the one
/// client there is ([`Principal::default`]). Every background run belongs
/// to the principal that started it: another one can neither list, read,
/// wait for nor end it (it is told "not found", as for an unknown id).
///
/// ```
/// use corral_mcp::serve::Principal;
///
/// let alice = Principal::new("alice");
/// assert_eq!(alice.name(), "alice");
/// assert_eq!(alice.to_string(), "alice");
/// assert_eq!(Principal::default().name(), "default");
/// assert_ne!(alice, Principal::default());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(Arc<str>);

impl Principal {
    /// The principal named `name`.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Self(name.into())
    }

    /// Its name, as the audit log shows it.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Default for Principal {
    /// `default`: the client of stdio, and of a single token given without
    /// a name.
    fn default() -> Self {
        Self::new("default")
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a tool call comes with besides its arguments.
///
/// ```
/// use corral_mcp::serve::{CallContext, Principal};
/// use tokio_util::sync::CancellationToken;
///
/// let cancel = CancellationToken::new();
/// let mut context = CallContext::default();
/// context.principal = Principal::new("alice");
/// // Cancelling it ends the run's tree.
/// context.cancel = cancel.clone();
/// assert!(context.progress.is_none());
/// ```
#[derive(Clone, Default)]
pub struct CallContext {
    /// Who calls: the runs it sees and the runs it starts are its own.
    pub principal: Principal,
    /// Cancelled when the client cancels the call (or the server shuts
    /// down): the run's tree is ended, and the result says the outcome is
    /// unknown.
    pub cancel: CancellationToken,
    /// Where progress goes, when the client asked for it.
    pub progress: Option<ProgressSink>,
    /// On HTTP, where a foreground run leaves its concurrency permit until
    /// its answer is built.
    pub(crate) hold: Option<AnswerHold>,
    /// The request declared the Tasks extension (under protocol
    /// 2026-07-28): a long `run` may be answered with a task.
    pub(crate) tasks: bool,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("principal", &self.principal)
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .field("hold", &self.hold)
            .field("tasks", &self.tasks)
            .finish()
    }
}

/// What a foreground run leaves behind until its answer is built: its
/// permit of the concurrency limit. On HTTP, answers are built on a thread
/// of their own (`transport/answer_thread.rs`), which lets go of the hold
/// once it has built a frame of the answer: runs then end no faster than
/// their answers are built, and at most `max_concurrent` results wait to be
/// built. Without that, runs of 1 MiB of output ended faster than their
/// answers of 12 MB were built, and the results waiting grew the server by
/// over 300 MB (docs/flakes.md (28)). Dropped with its last clone: a call
/// whose answer is never built lets go when rmcp drops the request.
#[derive(Clone, Default)]
pub(crate) struct AnswerHold(Arc<std::sync::Mutex<Vec<Box<dyn Send>>>>);

impl AnswerHold {
    /// Keeps `held` until [`AnswerHold::release`].
    pub(crate) fn keep(&self, held: impl Send + 'static) {
        run::lock(&self.0).push(Box::new(held));
    }

    /// Drops what is kept.
    pub(crate) fn release(&self) {
        let held = std::mem::take(&mut *run::lock(&self.0));
        drop(held);
    }
}

impl std::fmt::Debug for AnswerHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AnswerHold")
            .field(&run::lock(&self.0).len())
            .finish()
    }
}

/// Why the server cannot start.
///
/// ```
/// use corral_mcp::serve::{Runner, ServeError, ServeOptions};
///
/// let mut options = ServeOptions::default();
/// options.roots = vec!["/nonexistent/checkout".into()];
/// let Err(error) = Runner::new(options) else { panic!("a root that does not exist") };
/// assert!(matches!(&error, ServeError::Root { path, .. } if path.ends_with("checkout")));
/// assert!(error.to_string().starts_with("--root /nonexistent/checkout: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A root cannot be used.
    #[error("--root {path}: {why}")]
    Root {
        /// The root as given.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The audit file cannot be opened.
    #[error("--audit {path}: {source}")]
    Audit {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The tools file cannot be used (read, parsed, or checked against
    /// the other options).
    #[error("--tools {path}: {why}")]
    Tools {
        /// The file.
        path: PathBuf,
        /// Why, naming the tool and the rule, or the fix.
        why: String,
    },
}

/// The server's state: options, roots, background runs, the concurrency
/// limit, the audit log. Cheap to clone (shared).
///
/// ```
/// use corral_mcp::serve::{CallContext, Runner, ServeOptions};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runner = Runner::new(ServeOptions::default())?;
/// let tools: Vec<String> = runner.tools().iter().map(|tool| tool.name.to_string()).collect();
/// assert!(tools.iter().any(|name| name == "run"), "{tools:?}");
///
/// // Bad arguments: a tool error naming the field and the rule; nothing starts.
/// let Some(arguments) = json!({"argv": []}).as_object().cloned() else { unreachable!() };
/// let result = runner.call("run", arguments, CallContext::default()).await;
/// assert_eq!(result.is_error, Some(true));
/// assert!(serde_json::to_string(&result)?.contains("argv"));
/// assert_eq!(runner.tasks_kept(), 0);
///
/// // Ends every run and waits for their trees; later calls are refused.
/// runner.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Runner {
    inner: Arc<runs::Shared>,
}

impl Runner {
    /// A runner with `options`.
    ///
    /// # Errors
    /// A root that does not exist or is not a directory; an audit file that
    /// cannot be opened for appending; a command tool that does not fit the
    /// other options (its name is a generic tool's, its timeout is above
    /// the maximum, its `cwd` is outside the roots, it needs tasks and
    /// tasks are off), or `tools_only` with no command tools.
    pub fn new(options: ServeOptions) -> Result<Self, ServeError> {
        Ok(Self {
            inner: Arc::new(runs::Shared::new(options)?),
        })
    }

    /// The tools this server offers.
    pub fn tools(&self) -> Vec<Tool> {
        tools::list(&self.inner.options)
    }

    /// Calls tool `name`. Bad arguments give a tool error naming the field
    /// and the rule; the server keeps serving.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        mut context: CallContext,
    ) -> CallToolResult {
        context.tasks = false;
        match tools::call(&self.inner, name, arguments, context).await {
            CallToolResponse::Complete(result) => result,
            // Only a request that declared the Tasks extension is answered
            // otherwise, and this one did not.
            _ => CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                "the server answered with a task a call that did not ask for one",
            )]),
        }
    }

    /// Calls tool `name` for a request that may be answered with a task
    /// (`context.tasks`), as the MCP handler does.
    pub(crate) async fn respond(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        context: CallContext,
    ) -> CallToolResponse {
        tools::call(&self.inner, name, arguments, context).await
    }

    /// Whether tool `name` is always answered with a task (a command tool
    /// whose `task_support` is `required`): a request that did not declare
    /// the Tasks extension is refused with `-32021`.
    pub(crate) fn requires_tasks(&self, name: &str) -> bool {
        self.inner
            .options
            .tools
            .get(name)
            .is_some_and(|tool| tool.task_support == command_tools::TaskSupport::Required)
    }

    /// The runs answered as MCP tasks.
    pub(crate) fn tasks(&self) -> &task_store::TaskStore {
        &self.inner.tasks
    }

    /// How many tasks are kept now, running and finished (the Tasks
    /// extension: a long `run` answered with a task).
    pub fn tasks_kept(&self) -> usize {
        self.inner.tasks.len()
    }

    /// Ends every run (foreground and background) and waits until their
    /// trees are gone. Later calls are refused.
    pub async fn shutdown(&self) {
        self.inner.shutdown().await;
    }
}
