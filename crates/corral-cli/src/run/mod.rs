//! `corral run`: the command as an owned tree, with `timeout(1)`'s interface.

pub mod gnu;
mod init;
pub mod personality;
mod report;

use std::{
    pin::pin,
    time::{Duration, Instant},
};

use anyhow::Context;
use corral::{Finished, Signal, Stdio, host::HeldSignals};
use tokio_util::sync::CancellationToken;

use crate::{
    cli::RunArgs,
    kit::{
        exit::Status,
        report::tell_leftovers,
        signals::{self, Meaning, Watch},
        sink::{self, Sink},
        startup,
    },
    run::{personality::Personality, report::NotRun},
    text::printable,
};

/// What `corral run` sets up first, still single-threaded and before its
/// arguments are parsed: the signal dispositions every process of it
/// inherits, the watchdog included (a watchdog stopped by `SIGTTOU` while
/// writing to a terminal could not end the tree), then the watchdog
/// ([`startup::watchdog_first`]). [`main`] does the same again, a no-op
/// here and the set-up of the `timeout` personality.
pub fn prepare() {
    signals::hold_unhandled();
    signals::ignore_job_control();
    startup::watchdog_first();
}

/// Runs the command as a dedicated supervisor. `parent` is corral's parent
/// pid as read first thing at start-up.
///
/// # Errors
/// When corral itself fails before or around the run (exit status 125).
pub fn main(args: &RunArgs, parent: i32) -> anyhow::Result<Status> {
    // Still the only thread (the `timeout` personality), or after
    // `prepare`, which did the same before its watchdog's monitor thread
    // started: every thread holds SIGRTMAX either way.
    signals::hold_unhandled();
    signals::ignore_job_control();
    let personality = Personality::of(args);
    // The watchdog first (a no-op after `prepare`; as `timeout`, here):
    // forked after the hold below, it would take the dispositions the hold
    // sets back to the default instead of those the parent left.
    startup::watchdog_first();
    // The signals corral acts on, held from now on (one sent meanwhile
    // waits), before any thread of corral's own starts (the watchdog's
    // block every signal): about 40, which handlers would cost a
    // `sigaction` and a registration each (BENCHMARKS.md section 3).
    let held = corral::host::hold_signals(
        &init::handled(),
        &personality.handled_even_if_ignored(args.signal.0),
    )
    .context("holding the signals corral acts on")?;
    // As `timeout`, -v is GNU's lines only, not corral's debug log.
    let own_verbose = personality.own_verbose(args.verbose);
    let sink = startup::supervisor(&args.report, own_verbose)?;
    startup::supervise(run(args, parent, sink, held))
}

