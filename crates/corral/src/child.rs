//! The handle of a running tree: what the caller holds between the spawn
//! and the end of the call. The supervisor (`supervise.rs`) builds it.

use std::{
    path::PathBuf,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::{
    net::unix::pipe,
    sync::{mpsc, oneshot},
};
use tokio_util::sync::CancellationToken;

use crate::{
    backend::Backend, capture::OutputTap, error::Error, identity::Identity, outcome::Finished,
    signal::Signal,
};

/// The writing end of the command's standard input ([`Stdio::Piped`](crate::Stdio::Piped)).
pub type ChildStdin = pipe::Sender;
/// The reading end of a command's output stream ([`Stdio::Piped`](crate::Stdio::Piped)).
pub type ChildOutput = pipe::Receiver;

/// A running tree. Supervised by a tokio task from the spawn on.
///
/// # Drop and cancellation
/// Dropping the handle (or the future of [`Child::wait`]) starts the cleanup
/// at once, with the command's [`Policy`](crate::terminate::Policy): the supervising task
/// keeps running it to the end. `Drop` itself only flips a flag and cancels a
/// token; it never blocks or spawns. If the runtime shuts down mid-cleanup,
/// the supervisor's own `Drop` kills the tree synchronously with `SIGKILL`.
///
/// ```no_run
/// # async fn demo(stop: tokio::sync::oneshot::Receiver<()>) -> Result<(), corral::Error> {
/// let mut child = corral::Command::new("make").arg("test").spawn()?;
/// println!("leader {:?}", child.identity());
/// let finished = tokio::select! {
///     finished = child.wait() => finished?,
///     _ = stop => {
///         child.terminate(); // SIGTERM to the tree, SIGKILL after the grace
///         child.wait().await?
///     }
/// };
/// assert!(finished.report.survivors.is_empty());
/// # Ok(()) }
/// ```
///
/// Talking to the command while it runs: its standard input and output as
/// pipes, or a live view of a captured stream.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
/// use corral::{Backend, Command, Stdio};
/// let mut child = Command::new("cat")
///     .stdin(Stdio::Piped)
///     .stdout(Stdio::Piped)
///     .stderr(Stdio::Capture)
///     .spawn()?;
/// println!("leader {} on the {} backend", child.id(), child.backend());
/// assert!(!child.control().ending());
/// if child.backend() == Backend::Cgroup {
///     println!("in {:?}", child.cgroup().expect("the cgroup backend has a leaf"));
/// }
/// let mut stdin = child.take_stdin().expect("piped");
/// let mut stdout = child.take_stdout().expect("piped");
/// assert!(child.take_stderr().is_none(), "captured, not piped");
/// let errors = child.stderr_tap().expect("captured");
/// assert!(child.stdout_tap().is_none(), "piped, not captured");
/// stdin.write_all(b"hello\n").await?;
/// drop(stdin); // end-of-file: cat exits
/// let mut echoed = String::new();
/// stdout.read_to_string(&mut echoed).await?;
/// assert_eq!(echoed, "hello\n");
/// let finished = child.wait().await?;
/// assert!(finished.outcome.success());
/// assert_eq!(errors.snapshot(), finished.stderr.bytes);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Child {
    pub(crate) identity: Identity,
    pub(crate) backend: Backend,
    pub(crate) cgroup: Option<PathBuf>,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<ChildOutput>,
    pub(crate) stderr: Option<ChildOutput>,
    pub(crate) stdout_tap: Option<OutputTap>,
    pub(crate) stderr_tap: Option<OutputTap>,
    pub(crate) stop: CancellationToken,
    pub(crate) time_up: CancellationToken,
    /// The first signal [`Control::end_with`] asked for, instead of the
    /// policy's; set to `None` by the supervisor when the cleanup begins
    /// without one.
    pub(crate) first_signal: Arc<OnceLock<Option<Signal>>>,
    pub(crate) signals: mpsc::UnboundedSender<Signal>,
    pub(crate) dropped: Arc<AtomicBool>,
    pub(crate) result: Option<oneshot::Receiver<Finished>>,
}

/// A handle on a running tree that is not consumed by [`Child::wait`]: a
/// program that waits for the call can still act on the tree meanwhile (as
/// the `corral` command does with the signals it receives).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// let mut child = corral::Command::new("sleep").arg("100").spawn()?;
/// let control = child.control();
/// tokio::spawn(async move {
///     // On the host's SIGHUP, say: pass it on to every process of the tree.
///     control.signal(corral::Signal::HUP);
/// });
/// let finished = child.wait().await?;
/// # let _ = finished;
/// # Ok(()) }
/// ```
///
/// Ending the tree from another task, the ways `timeout(1)` does:
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use corral::{Command, Outcome, Signal};
/// let mut child = Command::new("sleep").arg("100").spawn()?;
/// let control = child.control();
/// assert!(!control.ending());
/// control.end_with(Signal::INT); // SIGINT first, then the grace and SIGKILL
/// assert!(control.ending());
/// let finished = child.wait().await?;
/// assert_eq!(finished.outcome, Outcome::Cancelled);
/// assert!(!control.signal(Signal::HUP), "the call has ended");
///
/// // As if the time limit had passed, or as `Child::terminate`:
/// let mut child = Command::new("sleep").arg("100").spawn()?;
/// child.control().time_up();
/// assert_eq!(child.wait().await?.outcome, Outcome::TimedOut);
/// let mut child = Command::new("sleep").arg("100").spawn()?;
/// child.control().terminate();
/// assert_eq!(child.wait().await?.outcome, Outcome::Cancelled);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Control {
    stop: CancellationToken,
    time_up: CancellationToken,
    first_signal: Arc<OnceLock<Option<Signal>>>,
    signals: mpsc::UnboundedSender<Signal>,
}

