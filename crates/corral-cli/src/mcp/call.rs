//! `corral mcp call`, `corral mcp list` and `corral mcp task`: one request to an MCP server run
//! as an owned tree ([`session`](super::session)), printed
//! ([`output`](super::output)), with the kit's start-up and exit status.

use crate::{
    cli::{CallArgs, ClientArgs, ListArgs, TaskCommand},
    kit::{exit::Status, sink::ReportArgs, startup},
    mcp::{
        output,
        session::{self, Request},
    },
};

/// Calls one tool. `parent` is corral's parent pid as read first thing at
/// start-up (its death counts as `SIGTERM`).
///
/// # Errors
/// When corral itself fails before the server starts (exit status 125).
pub fn call(args: CallArgs, parent: i32) -> anyhow::Result<Status> {
    let what = format!("tool {}", args.tool);
    let request = Request::Call {
        tool: args.tool,
        arguments: args.arguments,
        task: args.task,
    };
    one(&args.client, parent, request, &what, output::call_text)
}

/// Reads or cancels a task.
///
/// # Errors
/// As [`call`].
pub fn task(command: TaskCommand, parent: i32) -> anyhow::Result<Status> {
    let (args, request, what) = match command {
        TaskCommand::Get(args) => {
            let what = "tasks/get".to_owned();
            let request = Request::TaskGet(args.id.clone());
            (args, request, what)
        }
        TaskCommand::Cancel(args) => {
            let what = "tasks/cancel".to_owned();
            let request = Request::TaskCancel(args.id.clone());
            (args, request, what)
        }
    };
    one(&args.client, parent, request, &what, output::call_text)
}

/// Lists the server's tools.
///
/// # Errors
/// As [`call`].
pub fn list(args: ListArgs, parent: i32) -> anyhow::Result<Status> {
    one(
        &args.client,
        parent,
        Request::List,
        "tools/list",
        output::list_text,
    )
}

fn one(
    args: &ClientArgs,
    parent: i32,
    request: Request,
    what: &str,
    text: fn(&serde_json::Value) -> String,
) -> anyhow::Result<Status> {
    // No report file: the envelope goes to standard output with --json.
    startup::supervisor(&ReportArgs::default(), args.verbose)?;
    startup::supervise(async {
        let done = session::run(args, parent, request).await;
        Ok(output::finish(
            &args.command,
            args.url.as_deref(),
            what,
            args.json,
            args.tree.final_bound,
            done,
            text,
        ))
    })
}
