//! The termination policy as data, and the pure state machine that applies it.
//!
//! Escalation: send [`Policy::signal`] to the whole tree; if the tree is not
//! empty after [`Policy::grace`], send `SIGKILL` to the whole tree; if it is
//! still not empty after [`Policy::final_bound`], give up and report the
//! survivors. The driver in `supervise` asks [`Escalation::next`] what to do and
//! does it; this module never touches a process, so it is tested with plain
//! instants.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::signal::Signal;

/// How a tree is terminated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The first signal sent to every member (default `SIGTERM`). `None`
    /// sends nothing: the grace only starts (GNU `timeout -s 0`), and
    /// `SIGKILL` follows it.
    pub signal: Option<Signal>,
    /// How long members get to exit after [`Policy::signal`] before `SIGKILL`
    /// (default 5 s). Zero sends `SIGKILL` at once.
    #[serde(serialize_with = "crate::duration::secs")]
    pub grace: Duration,
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
            final_bound: Duration::from_secs(1),
        }
    }
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
}

impl Escalation {
    /// A termination that has not sent anything yet.
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            phase: Phase::NotStarted,
            killed: false,
        }
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
                if self.policy.signal == Some(Signal::KILL) || self.policy.grace.is_zero() {
                    return self.kill(now);
                }
                let deadline = deadline_after(now, self.policy.grace);
                self.phase = Phase::Graceful { deadline };
                match self.policy.signal {
                    Some(signal) => Step::Signal(signal),
                    // No first signal: the grace runs, nothing is sent.
                    None => Step::WaitUntil(deadline),
                }
            }
            Phase::Graceful { deadline } if now >= deadline => self.kill(now),
            Phase::Graceful { deadline } => Step::WaitUntil(deadline),
            Phase::Killing { deadline } if now >= deadline => {
                self.phase = Phase::Finished { gave_up: true };
                Step::GiveUp
            }
            Phase::Killing { deadline } => Step::WaitUntil(deadline),
            Phase::Finished { gave_up: true } => Step::GiveUp,
            Phase::Finished { gave_up: false } => Step::Done,
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
}
