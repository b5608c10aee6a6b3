//! The termination loop: the pure [`Escalation`] driven against a tree, as
//! [`terminate`] does for every call. The tree is reached through a small
//! trait, [`Members`], so the loop is unit-tested against a fake tree with
//! paused time (as tokio tests its reaper against a `Kill` trait), and the
//! backends are tested with real processes.

use std::{future::Future, io, pin::pin};

use tokio::{sync::mpsc, time::Instant};

use crate::{
    command::OnSignal,
    contain::Tree,
    identity::{Ending, ProcessInfo},
    outcome::{CleanupReport, SignalSent},
    signal::Signal,
    terminate::{Escalation, Policy, Step},
};

/// What the termination loop needs from a tree.
pub(crate) trait Members {
    /// Whether no member is running.
    async fn is_empty(&mut self) -> io::Result<bool>;
    /// Sends `signal` to every member: how many, or `None` where the kernel
    /// reaches them without naming them.
    async fn signal(&mut self, signal: Signal) -> io::Result<Option<usize>>;
    /// Waits until the tree is empty (true) or `deadline` passes (false);
    /// with `kill_late`, members that appear meanwhile are killed on sight.
    /// Cancel safe without `kill_late`: the loop drops the wait when the
    /// leader exits first, and the tree is as it was.
    async fn wait_empty(&mut self, deadline: Instant, kill_late: bool) -> io::Result<bool>;
    /// The running members, for the report.
    fn members(&mut self) -> Vec<ProcessInfo>;
    /// How far `member` has come to its end (see [`Ending`]).
    fn ending(&self, member: &ProcessInfo) -> Ending;
    /// Whether members were seen exiting that no scan could name.
    fn members_exiting(&self) -> bool;
    /// Whether, since the first signal, a member exited that no walk had
    /// seen running.
    fn members_hopped(&self) -> bool;
    /// Processes that may be members but could not be told yet.
    fn undecided(&self) -> usize;
}

impl Members for Tree {
    async fn is_empty(&mut self) -> io::Result<bool> {
        Tree::is_empty_shared(self).await
    }

    async fn signal(&mut self, signal: Signal) -> io::Result<Option<usize>> {
        Tree::signal_shared(self, signal).await
    }

    async fn wait_empty(&mut self, deadline: Instant, kill_late: bool) -> io::Result<bool> {
        Tree::wait_empty(self, deadline, kill_late).await
    }

    fn members(&mut self) -> Vec<ProcessInfo> {
        Tree::members(self)
    }

    fn ending(&self, member: &ProcessInfo) -> Ending {
        crate::identity::ending(member.pid, member.start_time)
    }

    fn members_exiting(&self) -> bool {
        Tree::members_exiting(self)
    }

    fn members_hopped(&self) -> bool {
        Tree::members_hopped(self)
    }

    fn undecided(&self) -> usize {
        Tree::undecided(self)
    }
}

