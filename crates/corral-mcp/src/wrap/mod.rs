//! The server as an owned tree, the relay around it, and the shutdown.
//!
//! 1. Spawn the server under corral's containment: stdin and stdout piped,
//!    stderr inherited, the termination policy `SIGTERM`, `--kill-after`,
//!    `SIGKILL`, `--final-bound`.
//! 2. Relay until one side ends: end of our stdin or a broken stdout (the
//!    client), a signal or the parent's death, the server's exit, the server
//!    closing its stdout or its stdin.
//! 3. Shut down as the MCP stdio lifecycle says, for the whole tree: close
//!    the server's stdin, wait up to `--close-grace` for it to exit, then let
//!    the library end the tree (`SIGTERM`, `--kill-after`, `SIGKILL`,
//!    `--final-bound`). Whatever the leader leaves behind when it exits by
//!    itself is ended the same way ([`corral::Leftovers::Terminate`]). The
//!    server's output keeps being relayed (or drained) meanwhile, so it
//!    never blocks on a full pipe.
//! 4. Answer every client request still in flight with an error naming the
//!    cause, and return what happened ([`WrapExit`]); the front end turns it
//!    into an exit status and a report.
//!
//! Signals arrive as a [`SignalWatch`] the caller installed (a process
//! dedicated to the relay hands over `SIGINT`, `SIGTERM`, `SIGHUP` and the
//! parent's death; a library user may hand over an empty one).
//!
//! The relay's own files are beside this one: `options` (what it is asked
//! to do), `relay` (the two pumps), `inflight` (requests waiting for their
//! answer), `notelimit` (the rate of dropped-frame notes), `stdio` (this
//! process's own streams), `ending` (what happened), `error` (why it could
//! not start). Framing and classifying lines are the crate's, shared with
//! the client.

pub(crate) mod ending;
pub(crate) mod error;
pub(crate) mod inflight;
pub(crate) mod notelimit;
pub(crate) mod options;
pub(crate) mod relay;
mod stdio;

use std::{future::Future, time::Duration};

use corral::{Finished, Stdio, host::SignalWatch};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    time::{Instant, sleep_until, timeout},
};
use tokio_util::sync::CancellationToken;

use ending::{Durations, Ending, Leader, WrapExit, unanswered_message};
use error::WrapError;
use inflight::Side;
use options::WrapOptions;
use relay::{OnWriteError, PumpEnd, Shared, pump};

/// How long the server's output is still read once its tree is gone (every
/// writer is gone then, so end of file comes at once unless a survivor holds
/// the pipe).
const DRAIN: Duration = Duration::from_millis(250);
/// How long writing the relay's own error answers may take.
const ANSWER_BOUND: Duration = Duration::from_secs(1);

/// Runs `options.command` as an MCP stdio server under corral's containment
/// and relays between it and the client on this process's standard input and
/// output. A signal from `signals` shuts the server down.
///
/// # Errors
/// See [`WrapError`]; nothing of the server is left running after one.
pub async fn wrap(options: WrapOptions, signals: SignalWatch) -> Result<WrapExit, WrapError> {
    let (input, output) = stdio::open()?;
    run(&options, signals, input, output).await
}

/// Like [`wrap`], with the client on `input` and `output` instead of this
/// process's standard streams.
///
/// ```no_run
/// use corral_mcp::WrapOptions;
/// use tokio::net::UnixListener;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// // A client that connects over a socket instead of our stdio.
/// let (client, _) = UnixListener::bind("/run/user/1000/mcp.sock")?.accept().await?;
/// let (input, output) = client.into_split();
/// let options = WrapOptions::new(["npx", "-y", "@modelcontextprotocol/server-everything"]);
/// let signals = corral::host::SignalWatch::default();
/// let exit = corral_mcp::wrap_with(options, signals, input, output).await?;
/// assert!(exit.finished.report.survivors.is_empty());
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`wrap`].
pub async fn wrap_with<I, O>(
    options: WrapOptions,
    signals: SignalWatch,
    input: I,
    output: O,
) -> Result<WrapExit, WrapError>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    run(&options, signals, input, output).await
}