impl Control {
    /// Sends `signal` to every running process of the tree, as the policy's
    /// signals are sent (by identity, or to each process of the leaf
    /// cgroup), and lets the tree run on: what the processes do with it is
    /// theirs. The supervisor sends it; the report's notes say to how many.
    ///
    /// During the cleanup it is sent too, to the processes still running,
    /// between the policy's steps: it is listed with the report's signals,
    /// and changes neither the grace nor the final bound. Not once the
    /// policy has sent `SIGKILL` (nothing left to tell). False once the
    /// call has ended (the signal is not sent).
    pub fn signal(&self, signal: Signal) -> bool {
        self.signals.send(signal).is_ok()
    }

    /// Ends the tree now as if its time limit had passed: the policy runs
    /// and the call ends in [`Outcome::TimedOut`](crate::Outcome::TimedOut).
    pub fn time_up(&self) {
        self.time_up.cancel();
    }

    /// Whether the tree is being ended: its cleanup has begun (whatever
    /// began it: the time limit, the leader's exit with members left), or
    /// [`end_with`](Self::end_with) was called. A signal meant to end the
    /// tree is then for [`signal`](Self::signal) to pass on.
    pub fn ending(&self) -> bool {
        self.first_signal.get().is_some()
    }

    /// As [`Child::terminate`].
    pub fn terminate(&self) {
        self.stop.cancel();
    }

    /// Ends the tree now as [`terminate`](Self::terminate) does, with
    /// `signal` as the policy's first signal (then its grace and `SIGKILL`):
    /// what `timeout(1)` does with a signal it receives, which it passes on
    /// to its command. Only the first call's signal is the policy's first,
    /// and only if the cleanup has not begun; a later call (or one after
    /// the cleanup began) passes its signal on as [`signal`](Self::signal)
    /// does, as `timeout(1)` passes on every signal it receives, the grace
    /// not reset.
    pub fn end_with(&self, signal: Signal) {
        if self.first_signal.set(Some(signal)).is_err() {
            let _ = self.signals.send(signal);
        }
        self.stop.cancel();
    }
}

impl Child {
    /// A live view of captured standard output ([`Stdio::Capture`](crate::Stdio::Capture)): what was
    /// produced so far, while the command runs. The full capture still comes
    /// in [`Finished::stdout`].
    pub fn stdout_tap(&self) -> Option<OutputTap> {
        self.stdout_tap.clone()
    }

    /// A live view of captured standard error ([`Stdio::Capture`](crate::Stdio::Capture)).
    pub fn stderr_tap(&self) -> Option<OutputTap> {
        self.stderr_tap.clone()
    }

    /// The leader's process id. A bare number: once the leader is reaped
    /// (at the end of the call) the kernel may give it to another process;
    /// [`Child::identity`] names the leader for ever.
    pub fn id(&self) -> i32 {
        self.identity.pid
    }

    /// The leader's identity: its pid with its start time, which no later
    /// process with the same pid shares (see [`crate::identity`]).
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// The containment backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The leaf cgroup, with the cgroup backend.
    pub fn cgroup(&self) -> Option<&std::path::Path> {
        self.cgroup.as_deref()
    }

    /// The writer of standard input, once, with [`Stdio::Piped`](crate::Stdio::Piped).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The reader of standard output, once, with [`Stdio::Piped`](crate::Stdio::Piped).
    pub fn take_stdout(&mut self) -> Option<ChildOutput> {
        self.stdout.take()
    }

    /// The reader of standard error, once, with [`Stdio::Piped`](crate::Stdio::Piped).
    pub fn take_stderr(&mut self) -> Option<ChildOutput> {
        self.stderr.take()
    }

    /// A handle that can signal the tree, or end it, while
    /// [`Child::wait`] holds the child.
    pub fn control(&self) -> Control {
        Control {
            stop: self.stop.clone(),
            time_up: self.time_up.clone(),
            first_signal: Arc::clone(&self.first_signal),
            signals: self.signals.clone(),
        }
    }

    /// Starts terminating the tree now; [`Child::wait`] then returns
    /// [`Outcome::Cancelled`](crate::Outcome::Cancelled).
    pub fn terminate(&self) {
        self.stop.cancel();
    }

    /// Waits for the call to end, cleanup included, and returns its result.
    ///
    /// # Cancel safety
    /// Cancel safe, as `tokio::process::Child::wait`: dropping this future
    /// leaves the tree running and the `Child` as it was, so a `select!`
    /// can wait for it beside something else and then end it with
    /// [`Child::terminate`]. Dropping the `Child` ends the tree.
    ///
    /// # Errors
    /// [`Error::SupervisorLost`] if the supervising task ended without a
    /// result (the runtime is shutting down), [`Error::AlreadyWaited`] if an
    /// earlier `wait` returned the result.
    pub async fn wait(&mut self) -> Result<Finished, Error> {
        let receiver = self.result.as_mut().ok_or(Error::AlreadyWaited)?;
        let finished = receiver.await;
        self.result = None;
        finished.map_err(|_| Error::SupervisorLost)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.result.is_some() {
            self.dropped.store(true, Ordering::SeqCst);
            self.stop.cancel();
        }
    }
}