/// Applies `policy` to `tree` until it is empty or the final bound passes,
/// recording every signal (with its time since `started`), whether it
/// escalated, survivors and notes in `report`; `on_signal` hears of each
/// signal just before it is sent (`None`: no first signal, the grace starts).
/// `leader_exit` resolves once the leader has exited (at once if it already
/// has): it is awaited only in a grace that ends there.
///
/// What comes through `passed` while the loop waits (before `SIGKILL`) is
/// sent to the tree at once, heard by `on_signal` and recorded as the
/// policy's signals are, and the wait goes on to the same deadline: as GNU
/// `timeout` passes on every signal it receives, its kill-after timer not
/// reset.
pub(crate) async fn terminate(
    tree: &mut impl Members,
    leader_exit: impl Future<Output = ()>,
    policy: Policy,
    started: Instant,
    report: &mut CleanupReport,
    on_signal: &OnSignal,
    passed: &mut mpsc::UnboundedReceiver<Signal>,
) {
    let mut escalation = Escalation::new(policy);
    // Whether the last wait ended with the tree found empty: that is the
    // answer, without asking again (for a scanned tree, one walk less).
    let mut found_empty = false;
    let mut leader_exit = pin!(leader_exit);
    let mut leader_gone = false;
    let mut first = true;
    let mut passed_on = 0;
    loop {
        let empty = found_empty
            || tree.is_empty().await.unwrap_or_else(|error| {
                report
                    .notes
                    .push(format!("checking the tree failed: {error}"));
                false
            });
        found_empty = false;
        let step = escalation.next(Instant::now(), empty);
        let waits = matches!(step, Step::WaitUntil(_) | Step::WaitForLeader(_));
        if std::mem::take(&mut first) && waits {
            // The policy has no first signal: the grace starts here.
            on_signal.call(None);
        }
        match step {
            Step::Signal(signal) => {
                on_signal.call(Some(signal));
                send(tree, signal, started, report).await;
            }
            Step::Kill => {
                on_signal.call(Some(Signal::KILL));
                send(tree, Signal::KILL, started, report).await;
            }
            Step::WaitForLeader(deadline) if !leader_gone => tokio::select! {
                biased;
                Some(signal) = passed.recv() => {
                    passed_on += 1;
                    pass_on(tree, signal, started, report, on_signal, passed_on).await;
                }
                empty = wait(tree, deadline, false, report) => found_empty = empty,
                () = &mut leader_exit => {
                    // Never polled again: it has resolved.
                    leader_gone = true;
                    escalation.leader_exited();
                }
            },
            Step::WaitUntil(deadline) | Step::WaitForLeader(deadline) => {
                let killing = escalation.killing();
                // Cancel safe only without `kill_late`: after `SIGKILL`,
                // nothing is passed on.
                tokio::select! {
                    biased;
                    Some(signal) = passed.recv(), if !killing => {
                        passed_on += 1;
                        pass_on(tree, signal, started, report, on_signal, passed_on).await;
                    }
                    empty = wait(tree, deadline, killing, report) => found_empty = empty,
                }
            }
            Step::Done => break,
            Step::GiveUp => {
                give_up(tree, report);
                break;
            }
        }
    }
    // A tree that emptied only because what forked and exited faster than a
    // walk could name it stopped by itself (its time up) still had members
    // no walk saw: say so, as when the final bound passes.
    if tree.members_hopped() && !report.notes.iter().any(|note| note.contains(KEPT_FORKING)) {
        report.notes.push(format!(
            "{KEPT_FORKING} during the cleanup, faster than a /proc walk can name them (their \
             exits were seen, never them running): one may have escaped unnamed (the cgroup \
             backend holds such processes)"
        ));
    }
    if passed_on > PASSED_ON_LISTED {
        report.notes.push(format!(
            "{} more signal(s) received during the cleanup were passed on to the tree, not \
             listed",
            passed_on - PASSED_ON_LISTED
        ));
    }
    report.escalated = escalation.escalated();
}

/// How many signals passed on during the cleanup the report lists (a flood
/// of them must not grow it without bound): the rest are counted in a note.
const PASSED_ON_LISTED: usize = 16;

/// The start of the note that says members may have escaped unnamed.
const KEPT_FORKING: &str = "members kept forking and exiting";

/// Waits until `tree` is empty or `deadline` passes (see
/// [`Members::wait_empty`]); a failed wait is noted and sleeps until
/// `deadline`.
///
/// # Cancel safety
/// Cancel safe without `kill_late`, as [`Members::wait_empty`] is.
async fn wait(
    tree: &mut impl Members,
    deadline: Instant,
    kill_late: bool,
    report: &mut CleanupReport,
) -> bool {
    match tree.wait_empty(deadline, kill_late).await {
        Ok(empty) => empty,
        Err(error) => {
            report
                .notes
                .push(format!("waiting for the tree failed: {error}"));
            tokio::time::sleep_until(deadline).await;
            false
        }
    }
}

/// Sends the `nth` signal received during the cleanup to `tree`, as a
/// step's: listed with the report's signals up to [`PASSED_ON_LISTED`].
async fn pass_on(
    tree: &mut impl Members,
    signal: Signal,
    started: Instant,
    report: &mut CleanupReport,
    on_signal: &OnSignal,
    nth: usize,
) {
    tracing::debug!(%signal, "passed on during the cleanup");
    on_signal.call(Some(signal));
    if nth <= PASSED_ON_LISTED {
        send(tree, signal, started, report).await;
    } else if let Err(error) = tree.signal(signal).await {
        tracing::debug!(%signal, %error, "passing a signal on failed");
    }
}

