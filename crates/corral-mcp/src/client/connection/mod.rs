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
//!
//! - `supervise`: the supervisor task, from the spawn to the published
//!   teardown; `teardown`: the one teardown and what it reports.

mod supervise;
mod teardown;

use std::sync::Arc;

use rmcp::model::{CallToolResult, GetTaskResult, ListToolsResult, Tool};
use serde_json::{Map, Value, json};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::watch,
    time::Instant,
};

use super::{
    elicitation::{Elicitation, MAX_INPUT_ROUNDS, input_responses},
    handshake::PeerInfo,
    headers::annotations,
    options::{CallOptions, ConnectOptions, HttpOptions, Reconnect},
    outcome::{CallError, ConnectError, Ended},
    shared::{Core, ReadStats, lock},
    task::{Follow, Step, created, state},
};
use crate::message::Id;

use supervise::{CloseOnDrop, Closer};
pub(crate) use supervise::{Launch, OnEnd, Owner, open};
pub use teardown::Teardown;

/// A live connection to one MCP server.
///
/// Dropping it ends the connection (the whole teardown runs in its
/// supervisor task; see [`Connection::close`] to wait for it).
///
/// Here the server is corral's own (`corral_mcp::serve`) at the other end of
/// a pipe, in this process:
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::client::{CallError, CallOptions, ConnectOptions, Connection, Ended, Era};
/// use corral_mcp::serve::{CorralServer, Runner, ServeOptions};
/// use rmcp::ServiceExt;
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (ours, theirs) = tokio::io::duplex(1 << 16);
/// let server = CorralServer::new(Runner::new(ServeOptions::default())?);
/// let serving = server.clone();
/// tokio::spawn(async move {
///     if let Ok(running) = serving.serve(theirs).await {
///         let _ = running.waiting().await;
///     }
/// });
///
/// let (input, output) = tokio::io::split(ours);
/// let connection = Connection::attach(input, output, ConnectOptions::default()).await?;
/// assert_eq!(connection.peer().era, Era::Discover);
/// assert_eq!(connection.server_pid(), None); // no process of ours
///
/// let options = CallOptions::timeout(Duration::from_secs(30));
/// let tools = connection.list_tools(&options).await?;
/// assert!(tools.iter().any(|tool| tool.name == "run"));
/// // The tool's own error is a result; nothing was started for it.
/// let arguments = json!({"argv": []}).as_object().cloned();
/// let result = connection.call_tool("run", arguments, &options).await?;
/// assert_eq!(result.is_error, Some(true));
/// // Any request, answered as JSON.
/// let listed = connection.request("tools/list", None, &options).await?;
/// assert_eq!(listed["tools"].as_array().map(Vec::len), Some(tools.len()));
/// assert!(connection.last_request_id().is_some());
/// assert_eq!((connection.in_flight(), connection.stats().dropped()), (0, 0));
///
/// let teardown = connection.close().await.expect("a teardown");
/// assert_eq!(teardown.ended, Ended::Disconnected);
/// assert_eq!(connection.ended(), Some(Ended::Disconnected));
/// let later = connection.call_tool("run", None, &options).await;
/// assert!(matches!(later, Err(CallError::NotSent { .. })));
/// server.runner().shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// A server spawned as an owned tree, an adopted one, or one over HTTP;
/// a call that ran as a task, read again later:
///
/// ```no_run
/// use corral_mcp::client::{CallOptions, ConnectOptions, Connection, HttpOptions};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mut command = corral::Command::new("npx");
/// command.args(["-y", "@modelcontextprotocol/server-everything"]);
/// let spawned = Connection::spawn(command, ConnectOptions::default()).await?;
/// println!("server pid {:?}", spawned.server_pid());
///
/// let mut command = corral::Command::new("uvx");
/// command.arg("mcp-server-git");
/// command.stdin(corral::Stdio::Piped).stdout(corral::Stdio::Piped);
/// let adopted = Connection::adopt(command.spawn()?, ConnectOptions::default()).await?;
///
/// let http = HttpOptions::default().header("Authorization", "Bearer a-long-random-token");
/// let remote = Connection::http("http://127.0.0.1:8765/mcp", http, ConnectOptions::default()).await?;
/// let options = CallOptions::default();
/// let task = remote.get_task("a-task-id", &options).await?;
/// println!("{task:?}");
/// match remote.read_task("a-task-id", &options).await {
///     Ok(result) => println!("{result:?}"),
///     Err(error) => eprintln!("{error}"),
/// }
/// remote.cancel_task("a-task-id", &options).await?;
///
/// // Waits for the end, whatever ends it.
/// let teardown = adopted.closed().await;
/// println!("{teardown:?}");
/// drop((spawned, remote));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Connection {
    core: Arc<Core>,
    peer: PeerInfo,
    pid: Option<i32>,
    closer: Closer,
    done: watch::Receiver<Option<Arc<Teardown>>>,
    /// The budget of polls in a row without an answer, for a call that
    /// follows a task.
    reconnect: Reconnect,
    _guard: CloseOnDrop,
}

