//! The tools: their definitions (schemas and annotations) and what a call
//! of each does. Bad arguments give a tool error naming the field and the
//! rule; nothing a caller sends can stop the server.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, Tool, ToolAnnotations,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{
    CallContext, Principal,
    request::{self, FieldError, RunArgs},
    run::{self, Ended, Kept, Plan, RING, lock},
    runs::{Background, Refused, Shared},
    task_store::{End, Latest},
};
use crate::tasks;

/// How long `wait_run` waits when it names no timeout.
const WAIT_DEFAULT: Duration = Duration::from_secs(30);
/// What `read_run` returns at most per stream when it names no cap.
const READ_DEFAULT: usize = 64 << 10;

/// The tool definitions.
pub(crate) fn list() -> Vec<Tool> {
    let duration = json!({
        "description": "seconds as a number, or a duration string such as \"1.5s\", \"2m\", \"500ms\"",
        "oneOf": [{"type": "number", "minimum": 0}, {"type": "string"}]
    });
    let run = schema(
        json!({
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                     "description": "the program and its arguments (no shell); give this or `shell`"},
            "shell": {"type": "string", "description": "a command line for /bin/sh -c; give this or `argv`"},
            "cwd": {"type": "string", "description": "working directory; must resolve inside one of the server's roots (default: the first root)"},
            "env": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "environment variables added to the server's"},
            "stdin": {"type": "string", "description": "text given on standard input (default: empty; never the server's own)"},
            "timeout": duration,
            "kill_after": duration,
            "background": {"type": "boolean", "description": "return a run id at once; see list_runs, read_run, wait_run, kill_run"},
        }),
        &[],
    );
    let id = json!({"type": "string", "description": "a run id from run with background: true"});
    vec![
        Tool::new(
            "run",
            "Run a command as an owned process tree and return when the whole tree is done: \
             its outcome (exited, signaled, timed_out, cancelled), exit code or signal, stdout and \
             stderr (head and tail kept), and the cleanup report. On timeout or cancel the tree \
             is ended (SIGTERM, grace, SIGKILL) and the output so far is returned; what the \
             command did outside this machine is not undone, and nothing is ever retried.",
            run,
        )
        .annotate(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        Tool::new(
            "list_runs",
            "List the background runs: id, command, state (running or finished), outcome.",
            schema(json!({}), &[]),
        )
        .annotate(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            "read_run",
            "Read a background run's output since an offset (per stream) from its bounded ring \
             buffer; says how many bytes were skipped if the ring moved on.",
            schema(
                json!({
                    "id": id,
                    "stdout_offset": {"type": "integer", "minimum": 0},
                    "stderr_offset": {"type": "integer", "minimum": 0},
                    "max_bytes": {"type": "integer", "minimum": 1},
                }),
                &["id"],
            ),
        )
        .annotate(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            "wait_run",
            "Wait (up to `timeout`, default 30 s) for a background run to finish; returns its \
             result, or its state if it still runs.",
            schema(json!({"id": id, "timeout": duration}), &["id"]),
        )
        .annotate(ToolAnnotations::new().read_only(true).open_world(false)),
        Tool::new(
            "kill_run",
            "End a background run's whole tree now and return its result.",
            schema(json!({"id": id}), &["id"]),
        )
        .annotate(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
    ]
}

fn schema(properties: Value, required: &[&str]) -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    schema.insert("additionalProperties".into(), json!(false));
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema
}

