//! The Tasks extension on the client's side (SEP-2663, 2026-07-28): a
//! `tools/call` answered with a task (`resultType: "task"`) is followed with
//! `tasks/get` at the server's `pollIntervalMs` until it completes (the
//! result is inlined), fails or is cancelled.
//!
//! The caller's deadlines hold across the whole: the hard one bounds the
//! call, the idle one is reset whenever the task's status or status message
//! changes (the server's latest output lines). A call cancelled, past a
//! deadline, or dropped while it follows its task sends `tasks/cancel`:
//! awaited within [`TASK_CANCEL_TIMEOUT`] in the first two cases, queued
//! without waiting from `Drop` in the last (see `Core::request_detached`).
//!
//! A task that asks for input (status `input_required`, its `inputRequests`
//! inlined in `tasks/get`) is answered with `tasks/update`, by the same
//! policy as an `input_required` result ([`ConnectOptions::elicitation`]),
//! each request once, at most [`MAX_INPUT_ROUNDS`] times (an answer taken
//! restarts the idle deadline); input this client cannot give, or a server
//! that keeps asking, gives the task up (`tasks/cancel`) with a reason
//! naming what was asked.
//!
//! A poll that gets no answer (the connection was cut, the server cannot be
//! reached) is not the task's end: `tasks/get` asks again, after a backoff,
//! up to the reconnect budget ([`Reconnect::attempts`]) of failed polls in a
//! row (the manager reconnects a connection that ended in between). Only a
//! task the server no longer knows, or polls that keep failing, end the call
//! as [`TaskEnd::Lost`], saying why.
//!
//! [`Reconnect::attempts`]: super::Reconnect::attempts
//! [`ConnectOptions::elicitation`]: super::ConnectOptions::elicitation

use std::{collections::HashSet, sync::Arc, time::Duration};

use rmcp::model::{CallToolResult, CreateTaskResult, GetTaskResult, TaskPayload, TaskStatus};
use serde_json::{Map, Value, json};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::{
    elicitation::{MAX_INPUT_ROUNDS, input_responses},
    http::HTTP_ERROR,
    options::{CallOptions, Reconnect, backoff},
    outcome::{CallError, TaskEnd},
    shared::{Core, lock},
};

/// The `_meta` key of a result that came from a task: `{"taskId": ID}`.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The bound on the `tasks/cancel` of a call given up (cancelled, or past
/// its deadline).
pub const TASK_CANCEL_TIMEOUT: Duration = Duration::from_secs(2);
/// The poll interval when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// The bounds put on the server's suggestion: a hostile one can make the
/// client neither spin nor sleep for ever.
const MIN_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_secs(10);

/// The task a `tools/call` was answered with, if it was.
pub(crate) fn created(answer: &Value) -> Result<Option<CreateTaskResult>, CallError> {
    if answer.get("resultType").and_then(Value::as_str) != Some("task") {
        return Ok(None);
    }
    serde_json::from_value(answer.clone())
        .map(Some)
        .map_err(|error| CallError::InvalidResult(format!("a task answer: {error}")))
}

/// What one answer to `tasks/get` says.
enum Read {
    /// The task goes on; nothing is owed to it.
    Working,
    /// The task waits for input not yet given: these requests, by key.
    Asks(Map<String, Value>),
    /// The call's end.
    Done(Result<CallToolResult, CallError>),
}

/// What one stretch of following ended in.
pub(crate) enum Step {
    /// The call's end.
    Done(Result<CallToolResult, CallError>),
    /// A poll got no answer: ask again (on a live connection).
    Lost(String),
}

