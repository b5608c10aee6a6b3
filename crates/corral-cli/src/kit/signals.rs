//! Signals sent to a supervising corral process, and the death of its
//! parent, for every subcommand.
//!
//! What a signal means is the subcommand's ([`Meaning`] for `corral run`);
//! no catchable signal ends corral while its tree runs on. A signal that
//! was ignored when corral started (`nohup` ignores `SIGHUP`; a
//! non-interactive shell ignores `SIGINT` and `SIGQUIT` for background
//! jobs) gets no handler (nor is held), so it stays ignored and the command
//! inherits that: an installed handler would be reset to the default by
//! `exec`. `corral run` holds its signals instead of handling them
//! ([`install_held`]). The death
//! of corral's parent arrives as `SIGTERM` (`PR_SET_PDEATHSIG`).

use anyhow::Context;
use corral::{
    Signal,
    host::{self, HeldSignals, ParentWatch, SignalWatch},
};

/// The signals that end `corral run`'s tree.
pub const RUN: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// Signals whose default action would end corral but that it leaves at
/// that default: a fault in corral itself (`SIGILL`, `SIGTRAP`, `SIGBUS`,
/// `SIGFPE`, `SIGSEGV`, `SIGSYS`: a handler that returns would run the
/// faulting instruction again), and `SIGPIPE`, which Rust programs ignore so
/// that corral's own writes to a closed pipe fail instead (handled, such a
/// write would pass `SIGPIPE` on to the command).
const LEFT_ALONE: [i32; 7] = [4, 5, 7, 8, 11, 31, 13];

/// Signals whose default action does not end a process (`SIGCHLD`,
/// `SIGCONT`, `SIGURG`, `SIGWINCH`, the stop signals) or that cannot be
/// caught (`SIGKILL`, `SIGSTOP`).
const NOT_ENDING: [i32; 9] = [9, 17, 18, 19, 20, 21, 22, 23, 28];

/// What a signal sent to `corral run` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// `SIGINT`, `SIGTERM`, `SIGHUP`, `SIGQUIT` ([`RUN`]): the tree is ended
    /// with the policy, and corral exits 128+N.
    End,
    /// `SIGALRM`: the time limit has passed (timeout(1)'s own alarm).
    TimeUp,
    /// Any other signal that would end corral (`SIGUSR1`, `SIGUSR2`, the
    /// real-time signals, ...): passed on to every process of the tree,
    /// which runs on; what they do with it decides how the command ends.
    PassOn,
}

/// What `signal` does when sent to `corral run`.
pub fn meaning(signal: Signal) -> Meaning {
    if RUN.contains(&signal) {
        Meaning::End
    } else if signal == Signal::ALRM {
        Meaning::TimeUp
    } else {
        Meaning::PassOn
    }
}

/// The signals `corral run` passes on to its tree when it is its PID
/// namespace's init (a container's entrypoint), as `docker stop` (`SIGTERM`)
/// and `docker kill --signal` expect: the command decides what they mean,
/// and corral exits with its status.
pub const INIT: [Signal; 7] = [
    Signal::TERM,
    Signal::INT,
    Signal::HUP,
    Signal::QUIT,
    Signal::USR1,
    Signal::USR2,
    Signal::WINCH,
];

/// What `signal` does when sent to `corral run` that is its PID namespace's
/// init: [`INIT`]'s are passed on, the rest mean what [`meaning`] says.
pub fn meaning_as_init(signal: Signal) -> Meaning {
    if INIT.contains(&signal) {
        Meaning::PassOn
    } else {
        meaning(signal)
    }
}

/// The signals `corral run` handles as its PID namespace's init:
/// [`run_handled`]'s and `SIGWINCH`, which does not end a process but which
/// the kernel would not deliver to an init that neither handles nor blocks
/// it.
pub fn init_handled() -> Vec<Signal> {
    let mut handled = run_handled();
    handled.push(Signal::WINCH);
    handled
}

/// The job-control signals `corral run` ignores itself, as GNU `timeout`
/// does: a command in the background that reads from the terminal (or
/// writes to it under `stty tostop`) gets `SIGTTIN` (`SIGTTOU`), and so does
/// its whole process group, corral included when it shares it; corral must
/// not stop with it, its time limit and its signals on hold. The command
/// starts with both at their defaults ([`corral::Command::default_signals`]),
/// whatever corral's parent left, as GNU's child resets them.
pub const JOB_CONTROL: [Signal; 2] = [Signal::TTIN, Signal::TTOU];

/// Ignores [`JOB_CONTROL`] in corral itself.
pub fn ignore_job_control() {
    for signal in JOB_CONTROL {
        if let Err(error) = host::ignore(signal) {
            tracing::debug!(%signal, %error, "not ignored");
        }
    }
}