/// Sends `signal` to `tree` and lists it in the report; then, unless it is
/// `SIGKILL` or a signal that stops or resumes, `SIGCONT` (not listed), as
/// GNU `timeout` does: a stopped member (`SIGSTOP`, `Ctrl-Z`) handles its
/// signal now, not at the `SIGKILL` a grace later.
async fn send(
    tree: &mut impl Members,
    signal: Signal,
    started: Instant,
    report: &mut CleanupReport,
) {
    let at = started.elapsed();
    match tree.signal(signal).await {
        Ok(delivered) => {
            tracing::debug!(%signal, ?delivered, "signal sent");
            report.signals.push(SignalSent {
                at,
                signal,
                delivered,
            });
        }
        Err(error) => report
            .notes
            .push(format!("sending {signal} failed: {error}")),
    }
    if signal != Signal::KILL
        && !signal.stops_or_resumes()
        && let Err(error) = tree.signal(Signal::CONT).await
    {
        tracing::debug!(%error, "SIGCONT after {signal} failed");
    }
}

/// The final bound passed: name the survivors, and say what could not be
/// named. A member still exiting then (killed, every thread past the point
/// where it runs code of its own, the kernel still releasing what it held:
/// a storm of hundreds on a starved machine) did not survive the kill: it is
/// named in a note, not as a survivor; one gone since it was listed is not
/// named at all.
fn give_up(tree: &mut impl Members, report: &mut CleanupReport) {
    let (mut survivors, mut dying) = (Vec::new(), Vec::new());
    for member in tree.members() {
        match tree.ending(&member) {
            Ending::Running => survivors.push(member),
            Ending::Dying => dying.push(member),
            Ending::Gone => {}
        }
    }
    report.survivors = survivors;
    if !dying.is_empty() {
        report.notes.push(dying_note(&dying));
    }
    if tree.members_exiting() {
        report.notes.push(format!(
            "{KEPT_FORKING} until the final bound, faster than a /proc walk can name them: one \
             may have escaped unnamed (the cgroup backend holds such processes)"
        ));
    }
    let undecided = tree.undecided();
    if undecided > 0 {
        report.notes.push(format!(
            "{undecided} process(es) started while another spawn of this process was in \
             progress, and could not be told from its leader: left alone"
        ));
    }
    tracing::warn!(
        survivors = report.survivors.len(),
        "final bound passed with survivors"
    );
}

