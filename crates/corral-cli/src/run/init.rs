//! `corral run` (and `timeout`) as its PID namespace's init: a container's
//! entrypoint (`ENTRYPOINT ["corral", "run", "--"]`), `unshare --pid
//! --fork`. Three duties on top of a run, each only when corral is PID 1:
//! it reaps every orphan of the namespace on each `SIGCHLD` (never a status
//! the library waits for: `corral::init::reap_orphans`); it passes
//! [`signals::INIT`] on to the command instead of ending the tree, so the
//! command decides and corral exits with its status (the kernel delivers
//! to an init only the signals it has a handler for or blocks, and corral
//! holds each); and once the command's tree has ended, it ends what is left in
//! the namespace by the run's policy and says what it was
//! (`corral::init::end_the_rest`), where an init that just exits leaves it
//! to the kernel's `SIGKILL`.

use corral::{
    Policy, Signal,
    host::SignalWatch,
    init::{self, Rest},
};

use crate::{
    cli::RunArgs,
    kit::signals::{self, Meaning},
    text::printable,
};

/// The init duties of this run: `None` when corral is not PID 1.
#[derive(Debug)]
pub struct Init {
    children: SignalWatch,
}

impl Init {
    /// Takes the duties on if this process is its namespace's init, with a
    /// handler for `SIGCHLD`. Needs a runtime with its I/O driver.
    ///
    /// # Errors
    /// If the handler cannot be installed.
    pub fn take_on() -> anyhow::Result<Option<Self>> {
        if !init::is_init() {
            return Ok(None);
        }
        let children = SignalWatch::install(&[Signal::CHLD])
            .map_err(|error| anyhow::anyhow!("handling SIGCHLD as PID 1: {error}"))?;
        // Orphans may have exited before the handler was there.
        init::reap_orphans();
        Ok(Some(Self { children }))
    }
}

/// The signals `corral run` handles: as init, `SIGWINCH` too.
pub fn handled() -> Vec<Signal> {
    if init::is_init() {
        signals::init_handled()
    } else {
        signals::run_handled()
    }
}

/// What `signal` means to this run.
pub fn meaning(init: Option<&Init>, signal: Signal) -> Meaning {
    match init {
        Some(_) => signals::meaning_as_init(signal),
        None => signals::meaning(signal),
    }
}

/// Reaps the namespace's orphans on each `SIGCHLD`; pending for ever when
/// corral is not init.
///
/// # Cancel safety
/// Cancel safe: a `SIGCHLD` that arrives meanwhile is kept for the next
/// call.
pub async fn reap(init: &mut Option<Init>) {
    match init {
        Some(init) => {
            init.children.recv().await;
            init::reap_orphans();
        }
        None => std::future::pending().await,
    }
}

/// Once the command's tree has ended: ends what is left in the namespace
/// by the run's policy, says on standard error what it was (survivors
/// always, the signals with `-v`), and returns the report's notes.
pub async fn end_the_rest(init: &Option<Init>, args: &RunArgs, verbose: bool) -> Vec<String> {
    if init.is_none() {
        return Vec::new();
    }
    let policy = Policy {
        signal: args.signal.0,
        grace: args.kill_after,
        final_bound: args.final_bound,
        ..Policy::default()
    };
    let rest = init::end_the_rest(&policy).await;
    notes(&rest, verbose)
}

/// What [`end_the_rest`] says, and the notes it returns.
fn notes(rest: &Rest, verbose: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(why) = &rest.unseen {
        let note = format!("as PID 1: {why}");
        if verbose {
            say!("note: {note}");
        }
        notes.push(note);
    }
    if rest.found.is_empty() {
        return notes;
    }
    let listed: Vec<String> = rest
        .found
        .iter()
        .map(|p| format!("{} ({})", p.pid, printable(&p.command)))
        .collect();
    let count = match rest.found.len() {
        1 => "1 process".to_owned(),
        n => format!("{n} processes"),
    };
    let note = format!(
        "as PID 1: {count} of the namespace outlived the command's tree and were ended: {}",
        listed.join(", ")
    );
    say!("{note}");
    notes.push(note);
    for sent in &rest.signals {
        let note = format!(
            "as PID 1: sent {} to {} of them at {:.3}s",
            sent.signal,
            sent.delivered.unwrap_or(0),
            sent.at.as_secs_f64()
        );
        if verbose {
            say!("{note}");
        }
        notes.push(note);
    }
    if !rest.survivors.is_empty() {
        let listed: Vec<String> = rest
            .survivors
            .iter()
            .map(|p| format!("{} ({})", p.pid, printable(&p.command)))
            .collect();
        let note = format!(
            "as PID 1: still running at the final bound, killed by the kernel as corral exits: {}",
            listed.join(", ")
        );
        say!("{note}");
        notes.push(note);
    }
    notes
}