/// Blocks `SIGRTMAX`, which would end corral but which [`run_handled`]
/// cannot include: sent to corral, it stays pending (not passed on). Call
/// it before any thread starts, so that every thread inherits the block;
/// the command starts with no signal blocked.
pub fn hold_unhandled() {
    if let Some(max) = host::highest_signal()
        && let Err(error) = host::block(max)
    {
        tracing::debug!(%error, "SIGRTMAX not blocked");
    }
}

/// The signals `corral run` handles: every signal whose default action ends
/// a process, but [`LEFT_ALONE`]. `SIGRTMAX` is left out too: tokio's signal
/// driver has no slot for the highest number.
pub fn run_handled() -> Vec<Signal> {
    let max = host::all_signals().map(Signal::number).max().unwrap_or(0);
    host::all_signals()
        .filter(|s| !LEFT_ALONE.contains(&s.number()) && !NOT_ENDING.contains(&s.number()))
        .filter(|s| s.number() < max)
        .collect()
}

/// The signals that shut `corral mcp wrap`'s server down, as the client
/// closing the connection does.
pub const WRAP: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// The signals that make `corral mcp call` and `corral mcp list` give the
/// request up (cancel the connect or the call) and end the server's tree.
pub const CLIENT: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// The signals that stop `corral mcp serve`: it ends every run's tree,
/// then exits 0.
pub const SERVE: [Signal; 3] = [Signal::INT, Signal::TERM, Signal::HUP];

/// What [`install`] found.
#[derive(Debug)]
pub enum Watch {
    /// The handlers are installed, and the parent's death is watched.
    Armed(SignalWatch),
    /// The parent was already gone: act as if `SIGTERM` had arrived, before
    /// anything starts.
    ParentGone,
}

/// Installs handlers for those of `handled` not ignored at start-up, then
/// has the kernel send `SIGTERM` when the parent dies. `parent` is the parent
/// pid read first thing at start-up. Needs a runtime with its I/O driver.
///
/// # Errors
/// If a disposition cannot be read, a handler cannot be installed or the
/// kernel refuses the parent-death setting.
pub fn install(handled: &[Signal], parent: i32) -> anyhow::Result<Watch> {
    install_overriding(handled, &[], parent)
}

/// The signals GNU `timeout` handles whatever its parent left ignored:
/// `SIGALRM`, `SIGINT`, `SIGQUIT`, `SIGHUP`, `SIGTERM` and its `--signal`.
/// Its command starts with them at their defaults: a `timeout 10 CMD &` in
/// a script (whose shell ignores `SIGINT` and `SIGQUIT` for background
/// jobs) still lets CMD trap `SIGINT`.
pub fn gnu_handled(signal: Option<Signal>) -> Vec<Signal> {
    let mut handled = vec![
        Signal::ALRM,
        Signal::INT,
        Signal::QUIT,
        Signal::HUP,
        Signal::TERM,
    ];
    handled.extend(signal.filter(|s| !handled.contains(s)));
    handled
}

/// [`install`], with handlers for `even_if_ignored` whatever the parent
/// left (the `timeout` personality: [`gnu_handled`]).
///
/// # Errors
/// As [`install`].
pub fn install_overriding(
    handled: &[Signal],
    even_if_ignored: &[Signal],
    parent: i32,
) -> anyhow::Result<Watch> {
    let signals = SignalWatch::install_overriding(handled, even_if_ignored)
        .context("installing the signal handlers")?;
    arm(signals, parent)
}

/// [`install_overriding`] for signals held since start-up
/// ([`corral::host::hold_signals`]: `corral run`, which watches about 40,
/// holds them instead of installing a handler for each, before any thread
/// of its own starts).
///
/// # Errors
/// As [`install`].
pub fn install_held(held: HeldSignals, parent: i32) -> anyhow::Result<Watch> {
    let signals = SignalWatch::from_held(held).context("watching the held signals")?;
    arm(signals, parent)
}

/// The watch, with the parent's death arriving as `SIGTERM`.
fn arm(signals: SignalWatch, parent: i32) -> anyhow::Result<Watch> {
    // Armed only once SIGTERM is handled (or held), or the parent's death
    // would kill corral without a cleanup. Without that (SIGTERM ignored at
    // start-up), the parent's death is not watched, but a parent already
    // gone still counts.
    let gone = if signals.handles(Signal::TERM) {
        host::signal_on_parent_death(Signal::TERM, parent)
            .context("arming the parent-death signal")?
            == ParentWatch::AlreadyGone
    } else {
        host::parent_pid() != parent
    };
    Ok(if gone {
        Watch::ParentGone
    } else {
        Watch::Armed(signals)
    })
}
