//! A supervisor that is its PID namespace's init (PID 1: a container's
//! entrypoint, `unshare --pid --fork`). The kernel re-parents every orphan
//! of the namespace to it, whoever started it, so those that exit stay
//! zombies until it reaps them; and when it exits, the kernel kills
//! everything left in the namespace with `SIGKILL`, no grace and no word
//! said. [`reap_orphans`] reaps them without ever taking a status this
//! process's own trees wait for; [`end_the_rest`] ends what is left once
//! those trees have ended, by a tree's policy (signal, grace, `SIGKILL`,
//! final bound), and names it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use corral::{host::SignalWatch, init, Signal};
//! let mut command = corral::Command::new("my-entrypoint");
//! let mut child = command.spawn()?;
//! let policy = *command.get_policy();
//! if init::is_init() {
//!     let mut chld = SignalWatch::install(&[Signal::CHLD])?;
//!     tokio::spawn(async move {
//!         loop {
//!             chld.recv().await;
//!             init::reap_orphans(); // zombies of the namespace, never a tree's leader
//!         }
//!     });
//! }
//! let finished = child.wait().await?;
//! if init::is_init() {
//!     let rest = init::end_the_rest(&policy).await;
//!     eprintln!("ended {} left in the namespace, {} survived", rest.found.len(),
//!               rest.survivors.len());
//! }
//! # let _ = finished;
//! # Ok(()) }
//! ```

use std::{collections::HashSet, os::fd::AsFd, time::Duration};

use tokio::time::Instant;

use crate::{
    contain,
    identity::{self, Delivery, Held, ProcessInfo, Stat},
    outcome::SignalSent,
    signal::Signal,
    sys,
    terminate::Policy,
};

/// The longest pause between two looks at what is left.
const POLL_MAX: Duration = Duration::from_millis(50);

/// Whether this process is its PID namespace's init.
pub fn is_init() -> bool {
    sys::getpid() == 1
}

/// Reaps every exited child of this process that nothing of this process
/// waits for, and returns how many. Never a live tree's leader (its
/// supervisor takes its status through its pidfd), a child that may be a
/// spawn in progress's leader, a helper of the host (the owner-death
/// watchdog), nor, while a subreaper-backed tree runs, any child: that
/// tree's scans reap what it adopts and read it as a trail of members.
///
/// It asks the kernel which child has exited without reaping it (`waitid`
/// with `WNOWAIT`) and reaps it by pid only when it is nobody's; the kernel
/// names that first child again until it is reaped, so past one that is
/// somebody's, the others are found in `/proc` (skipped where `/proc` is
/// another PID namespace's). Call it on every `SIGCHLD`: one call reaps
/// every child that has exited by then.
pub fn reap_orphans() -> usize {
    let mut reaped = 0;
    loop {
        let pid = match sys::peek_exited_child() {
            Ok(Some(pid)) => pid,
            Ok(None) => return reaped,
            Err(error) => {
                tracing::debug!(%error, "looking for exited children failed");
                return reaped;
            }
        };
        if contain::waits_for(pid) {
            return reaped + reap_listed();
        }
        match sys::reap(pid) {
            Ok(true) => reaped += 1,
            Ok(false) => return reaped,
            Err(error) => {
                tracing::debug!(pid, %error, "reaping an orphan failed");
                return reaped;
            }
        }
    }
}

/// [`reap_orphans`]' way past a child that is somebody's: the zombies among
/// this process's children in `/proc`.
fn reap_listed() -> usize {
    if !sys::proc_is_own_namespace() {
        return 0;
    }
    let me = sys::getpid();
    let Ok(table) = identity::all_processes() else {
        return 0;
    };
    table
        .iter()
        .filter(|s| s.ppid == me && !s.is_running() && !contain::waits_for(s.pid))
        .filter(|s| sys::reap(s.pid).unwrap_or(false))
        .count()
}

/// What was left in the namespace once this process's trees had ended, and
/// what [`end_the_rest`] did with it.
///
/// ```no_run
/// # async fn demo() {
/// let rest = corral::init::end_the_rest(&corral::Policy::default()).await;
/// if let Some(why) = &rest.unseen {
///     eprintln!("the namespace was not looked at: {why}");
/// }
/// for sent in &rest.signals {
///     eprintln!("{} to {:?} processes", sent.signal, sent.delivered);
/// }
/// assert!(rest.found.is_empty() || !rest.signals.is_empty(), "each found one was signalled");
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rest {
    /// The processes found running, as they were first seen.
    pub found: Vec<ProcessInfo>,
    /// The signals sent, each with how many processes it reached; times are
    /// from the first look.
    pub signals: Vec<SignalSent>,
    /// Processes still running when the final bound passed (the kernel
    /// kills them when this process exits).
    pub survivors: Vec<ProcessInfo>,
    /// Why the namespace was not looked at, if it was not.
    pub unseen: Option<String>,
}