/// One call following its task, across polls and connections. Dropping it
/// while the task is not over queues a `tasks/cancel` on the latest
/// connection.
pub(crate) struct Follow {
    pub task_id: String,
    core: Arc<Core>,
    poll: Duration,
    hard: Option<Instant>,
    idle_limit: Option<Duration>,
    idle: Option<Instant>,
    cancel: CancellationToken,
    /// The status and message last seen (a change resets the idle deadline).
    seen: (TaskStatus, Option<String>),
    /// Polls in a row that got no answer, and the budget for them.
    lost: u32,
    budget: u32,
    reconnect: Reconnect,
    /// The keys of the input requests answered (`tasks/update` acknowledged):
    /// a task keeps listing a request until it has read the answer.
    answered: HashSet<String>,
    /// `tasks/update`s sent, at most [`MAX_INPUT_ROUNDS`].
    rounds: u32,
    armed: bool,
}

impl Follow {
    /// Starts following `task` on `core` under the call's `options`, whose
    /// hard deadline started at `started`.
    pub(crate) fn new(
        core: &Arc<Core>,
        task: CreateTaskResult,
        options: &CallOptions,
        started: Instant,
        reconnect: Reconnect,
    ) -> Self {
        let poll = task
            .task
            .poll_interval_ms
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        tracing::info!(task_id = %task.task.task_id, ?poll, "the call runs as a task");
        Self {
            task_id: task.task.task_id,
            core: core.clone(),
            poll,
            hard: options.timeout.and_then(|limit| started.checked_add(limit)),
            idle_limit: options.idle_timeout,
            idle: options
                .idle_timeout
                .and_then(|limit| Instant::now().checked_add(limit)),
            cancel: options.cancel.clone().unwrap_or_default(),
            seen: (task.task.status, task.task.status_message),
            lost: 0,
            budget: reconnect.attempts,
            reconnect,
            answered: HashSet::new(),
            rounds: 0,
            armed: true,
        }
    }

    /// Follows on `core` from now on (a new connection of the manager).
    pub(crate) fn on(&mut self, core: &Arc<Core>) {
        self.core = core.clone();
    }

    /// Polls until the task ends or a poll gets no answer.
    pub(crate) async fn step(&mut self) -> Step {
        loop {
            if let Some(why) = self.wait(self.poll).await {
                return Step::Done(Err(self.give_up(why).await));
            }
            let mut options = CallOptions::default().cancel_on(self.cancel.clone());
            options.timeout = self.left();
            let params = json!({"taskId": self.task_id});
            match self.core.request("tasks/get", Some(params), &options).await {
                Ok(answer) => {
                    self.lost = 0;
                    match self.read(answer) {
                        Read::Working => {}
                        Read::Done(done) => return Step::Done(done),
                        Read::Asks(requests) => {
                            if let Some(step) = self.give_input(&requests).await {
                                return step;
                            }
                        }
                    }
                }
                Err(CallError::Rpc { code, message, .. }) if code != HTTP_ERROR => {
                    return Step::Done(Err(self.end(
                        TaskEnd::Lost,
                        format!("the server no longer knows it (error {code}: {message})"),
                    )));
                }
                Err(CallError::InvalidResult(why)) => {
                    return Step::Done(Err(self.end(
                        TaskEnd::Lost,
                        format!("tasks/get answered with no valid task: {why}"),
                    )));
                }
                Err(error) => {
                    if let Some(why) = self.stopped() {
                        return Step::Done(Err(self.give_up(why).await));
                    }
                    return Step::Lost(error.to_string());
                }
            }
        }
    }

    /// After a poll got no answer (`why`): waits a backoff and says whether
    /// to ask again, or the call's end once the budget is spent.
    pub(crate) async fn after_lost(&mut self, why: &str) -> Result<(), CallError> {
        self.lost += 1;
        if self.lost > self.budget {
            return Err(self.end(
                TaskEnd::Lost,
                format!(
                    "{} poll(s) in a row got no answer (Reconnect::attempts is {}); the last: \
                     {why}; it may still run: read it again with tasks/get",
                    self.lost, self.budget
                ),
            ));
        }
        tracing::info!(task_id = %self.task_id, lost = self.lost, %why, "a poll got no answer; asking again");
        let pause = backoff(&self.reconnect, self.lost - 1);
        match self.wait(pause).await {
            Some(why) => Err(self.give_up(why).await),
            None => Ok(()),
        }
    }