/// Polls an optional future; pending for ever once it is `None`.
async fn running<F: Future + Unpin>(future: &mut Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

async fn run<I, O>(
    options: &WrapOptions,
    mut signals: SignalWatch,
    mut input: I,
    mut output: O,
) -> Result<WrapExit, WrapError>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let started = Instant::now();
    let (program, args) = options.command.split_first().ok_or(WrapError::NoCommand)?;
    let cancel = CancellationToken::new();
    let mut child = corral::Command::new(program)
        .args(args)
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .stderr(Stdio::Inherit)
        .grace(options.kill_after)
        .final_bound(options.final_bound)
        .backend(options.backend)
        .limits(options.limits)
        .cancel_on(cancel.clone())
        .spawn()
        .map_err(WrapError::Spawn)?;
    let spawned = Instant::now();
    let corral::identity::Identity { pid, start_time } = child.identity();
    tracing::info!(pid, backend = %child.backend(), "spawned the MCP server");
    let pipes = (child.take_stdin(), child.take_stdout());
    let (Some(mut server_in), Some(mut server_out)) = pipes else {
        // Unreachable with piped stdio; the dropped child is terminated.
        return Err(WrapError::Setup {
            what: "the server's pipes were not set up",
            source: std::io::ErrorKind::BrokenPipe.into(),
        });
    };
    let shared = Shared::new(
        options.max_frame_bytes,
        // A closed standard error drops the note; it never ends the relay.
        Box::new(|line| {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "{line}");
        }),
    );

    let mut wait = Box::pin(child.wait());
    // Owns the server's stdin: dropping it closes the pipe.
    let mut to_server = Some(Box::pin(async {
        let end = pump(
            Side::Client,
            &mut input,
            &mut server_in,
            &shared,
            OnWriteError::Stop,
        )
        .await;
        drop(server_in);
        end
    }));
    let mut to_client = Some(Box::pin(pump(
        Side::Server,
        &mut server_out,
        &mut output,
        &shared,
        OnWriteError::Discard,
    )));

    // Relay until one side ends.
    let mut received = None;
    let mut finished = None;
    let ending = tokio::select! {
        biased;
        signal = signals.recv() => {
            received = Some(signal);
            Ending::Interrupted
        }
        result = &mut wait => {
            finished = Some(result.map_err(WrapError::Supervise)?);
            Ending::ServerExited
        }
        end = running(&mut to_server) => {
            to_server = None;
            match end {
                PumpEnd::Eof | PumpEnd::ReadFailed => Ending::ClientClosed,
                PumpEnd::WriteFailed => Ending::ServerClosedInput,
            }
        }
        () = shared.client_broken.notified() => Ending::ClientGone,
        _ = running(&mut to_client) => {
            to_client = None;
            Ending::ServerClosedOutput
        }
    };
    let ended = Instant::now();
    tracing::info!(?ending, signal = ?received, "relay ending");

    // Shut the server down, or wait for it to finish dying.
    if !ending.by_server() {
        to_server = None;
        tracing::info!(
            close_grace = ?options.close_grace,
            "shutdown: closed the server's stdin, waiting for it to exit"
        );
    }
    let finished = match finished {
        Some(finished) => finished,
        None => {
            // `Duration::MAX` (no limit) must not overflow the instant.
            let now = Instant::now();
            let deadline = now
                .checked_add(options.close_grace)
                .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30));
            let mut terminating = false;
            loop {
                tokio::select! {
                    biased;
                    result = &mut wait => break result.map_err(WrapError::Supervise)?,
                    signal = signals.recv(), if !terminating => {
                        received.get_or_insert(signal);
                        tracing::info!(%signal, "shutdown: received a signal, ending the tree now");
                        cancel.cancel();
                        terminating = true;
                    }
                    () = sleep_until(deadline), if !terminating => {
                        tracing::info!(
                            kill_after = ?options.kill_after,
                            "shutdown: still running after --close-grace, sending SIGTERM to the tree"
                        );
                        cancel.cancel();
                        terminating = true;
                    }
                    _ = running(&mut to_client) => to_client = None,
                    _ = running(&mut to_server) => to_server = None,
                }
            }
        }
    };
    let gone = Instant::now();
    tell(&finished);

    // What the server wrote before it died still goes to the client.
    {
        let rest = to_client;
        if let Some(rest) = rest
            && timeout(DRAIN, rest).await.is_err()
        {
            tracing::info!("the server's output was still open after its tree ended");
        }
    }
    drop(to_server);
    let message = unanswered_message(ending, received, finished.outcome);
    if timeout(ANSWER_BOUND, shared.answer_in_flight(&mut output, &message))
        .await
        .is_err()
    {
        tracing::info!("answering the requests in flight timed out");
    }
    let relay = shared.stats();
    if relay.in_flight_answered > 0 {
        tracing::info!(
            answered = relay.in_flight_answered,
            %message,
            "answered the client's requests in flight"
        );
    }
    Ok(WrapExit {
        ending,
        received,
        server: Leader { pid, start_time },
        durations: Durations {
            relay: ended - spawned,
            shutdown: gone - ended,
            cleanup: finished.report.cleanup_time,
            total: started.elapsed(),
        },
        finished,
        relay,
    })
}

/// Logs what the cleanup did.
fn tell(finished: &Finished) {
    let report = &finished.report;
    for sent in &report.signals {
        tracing::info!(
            signal = %sent.signal,
            delivered = ?sent.delivered,
            at = ?sent.at,
            "shutdown: signal sent"
        );
    }
    tracing::info!(
        outcome = ?finished.outcome,
        leader = ?finished.leader,
        survivors = report.survivors.len(),
        cleanup = ?report.cleanup_time,
        "the server's tree is gone"
    );
    for note in &report.notes {
        tracing::info!(%note, "cleanup note");
    }
}