/// What a `tools/call` was answered with.
pub(crate) enum Called {
    Done(CallToolResult),
    Task(Follow),
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
        open(Launch::Spawn(command), options, Owner::alone()).await
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
        open(Launch::Adopt(child), options, Owner::alone()).await
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
        open(launch, options, Owner::alone()).await
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
        open(launch, options, Owner::alone()).await
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

    /// The id given to the latest request on this connection (the
    /// handshake's included): after one call that returned, that call's id,
    /// whatever its outcome. With calls running concurrently, any of them.
    pub fn last_request_id(&self) -> Option<RequestId> {
        self.core.last_request_id()
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
    /// Over HTTP the request carries `Mcp-Name` and the `Mcp-Param-*`
    /// headers of the parameters the tool's schema annotates with
    /// `x-mcp-header`, as the latest [`Connection::list_tools`] gave them
    /// (list first: a tool never listed gets no `Mcp-Param-*` header); a
    /// tool that listing rejected for its annotations is not called.
    ///
    /// A result that asks for input (`resultType: "input_required"`, 2026-07-28)
    /// is answered and the call asked again, as a new request (a fresh id)
    /// with the answers (`inputResponses`, elicitations by
    /// [`ConnectOptions::elicitation`]) and the server's `requestState`
    /// unchanged, at most [`MAX_INPUT_ROUNDS`] times; input this client
    /// cannot give fails the call ([`CallError::InvalidResult`]).
    ///
    /// Nothing is retried, ever: a deadline, a cancellation or a dropped
    /// future after the request was written gives
    /// [`CallError::OutcomeUnknown`], and what the server did is not undone.
    ///
    /// With [`ConnectOptions::tasks`], a server may answer with a task
    /// (2026-07-28, SEP-2663): the call then polls `tasks/get` at the
    /// server's `pollIntervalMs`, within the same deadlines (the idle one is
    /// reset when the task's status message changes), until the task
    /// completes (its result comes back, naming the task in its `_meta`:
    /// [`task_of`](super::task_of)), fails, or is cancelled
    /// ([`CallError::Task`]). A poll that gets no answer is asked again after
    /// a backoff, up to [`Reconnect::attempts`] in a row; the call is never
    /// sent again. [`CallOptions::on_task`] hears the task's id as soon as it
    /// is known.
    ///
    /// # Errors
    /// As [`Connection::request`], and [`CallError::InvalidResult`];
    /// [`CallError::NotSent`] for a tool rejected for its annotations;
    /// [`CallError::Task`] for a task that did not complete.
    ///
    /// # Cancel safety
    /// As [`Connection::request`]. While the call follows a task, a
    /// cancellation or a deadline sends `tasks/cancel` (awaited within
    /// [`TASK_CANCEL_TIMEOUT`](super::TASK_CANCEL_TIMEOUT)), and dropping the
    /// future queues one without waiting: the server ends the run.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let mut follow = match self.start_call(name, arguments, options).await? {
            Called::Done(result) => return Ok(result),
            Called::Task(follow) => follow,
        };
        loop {
            match follow.step().await {
                Step::Done(done) => return done,
                Step::Lost(why) => {
                    if let Some(ended) = self.ended() {
                        return Err(follow.lost(format!(
                            "a poll got no answer ({why}) and the connection ended ({ended}); \
                             a Manager reconnects and resumes, a lone connection cannot"
                        )));
                    }
                    follow.after_lost(&why).await?;
                }
            }
        }
    }

    /// Sends a `tools/call` (and its `input_required` rounds): the result,
    /// or the task to follow.
    pub(crate) async fn start_call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        options: &CallOptions,
    ) -> Result<Called, CallError> {
        let started = Instant::now();
        if let Some(why) = lock(&self.core.tools).rejected.get(name) {
            return Err(CallError::NotSent {
                reason: format!("the tool {name:?} was rejected when the tools were listed: {why}"),
            });
        }
        let mut params = json!({"name": name});
        if let Some(arguments) = arguments {
            params["arguments"] = Value::Object(arguments);
        }
        let mut rounds = 0;
        let result = loop {
            let mut round = options.clone();
            round.timeout = options
                .timeout
                .map(|limit| limit.saturating_sub(started.elapsed()));
            let result = self
                .core
                .request("tools/call", Some(params.clone()), &round)
                .await?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                break result;
            }
            rounds += 1;
            if rounds > MAX_INPUT_ROUNDS {
                return Err(CallError::InvalidResult(format!(
                    "the server still asks for input after {MAX_INPUT_ROUNDS} rounds"
                )));
            }
            params = retried(&params, &result, lock(&self.core.elicitation).as_ref())
                .map_err(CallError::InvalidResult)?;
        };
        if let Some(task) = created(&result)? {
            let follow = Follow::new(&self.core, task, options, started, self.reconnect);
            if let Some(tell) = &options.on_task {
                tell.tell(&follow.task_id);
            }
            return Ok(Called::Task(follow));
        }
        serde_json::from_value(result)
            .map(Called::Done)
            .map_err(|error| CallError::InvalidResult(error.to_string()))
    }

    /// Reads task `task_id` once (`tasks/get`, the Tasks extension): its
    /// status and, once it completed, its result. Only the credentials that
    /// created a task can read it; any other is told it is unknown.
    ///
    /// # Errors
    /// As [`Connection::request`]; an unknown task is the server's
    /// [`CallError::Rpc`].
    pub async fn get_task(
        &self,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<GetTaskResult, CallError> {
        let params = json!({"taskId": task_id});
        let answer = self
            .core
            .request("tasks/get", Some(params), options)
            .await?;
        serde_json::from_value(answer).map_err(|error| CallError::InvalidResult(error.to_string()))
    }

    /// Reads task `task_id` once, as the call it ran would have ended: its
    /// result once it completed (naming the task in its `_meta`), else
    /// [`CallError::Task`] saying how it ended, or that it is still working
    /// ([`TaskEnd::Working`](super::TaskEnd::Working)). For a caller that
    /// detached from a call and comes back (a new process, with the same
    /// credentials).
    ///
    /// # Errors
    /// As [`Connection::get_task`], and [`CallError::Task`].
    pub async fn read_task(
        &self,
        task_id: &str,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        state(self.get_task(task_id, options).await?)
    }

    /// Asks the server to cancel task `task_id` (`tasks/cancel`): corral's
    /// server ends the run's whole tree, and the task then ends
    /// `cancelled`. A task already over stays as it ended.
    ///
    /// # Errors
    /// As [`Connection::get_task`].
    pub async fn cancel_task(&self, task_id: &str, options: &CallOptions) -> Result<(), CallError> {
        let params = json!({"taskId": task_id});
        self.core
            .request("tasks/cancel", Some(params), options)
            .await
            .map(|_| ())
    }

    /// Follows a task on this connection from now on (the manager's resume).
    pub(crate) fn adopt_follow(&self, follow: &mut Follow) {
        follow.on(&self.core);
    }

    /// Lists the server's tools (every page, each under `options`).
    ///
    /// Over HTTP, a tool whose `x-mcp-header` annotations break the
    /// specification's rules is left out (with a warning naming it and why),
    /// and the annotations of the others are kept for
    /// [`Connection::call_tool`]'s headers.
    ///
    /// # Errors
    /// As [`Connection::call_tool`].
    pub async fn list_tools(&self, options: &CallOptions) -> Result<Vec<Tool>, CallError> {
        let tools = self.list_all_tools(options).await?;
        let mut known = lock(&self.core.tools);
        if !known.http {
            return Ok(tools);
        }
        known.params.clear();
        known.rejected.clear();
        let mut kept = Vec::with_capacity(tools.len());
        for tool in tools {
            match annotations(&tool.input_schema) {
                Ok(params) => {
                    known.params.insert(tool.name.to_string(), params);
                    kept.push(tool);
                }
                Err(why) => {
                    tracing::warn!(tool = %tool.name, %why, "rejected a tool for its x-mcp-header annotations");
                    known.rejected.insert(tool.name.to_string(), why);
                }
            }
        }
        Ok(kept)
    }

    async fn list_all_tools(&self, options: &CallOptions) -> Result<Vec<Tool>, CallError> {
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

/// The parameters of the next round of a call whose answer asked for input:
/// the first round's own (name, arguments, `_meta`), the answers to the
/// input requests, and the server's `requestState` as it sent it.
fn retried(first: &Value, asked: &Value, handler: Option<&Elicitation>) -> Result<Value, String> {
    let empty = Map::new();
    let requests = asked
        .get("inputRequests")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut params = first.clone();
    if let Value::Object(map) = &mut params {
        map.remove("inputResponses");
        map.remove("requestState");
        if !requests.is_empty() {
            let responses = input_responses(requests, handler)?;
            map.insert("inputResponses".into(), Value::Object(responses));
        }
        if let Some(state) = asked.get("requestState") {
            map.insert("requestState".into(), state.clone());
        }
    }
    Ok(params)
}

/// The request id type, for callers matching [`CallError::OutcomeUnknown`].
pub type RequestId = Id;

#[cfg(test)]
mod tests;
