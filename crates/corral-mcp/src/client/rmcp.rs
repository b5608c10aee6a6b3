//! An [`rmcp`] transport whose MCP server runs as a corral-owned
//! process tree: the swap for rmcp's `TokioChildProcess`.
//!
//! rmcp's `TokioChildProcess` closes the server's standard input, waits, and
//! kills the one process it started; whatever that process started (an `npx`
//! wrapper's node, a `setsid` helper, a daemon) lives on. [`CorralProcess`]
//! runs the same `close` lifecycle for the *whole tree*: close standard input,
//! wait up to [`close_grace`](CorralProcessBuilder::close_grace), then end
//! every process of the tree with the [`corral::Command`]'s policy (`SIGTERM`,
//! grace, `SIGKILL`, final bound), and keep the [`Finished`] report.
//!
//! The swap is one line:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use corral_mcp::client::rmcp::CorralProcess;
//! use rmcp::ServiceExt as _;
//!
//! let mut command = corral::Command::new("npx");
//! command.args(["-y", "@modelcontextprotocol/server-everything"]);
//! // Was: let transport = TokioChildProcess::new(command)?;
//! let transport = CorralProcess::new(command)?;
//! let report = transport.finished();
//! let client = ().serve(transport).await?;
//! let tools = client.list_all_tools().await?;
//! client.cancel().await?; // the whole tree is gone when this returns
//! let finished = report.get().expect("closed, so reported");
//! println!("{} tools; survivors: {:?}", tools.len(), finished.report.survivors);
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use ::rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::AsyncRwTransport},
};
use corral::{Backend, Child, ChildOutput, ChildStdin, Command, Finished, Stdio};
use tokio::sync::watch;

use crate::wrap::{error::WrapError, options::DEFAULT_CLOSE_GRACE};

/// An rmcp client transport over the standard streams of an MCP server that
/// corral runs as an owned tree.
///
/// Build it with [`CorralProcess::new`] (standard error inherited) or
/// [`CorralProcess::builder`], then hand it to rmcp
/// (`().serve(transport)`, `serve_client(handler, transport)`). Take a
/// [`FinishedWatch`] first with [`CorralProcess::finished`] if you want the
/// cleanup report: rmcp owns the transport from then on.
///
/// # Drop
/// Dropping it without [`close`](Transport::close) ends the tree at once with
/// the command's policy (corral's [`Child`] does; `Drop` only cancels a
/// token, it never blocks or spawns). No report is kept then:
/// [`FinishedWatch::wait`] returns `None`. Dropping a running rmcp client
/// makes rmcp call `close` on its own task, so the report is kept there.
///
/// ```no_run
/// use corral_mcp::client::rmcp::CorralProcess;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mut command = corral::Command::new("uvx");
/// command.arg("mcp-server-git");
/// let mut transport = CorralProcess::new(command)?;
/// println!("server {} contained by {}", transport.id(), transport.backend());
/// let report = transport.finished();
/// // Without rmcp: the same close lifecycle, for the whole tree.
/// transport.graceful_shutdown().await?;
/// assert!(report.get().is_some());
///
/// let mut command = corral::Command::new("uvx");
/// command.arg("mcp-server-git");
/// let (transport, _stderr) = CorralProcess::builder(command).spawn()?;
/// # drop(transport);
/// # Ok(())
/// # }
/// ```
pub struct CorralProcess {
    transport: AsyncRwTransport<RoleClient, ChildOutput, ChildStdin>,
    /// `None` once `close` has begun (it owns the child from then on).
    child: Option<Child>,
    pid: i32,
    backend: Backend,
    close_grace: Duration,
    finished: watch::Sender<Option<Finished>>,
}

/// Builds a [`CorralProcess`], as rmcp's `TokioChildProcessBuilder` does.
///
/// ```no_run
/// use std::time::Duration;
///
/// use corral_mcp::client::rmcp::CorralProcess;
///
/// # fn demo() -> Result<(), corral_mcp::WrapError> {
/// let mut command = corral::Command::new("npx");
/// command.args(["-y", "@modelcontextprotocol/server-everything"]);
/// let (transport, stderr) = CorralProcess::builder(command)
///     .stderr(corral::Stdio::Piped)
///     .close_grace(Duration::from_secs(5))
///     .spawn()?;
/// // The server's standard error, to read (or drop).
/// assert!(stderr.is_some());
/// # drop(transport);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CorralProcessBuilder {
    command: Command,
    stderr: Stdio,
    close_grace: Duration,
}

/// Where the [`Finished`] report of a [`CorralProcess`] arrives once its
/// `close` has ended the tree. Cheap to clone; keep one before handing the
/// transport to rmcp.
///
/// ```no_run
/// use corral_mcp::client::rmcp::CorralProcess;
/// use rmcp::ServiceExt as _;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let transport = CorralProcess::new(corral::Command::new("mcp-server-fetch"))?;
/// let mut report = transport.finished();
/// let client = ().serve(transport).await?;
/// assert!(report.get().is_none()); // still running
/// drop(client); // rmcp closes the transport on its own task
/// if let Some(finished) = report.wait().await {
///     println!("{:?}, survivors: {:?}", finished.outcome, finished.report.survivors);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FinishedWatch(watch::Receiver<Option<Finished>>);

impl std::fmt::Debug for CorralProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CorralProcess")
            .field("pid", &self.pid)
            .field("backend", &self.backend)
            .field("close_grace", &self.close_grace)
            .field("closing", &self.child.is_none())
            .finish_non_exhaustive()
    }
}

