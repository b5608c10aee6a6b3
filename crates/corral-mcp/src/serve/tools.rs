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
    CallContext, Principal, ServeOptions,
    command_tools::{CommandTool, GENERIC, TaskSupport},
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

/// The tools offered: the generic ones (unless `tools_only`), then the
/// operator's command tools.
pub(crate) fn list(options: &ServeOptions) -> Vec<Tool> {
    let mut tools = if options.tools_only {
        Vec::new()
    } else {
        generic()
    };
    tools.extend(options.tools.iter().map(command_tool));
    tools
}

/// A command tool's definition. rmcp's `Tool` (protocol 2026-07-28) has no
/// `execution` field, so the description says when a call becomes a task.
fn command_tool(tool: &CommandTool) -> Tool {
    let tasks = match tool.task_support {
        TaskSupport::Forbidden => "",
        TaskSupport::Optional => {
            " (A call may be answered with an MCP task when it declares the Tasks extension.)"
        }
        TaskSupport::Required => {
            " (Always answered with an MCP task: the call must declare the Tasks extension.)"
        }
    };
    let mut definition = Tool::new(
        tool.name.clone(),
        format!("{}{tasks}", tool.description),
        tool.schema(),
    );
    definition.title.clone_from(&tool.title);
    definition
}

/// The generic tool definitions.
fn generic() -> Vec<Tool> {
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
    if let Some(tool) = shared.options.tools.get(name) {
        return match command(shared, tool, &arguments, context).await {
            Ok(response) => response,
            Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
        };
    }
    if shared.options.tools_only && GENERIC.contains(&name) {
        return not_found(shared, name);
    }
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
        other => return not_found(shared, other),
    };
    match outcome {
        Ok(response) => response,
        Err(error) => CallToolResult::error(vec![ContentBlock::text(error.to_string())]).into(),
    }
}

/// The answer to a call of a tool this server does not offer, naming the
/// ones it does.
fn not_found(shared: &Shared, name: &str) -> CallToolResponse {
    let offered: Vec<String> = list(&shared.options)
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    let text = format!(
        "`name`: no tool {name:?}; the tools are {}",
        offered.join(", ")
    );
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

/// A call of the operator's command tool `tool`: its arguments put into its
/// argv, then run as a `run` of the server (same roots, limits, audit,
/// owner), answered with a task as `task_support` says.
async fn command(
    shared: &Arc<Shared>,
    tool: &CommandTool,
    arguments: &Map<String, Value>,
    context: CallContext,
) -> Result<CallToolResponse, FieldError> {
    let argv = tool.argv(arguments)?;
    let args = RunArgs {
        program: request::Program::Argv(argv),
        cwd: tool.cwd.clone(),
        env: tool.env.clone(),
        stdin: String::new(),
        timeout: tool.timeout,
        kill_after: None,
        background: false,
    };
    let window = match tool.task_support {
        TaskSupport::Forbidden => None,
        TaskSupport::Optional => tool.task_window.or(shared.options.task_window),
        TaskSupport::Required if !context.tasks => {
            return Err(FieldError {
                field: "name".into(),
                rule: format!(
                    "{} is always answered with an MCP task, and this call did not declare the \
                     Tasks extension (io.modelcontextprotocol/tasks, protocol 2026-07-28)",
                    tool.name
                ),
            });
        }
        TaskSupport::Required => Some(Duration::ZERO),
    };
    start(shared, &args, context, window, Shape::Command).await
}

/// How a run's end is told: as `run` tells it (a tool error only when
/// corral failed), or as a command tool (a tool error unless the command
/// exited 0; its output as the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Run,
    Command,
}

impl Shape {
    fn answer(self, ended: &Ended) -> CallToolResult {
        match self {
            Shape::Run => of_ended(ended),
            Shape::Command => of_command(ended),
        }
    }

    /// How a task's run ended. A command tool whose command could not be
    /// started (the operator's command, not the caller's) fails its task
    /// with an internal error; `run`'s is a result, the caller's mistake.
    fn end(self, ended: &Ended) -> End {
        if ended.result["outcome"] == "cancelled" {
            return End::Cancelled(format!("effects unknown: {}", ended.text));
        }
        if self == Shape::Command && ended.failed {
            let mut error = Map::new();
            error.insert("code".into(), json!(-32603));
            error.insert("message".into(), json!(ended.text));
            error.insert("data".into(), ended.result.clone());
            return End::Failed(error);
        }
        End::Result(self.answer(ended))
    }
}

/// A command tool's result: the output as the text (stdout, then stderr as
/// a block of its own), a tool error unless the command exited 0 (the
/// text is then the run's headline and output); the structured content is
/// `run`'s.
fn of_command(ended: &Ended) -> CallToolResult {
    let value = &ended.result;
    let succeeded = !ended.failed && value["outcome"] == "exited" && value["exit_code"] == 0;
    if !succeeded {
        return result(value.clone(), ended.text.clone(), true);
    }
    let text = |field: &str| value[field].as_str().unwrap_or_default().to_owned();
    let mut content = vec![ContentBlock::text(text("stdout"))];
    let stderr = text("stderr");
    if !stderr.is_empty() {
        content.push(ContentBlock::text(format!("stderr:\n{stderr}")));
    }
    let mut answer = CallToolResult::success(content);
    answer.structured_content = Some(value.clone());
    answer
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
    start(
        shared,
        &args,
        context,
        shared.options.task_window,
        Shape::Run,
    )
    .await
}

/// Runs `args` under the server's limits: in the background, or in the
/// foreground answered as `shape` says, with a task when the request
/// declared the Tasks extension and the run is not done within `window`.
async fn start(
    shared: &Arc<Shared>,
    args: &RunArgs,
    context: CallContext,
    window: Option<Duration>,
    shape: Shape,
) -> Result<CallToolResponse, FieldError> {
    let plan = plan(shared, args)?;
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
    if let (true, Some(window)) = (context.tasks, window) {
        let how = How { window, shape };
        return Ok(run_or_task(shared, plan, context, alive, permit, cancel, how).await);
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
    Ok(shape.answer(&ended).into())
}

/// When a foreground run becomes a task, and how its end is told.
struct How {
    /// Answered directly if done within this; zero: a task at once.
    window: Duration,
    shape: Shape,
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
    how: How,
) -> CallToolResponse {
    let shape = how.shape;
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
            shape.answer(&ended).into()
        }
        Err(_) => failed_inside().into(),
    };
    // A zero window: a task at once, however soon the command ends.
    if !how.window.is_zero() {
        tokio::select! {
            got = &mut done => return answer(got, &context.hold),
            () = context.cancel.cancelled() => {
                cancel.cancel();
                return answer(done.await, &context.hold);
            }
            () = tokio::time::sleep(how.window) => {}
        }
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
            Ok((ended, _permit)) => shape.end(&ended),
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
