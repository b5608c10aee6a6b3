//! The termination policy as data, and the pure state machine that applies it.
//!
//! Escalation: send [`Policy::signal`] to the whole tree; if the tree is not
//! empty when the grace ends ([`Policy::grace`] after the signal, or, with
//! [`GraceEnds::AtLeaderExit`], the leader's exit if that comes first), send
//! `SIGKILL` to the whole tree; if it is still not empty after
//! [`Policy::final_bound`], give up and report the survivors. The driver in
//! `supervise` asks [`Escalation::next`] what to do, does it, and tells
//! [`Escalation::leader_exited`]; this module never touches a process, so it
//! is tested with plain instants.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::signal::Signal;

/// How a tree is terminated.
///
/// ```
/// use std::time::Duration;
/// use corral::{GraceEnds, Policy, Signal};
/// let policy = Policy {
///     signal: Some(Signal::INT),
///     grace: Duration::from_secs(3),
///     ..Policy::default()
/// };
/// assert_eq!(policy.grace_ends, GraceEnds::WhenElapsed);
/// // The longest an ending can take: the grace, then the final bound after SIGKILL.
/// assert_eq!(policy.bound(), Duration::from_secs(4));
/// let mut command = corral::Command::new("server");
/// command.policy(policy);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The first signal sent to every member (default `SIGTERM`), followed
    /// by `SIGCONT` unless it stops or resumes, as GNU `timeout` does, so a
    /// stopped member handles it. `None` sends nothing: the grace only
    /// starts (GNU `timeout -s 0`), and `SIGKILL` follows it.
    pub signal: Option<Signal>,
    /// How long members get to exit after [`Policy::signal`] before `SIGKILL`
    /// (default 5 s; see [`Policy::grace_ends`] for what else ends it). Zero
    /// sends `SIGKILL` at once.
    #[serde(serialize_with = "crate::duration::secs")]
    pub grace: Duration,
    /// What else ends the grace (default: only [`Policy::grace`] passing).
    pub grace_ends: GraceEnds,
    /// How long to wait after `SIGKILL` before returning anyway and reporting
    /// survivors, e.g. a process stuck in the kernel (default 1 s).
    #[serde(serialize_with = "crate::duration::secs")]
    pub final_bound: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            signal: Some(Signal::TERM),
            grace: Duration::from_secs(5),
            grace_ends: GraceEnds::WhenElapsed,
            final_bound: Duration::from_secs(1),
        }
    }
}

/// When the grace after [`Policy::signal`] ends, and `SIGKILL` goes to what
/// is left of the tree.
///
/// ```
/// use std::time::Duration;
/// use corral::GraceEnds;
/// // GNU `timeout` without `-k`: wait for the command however long it takes
/// // to stop, and kill what it leaves the moment it exits.
/// let mut command = corral::Command::new("server");
/// command.grace(Duration::MAX).grace_ends(GraceEnds::AtLeaderExit);
/// assert_eq!(command.get_policy().grace_ends, GraceEnds::AtLeaderExit);
/// assert_eq!(command.get_policy().bound(), Duration::MAX);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GraceEnds {
    /// When [`Policy::grace`] has passed (the default): every member gets the
    /// whole grace, whether or not the leader is still running.
    #[default]
    WhenElapsed,
    /// When the leader (the command itself) exits, or when [`Policy::grace`]
    /// has passed if that comes first. What is left of the tree then (it got
    /// the first signal) is sent `SIGKILL` at once, and
    /// [`Policy::final_bound`] applies as usual. With `grace: Duration::MAX`
    /// the leader is never sent `SIGKILL`, however long it takes to exit, as
    /// GNU `timeout` without `-k` waits for its command; unlike GNU, nothing
    /// the command started outlives it. A leader that had exited before the
    /// termination started (it left members behind) ends the grace at once:
    /// they get the first signal, then `SIGKILL`.
    AtLeaderExit,
}

impl Policy {
    /// The longest a termination can take: grace plus final bound
    /// (saturating: `Duration::MAX` means no bound, never a panic).
    pub fn bound(&self) -> Duration {
        self.grace.saturating_add(self.final_bound)
    }
}

