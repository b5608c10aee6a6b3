//! `corral run`: the command as an owned tree, with `timeout(1)`'s interface.

use std::{pin::pin, time::Instant};

use anyhow::Context;
use corral::{Error, Finished, Input, Output, Signal, SpawnFailure};
use tokio_util::sync::CancellationToken;

use crate::{
    cli::RunArgs,
    exit::Status,
    report::{NotRun, Report, Sink},
    signals,
    text::printable,
};

/// Runs the command on a current-thread runtime. `parent` is corral's parent
/// pid as read first thing at start-up.
///
/// # Errors
/// When corral itself fails before or around the run (exit status 125).
pub fn main(args: &RunArgs, parent: i32) -> anyhow::Result<Status> {
    // The corral process does nothing but supervise, so the subreaper
    // backend is fair game for `--backend auto`.
    corral::claim_subreaper();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let status = runtime.block_on(run(args, parent));
    // Every tree is gone: stop the watchdog rather than leave it to notice
    // our exit.
    corral::watchdog::shutdown();
    status
}

async fn run(args: &RunArgs, parent: i32) -> anyhow::Result<Status> {
    let sink = Sink::open(args.report.as_deref(), args.report_fd)?;
    let mut signals = signals::install()?;
    let started = Instant::now();
    if !signals::watch_parent(parent)? {
        say!("the parent process is already gone (counts as SIGTERM); the command was not started");
        let status = Status::Interrupted(Signal::TERM);
        let reason = "corral's parent process was gone before the command started".to_owned();
        let report = Report::not_run(
            &args.command,
            NotRun::NotStarted { reason },
            status,
            started.elapsed(),
        );
        write_report(sink, &report);
        return Ok(status);
    }

    let cancel = CancellationToken::new();
    let command = match command(args, cancel.clone()) {
        Ok(command) => command,
        Err(error) => {
            // A bad --user: nothing ran, and the report says why.
            let message = format!("{error:#}");
            say!("{message}");
            let status = Status::Failed;
            let why = NotRun::SpawnFailed { error: message };
            let report = Report::not_run(&args.command, why, status, started.elapsed());
            write_report(sink, &report);
            return Ok(status);
        }
    };
    let child = match command.spawn().await {
        Ok(child) => child,
        Err(error) => {
            let (status, message) = spawn_failure(&error);
            say!("{message}");
            let why = NotRun::SpawnFailed { error: message };
            let report = Report::not_run(&args.command, why, status, started.elapsed());
            write_report(sink, &report);
            return Ok(status);
        }
    };

    let mut wait = pin!(child.wait());
    let (result, received) = tokio::select! {
        biased;
        result = &mut wait => (result, None),
        signal = signals.recv() => {
            if args.verbose {
                say!("received {signal}; ending the tree");
            }
            cancel.cancel();
            (wait.await, Some(signal))
        }
    };
    let finished = result.context("supervising the command")?;
    let status = Status::of_run(
        finished.outcome,
        finished.leader,
        args.preserve_status,
        received,
    );
    tell(args, &finished);
    let notes = received
        .map(|signal| format!("corral received {signal} and ended the tree"))
        .into_iter()
        .collect();
    let report = Report::of_finished(&args.command, &finished, status, started.elapsed(), notes);
    write_report(sink, &report);
    Ok(status)
}

/// The library command for `args`; the token ends the tree when cancelled.
fn command(args: &RunArgs, cancel: CancellationToken) -> anyhow::Result<corral::Command> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: put it after `--`")?;
    let command = corral::Command::new(program)
        .args(rest)
        .stdin(Input::Inherit)
        .stdout(Output::Inherit)
        .stderr(Output::Inherit)
        .signal(args.signal)
        .grace(args.kill_after)
        .final_bound(args.final_bound)
        .backend(args.backend.choice())
        .cancel_on(cancel);
    let command = match &args.user {
        Some(spec) => {
            let ids = crate::user::resolve(spec)?;
            command.user(ids.uid).group(ids.gid)
        }
        None => command,
    };
    Ok(if args.timeout.is_zero() {
        command
    } else {
        command.timeout(args.timeout)
    })
}

/// The exit status and one-line message for a failed spawn.
fn spawn_failure(error: &Error) -> (Status, String) {
    match error {
        Error::Spawn { failure, .. } => {
            let status = match failure {
                SpawnFailure::NotFound => Status::NotFound,
                SpawnFailure::NotExecutable => Status::CannotInvoke,
                _ => Status::Failed,
            };
            (status, error.to_string())
        }
        Error::BackendUnavailable { .. } => (
            Status::Failed,
            format!("{error}; choose another with --backend (see corral capabilities)"),
        ),
        Error::Cgroup { .. } => (Status::Failed, format!("{error}; try --backend subreaper")),
        _ => (Status::Failed, format!("{error}")),
    }
}

/// What the cleanup did, on standard error: every signal with `-v`,
/// survivors always.
fn tell(args: &RunArgs, finished: &Finished) {
    let report = &finished.report;
    if args.verbose {
        for sent in &report.signals {
            let whom = match sent.delivered {
                Some(1) => "1 process".to_owned(),
                Some(n) => format!("{n} processes"),
                None => "the whole cgroup".to_owned(),
            };
            let at = sent.at.as_secs_f64();
            say!("sent {} to {whom} at {at:.3}s", sent.signal);
        }
        for note in &report.notes {
            say!("note: {}", printable(note));
        }
    } else {
        // A crash ledger refused (another user's directory, say) weakens the
        // owner-death guarantee: said even without -v, so it is not missed.
        for note in report
            .notes
            .iter()
            .filter(|n| n.starts_with("crash ledger off"))
        {
            say!("note: {}", printable(note));
        }
    }
    if !report.left_cgroup.is_empty() {
        let list: Vec<String> = report
            .left_cgroup
            .iter()
            .map(|p| format!("{} ({})", p.pid, printable(&p.command)))
            .collect();
        say!(
            "{} process(es) had moved out of the leaf cgroup and were killed by identity: {} \
             (run the command with --user so it cannot)",
            list.len(),
            list.join(", ")
        );
    }
    if !report.survivors.is_empty() {
        let list: Vec<String> = report
            .survivors
            .iter()
            .map(|p| format!("{} ({})", p.pid, printable(&p.command)))
            .collect();
        say!(
            "{} process(es) survived SIGKILL and --final-bound {:?}: {}",
            list.len(),
            args.final_bound,
            list.join(", ")
        );
    }
}

/// Writes the report if one was asked for; a failure is reported but does
/// not change the exit status, which belongs to the command.
fn write_report(sink: Option<Sink>, report: &Report) {
    if let Some(sink) = sink
        && let Err(error) = sink.write(report)
    {
        say!("{error:#}");
    }
}
