//! The rmcp glue: [`CorralServer`] is the server handler that lists the
//! tools and hands each call to the [`Runner`], with the call's
//! cancellation token and, when the client asked for progress, a sink that
//! sends `notifications/progress` with the latest output lines, and the
//! caller's [`Principal`].

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
        ClientCapabilities, ContentBlock, GetTaskParams, GetTaskResult, Implementation,
        ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
        ServerCapabilities, ServerConfig, UpdateTaskParams,
    },
    service::RequestContext,
};
use tokio::sync::mpsc;

use super::{AnswerHold, CallContext, Principal, Progress, Runner};

/// An MCP server handler for the command-running tools. Cheap to clone
/// (each HTTP session gets a clone).
///
/// Any rmcp transport serves it; here a client and the server share an
/// in-memory pipe:
///
/// ```
/// use corral_mcp::serve::{CorralServer, Runner, ServeOptions};
/// use rmcp::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = CorralServer::new(Runner::new(ServeOptions::default())?);
/// let (client_end, server_end) = tokio::io::duplex(1 << 16);
/// let serving = tokio::spawn(server.clone().serve(server_end));
/// let client = ().serve(client_end).await?;
/// let tools = client.list_all_tools().await?;
/// assert_eq!(tools.len(), server.runner().tools().len());
/// client.cancel().await?;
/// drop(serving.await?);
/// server.runner().shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CorralServer {
    runner: Runner,
}

impl CorralServer {
    /// A handler serving `runner`'s tools.
    pub fn new(runner: Runner) -> Self {
        Self { runner }
    }

    /// The runner behind it (to shut it down).
    pub fn runner(&self) -> &Runner {
        &self.runner
    }
}

impl ServerHandler for CorralServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = Implementation::from_build_env();
        info.name = "corral".into();
        info.version = env!("CARGO_PKG_VERSION").into();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(info)
        .with_instructions(
            "Runs commands as owned process trees: `run` returns when the whole tree is done \
                 (background jobs included), with its outcome and output. A timed-out or \
                 cancelled run's effects are unknown and it is never retried.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.runner.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        check_input_responses(request.input_responses.as_ref())?;
        let token = context.meta.get_progress_token();
        let (progress_tx, mut progress_rx) = mpsc::channel::<Progress>(4);
        // The call runs in a task of its own: a panic in it becomes a tool
        // error instead of a request never answered. Dropping this future
        // (the session ended) still cancels it, through the guard.
        let cancel = context.ct.child_token();
        let _on_drop = cancel.clone().drop_guard();
        let call = CallContext {
            principal: principal_of(&context),
            hold: hold_of(&context),
            tasks: declares_tasks(&context),
            cancel,
            progress: token.is_some().then(|| {
                let tx = progress_tx.clone();
                std::sync::Arc::new(move |progress: Progress| {
                    // A slow client drops reports; it never slows the run.
                    let _ = tx.try_send(progress);
                }) as super::ProgressSink
            }),
        };
        drop(progress_tx);
        if !call.tasks && self.runner.requires_tasks(&request.name) {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        let runner = self.runner.clone();
        let name = request.name.to_string();
        let mut running = tokio::spawn(async move { runner.respond(&name, arguments, call).await });
        let response = loop {
            tokio::select! {
                joined = &mut running => break joined.unwrap_or_else(|error| {
                    tracing::error!(%error, "a tool call failed inside the server");
                    CallToolResult::error(vec![ContentBlock::text(format!(
                        "the call failed inside the server ({error}); if it started a command, \
                         its tree was ended"
                    ))]).into()
                }),
                Some(progress) = progress_rx.recv() => {
                    if let Some(token) = &token {
                        #[allow(clippy::cast_precision_loss)]
                        let param = ProgressNotificationParam::new(token.clone(), progress.bytes as f64)
                            .with_message(progress.message);
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
            }
        };
        Ok(response)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self
            .runner
            .tasks()
            .get(&principal_of(&context), &request.task_id)?;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.runner
            .tasks()
            .cancel(&principal_of(&context), &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.runner
            .tasks()
            .update(&principal_of(&context), &request.task_id)
    }
}

/// Whether a long `run` may be answered with a task: the request declared
/// the Tasks extension in its own capabilities, under protocol 2026-07-28
/// (never under 2025-11-25, whose clients know only that version's tasks).
fn declares_tasks(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
        && context
            .meta
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// Where the HTTP transport wants a run's permit left until its answer is
/// built (in the request, as the principal); none on stdio.
fn hold_of(context: &RequestContext<RoleServer>) -> Option<AnswerHold> {
    context
        .extensions
        .get::<hyper::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<AnswerHold>())
        .cloned()
}

/// The principal the HTTP gate put into the request (rmcp hands the
/// request's `http::request::Parts` to the handler in its extensions); on
/// stdio, where there is no HTTP request, the one client there is.
fn principal_of(context: &RequestContext<RoleServer>) -> Principal {
    context
        .extensions
        .get::<hyper::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_default()
}

/// A call's `inputResponses` (SEP-2322), which no corral tool asks for:
/// ignored when well formed (each an object, as a client retrying a call
/// sends them; SHOULD ignore what it does not recognise), refused with
/// `-32602` naming the key when not (a protocol error, SHOULD be one).
fn check_input_responses(responses: Option<&rmcp::model::InputResponses>) -> Result<(), ErrorData> {
    let Some((key, value)) = responses
        .into_iter()
        .flatten()
        .find(|(_, value)| !value.is_object())
    else {
        return Ok(());
    };
    let kind = match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    };
    let key: String = key.chars().take(64).collect();
    Err(ErrorData::invalid_params(
        format!(
            "inputResponses.{key:?}: an input response is an object (the answer to an input \
             request), not {kind}"
        ),
        None,
    ))
}