/// One tool call.
pub(crate) async fn call(
    shared: &Arc<Shared>,
    name: &str,
    arguments: Map<String, Value>,
    context: CallContext,
) -> CallToolResponse {
    let outcome = match name {
        "run" => run(shared, &arguments, context).await,
        "list_runs" => {
            request::no_args(&arguments).map(|()| list_runs(shared, &context.principal).into())
        }
        "read_run" => request::read_args(&arguments)
            .and_then(|args| read_run(shared, &context.principal, &args))
            .map(Into::into),
        "wait_run" => match request::wait_args(&arguments) {
            Ok(args) => wait_run(shared, &args.id, args.timeout, &context)
                .await
                .map(Into::into),
            Err(error) => Err(error),
        },
        "kill_run" => match request::id_args(&arguments) {
            Ok(id) => kill_run(shared, &context.principal, &id)
                .await
                .map(Into::into),
            Err(error) => Err(error),
        },
        other => Err(FieldError {
            field: "name".into(),
            rule: format!(
                "no tool {other:?}; the tools are run, list_runs, read_run, wait_run, kill_run"
            ),
        }),
    };
    match outcome {
        Ok(response) => response,
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
    }
}

/// A result whose structured content is `value` and text is `text`.
fn result(value: Value, text: String, error: bool) -> CallToolResult {
    let mut result = if error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(value);
    result
}

fn of_ended(ended: &Ended) -> CallToolResult {
    result(ended.result.clone(), ended.text.clone(), ended.failed)
}

/// The server's limits applied to a request: narrowed, never widened.
fn plan(shared: &Shared, args: &RunArgs) -> Result<Plan, FieldError> {
    let options = &shared.options;
    let cwd = shared.roots.resolve(args.cwd.as_deref())?;
    let timeout = match args.timeout {
        Some(asked) if asked > options.max_timeout => {
            return Err(FieldError {
                field: "timeout".into(),
                rule: format!(
                    "{} s is above this server's maximum of {} s (--max-timeout); ask for less",
                    asked.as_secs_f64(),
                    options.max_timeout.as_secs_f64()
                ),
            });
        }
        Some(asked) => asked,
        None => options.default_timeout.min(options.max_timeout),
    };
    // The server's grace is the most a call may ask for: a longer one would
    // hold a tree that ignores SIGTERM past its timeout, its cancellation,
    // `kill_run` and the server's shutdown.
    let kill_after = match args.kill_after {
        Some(asked) if asked > options.kill_after => {
            return Err(FieldError {
                field: "kill_after".into(),
                rule: format!(
                    "{} s is above this server's grace of {} s (--kill-after); ask for less",
                    asked.as_secs_f64(),
                    options.kill_after.as_secs_f64()
                ),
            });
        }
        Some(asked) => asked,
        None => options.kill_after,
    };
    let limits = json!({
        "timeout_s": timeout.as_secs_f64(),
        "timeout_from": if args.timeout.is_some() { "call" } else { "server default (--default-timeout)" },
        "max_timeout_s": options.max_timeout.as_secs_f64(),
        "kill_after_s": kill_after.as_secs_f64(),
        "max_output_bytes": options.max_output,
        "max_concurrent": options.max_concurrent.max(1),
        "roots": shared.roots.list(),
        "tree": tree_limits(&options.tree_limits),
    });
    Ok(Plan {
        program: args.program.clone(),
        cwd,
        env: args.env.clone(),
        stdin: args.stdin.clone(),
        timeout,
        kill_after,
        final_bound: options.final_bound,
        max_output: options.max_output,
        backend: options.backend,
        user: options.user,
        group: options.group,
        tree_limits: options.tree_limits,
        limits,
    })
}

/// The operator's limits on each run's tree, as a result shows them (what the
/// kernel then counted is in the result's `cleanup.limits`).
fn tree_limits(limits: &corral::Limits) -> Value {
    json!({
        "max_processes": limits.max_processes,
        "max_memory_bytes": limits.max_memory,
        "max_swap_bytes": limits.max_swap,
        "cpus": limits.cpus,
        "cpu_time_s": limits.cpu_time.map(|t| t.as_secs_f64()),
        "best_effort": limits.best_effort_tree,
    })
}

fn refused(why: Refused) -> FieldError {
    let rule = match why {
        Refused::Busy(max) => format!(
            "the server is busy: {max} runs are going (--max-concurrent {max}, --reject-when-busy); try again later"
        ),
        Refused::ShuttingDown => "the server is shutting down; nothing was started".into(),
        Refused::Cancelled => "cancelled while waiting for a free slot; nothing was started".into(),
    };
    FieldError {
        field: "run".into(),
        rule,
    }
}