    /// The call's end after a poll failed, when it cannot be asked again
    /// (the connection is gone for good).
    pub(crate) fn lost(&mut self, why: String) -> CallError {
        self.end(TaskEnd::Lost, why)
    }

    /// What an answer to `tasks/get` means.
    fn read(&mut self, answer: Value) -> Read {
        let got: GetTaskResult = match serde_json::from_value(answer) {
            Ok(got) => got,
            Err(error) => {
                return Read::Done(Err(self.end(
                    TaskEnd::Lost,
                    format!("tasks/get answered with no valid task: {error}"),
                )));
            }
        };
        let task = &got.task.task;
        if task.status.is_terminal() {
            self.armed = false;
            return Read::Done(state(got));
        }
        let now = (task.status, task.status_message.clone());
        if now != self.seen {
            self.seen = now;
            self.idle = self
                .idle_limit
                .and_then(|limit| Instant::now().checked_add(limit));
        }
        let TaskPayload::InputRequired { input_requests } = &got.task.payload else {
            return Read::Working;
        };
        let Ok(Value::Object(requests)) = serde_json::to_value(input_requests) else {
            return Read::Working;
        };
        let unanswered: Map<String, Value> = requests
            .into_iter()
            .filter(|(key, _)| !self.answered.contains(key))
            .collect();
        if unanswered.is_empty() {
            Read::Working
        } else {
            Read::Asks(unanswered)
        }
    }

    /// Answers the task's `requests` with `tasks/update`: `None` once the
    /// server acknowledged (follow on), else the step it ends in (the task
    /// given up when this client cannot answer or the server refuses the
    /// answer; lost when no answer came).
    async fn give_input(&mut self, requests: &Map<String, Value>) -> Option<Step> {
        if self.rounds >= MAX_INPUT_ROUNDS {
            let why = format!(
                "the server still asks for input after {MAX_INPUT_ROUNDS} answers (tasks/update)"
            );
            return Some(Step::Done(Err(self.give_up(&why).await)));
        }
        // The handler runs without the lock: a slow one must not hold up
        // the reader task's own elicitation answers.
        let handler = lock(&self.core.elicitation).clone();
        let responses = match input_responses(requests, handler.as_ref()) {
            Ok(responses) => responses,
            Err(why) => return Some(Step::Done(Err(self.give_up(&why).await))),
        };
        self.rounds += 1;
        tracing::info!(task_id = %self.task_id, requests = responses.len(), round = self.rounds, "the task asks for input: tasks/update");
        let mut options = CallOptions::default().cancel_on(self.cancel.clone());
        options.timeout = self.left();
        let keys: Vec<String> = responses.keys().cloned().collect();
        let params = json!({"taskId": self.task_id, "inputResponses": responses});
        match self
            .core
            .request("tasks/update", Some(params), &options)
            .await
        {
            Ok(_) => {
                self.answered.extend(keys);
                // An answer taken is progress: the idle deadline starts again.
                self.idle = self
                    .idle_limit
                    .and_then(|limit| Instant::now().checked_add(limit));
                None
            }
            Err(CallError::Rpc { code, message, .. }) if code != HTTP_ERROR => {
                let why = format!("tasks/update was refused (error {code}: {message})");
                Some(Step::Done(Err(self.give_up(&why).await)))
            }
            Err(error) => match self.stopped() {
                Some(why) => Some(Step::Done(Err(self.give_up(why).await))),
                None => Some(Step::Lost(error.to_string())),
            },
        }
    }

    /// The call's end, with nothing more owed to the server.
    fn end(&mut self, end: TaskEnd, reason: String) -> CallError {
        self.armed = false;
        CallError::Task {
            task_id: self.task_id.clone(),
            end,
            reason,
        }
    }

