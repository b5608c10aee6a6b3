//! `mcp-tasks-peer`: an MCP server built on rmcp (the official Rust SDK)
//! whose tool runs as a task that asks the client for input (2026-07-28,
//! SEP-2663 `input_required`), for the client runtime's tests: a real
//! server's task store, `tasks/get`, `tasks/update` and `tasks/cancel`, not
//! a script of answers.
//!
//! Speaks MCP on stdin/stdout. Tools:
//! - `confirm {file}`: with the Tasks extension declared by the request, a
//!   task that asks `elicitation/create` ("Delete FILE?", a `confirm`
//!   boolean defaulting to `true`) under the key `confirm-1`, then a second
//!   question (`reason`, a string defaulting to `"tidy"`) under `reason-1`,
//!   and completes with the text `FILE: ACTION1 CONTENT1; ACTION2 CONTENT2`.
//! - `endless {}`: a task (polled every 200 ms) that asks one question
//!   after another (`q-1`, `q-2`, ...: a `go` boolean defaulting to
//!   `true`) for as long as it is answered.
//!
//! Without the extension, either is the error "declare the Tasks extension".
//!
//! `--log FILE` appends one line per event (`created ID`, `updated ID
//! KEYS`, `cancelled ID`), flushed at once. `--hold-updates`: a
//! `tasks/update` is logged, then never answered (nor applied). Bad
//! arguments: exit 2.

use std::{
    fs::OpenOptions,
    io::Write as _,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        CreateTaskResult, GetTaskParams, GetTaskResult, InputRequest, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
    },
    service::RequestContext,
    task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions},
};
use serde_json::{Value, json};

#[derive(Clone)]
struct Peer {
    tasks: TaskManager,
    log: Option<Arc<Mutex<std::fs::File>>>,
    hold_updates: bool,
}

impl Peer {
    fn note(&self, line: &str) {
        if let Some(log) = &self.log {
            let mut file = log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let _ = writeln!(file, "{line}");
        }
    }
}

/// Asks one question under `key`: its answer's `action` and `content`.
async fn ask(
    ctx: &TaskContext,
    key: &str,
    message: String,
    field: &str,
    schema: Value,
) -> Result<String, TaskExit> {
    let request: InputRequest = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: schema},
                "required": [field],
            },
        },
    }))
    .map_err(|error| TaskExit::Error(ErrorData::internal_error(error.to_string(), None)))?;
    let answer = ctx.request_input(key, request).await?;
    let action = answer["action"].as_str().unwrap_or("?").to_owned();
    Ok(match answer.get("content") {
        Some(content) => format!("{action} {content}"),
        None => action,
    })
}

impl ServerHandler for Peer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"file": {"type": "string"}}});
        let Value::Object(schema) = schema else {
            unreachable!("a literal object")
        };
        let schema = Arc::new(schema);
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "confirm",
                "asks for a confirmation and a reason, as a task",
                Arc::clone(&schema),
            ),
            Tool::new(
                "endless",
                "asks one question after another, as a task",
                schema,
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let declared = context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if request.name != "confirm" && request.name != "endless" {
            return Err(ErrorData::invalid_params("no such tool", None));
        }
        if !declared {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                "declare the Tasks extension",
            )])
            .into());
        }
        if request.name == "endless" {
            let task =
                self.tasks
                    .spawn(TaskOptions::new().with_poll_interval_ms(200), move |ctx| {
                        Box::pin(async move {
                            for round in 1.. {
                                ask(
                                    &ctx,
                                    &format!("q-{round}"),
                                    format!("Question {round}: go on?"),
                                    "go",
                                    json!({"type": "boolean", "default": true}),
                                )
                                .await?;
                            }
                            unreachable!("the questions never end")
                        })
                    });
            self.note(&format!("created {}", task.task_id));
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        let file = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("file"))
            .and_then(Value::as_str)
            .unwrap_or("file")
            .to_owned();
        let task = self
            .tasks
            .spawn(TaskOptions::new().with_poll_interval_ms(20), move |ctx| {
                Box::pin(async move {
                    let first = ask(
                        &ctx,
                        "confirm-1",
                        format!("Delete {file}?"),
                        "confirm",
                        json!({"type": "boolean", "default": true}),
                    )
                    .await?;
                    let second = ask(
                        &ctx,
                        "reason-1",
                        "Why?".into(),
                        "reason",
                        json!({"type": "string", "default": "tidy"}),
                    )
                    .await?;
                    Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                        "{file}: {first}; {second}"
                    ))]))
                })
            });
        self.note(&format!("created {}", task.task_id));
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let keys: Vec<&String> = request.input_responses.keys().collect();
        self.note(&format!("updated {} {keys:?}", request.task_id));
        if self.hold_updates {
            std::future::pending::<()>().await;
        }
        self.tasks
            .update_task(&request.task_id, request.input_responses.clone())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(&format!("cancelled {}", request.task_id));
        self.tasks.cancel_task(&request.task_id)
    }
}

fn main() {
    let usage = || -> ! {
        eprintln!("mcp-tasks-peer: usage: mcp-tasks-peer [--log FILE] [--hold-updates]");
        std::process::exit(2);
    };
    let (mut log, mut hold_updates) = (None, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--log" => log = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--hold-updates" => hold_updates = true,
            _ => usage(),
        }
    }
    let log = log.map(|path| {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|error| {
                eprintln!("mcp-tasks-peer: {}: {error}", path.display());
                std::process::exit(1);
            });
        Arc::new(Mutex::new(file))
    });
    let peer = Peer {
        tasks: TaskManager::new(),
        log,
        hold_updates,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
        match peer.serve((stdin, stdout)).await {
            Ok(running) => {
                let _ = running.waiting().await;
            }
            Err(error) => eprintln!("mcp-tasks-peer: {error}"),
        }
    });
}
