//! The MCP Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) on
//! the server's side: a `run` not done within the task window is answered
//! with a task handle, and its result is kept here for `tasks/get`.
//!
//! A task is its run: the run goes on within its own timeout and limits
//! whatever happens to the request that started it (a dropped connection, an
//! ended session), and `tasks/cancel` ends its whole tree. Each task belongs
//! to the principal that started it, as background runs do: another one is
//! told the task is unknown, as for an id that never existed. Ids are 128
//! random bits. A finished task is kept for the TTL after its end, then
//! dropped with its output; at most `max_tasks` are kept. To make room, the
//! creator's own oldest finished task goes first, else one of a client
//! holding more tasks than the creator (see [`room_for`]): one client
//! starting many runs never pushes out another's results. When nothing can
//! go, a new long run is answered directly instead, as without the
//! extension.

use std::{
    cmp::Reverse,
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::{
    ErrorData,
    model::{CallToolResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus},
    task_manager::current_timestamp,
};
use tokio_util::sync::CancellationToken;

use super::{Principal, run::lock};

/// What a task's run says while it goes on: its latest output lines.
pub(crate) type Latest = Arc<Mutex<Option<String>>>;

/// How a task's run ended.
pub(crate) enum End {
    /// The run's result, whatever its outcome (a failed command included).
    Result(CallToolResult),
    /// The run was cancelled (`tasks/cancel`, or the server's shutdown): its
    /// tree was ended; this says what is known.
    Cancelled(String),
    /// The server failed to carry out the request (a command tool whose
    /// command could not be started): the JSON-RPC error object.
    Failed(JsonObject),
}

/// The tasks of one server.
#[derive(Debug)]
pub(crate) struct TaskStore {
    tasks: Mutex<HashMap<String, Entry>>,
    /// How long a finished task is kept.
    ttl: Duration,
    /// How many tasks are kept at most, running and finished.
    max: usize,
    /// The polling interval suggested to clients.
    poll: Duration,
}

#[derive(Debug)]
struct Entry {
    owner: Principal,
    task: Task,
    cancel: CancellationToken,
    latest: Latest,
    /// The end, once the run is over, and when it came.
    end: Option<(TaskPayload, Instant)>,
}

impl TaskStore {
    pub(crate) fn new(ttl: Duration, max: usize, poll: Duration) -> Self {
        Self {
            tasks: Mutex::new(HashMap::new()),
            ttl,
            max,
            poll,
        }
    }

    /// Makes task `id` (128 random bits) for a run that goes on (ended
    /// through `cancel`, saying its latest lines in `latest`) and may take
    /// up to `bound` from now, owned by `owner`. It can be read before this
    /// returns. `Err` says why no task was made (the store is full of
    /// running tasks): the run is then answered directly.
    pub(crate) fn create(
        &self,
        id: String,
        owner: &Principal,
        cancel: CancellationToken,
        latest: Latest,
        bound: Duration,
    ) -> Result<Task, String> {
        let mut tasks = lock(&self.tasks);
        self.sweep(&mut tasks);
        if tasks.len() >= self.max {
            let id = room_for(&tasks, owner).ok_or_else(|| {
                format!(
                    "{} tasks are kept (--max-tasks) and none can go: none is a finished one \
                     of this client's or of a client holding more tasks than it",
                    self.max
                )
            })?;
            tasks.remove(&id);
        }
        let now = current_timestamp();
        let mut task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(millis(bound.saturating_add(self.ttl)));
        task.poll_interval_ms = Some(millis(self.poll));
        task.status_message = Some("running".into());
        tasks.insert(
            id,
            Entry {
                owner: owner.clone(),
                task: task.clone(),
                cancel,
                latest,
                end: None,
            },
        );
        Ok(task)
    }

    /// Records the end of task `id`'s run.
    pub(crate) fn finish(&self, id: &str, end: End) {
        let mut tasks = lock(&self.tasks);
        let Some(entry) = tasks.get_mut(id) else {
            return;
        };
        let (status, message, payload) = match end {
            End::Result(result) => {
                let summary = result
                    .content
                    .first()
                    .and_then(|block| block.as_text())
                    .map(|text| text.text.clone());
                let object = match serde_json::to_value(&result) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => JsonObject::new(),
                };
                (
                    TaskStatus::Completed,
                    summary,
                    TaskPayload::Completed { result: object },
                )
            }
            End::Cancelled(why) => (TaskStatus::Cancelled, Some(why), TaskPayload::Cancelled),
            End::Failed(error) => {
                let message = error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned);
                (TaskStatus::Failed, message, TaskPayload::Failed { error })
            }
        };
        entry.task.status = status;
        entry.task.status_message = message;
        entry.task.last_updated_at = current_timestamp();
        entry.end = Some((payload, Instant::now()));
    }

    /// `tasks/get` of `caller`: the task's state, its result once done.
    pub(crate) fn get(&self, caller: &Principal, id: &str) -> Result<DetailedTask, ErrorData> {
        let mut tasks = lock(&self.tasks);
        self.sweep(&mut tasks);
        let entry = owned(&mut tasks, caller, id)?;
        let payload = match &entry.end {
            Some((payload, _)) => payload.clone(),
            None => {
                if let Some(latest) = lock(&entry.latest).clone() {
                    entry.task.status_message = Some(latest);
                }
                TaskPayload::Working
            }
        };
        Ok(DetailedTask::new(entry.task.clone(), payload))
    }

    /// `tasks/cancel` of `caller`: ends the run's whole tree (the task then
    /// ends `cancelled`); a finished task stays as it ended.
    pub(crate) fn cancel(&self, caller: &Principal, id: &str) -> Result<(), ErrorData> {
        let mut tasks = lock(&self.tasks);
        self.sweep(&mut tasks);
        let entry = owned(&mut tasks, caller, id)?;
        if entry.end.is_none() {
            entry.cancel.cancel();
        }
        Ok(())
    }

    /// `tasks/update` of `caller`: a run never asks for input, so every
    /// response is for a key never issued and is ignored, as the extension
    /// says; an unknown task is an error.
    pub(crate) fn update(&self, caller: &Principal, id: &str) -> Result<(), ErrorData> {
        let mut tasks = lock(&self.tasks);
        self.sweep(&mut tasks);
        owned(&mut tasks, caller, id).map(|_| ())
    }

    /// Tasks kept now, running and finished.
    pub(crate) fn len(&self) -> usize {
        let mut tasks = lock(&self.tasks);
        self.sweep(&mut tasks);
        tasks.len()
    }

    /// Drops the finished tasks whose TTL has passed since their end.
    fn sweep(&self, tasks: &mut HashMap<String, Entry>) {
        tasks.retain(|_, entry| {
            entry
                .end
                .as_ref()
                .is_none_or(|(_, at)| at.elapsed() < self.ttl)
        });
    }
}