impl CorralProcess {
    /// Spawns `command` as an owned tree with piped standard input and
    /// output, standard error inherited, and the default close grace (2 s).
    /// The command's own policy (signal, grace, final bound, backend, time
    /// limit, leftovers) applies unchanged.
    ///
    /// # Errors
    /// [`WrapError::Spawn`] if the command cannot be started (nothing is left
    /// running).
    pub fn new(command: Command) -> Result<Self, WrapError> {
        let (process, _stderr) = Self::builder(command).spawn()?;
        Ok(process)
    }

    /// A builder to choose standard error and the close grace.
    pub fn builder(command: Command) -> CorralProcessBuilder {
        CorralProcessBuilder {
            command,
            stderr: Stdio::Inherit,
            close_grace: DEFAULT_CLOSE_GRACE,
        }
    }

    /// The process id of the server (the tree's leader). It stays the
    /// leader's id after `close`, when the process may be gone.
    pub fn id(&self) -> i32 {
        self.pid
    }

    /// The containment backend corral chose for the tree.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A watch on the report that `close` leaves.
    pub fn finished(&self) -> FinishedWatch {
        FinishedWatch(self.finished.subscribe())
    }

    /// The MCP stdio shutdown for the whole tree: closes the server's
    /// standard input, waits up to the close grace for the tree to end by
    /// itself (when the leader exits, corral ends what it left behind), then
    /// terminates the tree with the command's policy, waits for the cleanup
    /// to finish and publishes the [`Finished`] report. Calling it again does
    /// nothing.
    ///
    /// # Cancel safety
    /// Not cancel safe, but never leaks: dropping the future part-way drops
    /// the child, which ends the tree at once with the policy; the report is
    /// then lost ([`FinishedWatch::wait`] returns `None`).
    ///
    /// # Errors
    /// An [`std::io::Error`] if corral's supervisor was lost (the runtime is
    /// shutting down); the tree is killed by the supervisor's own `Drop`.
    pub async fn graceful_shutdown(&mut self) -> std::io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let control = child.control();
        // Dropping the writer closes the server's standard input. Bounded:
        // a write stuck on a server that never reads must not hold the
        // close; the tree is ended below either way.
        let closed = tokio::time::timeout(
            self.close_grace,
            Transport::<RoleClient>::close(&mut self.transport),
        )
        .await;
        let close_error = match closed {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error),
            Err(_elapsed) => {
                control.terminate();
                None
            }
        };
        let wait = child.wait();
        tokio::pin!(wait);
        let result = match tokio::time::timeout(self.close_grace, &mut wait).await {
            Ok(result) => result,
            Err(_elapsed) => {
                tracing::debug!(pid = self.pid, "the MCP server outlived its close grace");
                control.terminate();
                wait.await
            }
        };
        let finished = result.map_err(std::io::Error::other)?;
        tracing::info!(
            pid = self.pid,
            survivors = finished.report.survivors.len(),
            "the MCP server's tree has ended"
        );
        self.finished.send_replace(Some(finished));
        close_error.map_or(Ok(()), Err)
    }
}

impl CorralProcessBuilder {
    /// Where the server's standard error goes (default:
    /// [`Stdio::Inherit`]). With [`Stdio::Piped`], [`spawn`](Self::spawn)
    /// returns its reader; with [`Stdio::Capture`] it is in the
    /// [`Finished`] report.
    pub fn stderr(mut self, stderr: Stdio) -> Self {
        self.stderr = stderr;
        self
    }

    /// How long `close` waits, after closing the server's standard input,
    /// before it terminates the tree (default 2 s, as the Python SDK).
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// Spawns the tree. Returns the transport and, with
    /// [`Stdio::Piped`] standard error, its reader.
    ///
    /// Like [`corral::Command::spawn`], it must be called within a tokio
    /// runtime and does the spawn's blocking work on the calling thread.
    ///
    /// # Errors
    /// [`WrapError::Spawn`] if the command cannot be started (nothing is left
    /// running).
    pub fn spawn(mut self) -> Result<(CorralProcess, Option<ChildOutput>), WrapError> {
        let mut child = self
            .command
            .stdin(Stdio::Piped)
            .stdout(Stdio::Piped)
            .stderr(self.stderr)
            .spawn()
            .map_err(WrapError::Spawn)?;
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            // Unreachable with piped stdio; the dropped child is terminated.
            return Err(WrapError::Setup {
                what: "the MCP server's pipes were not set up",
                source: std::io::ErrorKind::BrokenPipe.into(),
            });
        };
        let stderr = child.take_stderr();
        let process = CorralProcess {
            transport: AsyncRwTransport::new(stdout, stdin),
            pid: child.id(),
            backend: child.backend(),
            child: Some(child),
            close_grace: self.close_grace,
            finished: watch::Sender::new(None),
        };
        Ok((process, stderr))
    }
}

impl FinishedWatch {
    /// The report, if `close` has ended the tree.
    pub fn get(&self) -> Option<Finished> {
        self.0.borrow().clone()
    }

    /// Waits for the report. `None` if the transport was dropped without a
    /// completed `close` (the tree was ended all the same).
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn wait(&mut self) -> Option<Finished> {
        match self.0.wait_for(Option::is_some).await {
            Ok(finished) => finished.clone(),
            Err(_closed) => None,
        }
    }
}

impl Transport<RoleClient> for CorralProcess {
    type Error = std::io::Error;

    /// # Cancel safety
    /// As rmcp's: the returned future is `'static` and owns the write.
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    /// # Cancel safety
    /// Cancel safe, as rmcp's line reader: a partial line is kept for the
    /// next call.
    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// [`CorralProcess::graceful_shutdown`].
    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.graceful_shutdown()
    }
}