/// Ends every process of this PID namespace but this one and its helpers,
/// as a tree's policy does: `policy.signal` to each, by identity; once they
/// are all gone or `policy.grace` has passed, `SIGKILL` to each one still
/// running, and to any that appears, until they are all gone or
/// `policy.final_bound` has passed too. Reaps them as they exit. Call it
/// when this process is the namespace's init and its own trees have ended:
/// what is left then is no tree's (an orphan a backend let go, a process
/// that entered the namespace from outside, `docker exec` and `nsenter`).
///
/// The namespace is read from `/proc`; where `/proc` is another namespace's
/// (`unshare --pid --fork` without `--mount-proc`), nothing is signalled and
/// [`Rest::unseen`] says why. The bound holds whatever the processes do: on
/// this process's exit the kernel kills what is still there.
///
/// # Cancel safety
/// Dropped early, some processes may have been signalled and not yet
/// reaped; the next call (or the kernel, at exit) finishes the work.
pub async fn end_the_rest(policy: &Policy) -> Rest {
    let mut rest = Rest::default();
    if !sys::proc_is_own_namespace() {
        rest.unseen = Some(
            "/proc is not this PID namespace's (mount the namespace's own: unshare \
             --mount-proc, or a container's /proc), so what is left was not looked at"
                .to_owned(),
        );
        return rest;
    }
    let started = Instant::now();
    let mut left = settle();
    if left.is_empty() {
        return rest;
    }
    rest.found = left.iter().map(identity::describe).collect();
    let grace_ends = started + policy.grace;
    if let Some(signal) = policy.signal {
        let delivered = left.iter().filter(|s| send(s, signal)).count();
        rest.signals.push(SignalSent {
            at: started.elapsed(),
            signal,
            delivered: Some(delivered),
        });
        left = settle_until(grace_ends).await;
    }
    let bound = grace_ends + policy.final_bound;
    let mut killed = HashSet::new();
    let mut first_kill = None;
    let mut pause = Duration::from_millis(1);
    while !left.is_empty() && Instant::now() < bound {
        first_kill.get_or_insert_with(|| started.elapsed());
        for stat in &left {
            if send(stat, Signal::KILL) {
                killed.insert((stat.pid, stat.start_time));
            }
        }
        tokio::time::sleep_until(bound.min(Instant::now() + pause)).await;
        pause = (pause * 2).min(POLL_MAX);
        left = settle();
    }
    if let Some(at) = first_kill {
        rest.signals.push(SignalSent {
            at,
            signal: Signal::KILL,
            delivered: Some(killed.len()),
        });
    }
    rest.survivors = left.iter().map(identity::describe).collect();
    rest
}

/// Reaps what has exited, then lists what runs of the namespace but this
/// process and its helpers.
fn settle() -> Vec<Stat> {
    reap_orphans();
    let me = sys::getpid();
    match identity::all_processes() {
        Ok(table) => table
            .into_iter()
            .filter(|s| s.pid != me && s.is_running())
            .filter(|s| !contain::is_exempt((s.pid, s.start_time)))
            .collect(),
        Err(error) => {
            tracing::debug!(%error, "walking /proc failed");
            Vec::new()
        }
    }
}

/// [`settle`] until nothing is left or `until` passes. Between two looks it
/// waits on the pidfd of one process still there, so the next look comes
/// the moment that one exits (nothing is left only once it has); where no
/// pidfd can be had, or that process still shows as running once its pidfd
/// said it exited, it looks again at growing intervals (1 ms to
/// [`POLL_MAX`]).
async fn settle_until(until: Instant) -> Vec<Stat> {
    let mut pause = Duration::from_millis(1);
    let mut waited_for = None;
    loop {
        let left = settle();
        tracing::debug!(left = left.len(), "looked at what is left in the namespace");
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        let first = (left[0].pid, left[0].start_time);
        if waited_for != Some(first) && wait_for_exit(first, until).await {
            waited_for = Some(first);
            continue;
        }
        tokio::time::sleep_until(until.min(Instant::now() + pause)).await;
        pause = (pause * 2).min(POLL_MAX);
    }
}

/// Waits on its pidfd until the process `identity` names exits or `until`
/// passes; false if no pidfd could be had (nothing was waited for).
async fn wait_for_exit((pid, start_time): (i32, u64), until: Instant) -> bool {
    match identity::hold_verified(pid, start_time) {
        Ok(Held::Pidfd(pidfd)) => match sys::pidfd_wait_until(pidfd.as_fd(), until).await {
            Ok(_) => true,
            Err(error) => {
                tracing::debug!(pid, %error, "waiting on a pidfd failed");
                false
            }
        },
        Ok(Held::Gone) => true,
        Err(error) => {
            tracing::debug!(pid, %error, "no pidfd to wait on");
            false
        }
    }
}

/// Sends `signal` to the process `stat` describes, if it is still that
/// process; true if it was sent.
fn send(stat: &Stat, signal: Signal) -> bool {
    match identity::signal_verified(stat.pid, stat.start_time, signal) {
        Ok(Delivery::Sent) => true,
        Ok(Delivery::Gone) => false,
        Err(error) => {
            let pid = stat.pid;
            tracing::debug!(pid, %signal, %error, "signalling a process left in the namespace failed");
            false
        }
    }
}