/// The finished task that goes to make room for one more of `creator`'s:
/// `creator`'s own oldest finished one; else the oldest finished one of
/// the client holding the most tasks, if that client holds more than
/// `creator` will (so pushing it out never leaves it holding fewer than
/// `creator`). `None` when no finished task can go fairly: one client
/// starting many runs can then push out only its own results, never
/// another's.
fn room_for(tasks: &HashMap<String, Entry>, creator: &Principal) -> Option<String> {
    let finished = || {
        tasks
            .iter()
            .filter_map(|(id, entry)| entry.end.as_ref().map(|(_, at)| (id, &entry.owner, *at)))
    };
    let own = finished()
        .filter(|(_, owner, _)| *owner == creator)
        .min_by_key(|(_, _, at)| *at);
    if let Some((id, _, _)) = own {
        return Some(id.clone());
    }
    let mut held: HashMap<&Principal, usize> = HashMap::new();
    for entry in tasks.values() {
        *held.entry(&entry.owner).or_default() += 1;
    }
    let creator_will_hold = held.get(creator).copied().unwrap_or(0) + 1;
    // The biggest holder's oldest finished task.
    finished()
        .map(|(id, owner, at)| (held[owner], Reverse(at), id))
        .filter(|(count, _, _)| *count > creator_will_hold)
        .max()
        .map(|(_, _, id)| id.clone())
}

/// Task `id` if `caller` owns it; otherwise the same error as for an id
/// that never existed (another principal's task is not even confirmed).
fn owned<'a>(
    tasks: &'a mut HashMap<String, Entry>,
    caller: &Principal,
    id: &str,
) -> Result<&'a mut Entry, ErrorData> {
    match tasks.get_mut(id) {
        Some(entry) if entry.owner == *caller => Ok(entry),
        _ => Err(ErrorData::invalid_params(
            format!(
                "unknown task {id:?}: no task of yours has this id (it never existed, \
                 belongs to another client, or was dropped after its TTL)"
            ),
            None,
        )),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