/// The note naming the members still exiting at the final bound (the first
/// few; a storm may leave hundreds).
fn dying_note(dying: &[ProcessInfo]) -> String {
    const NAMED: usize = 5;
    let mut named: Vec<String> = dying
        .iter()
        .take(NAMED)
        .map(|p| format!("{} ({})", p.pid, p.command))
        .collect();
    if dying.len() > NAMED {
        named.push(format!("and {} more", dying.len() - NAMED));
    }
    format!(
        "{} member(s) were killed and still exiting when the final bound passed (the kernel \
         was releasing what they held; they run nothing again), so they are not survivors: {}",
        dying.len(),
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{backend::Backend, outcome::Trigger, terminate::GraceEnds};

    /// A made-up tree: which signal ends it (if any), after how long.
    struct Fake {
        dies_of: Option<Signal>,
        /// When the fatal signal arrived.
        dying_since: Option<Instant>,
        takes: Duration,
        sent: Vec<Signal>,
        fail_checks: bool,
        /// Whether a member sent its fatal signal shows as exiting until it
        /// is gone (a storm the kernel is slow to tear down).
        exits_slowly: bool,
    }

    impl Fake {
        fn new(dies_of: Option<Signal>, takes: Duration) -> Self {
            Self {
                dies_of,
                dying_since: None,
                takes,
                sent: Vec::new(),
                fail_checks: false,
                exits_slowly: false,
            }
        }

        fn gone(&self) -> bool {
            self.dying_since
                .is_some_and(|since| Instant::now() >= since + self.takes)
        }
    }

    impl Members for Fake {
        async fn is_empty(&mut self) -> io::Result<bool> {
            if self.fail_checks {
                return Err(io::Error::other("no /proc"));
            }
            Ok(self.gone())
        }

        async fn signal(&mut self, signal: Signal) -> io::Result<Option<usize>> {
            self.sent.push(signal);
            let fatal = self
                .dies_of
                .is_some_and(|s| s == signal || signal == Signal::KILL);
            if fatal && self.dying_since.is_none() {
                self.dying_since = Some(Instant::now());
            }
            Ok(Some(1))
        }

        async fn wait_empty(&mut self, deadline: Instant, _kill_late: bool) -> io::Result<bool> {
            // Straight to the next change: a far deadline is one sleep.
            let gone_at = self.dying_since.map(|since| since + self.takes);
            tokio::time::sleep_until(gone_at.map_or(deadline, |at| at.min(deadline))).await;
            Ok(self.gone())
        }

        fn members(&mut self) -> Vec<ProcessInfo> {
            if self.gone() {
                return Vec::new();
            }
            vec![ProcessInfo {
                pid: 42,
                start_time: 7,
                command: "fake".to_owned(),
            }]
        }

        fn ending(&self, _member: &ProcessInfo) -> Ending {
            if self.exits_slowly && self.dying_since.is_some() {
                Ending::Dying
            } else {
                Ending::Running
            }
        }

        fn members_exiting(&self) -> bool {
            false
        }

        fn members_hopped(&self) -> bool {
            false
        }

        fn undecided(&self) -> usize {
            0
        }
    }

    fn report() -> CleanupReport {
        CleanupReport {
            backend: Backend::Group,
            trigger: Trigger::TimedOut,
            signals: Vec::new(),
            escalated: false,
            survivors: Vec::new(),
            moved_out: Vec::new(),
            released: Vec::new(),
            cgroup: None,
            cgroup_not_removed: false,
            run_time: Duration::ZERO,
            cleanup_time: Duration::ZERO,
            notes: Vec::new(),
            limits: None,
        }
    }

    /// The ledger record of a tree outlives it with survivors, and with a
    /// leaf an ended tree left behind (its members still exiting at the final
    /// bound: none survived, but the leaf must still be removed later); never
    /// for a leaf that released processes keep.
    #[test]
    fn a_leaf_left_by_an_ended_tree_keeps_its_record() {
        use crate::supervise::keeps_record;
        let clean = report();
        assert!(!keeps_record(&clean, false));
        let mut left = report();
        left.cgroup_not_removed = true;
        assert!(keeps_record(&left, false));
        assert!(!keeps_record(&left, true));
        let mut survived = report();
        survived.survivors.push(ProcessInfo {
            pid: 1,
            start_time: 1,
            command: String::new(),
        });
        assert!(keeps_record(&survived, false));
    }

    const POLICY: Policy = Policy {
        signal: Some(Signal::TERM),
        grace: Duration::from_secs(5),
        grace_ends: GraceEnds::WhenElapsed,
        final_bound: Duration::from_secs(2),
    };

    async fn run(tree: &mut Fake) -> (CleanupReport, Duration) {
        let started = Instant::now();
        let mut report = report();
        let leader_exit = std::future::pending();
        terminate(
            tree,
            leader_exit,
            POLICY,
            started,
            &mut report,
            &OnSignal::default(),
            &mut mpsc::unbounded_channel().1,
        )
        .await;
        (report, started.elapsed())
    }

    /// `policy` applied to `tree`, whose leader exits `leader_lives` after
    /// the termination starts.
    async fn run_with_leader(
        tree: &mut Fake,
        policy: Policy,
        leader_lives: Duration,
    ) -> (CleanupReport, Duration) {
        let started = Instant::now();
        let mut report = report();
        let leader_exit = tokio::time::sleep(leader_lives);
        terminate(
            tree,
            leader_exit,
            policy,
            started,
            &mut report,
            &OnSignal::default(),
            &mut mpsc::unbounded_channel().1,
        )
        .await;
        (report, started.elapsed())
    }

    /// GNU `timeout` without `-k`: no time limit, the grace ends when the
    /// leader exits.
    const UNTIL_THE_LEADER_EXITS: Policy = Policy {
        grace: Duration::MAX,
        grace_ends: GraceEnds::AtLeaderExit,
        ..POLICY
    };

    fn signals(report: &CleanupReport) -> Vec<(Signal, Duration)> {
        report.signals.iter().map(|s| (s.signal, s.at)).collect()
    }

    /// A tree that obeys the signal gets that signal only and is done when
    /// it empties: no `SIGKILL`, no survivors.
    #[tokio::test(start_paused = true)]
    async fn a_tree_that_obeys_gets_only_the_signal() {
        let mut tree = Fake::new(Some(Signal::TERM), Duration::from_millis(300));
        let (report, took) = run(&mut tree).await;
        assert_eq!(signals(&report), vec![(Signal::TERM, Duration::ZERO)]);
        assert!(!report.escalated);
        assert!(report.survivors.is_empty());
        assert!(
            took >= Duration::from_millis(300) && took < POLICY.grace,
            "{took:?}"
        );
    }

    /// A tree that ignores the signal gets `SIGKILL` when the grace ends.
    #[tokio::test(start_paused = true)]
    async fn a_tree_that_ignores_the_signal_is_killed_after_the_grace() {
        let mut tree = Fake::new(None, Duration::ZERO);
        tree.dies_of = Some(Signal::KILL);
        let (report, _) = run(&mut tree).await;
        assert_eq!(
            signals(&report),
            vec![(Signal::TERM, Duration::ZERO), (Signal::KILL, POLICY.grace)]
        );
        assert!(report.escalated);
        assert!(report.survivors.is_empty());
    }

    /// Signals received during the grace are sent as they come, listed and
    /// heard as the policy's are, and leave the grace as it was: `SIGKILL`
    /// still comes when it ends (GNU's kill-after timer, not reset by a
    /// later signal). None is sent after `SIGKILL`.
    #[tokio::test(start_paused = true)]
    async fn signals_received_during_the_grace_are_passed_on_without_resetting_it() {
        use std::sync::{Arc, Mutex};
        let mut tree = Fake::new(Some(Signal::KILL), Duration::ZERO);
        let (sender, mut passed) = mpsc::unbounded_channel();
        let second = Duration::from_secs(1);
        let third = Duration::from_secs(3);
        tokio::spawn(async move {
            tokio::time::sleep(second).await;
            sender.send(Signal::INT).expect("send");
            tokio::time::sleep(third - second).await;
            sender.send(Signal::HUP).expect("send");
            tokio::time::sleep(POLICY.grace).await;
            // After the kill: not sent.
            let _ = sender.send(Signal::USR1);
        });
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let mut command = crate::command::Command::new("x");
        command.on_signal(move |signal| {
            sink.lock().expect("log").push(signal);
        });
        let started = Instant::now();
        let mut report = report();
        terminate(
            &mut tree,
            std::future::pending(),
            POLICY,
            started,
            &mut report,
            &command.on_signal,
            &mut passed,
        )
        .await;
        assert_eq!(
            signals(&report),
            vec![
                (Signal::TERM, Duration::ZERO),
                (Signal::INT, second),
                (Signal::HUP, third),
                (Signal::KILL, POLICY.grace),
            ]
        );
        assert_eq!(
            *log.lock().expect("log"),
            vec![
                Some(Signal::TERM),
                Some(Signal::INT),
                Some(Signal::HUP),
                Some(Signal::KILL)
            ]
        );
        // Each but `SIGKILL` followed by a `SIGCONT`, not listed.
        assert_eq!(
            tree.sent,
            vec![
                Signal::TERM,
                Signal::CONT,
                Signal::INT,
                Signal::CONT,
                Signal::HUP,
                Signal::CONT,
                Signal::KILL
            ]
        );
    }

    /// The callback hears each signal as it is sent, and `None` where the
    /// policy has no first signal (GNU's `-s 0`, `sending signal EXIT`).
    #[tokio::test(start_paused = true)]
    async fn on_signal_hears_each_signal_when_it_is_sent() {
        use std::sync::{Arc, Mutex};
        for (first, heard) in [
            (
                Some(Signal::TERM),
                vec![Some(Signal::TERM), Some(Signal::KILL)],
            ),
            (None, vec![None, Some(Signal::KILL)]),
        ] {
            let log = Arc::new(Mutex::new(Vec::new()));
            let sink = Arc::clone(&log);
            let mut command = crate::command::Command::new("x");
            command.on_signal(move |signal| {
                sink.lock().expect("log").push((signal, Instant::now()));
            });
            let mut tree = Fake::new(Some(Signal::KILL), Duration::ZERO);
            let started = Instant::now();
            let policy = Policy {
                signal: first,
                ..POLICY
            };
            let mut report = report();
            let leader_exit = std::future::pending();
            terminate(
                &mut tree,
                leader_exit,
                policy,
                started,
                &mut report,
                &command.on_signal,
                &mut mpsc::unbounded_channel().1,
            )
            .await;
            let log = log.lock().expect("log").clone();
            let signals: Vec<Option<Signal>> = log.iter().map(|&(s, _)| s).collect();
            assert_eq!(signals, heard);
            let times: Vec<Duration> = log.iter().map(|&(_, at)| at - started).collect();
            assert_eq!(times, vec![Duration::ZERO, POLICY.grace], "as it goes");
        }
    }

    /// A tree nothing ends is given up at grace + final bound, with its
    /// members named as survivors.
    #[tokio::test(start_paused = true)]
    async fn an_unkillable_tree_is_given_up_with_survivors_named() {
        let mut tree = Fake::new(None, Duration::ZERO);
        let (report, took) = run(&mut tree).await;
        assert_eq!(took, POLICY.grace + POLICY.final_bound);
        let pids: Vec<i32> = report.survivors.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![42]);
        assert!(report.escalated);
    }

    /// A member killed and still exiting when the final bound passes (the
    /// kernel slow to tear it down) did not survive: the call returns at the
    /// bound, names it in a note, and not as a survivor.
    #[tokio::test(start_paused = true)]
    async fn a_member_still_exiting_at_the_final_bound_is_no_survivor() {
        let mut tree = Fake::new(Some(Signal::KILL), Duration::from_secs(60));
        tree.exits_slowly = true;
        let (report, took) = run(&mut tree).await;
        assert_eq!(took, POLICY.grace + POLICY.final_bound);
        assert!(report.survivors.is_empty(), "{:?}", report.survivors);
        assert!(
            report.notes.iter().any(
                |n| n.starts_with("1 member(s) were killed and still exiting")
                    && n.ends_with(": 42 (fake)")
            ),
            "{:?}",
            report.notes
        );
    }

    /// An empty tree is signalled nothing.
    #[tokio::test(start_paused = true)]
    async fn an_empty_tree_is_signalled_nothing() {
        let mut tree = Fake::new(Some(Signal::TERM), Duration::ZERO);
        tree.dying_since = Some(Instant::now());
        let (report, took) = run(&mut tree).await;
        assert!(report.signals.is_empty(), "{:?}", report.signals);
        assert_eq!(took, Duration::ZERO);
    }

    /// A tree that cannot be checked is still signalled, escalated and
    /// given up on time, and the failure is noted.
    #[tokio::test(start_paused = true)]
    async fn a_failing_check_is_noted_and_the_bound_still_holds() {
        let mut tree = Fake::new(None, Duration::ZERO);
        tree.fail_checks = true;
        let (report, took) = run(&mut tree).await;
        assert_eq!(took, POLICY.grace + POLICY.final_bound);
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("checking the tree failed")),
            "{:?}",
            report.notes
        );
        assert_eq!(tree.sent, vec![Signal::TERM, Signal::CONT, Signal::KILL]);
    }

    /// A leader slow to stop (longer than the default grace) is not killed:
    /// what is left of the tree gets `SIGKILL` the moment it exits.
    #[tokio::test(start_paused = true)]
    async fn a_grace_until_the_leader_exits_kills_the_rest_when_it_does() {
        let mut tree = Fake::new(Some(Signal::KILL), Duration::ZERO);
        let leader_lives = Duration::from_secs(6);
        let (report, took) = run_with_leader(&mut tree, UNTIL_THE_LEADER_EXITS, leader_lives).await;
        assert_eq!(
            signals(&report),
            vec![(Signal::TERM, Duration::ZERO), (Signal::KILL, leader_lives)]
        );
        assert_eq!(took, leader_lives);
        assert!(report.escalated);
        assert!(report.survivors.is_empty());
    }

    /// After the leader's exit the final bound applies as usual.
    #[tokio::test(start_paused = true)]
    async fn after_the_leaders_exit_the_final_bound_applies() {
        let mut tree = Fake::new(None, Duration::ZERO);
        let leader_lives = Duration::from_secs(30);
        let (report, took) = run_with_leader(&mut tree, UNTIL_THE_LEADER_EXITS, leader_lives).await;
        assert_eq!(took, leader_lives + POLICY.final_bound);
        let pids: Vec<i32> = report.survivors.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![42]);
    }

    /// A tree that obeys the signal is never killed, its leader's exit
    /// notwithstanding; and by default the leader's exit does not shorten
    /// the grace.
    #[tokio::test(start_paused = true)]
    async fn the_leaders_exit_kills_only_what_is_left_and_only_if_asked() {
        let mut obeys = Fake::new(Some(Signal::TERM), Duration::from_secs(2));
        let until = Duration::from_secs(2);
        let (report, took) = run_with_leader(&mut obeys, UNTIL_THE_LEADER_EXITS, until).await;
        assert_eq!(signals(&report), vec![(Signal::TERM, Duration::ZERO)]);
        assert_eq!(took, until);
        let mut ignores = Fake::new(Some(Signal::KILL), Duration::ZERO);
        let early = Duration::from_secs(1);
        let (report, _) = run_with_leader(&mut ignores, POLICY, early).await;
        assert_eq!(
            signals(&report),
            vec![(Signal::TERM, Duration::ZERO), (Signal::KILL, POLICY.grace)]
        );
    }
}
