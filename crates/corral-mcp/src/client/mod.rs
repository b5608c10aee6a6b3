//! The MCP client runtime: connections that never leak a task, a process or
//! an answer.
//!
//! - [`Connection`]: one server, over stdio (spawned and owned by corral as a
//!   whole tree, or adopted), bare streams, or streamable HTTP
//!   ([`Connection::http`]). One bounded outbound queue drained by one
//!   writer task, one reader task, and a supervisor task that runs the
//!   handshake and the one teardown.
//! - [`Manager`]: named connections, disconnect, shutdown, and a bounded,
//!   single-flight reconnect for a server that crashed.
//! - [`CallError`]: the honest outcome of a call (not sent, or outcome
//!   unknown, never retried).
//!
//! # Layout
//! - `options`, `outcome`: plain data (what is allowed, what happened).
//! - `shared`: the state a connection's handles, writer and reader share
//!   (its `Core`); `dispatch`: what one incoming frame does.
//! - `stdio`: the stdio wire; `http`: the streamable HTTP wire, `sse`: its
//!   event-stream parser, `headers`: the headers that mirror a request's
//!   body (version, method, name, `x-mcp-header` parameters).
//! - `handshake`: `server/discover` with fallback to `initialize`.
//! - `task`: following a call the server answered with a task (the Tasks
//!   extension): polls, `tasks/cancel`, resuming after a lost poll.
//! - `elicitation`: how a client without a user answers the server's
//!   questions (a handler, and the input of `input_required` results).
//! - `connection`: the supervisor and the teardown; `manager`: names and
//!   reconnects. The count of live tasks is the crate's `tasks`.
//! - [`rmcp`]: an `rmcp` transport whose server is a corral-owned tree, for
//!   users of the `rmcp` client.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use corral_mcp::client::{CallOptions, ConnectOptions, Manager, Server, live_tasks, task_of};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let manager = Manager::new();
//! let mut command = corral::Command::new("npx");
//! command.args(["-y", "@modelcontextprotocol/server-everything"]);
//! manager.connect("everything", Server::Stdio(command), ConnectOptions::default()).await?;
//! let options = CallOptions::timeout(Duration::from_secs(30));
//! match manager.call_tool("everything", "echo", None, &options).await {
//!     // A server that ran it as a task names it in the result.
//!     Ok(result) => println!("{result:?} (task {:?})", task_of(&result)),
//!     // Never retried: the server may have acted on it.
//!     Err(error) if error.effects_unknown() => eprintln!("outcome unknown: {error}"),
//!     Err(error) => eprintln!("{error}"),
//! }
//! // Every server's whole tree is gone after this.
//! manager.shutdown().await;
//! assert_eq!(live_tasks(), 0);
//! # Ok(())
//! # }
//! ```

mod connection;
mod dispatch;
mod elicitation;
mod handshake;
mod headers;
mod http;
mod manager;
mod options;
mod outcome;
pub mod rmcp;
mod shared;
mod sse;
mod stdio;
mod task;

pub use crate::tasks::{TaskCount, live_tasks};
pub use connection::{Connection, RequestId, Teardown};
pub use elicitation::{Elicitation, MAX_INPUT_ROUNDS};
pub use handshake::{Era, LEGACY, MODERN, PeerInfo};
pub use manager::{Manager, Server};
pub use options::{
    CallOptions, ConnectOptions, DEFAULT_CLOSE_GRACE, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_DISCOVER_TIMEOUT, DEFAULT_INITIALIZE_TIMEOUT, DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_POOL_IDLE_TIMEOUT, DEFAULT_QUEUE, DEFAULT_STDERR_TAIL, HTTP_ANSWERS_IN_FLIGHT,
    HTTP_IDLE_CONNECTIONS, HttpOptions, OnTask, Reconnect,
};
pub use outcome::{CallError, ConnectError, Ended, TaskEnd};
pub use shared::ReadStats;
pub use task::{RELATED_TASK, TASK_CANCEL_TIMEOUT, task_of};