    /// Gives the task up for `why`: `tasks/cancel`, within
    /// [`TASK_CANCEL_TIMEOUT`].
    async fn give_up(&mut self, why: &str) -> CallError {
        self.armed = false;
        let options = CallOptions::timeout(TASK_CANCEL_TIMEOUT);
        let params = json!({"taskId": self.task_id});
        let sent = self
            .core
            .request("tasks/cancel", Some(params), &options)
            .await;
        let said = match sent {
            Ok(_) => "tasks/cancel was acknowledged".to_owned(),
            Err(error) => format!("tasks/cancel got no acknowledgement ({error})"),
        };
        tracing::info!(task_id = %self.task_id, why, %said, "gave a task up");
        self.end(
            TaskEnd::GivenUp,
            format!("{why}; {said}; what the run did before is not undone"),
        )
    }

    /// Sleeps `pause` unless the call is cancelled or a deadline passes
    /// first: then says which.
    async fn wait(&self, pause: Duration) -> Option<&'static str> {
        if let Some(why) = self.stopped() {
            return Some(why);
        }
        let wake = Instant::now() + pause;
        let ends = self.deadline();
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Some("cancelled"),
            () = until(ends), if ends.is_some_and(|ends| ends <= wake) => {
                Some("the deadline passed")
            }
            () = sleep_until(wake) => None,
        }
    }

    /// Why the call must stop now, if it must.
    fn stopped(&self) -> Option<&'static str> {
        if self.cancel.is_cancelled() {
            return Some("cancelled");
        }
        self.deadline()
            .is_some_and(|at| at <= Instant::now())
            .then_some("the deadline passed")
    }

    /// The nearer of the call's two deadlines, hard and idle.
    fn deadline(&self) -> Option<Instant> {
        [self.hard, self.idle].into_iter().flatten().min()
    }

    /// What is left until [`Self::deadline`]: a request of the call's
    /// (`tasks/get`, `tasks/update`) that gets no answer is given up at
    /// either deadline.
    fn left(&self) -> Option<Duration> {
        self.deadline()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        if self.armed {
            let queued = self
                .core
                .request_detached("tasks/cancel", json!({"taskId": self.task_id}));
            tracing::info!(task_id = %self.task_id, queued, "the call following a task was dropped: tasks/cancel");
        }
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The task id a result came from, if it ran as a task (its `_meta`
/// names it under [`RELATED_TASK`]).
pub fn task_of(result: &CallToolResult) -> Option<&str> {
    result
        .meta
        .as_ref()?
        .get(RELATED_TASK)?
        .get("taskId")?
        .as_str()
}

/// What a task's state means for the call it ran: its result once it
/// completed (naming the task in its `_meta`), else [`CallError::Task`] (a
/// task still working or asking for input is [`TaskEnd::Working`]).
pub(crate) fn state(got: GetTaskResult) -> Result<CallToolResult, CallError> {
    let task = got.task.task;
    let ended = |end, reason| CallError::Task {
        task_id: task.task_id.clone(),
        end,
        reason,
    };
    match got.task.payload {
        TaskPayload::Completed { result } => {
            let mut result: CallToolResult = serde_json::from_value(Value::Object(result))
                .map_err(|error| CallError::InvalidResult(format!("the task's result: {error}")))?;
            let meta = result.meta.get_or_insert_with(Default::default);
            meta.insert(RELATED_TASK.into(), json!({"taskId": task.task_id}));
            Ok(result)
        }
        TaskPayload::Failed { error } => {
            let said = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
            Err(ended(TaskEnd::Failed, format!("error {code}: {said}")))
        }
        TaskPayload::Cancelled => {
            let said = task
                .status_message
                .clone()
                .unwrap_or_else(|| "the server said no more".into());
            Err(ended(TaskEnd::Cancelled, said))
        }
        _ => {
            let said = task
                .status_message
                .clone()
                .unwrap_or_else(|| "no status message".into());
            Err(ended(TaskEnd::Working, said))
        }
    }
}