async fn run(
    shared: &Arc<Shared>,
    arguments: &Map<String, Value>,
    context: CallContext,
) -> Result<CallToolResponse, FieldError> {
    let args = request::run_args(arguments)?;
    let plan = plan(shared, &args)?;
    // Counted before the permit: a shutdown that starts meanwhile waits for
    // this run too (or refuses it).
    let alive = shared.active.enter();
    let permit = shared.permit(&context.cancel).await.map_err(refused)?;
    // Every tree ends with the server, and with the call's cancellation
    // (a foreground run's), through this token.
    let cancel = shared.stop.child_token();
    if args.background {
        let id = Shared::next_id().map_err(|error| FieldError {
            field: "run".into(),
            rule: format!(
                "cannot draw a run id from the kernel's random source ({error}); nothing was started"
            ),
        })?;
        let kept = Arc::new(Mutex::new(Kept::new(plan.max_output, RING)));
        let (done_tx, done) = watch::channel(None);
        let owner = context.principal.clone();
        let background = Arc::new(Background {
            id: id.clone(),
            owner: owner.clone(),
            command: plan.describe(),
            started: Instant::now(),
            kept: kept.clone(),
            cancel: cancel.clone(),
            done,
        });
        shared.add(background);
        let task_shared = shared.clone();
        let task_id = id.clone();
        tasks::spawn(&shared.active, async move {
            let _alive = alive;
            let _permit = permit;
            // Says the run is over even if this task panics.
            let mut finish = Finish {
                done: Some(done_tx),
                shared: task_shared,
                owner,
                id: task_id,
            };
            let ended = run::execute(&plan, cancel, kept.clone(), None).await;
            finish
                .shared
                .audit(&plan, &finish.owner, Some(&finish.id), &ended);
            // The result holds the kept head and tail now; the rings stay
            // for `read_run`.
            {
                let mut kept = lock(&kept);
                kept.stdout = super::output::HeadTail::new(0);
                kept.stderr = super::output::HeadTail::new(0);
            }
            finish.send(ended);
        });
        let value = json!({"run_id": id, "state": "running"});
        return Ok(result(value, format!("started in the background as {id}"), false).into());
    }
    if let (true, Some(window)) = (context.tasks, shared.options.task_window) {
        return Ok(run_or_task(shared, plan, context, alive, permit, cancel, window).await);
    }
    let _alive = alive;
    let kept = Arc::new(Mutex::new(Kept::new(plan.max_output, 0)));
    // The client's cancellation ends this run's tree too.
    let linked = async {
        context.cancel.cancelled().await;
        cancel.cancel();
        std::future::pending::<()>().await;
    };
    let ended = tokio::select! {
        ended = run::execute(&plan, cancel.clone(), kept, context.progress.clone()) => ended,
        () = linked => unreachable!("the link never ends"),
    };
    shared.audit(&plan, &context.principal, None, &ended);
    // On HTTP the permit is let go once the answer is built (`AnswerHold`).
    if let Some(hold) = &context.hold {
        hold.keep(permit);
    }
    Ok(of_ended(&ended).into())
}

