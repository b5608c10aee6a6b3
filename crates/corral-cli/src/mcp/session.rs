//! One request to an MCP server, for `corral mcp call` and `corral mcp
//! list`: connect (the server spawned as an owned tree), send the request
//! under `--timeout` and the signals, then always close the connection and
//! wait for its teardown, so that the server's whole tree is gone before
//! corral exits, whatever happened.
//!
//! A signal ([`signals::CLIENT`]) cancels whatever runs: the connect (then
//! nothing was sent) or the call (then the outcome is unknown if the request
//! was written, not sent otherwise). The library decides which, and tears
//! the connection down before it answers.

use std::{future::Future, sync::Arc, time::Duration};

use corral::{Signal, host::SignalWatch};
use corral_mcp::client::{
    CallError, CallOptions, ConnectError, ConnectOptions, Connection, DEFAULT_DISCOVER_TIMEOUT,
    Elicitation, HttpOptions, OnTask, RELATED_TASK, RequestId, TaskEnd, Teardown,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::{
    cli::{ClientArgs, ElicitationPolicy, ServerTarget, ServerTreeArgs},
    kit::{
        exit::CallOutcome,
        signals::{self, Watch},
    },
};

/// The one request a session sends.
#[derive(Debug, Clone)]
pub enum Request {
    /// `tools/call`.
    Call {
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Option<Map<String, Value>>,
        /// Declare the Tasks extension, and follow a task to its end.
        task: bool,
    },
    /// `tools/list`, every page: answered as `{"tools": [...]}`.
    List,
    /// `tasks/get` of this task, once: answered with its result once it
    /// completed.
    TaskGet(String),
    /// `tasks/cancel` of this task: answered with `{}`.
    TaskCancel(String),
}

impl Request {
    /// Whether the connection declares the Tasks extension.
    fn declares_tasks(&self) -> bool {
        match self {
            Self::Call { task, .. } => *task,
            Self::List => false,
            Self::TaskGet(_) | Self::TaskCancel(_) => true,
        }
    }

    /// The task this request reads or cancels, if any.
    fn task_id(&self) -> Option<&str> {
        match self {
            Self::TaskGet(id) | Self::TaskCancel(id) => Some(id),
            _ => None,
        }
    }
}

/// Why a session has no answer.
#[derive(Debug)]
pub enum Failure {
    /// corral could not start (signal handlers, parent already gone).
    Setup(anyhow::Error),
    /// The server could not be started or connected; its tree is gone.
    Connect(ConnectError),
    /// The request failed (see [`CallError`]).
    Call(CallError),
}

/// What a session did.
#[derive(Debug)]
pub struct Done {
    /// The server's answer (a `CallToolResult` or `{"tools": [...]}`) as
    /// JSON, or why there is none.
    pub answer: Result<Value, Failure>,
    /// The id of the request (of the last page for `tools/list`), once it
    /// may have been written: `None` if it was not sent.
    pub request_id: Option<RequestId>,
    /// The connection's teardown, once it finished (`None` if it never
    /// connected: the library ended the tree before it returned the error).
    pub teardown: Option<Arc<Teardown>>,
    /// The signal that cancelled the session, if one did.
    pub received: Option<Signal>,
    /// The task the call ran as (or the task read or cancelled), if any.
    pub task_id: Option<String>,
    /// How that task stands for this client: `completed`, `failed`,
    /// `cancelled`, `working`, `given_up` (corral sent `tasks/cancel`) or
    /// `lost` (it cannot be found again).
    pub task_status: Option<&'static str>,
}

impl Done {
    /// How the request ended.
    pub fn outcome(&self) -> CallOutcome {
        match &self.answer {
            Ok(value) if value.get("isError") == Some(&Value::Bool(true)) => CallOutcome::ToolError,
            Ok(_) => CallOutcome::Ok,
            Err(Failure::Setup(_) | Failure::Connect(_)) => CallOutcome::NotSent,
            Err(Failure::Call(CallError::NotSent { .. })) => CallOutcome::NotSent,
            Err(Failure::Call(CallError::Task {
                end: TaskEnd::Failed,
                ..
            })) => CallOutcome::Error,
            Err(Failure::Call(CallError::Rpc { .. } | CallError::InvalidResult(_))) => {
                CallOutcome::Error
            }
            // OutcomeUnknown, and any kind the library adds later: corral
            // cannot claim the request was not sent.
            Err(Failure::Call(_)) => CallOutcome::Unknown,
        }
    }
}

/// Runs `request` against the server of `args` as one session.
pub async fn run(args: &ClientArgs, parent: i32, request: Request) -> Done {
    let failed = |failure| Done {
        answer: Err(failure),
        request_id: None,
        teardown: None,
        received: None,
        task_id: None,
        task_status: None,
    };
    let watch = match signals::install(&signals::CLIENT, parent) {
        Ok(Watch::Armed(watch)) => watch,
        Ok(Watch::ParentGone) => {
            return failed(Failure::Setup(anyhow::anyhow!(
                "the parent process is already gone; the server was not started"
            )));
        }
        Err(error) => return failed(Failure::Setup(error)),
    };
    let mut guard = Guard {
        watch,
        cancel: CancellationToken::new(),
        received: None,
    };
    let target = args.target();
    let over_http = matches!(target, ServerTarget::Http { .. });
    let connected = match target {
        ServerTarget::Stdio(command) => {
            let command = server_command(&command, &args.tree);
            let options = connect_options(args, guard.cancel.clone(), request.declares_tasks());
            guard.run(Connection::spawn(command, options)).await
        }
        ServerTarget::Http { url, headers } => {
            let mut http = HttpOptions::default();
            http.headers = headers;
            let options = connect_options(args, guard.cancel.clone(), request.declares_tasks());
            guard.run(Connection::http(&url, http, options)).await
        }
    };
    let connection = match connected {
        Ok(connection) => connection,
        Err(error) => {
            return Done {
                answer: Err(Failure::Connect(error)),
                request_id: None,
                teardown: None,
                received: guard.received,
                task_id: None,
                task_status: None,
            };
        }
    };
    tracing::info!(
        pid = connection.server_pid(),
        "connected; sending the request"
    );
    let mut options = call_options(args.timeout, guard.cancel.clone());
    if let Request::Call { tool, .. } = &request {
        let tool = tool.clone();
        options.on_task = Some(OnTask::new(move |id| {
            if over_http {
                say!(
                    "tool {tool} runs as task {id}; if corral is stopped, read it later with \
                     `corral mcp task get {id}` (same --url and --header)"
                );
            } else {
                say!(
                    "tool {tool} runs as task {id}; over stdio it ends with the server, \
                     which ends with this corral"
                );
            }
        }));
    }
    let asked = request.task_id().map(str::to_owned);
    let answer = guard
        .run(send(&connection, request, &options, over_http))
        .await;
    let request_id = match &answer {
        Err(CallError::NotSent { .. }) => None,
        _ => connection.last_request_id(),
    };
    let (task_id, task_status) = task_of(&answer, asked);
    // Whatever the answer, the tree goes before corral does.
    let teardown = connection.close().await;
    Done {
        answer: answer.map_err(Failure::Call),
        request_id,
        teardown,
        received: guard.received,
        task_id,
        task_status,
    }
}

/// The task an answer came from (or the one asked about), and how it stands.
fn task_of(
    answer: &Result<Value, CallError>,
    asked: Option<String>,
) -> (Option<String>, Option<&'static str>) {
    match answer {
        Ok(value) => {
            let ran = value["_meta"][RELATED_TASK]["taskId"].as_str();
            let status = ran.is_some().then_some("completed");
            (ran.map(str::to_owned).or(asked), status)
        }
        Err(CallError::Task { task_id, end, .. }) => {
            let status = match end {
                TaskEnd::Failed => "failed",
                TaskEnd::Cancelled => "cancelled",
                TaskEnd::Working => "working",
                TaskEnd::GivenUp => "given_up",
                _ => "lost",
            };
            (Some(task_id.clone()), Some(status))
        }
        Err(_) => (asked, None),
    }
}

/// Sends the request and returns its answer as JSON. Over HTTP a call lists
/// the tools first (under its own `options`), so that the request carries
/// the `Mcp-Param-*` headers the tool's schema asks for, and a tool with
/// invalid annotations is refused before anything is sent for it.
async fn send(
    connection: &Connection,
    request: Request,
    options: &CallOptions,
    over_http: bool,
) -> Result<Value, CallError> {
    let invalid = |error: serde_json::Error| CallError::InvalidResult(error.to_string());
    match request {
        Request::Call {
            tool, arguments, ..
        } => {
            if over_http {
                match connection.list_tools(options).await {
                    Ok(_) => {}
                    // A server that cannot list still gets the call, without
                    // parameter headers.
                    Err(error @ (CallError::Rpc { .. } | CallError::InvalidResult(_))) => {
                        tracing::warn!(%error, "listing the tools before the call failed");
                    }
                    Err(error) => {
                        return Err(CallError::NotSent {
                            reason: format!("listing the tools before the call: {error}"),
                        });
                    }
                }
            }
            let result = connection.call_tool(&tool, arguments, options).await?;
            serde_json::to_value(result).map_err(invalid)
        }
        Request::TaskGet(id) => {
            let result = connection.read_task(&id, options).await?;
            serde_json::to_value(result).map_err(invalid)
        }
        Request::TaskCancel(id) => {
            connection.cancel_task(&id, options).await?;
            Ok(json!({}))
        }
        Request::List => {
            let tools = connection.list_tools(options).await?;
            Ok(json!({ "tools": serde_json::to_value(tools).map_err(invalid)? }))
        }
    }
}

/// The server command as corral runs it: the tree's policy from the
/// options (its stdio is set by the connection).
fn server_command(command: &[std::ffi::OsString], tree: &ServerTreeArgs) -> corral::Command {
    // clap requires at least one word after `--`.
    let (program, rest) = command.split_first().expect("a server command");
    let mut command = corral::Command::new(program);
    command
        .args(rest)
        .grace(tree.kill_after)
        .final_bound(tree.final_bound)
        .backend(tree.backend)
        .limits(tree.limits.limits());
    command
}

fn connect_options(args: &ClientArgs, cancel: CancellationToken, tasks: bool) -> ConnectOptions {
    let mut options = ConnectOptions::default();
    options.tasks = tasks;
    if let Some(limit) = args.connect_timeout {
        // The limit bounds the whole handshake; the discovery probe gets a
        // quarter of it, so a server silent on it is still reached through
        // initialize, which gets what is left.
        options.handshake_timeout = Some(limit);
        options.discover_timeout = (limit / 4).min(DEFAULT_DISCOVER_TIMEOUT);
        options.initialize_timeout = limit;
    }
    options.close_grace = args.tree.close_grace;
    options.elicitation = args.elicitation.map(|policy| match policy {
        ElicitationPolicy::Decline => Elicitation::decline(),
        ElicitationPolicy::Defaults => Elicitation::defaults(),
    });
    options.cancel = cancel;
    options
}

fn call_options(timeout: Duration, cancel: CancellationToken) -> CallOptions {
    let mut options = CallOptions::default().cancel_on(cancel);
    options.timeout = (!timeout.is_zero()).then_some(timeout);
    options
}

/// Runs futures while watching the signals: the first one cancels the
/// token (which the connect and the call watch) and is remembered; the
/// future still runs to its end, which the library makes come soon.
struct Guard {
    watch: SignalWatch,
    cancel: CancellationToken,
    received: Option<Signal>,
}

impl Guard {
    async fn run<T>(&mut self, work: impl Future<Output = T>) -> T {
        let mut work = std::pin::pin!(work);
        loop {
            tokio::select! {
                output = &mut work => return output,
                signal = self.watch.recv(), if self.received.is_none() => {
                    tracing::info!(%signal, "cancelling the request");
                    self.received = Some(signal);
                    self.cancel.cancel();
                }
            }
        }
    }
}