async fn run(
    args: &RunArgs,
    parent: i32,
    sink: Option<Sink>,
    held: HeldSignals,
) -> anyhow::Result<Status> {
    let personality = Personality::of(args);
    let mut init = init::Init::take_on()?;
    let watch = signals::install_held(held, parent)?;
    let started = Instant::now();
    let Watch::Armed(mut signals) = watch else {
        say!("the parent process is already gone (counts as SIGTERM); the command was not started");
        let status = Status::Interrupted(Signal::TERM);
        let reason = "corral's parent process was gone before the command started".to_owned();
        let why = NotRun::NotStarted { reason };
        let report = report::not_run(&args.command, why, status, started.elapsed());
        sink::deliver(sink, &report);
        return Ok(status);
    };

    let cancel = CancellationToken::new();
    let mut command = match command(args, &personality, cancel.clone()) {
        Ok(command) => command,
        Err(error) => {
            // A bad --user: nothing ran, and the report says why.
            let message = format!("{error:#}");
            say!("{message}");
            let status = Status::Failed;
            let why = NotRun::SpawnFailed { error: message };
            let report = report::not_run(&args.command, why, status, started.elapsed());
            sink::deliver(sink, &report);
            return Ok(status);
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let status = Status::of_spawn_error(&error);
            let message = personality.spawn_failed(&args.command, &error);
            let why = NotRun::SpawnFailed { error: message };
            let report = report::not_run(&args.command, why, status, started.elapsed());
            sink::deliver(sink, &report);
            return Ok(status);
        }
    };

    // No other tree starts: the watchdog goes the moment this one ends (with
    // its leaf), and exits while corral removes its record and reports.
    corral::watchdog::release_when_idle();
    let control = child.control();
    let corral_verbose = personality.own_verbose(args.verbose);
    let mut wait = pin!(child.wait());
    // The watchdog forked first thing has no thread of its own watching it:
    // this loop replaces it if it dies while the tree runs.
    let mut watch_over = pin!(corral::watchdog::watch_over());
    let mut watched = true;
    // The signal that ended the tree, and whether it is being ended: a
    // signal received from then on is passed on to what still runs, as GNU
    // `timeout` passes on every one (its grace, -k, not reset).
    let mut received = None;
    let mut ending = false;
    // A SIGALRM while ending: GNU counts the run as timed out.
    let mut late_alarm = false;
    let result = loop {
        tokio::select! {
            biased;
            result = &mut wait => break result,
            () = &mut watch_over, if watched => watched = false,
            () = init::reap(&mut init) => {}
            signal = signals.recv() => match init::meaning(init.as_ref(), signal) {
                Meaning::End if ending || control.ending() => {
                    if corral_verbose {
                        say!("received {signal} while ending the tree; passing it on");
                    }
                    control.signal(signal);
                }
                Meaning::End => {
                    if corral_verbose {
                        say!("received {signal}; ending the tree");
                    }
                    ending = true;
                    received = Some(signal);
                    if personality.passes_on_the_ending_signal() {
                        control.end_with(signal);
                    } else {
                        cancel.cancel();
                    }
                }
                Meaning::TimeUp if ending || control.ending() => {
                    // GNU's alarm once its cleanup began: its signal
                    // again without -k, SIGKILL with it (corral run's
                    // grace always ends).
                    let late = if args.kill_after == Duration::MAX {
                        args.signal.0
                    } else {
                        Some(Signal::KILL)
                    };
                    if corral_verbose {
                        say!("received {signal} while ending the tree; sending {}",
                            late.map_or_else(|| "nothing".to_owned(), |s| s.to_string()));
                    }
                    if let Some(late) = late {
                        control.signal(late);
                    }
                    late_alarm = true;
                }
                Meaning::TimeUp => {
                    if corral_verbose {
                        say!("received {signal}: the time is up");
                    }
                    ending = true;
                    control.time_up();
                }
                Meaning::PassOn => {
                    if corral_verbose {
                        say!("received {signal}; passing it on to the tree");
                    }
                    control.signal(signal);
                }
            },
        }
    };
    let finished = result.context("supervising the command")?;
    let status = Status::of_run(
        finished.outcome,
        finished.leader,
        args.preserve_status,
        received,
    );
    let status = personality.status(status, finished.leader, args.preserve_status, late_alarm);
    tell(args, corral_verbose, &finished);
    let mut notes: Vec<String> = received
        .map(|signal| format!("corral received {signal} and ended the tree"))
        .into_iter()
        .collect();
    notes.extend(init::end_the_rest(&init, args, corral_verbose).await);
    // A watchdog that died and could not be replaced (fork refused, say)
    // left corral's own death unguarded: said even without -v.
    if let Some(reason) = corral::watchdog::lost() {
        let note = format!("owner-death guard off: {reason}");
        say!("note: {}", printable(&note));
        notes.push(note);
    }
    let report = report::of_finished(&args.command, &finished, status, started.elapsed(), notes);
    sink::deliver(sink, &report);
    Ok(status)
}

/// The library command for `args`; the token ends the tree when cancelled.
fn command(
    args: &RunArgs,
    personality: &Personality,
    cancel: CancellationToken,
) -> anyhow::Result<corral::Command> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given: put it after `--`")?;
    let mut command = corral::Command::new(program);
    command
        .args(rest)
        .stdin(Stdio::Inherit)
        .stdout(Stdio::Inherit)
        .stderr(Stdio::Inherit)
        .signal(args.signal.0)
        .foreground(args.foreground)
        .grace(args.kill_after)
        .grace_ends(args.grace_ends)
        .final_bound(args.final_bound)
        .backend(args.backend.choice())
        .limits(args.limits.limits())
        // As the parent left it for corral (Rust ignores it before `main`).
        .ignore_sigpipe(corral::host::sigpipe_ignored_at_start() == Some(true))
        .default_signals(signals::JOB_CONTROL)
        .cancel_on(cancel);
    if let Some(say_each) = personality.on_signal(&args.command, args.verbose) {
        command.on_signal(say_each);
    }
    if let Some(spec) = &args.user {
        let ids = crate::user::resolve(spec)?;
        command.user(ids.uid).group(ids.gid);
    }
    if !args.timeout.is_zero() {
        command.timeout(args.timeout);
    }
    Ok(command)
}

/// What the cleanup did, on standard error: every signal with `-v`,
/// survivors always.
fn tell(args: &RunArgs, corral_verbose: bool, finished: &Finished) {
    let report = &finished.report;
    // As `timeout`, -v lines were said as each signal went (see `command`).
    if corral_verbose {
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
    tell_leftovers(
        report,
        "",
        " (run the command with --user so it cannot)",
        args.final_bound,
    );
}