/// A foreground run whose request declared the Tasks extension: answered
/// directly if it ends within `window`, otherwise with a task that it then
/// outlives the request as (within its own timeout and limits). Until it
/// becomes a task, the request's cancellation (or its end) ends its tree.
async fn run_or_task(
    shared: &Arc<Shared>,
    plan: Plan,
    context: CallContext,
    alive: crate::tasks::Alive,
    permit: tokio::sync::OwnedSemaphorePermit,
    cancel: tokio_util::sync::CancellationToken,
    window: Duration,
) -> CallToolResponse {
    let latest: Latest = Arc::default();
    let progress = {
        let latest = latest.clone();
        let client = context.progress.clone();
        Arc::new(move |progress: super::Progress| {
            *lock(&latest) = Some(progress.message.clone());
            if let Some(client) = &client {
                client(progress);
            }
        }) as super::ProgressSink
    };
    // The run lives in a task of its own, so that it can outlive this
    // request; until it is a task, dropping this future ends its tree.
    let on_drop = cancel.clone().drop_guard();
    let (done_tx, mut done) = tokio::sync::oneshot::channel();
    let owner = context.principal.clone();
    let bound = plan.timeout + plan.kill_after + shared.options.final_bound;
    {
        let shared = shared.clone();
        let cancel = cancel.clone();
        let owner = owner.clone();
        tasks::spawn(&shared.clone().active, async move {
            let _alive = alive;
            let kept = Arc::new(Mutex::new(Kept::new(plan.max_output, 0)));
            let ended = run::execute(&plan, cancel, kept, Some(progress)).await;
            shared.audit(&plan, &owner, None, &ended);
            let _ = done_tx.send((ended, permit));
        });
    }
    let answer = |got: Result<(Ended, _), _>, hold: &Option<super::AnswerHold>| match got {
        Ok((ended, permit)) => {
            if let Some(hold) = hold {
                hold.keep(permit);
            }
            of_ended(&ended).into()
        }
        Err(_) => failed_inside().into(),
    };
    tokio::select! {
        got = &mut done => return answer(got, &context.hold),
        () = context.cancel.cancelled() => {
            cancel.cancel();
            return answer(done.await, &context.hold);
        }
        () = tokio::time::sleep(window) => {}
    }
    let made = Shared::random_id("task-")
        .map_err(|error| format!("no task id from the kernel's random source: {error}"))
        .and_then(|id| {
            shared
                .tasks
                .create(id, &owner, cancel.clone(), latest, bound)
        });
    let task = match made {
        Ok(task) => task,
        Err(why) => {
            tracing::debug!(%why, "a long run is answered directly, not as a task");
            let linked = async {
                context.cancel.cancelled().await;
                cancel.cancel();
                std::future::pending::<()>().await;
            };
            return tokio::select! {
                got = done => answer(got, &context.hold),
                () = linked => unreachable!("the link never ends"),
            };
        }
    };
    // A task now: the run is no longer this request's.
    on_drop.disarm();
    let id = task.task_id.clone();
    let store = shared.clone();
    tasks::spawn(&shared.active, async move {
        let end = match done.await {
            Ok((ended, _permit)) if ended.result["outcome"] == "cancelled" => {
                End::Cancelled(format!("effects unknown: {}", ended.text))
            }
            Ok((ended, _permit)) => End::Result(of_ended(&ended)),
            Err(_) => End::Result(failed_inside()),
        };
        store.tasks.finish(&id, end);
    });
    CallToolResponse::Task(CreateTaskResult::new(task))
}

/// The result of a run whose task failed inside the server.
fn failed_inside() -> CallToolResult {
    result(
        json!({"outcome": "failed", "error": "the run's task failed inside the server; its tree was ended", "effects_unknown": true}),
        "the run failed inside the server; its tree was ended; its effects are unknown".into(),
        true,
    )
}

/// Publishes a background run's end exactly once, and a failure if its task
/// panicked before it could.
struct Finish {
    done: Option<watch::Sender<Option<Ended>>>,
    shared: Arc<Shared>,
    owner: Principal,
    id: String,
}