/// `now + wait`, or a far-future instant where that sum does not fit (a
/// caller's `Duration::MAX` means "no deadline", never a panic).
pub(crate) fn deadline_after(now: Instant, wait: Duration) -> Instant {
    /// About 30 years, like tokio's own far future.
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(wait)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

/// What the driver must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Send this (non-`SIGKILL`) signal to every member.
    Signal(Signal),
    /// Send `SIGKILL` to every member.
    Kill,
    /// Wait until the tree is empty or this instant passes, then ask again.
    WaitUntil(Instant),
    /// Wait until the tree is empty, the leader exits or this instant
    /// passes, then ask again (telling [`Escalation::leader_exited`] first if
    /// the leader exited). Only in a grace that ends at the leader's exit.
    WaitForLeader(Instant),
    /// The tree is empty.
    Done,
    /// The final bound passed with members left: report them as survivors.
    GiveUp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Graceful { deadline: Instant },
    Killing { deadline: Instant },
    Finished { gave_up: bool },
}

/// One termination in progress. Feed it the time and whether the tree is
/// empty; it answers with the next [`Step`].
#[derive(Debug, Clone)]
pub struct Escalation {
    policy: Policy,
    phase: Phase,
    killed: bool,
    leader_exited: bool,
}

impl Escalation {
    /// A termination that has not sent anything yet.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            phase: Phase::NotStarted,
            killed: false,
            leader_exited: false,
        }
    }

    /// The leader has exited: with [`GraceEnds::AtLeaderExit`], the grace is
    /// over (the next step is `SIGKILL` to what is left, if anything is).
    pub fn leader_exited(&mut self) {
        self.leader_exited = true;
    }

    /// Whether `SIGKILL` has been (or is being) sent.
    pub fn escalated(&self) -> bool {
        self.killed
    }

    /// Whether the escalation is in its `SIGKILL` phase, where members that
    /// appear late must be killed on sight.
    pub fn killing(&self) -> bool {
        matches!(self.phase, Phase::Killing { .. })
    }

    /// The next step, given the current time and whether the tree is empty.
    pub fn next(&mut self, now: Instant, tree_empty: bool) -> Step {
        if tree_empty && !matches!(self.phase, Phase::Finished { gave_up: true }) {
            self.phase = Phase::Finished { gave_up: false };
            return Step::Done;
        }
        match self.phase {
            Phase::NotStarted => {
                let no_grace = self.policy.grace.is_zero()
                    || (self.policy.signal.is_none() && self.leader_ended_grace());
                if self.policy.signal == Some(Signal::KILL) || no_grace {
                    return self.kill(now);
                }
                let deadline = deadline_after(now, self.policy.grace);
                self.phase = Phase::Graceful { deadline };
                match self.policy.signal {
                    Some(signal) => Step::Signal(signal),
                    // No first signal: the grace runs, nothing is sent.
                    None => self.wait_in_grace(deadline),
                }
            }
            Phase::Graceful { deadline } if now >= deadline || self.leader_ended_grace() => {
                self.kill(now)
            }
            Phase::Graceful { deadline } => self.wait_in_grace(deadline),
            Phase::Killing { deadline } if now >= deadline => {
                self.phase = Phase::Finished { gave_up: true };
                Step::GiveUp
            }
            Phase::Killing { deadline } => Step::WaitUntil(deadline),
            Phase::Finished { gave_up: true } => Step::GiveUp,
            Phase::Finished { gave_up: false } => Step::Done,
        }
    }

    /// Whether the leader's exit has ended the grace.
    fn leader_ended_grace(&self) -> bool {
        self.leader_exited && self.policy.grace_ends == GraceEnds::AtLeaderExit
    }

    /// The wait of a grace that ends at `deadline`, or also at the leader's
    /// exit.
    fn wait_in_grace(&self, deadline: Instant) -> Step {
        match self.policy.grace_ends {
            GraceEnds::AtLeaderExit => Step::WaitForLeader(deadline),
            GraceEnds::WhenElapsed => Step::WaitUntil(deadline),
        }
    }

    fn kill(&mut self, now: Instant) -> Step {
        self.killed = true;
        self.phase = Phase::Killing {
            deadline: deadline_after(now, self.policy.final_bound),
        };
        Step::Kill
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(grace_ms: u64, final_ms: u64) -> Policy {
        Policy {
            signal: Some(Signal::TERM),
            grace: Duration::from_millis(grace_ms),
            grace_ends: GraceEnds::WhenElapsed,
            final_bound: Duration::from_millis(final_ms),
        }
    }

    #[test]
    fn empty_tree_needs_nothing() {
        let mut escalation = Escalation::new(policy(100, 50));
        assert_eq!(escalation.next(Instant::now(), true), Step::Done);
        assert!(!escalation.escalated());
    }

    #[test]
    fn tree_that_obeys_the_signal_is_never_killed() {
        let t0 = Instant::now();
        let mut e = Escalation::new(policy(100, 50));
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        assert_eq!(
            e.next(t0, false),
            Step::WaitUntil(t0 + Duration::from_millis(100))
        );
        assert_eq!(e.next(t0 + Duration::from_millis(30), true), Step::Done);
        assert!(!e.escalated());
    }

    #[test]
    fn grace_expiry_escalates_then_final_bound_gives_up() {
        let t0 = Instant::now();
        let mut e = Escalation::new(policy(100, 50));
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(e.next(t1, false), Step::Kill);
        assert!(e.escalated() && e.killing());
        assert_eq!(
            e.next(t1, false),
            Step::WaitUntil(t1 + Duration::from_millis(50))
        );
        let t2 = t1 + Duration::from_millis(50);
        assert_eq!(e.next(t2, false), Step::GiveUp);
        assert!(e.escalated() && !e.killing());
        // Giving up is final, even if the tree empties later.
        assert_eq!(e.next(t2, true), Step::GiveUp);
    }

    #[test]
    fn zero_grace_or_kill_signal_kills_at_once() {
        let t0 = Instant::now();
        let mut zero = Escalation::new(policy(0, 50));
        assert_eq!(zero.next(t0, false), Step::Kill);
        let mut kill = Escalation::new(Policy {
            signal: Some(Signal::KILL),
            ..policy(1000, 50)
        });
        assert_eq!(kill.next(t0, false), Step::Kill);
        assert_eq!(
            kill.next(t0, false),
            Step::WaitUntil(t0 + Duration::from_millis(50))
        );
    }

    #[test]
    fn emptied_during_kill_is_done() {
        let t0 = Instant::now();
        let mut e = Escalation::new(policy(0, 50));
        assert_eq!(e.next(t0, false), Step::Kill);
        assert_eq!(e.next(t0 + Duration::from_millis(1), true), Step::Done);
        assert!(!e.killing());
        assert!(
            e.escalated(),
            "a kill that worked still counts as escalation"
        );
    }

    /// GNU's `-s 0`: nothing is sent at first, `SIGKILL` after the grace.
    #[test]
    fn no_first_signal_only_starts_the_grace() {
        let t0 = Instant::now();
        let mut e = Escalation::new(Policy {
            signal: None,
            ..policy(100, 50)
        });
        let end_of_grace = t0 + Duration::from_millis(100);
        assert_eq!(e.next(t0, false), Step::WaitUntil(end_of_grace));
        assert!(!e.escalated());
        assert_eq!(e.next(end_of_grace, false), Step::Kill);
        let mut obeys = Escalation::new(Policy {
            signal: None,
            ..policy(100, 50)
        });
        assert_eq!(obeys.next(t0, false), Step::WaitUntil(end_of_grace));
        assert_eq!(obeys.next(t0, true), Step::Done);
    }

    /// The whole escalation never asks to wait past grace + final bound.
    #[test]
    fn waits_are_bounded_by_policy() {
        let t0 = Instant::now();
        let p = policy(70, 30);
        let mut e = Escalation::new(p);
        let mut now = t0;
        for _ in 0..10 {
            match e.next(now, false) {
                Step::WaitUntil(deadline) => {
                    assert!(deadline <= t0 + p.bound());
                    now = deadline;
                }
                Step::GiveUp => break,
                _ => {}
            }
        }
        assert_eq!(now, t0 + p.bound());
    }

    /// `Duration::MAX` as grace or final bound means "no deadline": the
    /// escalation waits far into the future instead of panicking.
    #[test]
    fn duration_max_never_overflows() {
        let t0 = Instant::now();
        let p = Policy {
            signal: Some(Signal::TERM),
            grace: Duration::MAX,
            grace_ends: GraceEnds::WhenElapsed,
            final_bound: Duration::MAX,
        };
        assert_eq!(p.bound(), Duration::MAX);
        let mut e = Escalation::new(p);
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        let far =
            |step| matches!(step, Step::WaitUntil(d) if d > t0 + Duration::from_secs(86_400 * 365));
        assert!(far(e.next(t0, false)));
        let mut kill = Escalation::new(Policy {
            signal: Some(Signal::KILL),
            ..p
        });
        assert_eq!(kill.next(t0, false), Step::Kill);
        assert!(far(kill.next(t0, false)));
        assert_eq!(kill.next(t0, true), Step::Done);
    }

    /// A grace that ends at the leader's exit, with no time limit (GNU
    /// `timeout` without `-k`).
    fn until_the_leader_exits(final_ms: u64) -> Policy {
        Policy {
            grace: Duration::MAX,
            grace_ends: GraceEnds::AtLeaderExit,
            ..policy(0, final_ms)
        }
    }

    /// However long the leader takes to exit after the signal, nothing is
    /// killed meanwhile; when it exits, what is left gets `SIGKILL` at once,
    /// then the final bound applies.
    #[test]
    fn a_grace_that_ends_at_the_leaders_exit_kills_only_then() {
        let t0 = Instant::now();
        let mut e = Escalation::new(until_the_leader_exits(50));
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        let far = |step| matches!(step, Step::WaitForLeader(d) if d > t0 + Duration::from_secs(86_400 * 365));
        assert!(far(e.next(t0, false)));
        // An hour later the leader still runs: still no SIGKILL.
        let hour = t0 + Duration::from_secs(3600);
        assert!(far(e.next(hour, false)));
        assert!(!e.escalated());
        e.leader_exited();
        assert_eq!(e.next(hour, false), Step::Kill);
        assert!(e.escalated() && e.killing());
        let end = hour + Duration::from_millis(50);
        assert_eq!(e.next(hour, false), Step::WaitUntil(end));
        assert_eq!(e.next(end, false), Step::GiveUp);
    }

    /// A tree that empties with its leader is done, nothing killed.
    #[test]
    fn a_tree_gone_with_its_leader_is_not_killed() {
        let t0 = Instant::now();
        let mut e = Escalation::new(until_the_leader_exits(50));
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        e.leader_exited();
        assert_eq!(e.next(t0, true), Step::Done);
        assert!(!e.escalated());
    }

    /// With a time limit too, whichever comes first ends the grace.
    #[test]
    fn the_grace_ends_at_the_leaders_exit_or_when_elapsed_whichever_first() {
        let t0 = Instant::now();
        let bounded = Policy {
            grace_ends: GraceEnds::AtLeaderExit,
            ..policy(100, 50)
        };
        let end_of_grace = t0 + Duration::from_millis(100);
        let mut elapsed = Escalation::new(bounded);
        assert_eq!(elapsed.next(t0, false), Step::Signal(Signal::TERM));
        assert_eq!(elapsed.next(t0, false), Step::WaitForLeader(end_of_grace));
        assert_eq!(elapsed.next(end_of_grace, false), Step::Kill);
        let mut exited = Escalation::new(bounded);
        assert_eq!(exited.next(t0, false), Step::Signal(Signal::TERM));
        exited.leader_exited();
        assert_eq!(
            exited.next(t0 + Duration::from_millis(10), false),
            Step::Kill
        );
    }

    /// By default the leader's exit changes nothing: the rest of the tree
    /// gets the whole grace.
    #[test]
    fn by_default_the_leaders_exit_does_not_shorten_the_grace() {
        let t0 = Instant::now();
        let mut e = Escalation::new(policy(100, 50));
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        e.leader_exited();
        let end_of_grace = t0 + Duration::from_millis(100);
        assert_eq!(e.next(t0, false), Step::WaitUntil(end_of_grace));
        assert_eq!(e.next(end_of_grace, false), Step::Kill);
    }

    /// A leader gone before the termination starts (it left members
    /// behind): the first signal, if any, then `SIGKILL` at once.
    #[test]
    fn a_leader_gone_before_the_start_leaves_no_grace() {
        let t0 = Instant::now();
        let mut e = Escalation::new(until_the_leader_exits(50));
        e.leader_exited();
        assert_eq!(e.next(t0, false), Step::Signal(Signal::TERM));
        assert_eq!(e.next(t0, false), Step::Kill);
        let mut silent = Escalation::new(Policy {
            signal: None,
            ..until_the_leader_exits(50)
        });
        silent.leader_exited();
        assert_eq!(silent.next(t0, false), Step::Kill);
    }

    /// GNU's `-s 0` without `-k`: nothing sent, the grace lasts until the
    /// leader exits.
    #[test]
    fn no_first_signal_waits_for_the_leader() {
        let t0 = Instant::now();
        let mut e = Escalation::new(Policy {
            signal: None,
            ..until_the_leader_exits(50)
        });
        assert!(matches!(e.next(t0, false), Step::WaitForLeader(_)));
        e.leader_exited();
        assert_eq!(e.next(t0 + Duration::from_secs(9), false), Step::Kill);
    }
}