impl Finish {
    fn send(&mut self, ended: Ended) {
        if let Some(done) = self.done.take() {
            // Counted among the finished first: whoever sees the result
            // sees the older runs it pushed out gone too.
            self.shared.finished(&self.owner, &self.id);
            done.send_replace(Some(ended));
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.send(Ended {
            result: json!({"outcome": "failed", "error": "the run's task failed inside the server; its tree was ended", "effects_unknown": true}),
            text: "the run failed inside the server; its tree was ended; its effects are unknown".into(),
            failed: true,
        });
    }
}

fn list_runs(shared: &Shared, caller: &Principal) -> CallToolResult {
    let runs: Vec<Value> = shared
        .list(caller)
        .iter()
        .map(|run| {
            let done = run.done.borrow();
            json!({
                "id": run.id,
                "command": run.command,
                "state": run.state(),
                "seconds": run.started.elapsed().as_secs_f64(),
                "outcome": done.as_ref().map(|ended| ended.result["outcome"].clone()),
            })
        })
        .collect();
    let text = if runs.is_empty() {
        "no background runs".to_owned()
    } else {
        runs.iter()
            .map(|run| {
                format!(
                    "{} {} {}",
                    run["id"].as_str().unwrap_or(""),
                    run["state"].as_str().unwrap_or(""),
                    run["command"]
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    result(
        json!({"runs": runs, "running_trees": shared.running()}),
        text,
        false,
    )
}

/// `caller`'s run `id`. Another principal's run is not found, in the same
/// words as an id never given out: nothing tells it apart.
fn find(shared: &Shared, caller: &Principal, id: &str) -> Result<Arc<Background>, FieldError> {
    shared.get(caller, id).ok_or_else(|| FieldError {
        field: "id".into(),
        rule: format!(
            "no background run {id:?} (list_runs shows them; finished runs are kept for a while)"
        ),
    })
}

fn read_run(
    shared: &Shared,
    caller: &Principal,
    args: &request::ReadArgs,
) -> Result<CallToolResult, FieldError> {
    let run = find(shared, caller, &args.id)?;
    let max = args.max_bytes.unwrap_or(READ_DEFAULT);
    let (stdout, stderr) = {
        let kept = lock(&run.kept);
        (
            kept.stdout_ring.read(args.stdout_offset, max),
            kept.stderr_ring.read(args.stderr_offset, max),
        )
    };
    let chunk = |chunk: &super::output::Chunk| {
        json!({
            "offset": chunk.offset,
            "data": String::from_utf8_lossy(&chunk.data),
            "next": chunk.next,
            "skipped": chunk.skipped,
        })
    };
    let done = run.done.borrow().clone();
    let value = json!({
        "id": run.id,
        "state": run.state(),
        "stdout": chunk(&stdout),
        "stderr": chunk(&stderr),
        "result": done.as_ref().map(|ended| ended.result.clone()),
    });
    let text = format!(
        "{} ({}): stdout {}..{}, stderr {}..{}\n{}",
        run.id,
        run.state(),
        stdout.offset,
        stdout.next,
        stderr.offset,
        stderr.next,
        String::from_utf8_lossy(&stdout.data)
    );
    Ok(result(value, text, false))
}

async fn wait_run(
    shared: &Shared,
    id: &str,
    timeout: Option<Duration>,
    context: &CallContext,
) -> Result<CallToolResult, FieldError> {
    let run = find(shared, &context.principal, id)?;
    let limit = timeout
        .unwrap_or(WAIT_DEFAULT)
        .min(shared.options.max_timeout);
    let mut done = run.done.clone();
    let waited = tokio::select! {
        ended = done.wait_for(Option::is_some) => ended.ok().and_then(|ended| ended.clone()),
        () = tokio::time::sleep(limit) => None,
        () = context.cancel.cancelled() => None,
    };
    Ok(match waited {
        Some(ended) => of_ended(&ended),
        None => result(
            json!({"id": run.id, "state": run.state()}),
            format!("{} still runs after {:?}", run.id, limit),
            false,
        ),
    })
}

async fn kill_run(
    shared: &Shared,
    caller: &Principal,
    id: &str,
) -> Result<CallToolResult, FieldError> {
    let run = find(shared, caller, id)?;
    run.cancel.cancel();
    let mut done = run.done.clone();
    let ended = done
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|ended| ended.clone());
    Ok(match ended {
        Some(ended) => of_ended(&ended),
        None => result(
            json!({"id": run.id, "state": "gone"}),
            "the run's task ended without a result".into(),
            true,
        ),
    })
}
