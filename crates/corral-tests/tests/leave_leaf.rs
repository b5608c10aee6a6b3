//! Leaving the leaf: a member that may write another cgroup's `cgroup.procs`
//! (root can) moves itself out of its leaf cgroup, where neither
//! `cgroup.kill` nor `populated 0` sees it. corral remembers the members it
//! listed and ends such a one by identity, naming it in `moved_out`; a
//! command run as another user cannot leave at all.
//!
//! Needs the cgroup backend (root or a delegated subtree); the user tests
//! need root. Elsewhere they print `SKIPPED:` and pass.

mod common;
#[allow(dead_code)] // Only `in_child` and `runtime` are needed here.
#[path = "faults/support.rs"]
mod support;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use common::fixture_path;
use corral::{Backend, BackendChoice, Command, Error, Finished, GraceEnds, Outcome, OutputTap};
use corral_tests::{
    Bystander, Guard, Proc, READY_TIMEOUT, Scratch, cgroup_parent, is_root, parse_ready,
};
use tokio_util::sync::CancellationToken;

const GRACE: Duration = Duration::from_millis(300);
const FINAL: Duration = Duration::from_secs(1);
/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// `nobody` on Debian and most distributions.
const NOBODY: u32 = 65534;

/// A cgroup tree of `command` (the grace set; backend, final bound and
/// cancellation set here), cancelled once its readiness line is out.
struct Cancelled {
    finished: Finished,
    /// The processes on the readiness line.
    procs: Vec<Proc>,
    /// From the cancellation to the result.
    took: Duration,
    leaf: PathBuf,
    /// Kills `procs` on drop, if they are still alive.
    _cleanup: Guard,
}

/// Spawns and cancels `command` (see [`Cancelled`]); `None` (said as
/// skipped) without the cgroup backend.
async fn cancel_when_ready(mut command: Command) -> Option<Cancelled> {
    let token = CancellationToken::new();
    let command = command
        .backend(BackendChoice::Only(Backend::Cgroup))
        .final_bound(FINAL)
        .cancel_on(token.clone());
    let mut child = spawned(command.spawn())?;
    let leaf = child.cgroup().expect("a leaf").to_owned();
    let mut tap = child.stdout_tap().expect("captured");
    let procs = parse_ready(&first_line(&mut tap).await);
    let _cleanup = Guard::of(procs.clone());
    let started = std::time::Instant::now();
    token.cancel();
    let finished = child.wait().await.expect("a result");
    Some(Cancelled {
        finished,
        procs,
        took: started.elapsed(),
        leaf,
        _cleanup,
    })
}

/// `sh -c 'sh -c "$ESCAPER" & wait'`, with `$PARENT` the leaf's parent.
fn escaper_tree(escaper: &str, parent: &Path) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", "sh -c \"$ESCAPER\" & wait"])
        .env("ESCAPER", escaper)
        .env("PARENT", parent);
    command
}

/// The processes the report names as having left the leaf.
fn moved_out(finished: &Finished) -> Vec<Proc> {
    finished
        .report
        .moved_out
        .iter()
        .map(|p| Proc {
            pid: p.pid,
            start_time: p.start_time,
        })
        .collect()
}

/// The first line of output, once it is there.
async fn first_line(tap: &mut OutputTap) -> String {
    let ready = tokio::time::timeout(READY_TIMEOUT, tap.wait_for(|b| b.contains(&b'\n')))
        .await
        .expect("a first line in time");
    assert!(ready, "the command ended before its first line");
    String::from_utf8_lossy(&tap.snapshot())
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn spawned(result: Result<corral::Child, Error>) -> Option<corral::Child> {
    match result {
        Ok(child) => Some(child),
        Err(Error::BackendUnavailable { reason, .. }) => {
            println!("SKIPPED: the cgroup backend is not available here: {reason}");
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// Bounded, and nothing left in the leaf or outside it.
fn assert_contained(finished: &Finished, took: Duration, leaf: &std::path::Path) {
    assert!(
        took < GRACE + FINAL + SLACK,
        "the call took {took:?}: {:?}",
        finished.report
    );
    assert!(
        finished.report.survivors.is_empty(),
        "{:?}",
        finished.report
    );
    assert!(!finished.report.cgroup_not_removed, "{:?}", finished.report);
    assert!(
        !leaf.exists(),
        "the leaf {} was left behind",
        leaf.display()
    );
}

/// A member that moves itself into the parent cgroup when asked to stop (as
/// root it may): the tree is still ended, that process is killed by identity
/// and named in `moved_out`, not passed over as "no survivors". The member
/// then execs into `sleep`: still the same process, still ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_left_the_leaf_is_ended_and_reported() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let bystander = Bystander::spawn(fixture_path());
    // The leader starts the escaper and waits; the escaper, on SIGTERM,
    // writes 0 (itself) to the parent's cgroup.procs and becomes `sleep`.
    let escaper = "trap 'echo 0 > \"$PARENT/cgroup.procs\"; exec sleep 60' TERM; \
                   sleep 60 & echo ready $$; wait";
    let mut command = escaper_tree(escaper, &parent);
    command.grace(GRACE);
    let Some(run) = cancel_when_ready(command).await else {
        return;
    };
    let Cancelled {
        finished,
        procs,
        took,
        leaf,
        _cleanup,
    } = run;
    let escaper = procs[0];

    assert_eq!(finished.outcome, Outcome::Cancelled);
    let left = moved_out(&finished);
    assert_eq!(
        left,
        [escaper],
        "the member that left the leaf is named: {:?}",
        finished.report
    );
    assert!(
        !escaper.is_alive(),
        "the member that left the leaf still runs"
    );
    assert!(finished.report.escalated, "{:?}", finished.report);
    assert_contained(&finished, took, &leaf);
    assert!(bystander.is_running(), "a bystander was killed");
}

/// A member that left the leaf early, long before the cleanup, while its
/// parent stayed inside: never listed in the leaf, it is found at the first
/// signal through its parent link, then ended and named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_left_early_is_found_through_its_parent() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let escaper = "echo 0 > \"$PARENT/cgroup.procs\" && echo ready $$ && exec sleep 60";
    let mut command = escaper_tree(escaper, &parent);
    command.grace(GRACE);
    let Some(run) = cancel_when_ready(command).await else {
        return;
    };
    let Cancelled {
        finished,
        procs,
        took,
        leaf,
        _cleanup,
    } = run;
    let escaper = procs[0];

    let left = moved_out(&finished);
    assert_eq!(left, [escaper], "{:?}", finished.report);
    assert!(!escaper.is_alive(), "the member that left early still runs");
    assert_contained(&finished, took, &leaf);
}

/// A child forked during the grace (after the first listing) that moves
/// itself out while its parent, which ignores SIGTERM, stays: found by the
/// second look just before `SIGKILL`, then ended and named. Each step waits
/// for the one before it: the member sets its trap before the leader says
/// it is ready, and the grace (30 s, ending when the leader exits) ends only
/// once the escaper has moved, since the leader exits on its mark. (With a
/// fixed 900 ms grace, the escaper, started in the member's TERM trap, had
/// not run yet when `SIGKILL` came under emulation on a loaded host.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_left_during_the_grace_is_found_before_sigkill() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let marks = Scratch::new("left-during-the-grace");
    // The escaper prints its identity, so the test can end it if corral does
    // not.
    let escaper = "echo 0 > \"$PARENT/cgroup.procs\" && \
                   echo escaped $$ $(cut -d' ' -f22 /proc/$$/stat) && : > \"$MOVED\" && \
                   exec sleep 60";
    let member = "trap 'sh -c \"$ESCAPER\" &' TERM; : > \"$HELD\"; \
                  while :; do sleep 0.05; done";
    let leader = "sh -c \"$MEMBER\" & \
                  trap 'until [ -e \"$MOVED\" ]; do sleep 0.01; done; exit 0' TERM; \
                  until [ -e \"$HELD\" ]; do sleep 0.01; done; echo ready $$; \
                  while :; do sleep 0.05; done";
    let mut command = Command::new("sh");
    command
        .args(["-c", leader])
        .env("MEMBER", member)
        .env("ESCAPER", escaper)
        .env("PARENT", &parent)
        .env("HELD", marks.path("held"))
        .env("MOVED", marks.path("moved"))
        .grace(Duration::from_secs(30))
        .grace_ends(GraceEnds::AtLeaderExit);
    let Some(Cancelled {
        finished,
        took,
        leaf,
        _cleanup,
        ..
    }) = cancel_when_ready(command).await
    else {
        return;
    };

    let stdout = finished.stdout.text();
    let escaped: Vec<Proc> = stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("escaped ")?.split_whitespace();
            Some(Proc {
                pid: words.next()?.parse().ok()?,
                start_time: words.next()?.parse().ok()?,
            })
        })
        .collect();
    let _cleanup_escaped = Guard::of(escaped.clone());
    assert_eq!(escaped.len(), 1, "the escaper ran: {stdout:?}");
    let left = moved_out(&finished);
    assert_eq!(left, [escaped[0]], "{:?}", finished.report);
    assert!(!escaped[0].is_alive(), "the escaper still runs");
    assert!(finished.report.escalated);
    assert_contained(&finished, took, &leaf);
}

/// A member that left the leaf and then forked: its child was never in the
/// leaf, never listed, but is found through its parent and ended too. A
/// sibling that ignores SIGTERM keeps the leaf populated until the escaper
/// has forked outside (it waits for the escaper's mark, then exits by
/// itself), so corral looks outside only after the fork, whatever the
/// machine's load: each step waits for the one before it (the sibling's
/// trap is set before the escaper says it is ready, and the test cancels
/// only then), and the grace never runs out. The escaper waits in short
/// sleeps, not beside a `sleep 60 &`: a child forked by a shell with a TERM
/// trap takes a TERM that lands between its fork and its `exec` in the
/// inherited trap, which the `exec` then drops, so that `sleep 60` would
/// keep the leaf populated for the whole grace (the flake the hunt found
/// under load: `docs/flakes.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_departed_member_forked_outside_is_ended_too() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let marks = Scratch::new("departed-forked");
    // Each step is also written to $STEPS, which a failure prints.
    let escaper = "trap 'if echo 0 > \"$PARENT/cgroup.procs\"; then echo moved; \
                   else echo not moved; fi >> \"$STEPS\"; sleep 60 & echo forked $! >> \"$STEPS\"; \
                   : > \"$FORKED\"; exec sleep 60' TERM; \
                   until [ -e \"$HELD\" ]; do sleep 0.01; done; \
                   echo ready $$; while :; do sleep 0.05; done";
    let holder = "trap '' TERM; : > \"$HELD\"; until [ -e \"$FORKED\" ]; do sleep 0.01; done; \
                  echo holder saw the fork >> \"$STEPS\"";
    let mut command = Command::new("sh");
    command
        .args(["-c", "sh -c \"$ESCAPER\" & sh -c \"$HOLDER\" & wait"])
        .env("ESCAPER", escaper)
        .env("HOLDER", holder)
        .env("HELD", marks.path("held"))
        .env("FORKED", marks.path("forked"))
        .env("STEPS", marks.path("steps"))
        .env("PARENT", &parent)
        .grace(Duration::from_secs(60)); // never reached: the holder exits
    let Some(run) = cancel_when_ready(command).await else {
        return;
    };
    let Cancelled {
        finished,
        procs,
        took,
        leaf,
        _cleanup,
    } = run;
    let escaper = procs[0];

    let left = moved_out(&finished);
    let _cleanup_left = Guard::of(left.clone());
    let steps = std::fs::read_to_string(marks.path("steps")).unwrap_or_default();
    assert!(
        finished
            .report
            .signals
            .iter()
            .all(|s| s.at < Duration::from_secs(30)),
        "the grace ran out: steps {steps:?}, {:?}",
        finished.report
    );
    assert_eq!(
        left.len(),
        2,
        "the member and its child: steps {steps:?}, {:?}",
        finished.report
    );
    assert!(left.contains(&escaper), "{:?}", finished.report);
    for p in &left {
        assert!(!p.is_alive(), "{p:?} still runs");
    }
    assert_contained(&finished, took, &leaf);
}

/// A departed member that forks without pause once it is out: corral stops
/// it before looking for its children, and each child before looking for
/// theirs, so none is forked between the look and the kill (a walk, then
/// `SIGKILL`, left one running about once in twelve runs). Each child
/// carries this test's token in its command line, so what survived is found
/// without signalling anything else. The grace is never reached: the leaf
/// empties once the member has left it (every other member dies of
/// `SIGTERM`), which ends the grace, so corral looks outside only after
/// the move. With a 300 ms grace, a member whose trap had not run by then
/// (the shell runs it after its current `sleep 0.05`, late under
/// emulation beside a loaded host) was killed inside the leaf, and the
/// round never tested a departure (docs/flakes.md (44)).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_departed_member_forking_in_a_loop_leaves_nothing() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let token = format!("60.{}{}", std::process::id(), 7);
    for _ in 0..5 {
        let escaper = "trap 'echo 0 > \"$PARENT/cgroup.procs\"; \
                       while :; do sleep \"$TOKEN\" & done' TERM; \
                       echo ready $$; while :; do sleep 0.05; done";
        let mut command = escaper_tree(escaper, &parent);
        // The grace is never reached: the leaf empties.
        command.env("TOKEN", &token).grace(Duration::from_secs(60));
        let Some(run) = cancel_when_ready(command).await else {
            return;
        };
        let left = moved_out(&run.finished);
        let _cleanup_left = Guard::of(left.clone());
        let survivors = corral_tests::proc::with_argument(&token);
        let _cleanup_survivors = Guard::of(survivors.clone());
        assert!(
            survivors.is_empty(),
            "{} process(es) the departed member forked still run: {:?}",
            survivors.len(),
            run.finished.report
        );
        assert!(left.contains(&run.procs[0]), "{:?}", run.finished.report);
        assert_contained(&run.finished, run.took, &run.leaf);
    }
}

/// A member that stays in the leaf and forks, in a loop, children that move
/// themselves out: a child forked after corral's last look at the leaf and
/// out of it before `cgroup.kill` is linked only to a member the kill ends,
/// and would run on, orphaned, outside. The leaf is frozen before that look
/// (`docs/design.md`, "Stop, then look, then kill").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_children_leave_in_a_loop_leaves_nothing() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let token = format!("60.{}{}", std::process::id(), 9);
    let deciding = format!("deciding-{}", std::process::id());
    for _ in 0..5 {
        // Each child moves out, waits a moment, and lives on (as `sleep
        // $TOKEN`) only if the breeder is gone meanwhile: one that corral
        // missed. The others exit, and the breeder forks one every few
        // milliseconds, so a few dozen are alive at once, not hundreds
        // (which, killed together under load, were still exiting at the
        // final bound).
        let child = "echo 0 > \"$PARENT/cgroup.procs\" || exit; sleep 0.1; \
                     [ \"$(cut -d' ' -f4 /proc/$$/stat)\" = \"$BREEDER\" ] && exit; \
                     exec sleep \"$TOKEN\"";
        // Ready once it is breeding (40 children forked), so the looks
        // meet children leaving.
        let breeder = "trap '' TERM; export BREEDER=$$; i=0; \
                       while :; do sh -c \"$CHILD\" \"$DECIDING\" & sleep 0.002; \
                         i=$((i + 1)); [ $i = 40 ] && echo ready $$; done";
        let mut command = Command::new("sh");
        command
            .args(["-c", breeder])
            .env("PARENT", &parent)
            .env("TOKEN", &token)
            .env("CHILD", child)
            .env("DECIDING", &deciding)
            .grace(Duration::from_millis(50));
        let Some(run) = cancel_when_ready(command).await else {
            return;
        };
        // Every child that was still deciding has decided (corral killed
        // it, or it exited, or it lives on as an escapee).
        assert!(
            corral_tests::wait_until(Duration::from_secs(10), || {
                corral_tests::proc::with_argument(&deciding).is_empty()
            }),
            "children still deciding 10 s after the call"
        );
        let left = moved_out(&run.finished);
        let _cleanup_left = Guard::of(left.clone());
        let survivors = corral_tests::proc::with_argument(&token);
        let _cleanup_survivors = Guard::of(survivors.clone());
        let report = &run.finished.report;
        assert!(
            survivors.is_empty(),
            "{} child(ren) that left the leaf still run; {} named in moved_out; \
             signals {:?}, notes {:?}",
            survivors.len(),
            report.moved_out.len(),
            report.signals,
            report.notes
        );
        assert_contained(&run.finished, run.took, &run.leaf);
    }
}

/// A kill without a grace looks at the leaf first too: children that moved
/// out of it while their parent stayed are found through that parent and
/// ended, not left running because no `SIGTERM` step listed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_without_grace_still_ends_children_that_left() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let token = format!("60.{}{}", std::process::id(), 11);
    // Three children move out and say so; then the parent says it is ready.
    let tree = "for i in 1 2 3; do \
                  sh -c 'echo 0 > \"$PARENT/cgroup.procs\" && echo out >> \"$MARKS\" \
                         && exec sleep \"$TOKEN\"' & \
                done; \
                while [ \"$(wc -l < \"$MARKS\")\" -lt 3 ]; do sleep 0.01; done; \
                echo ready $$; while :; do sleep 0.05; done";
    let scratch = Scratch::new("kill-without-grace");
    let marks = scratch.path("marks");
    std::fs::write(&marks, "").expect("the marks file");
    let mut command = Command::new("sh");
    command
        .args(["-c", tree])
        .env("PARENT", &parent)
        .env("TOKEN", &token)
        .env("MARKS", &marks)
        .grace(Duration::ZERO);
    let Some(run) = cancel_when_ready(command).await else {
        return;
    };
    let left = moved_out(&run.finished);
    let _cleanup_left = Guard::of(left.clone());
    let survivors = corral_tests::proc::with_argument(&token);
    let _cleanup_survivors = Guard::of(survivors.clone());
    assert!(
        survivors.is_empty(),
        "{} child(ren) that left the leaf still run: {:?}",
        survivors.len(),
        run.finished.report
    );
    assert_eq!(left.len(), 3, "{:?}", run.finished.report);
    assert_contained(&run.finished, run.took, &run.leaf);
}

/// A leader that leaves its leaf at once, before corral could list it, is
/// a member all the same (corral holds its identity from the fork): it is
/// ended by identity at the cleanup and named in `moved_out`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_leaves_its_leaf_at_once_is_ended() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            "echo 0 > \"$PARENT/cgroup.procs\" && echo ready $$ && exec sleep 60",
        ])
        .env("PARENT", &parent)
        .grace(GRACE);
    let Some(run) = cancel_when_ready(command).await else {
        return;
    };
    let leader = run.procs[0];
    let left = moved_out(&run.finished);
    assert_eq!(left, [leader], "{:?}", run.finished.report);
    assert!(!leader.is_alive(), "the leader still runs");
    assert_eq!(
        run.finished.outcome,
        Outcome::Cancelled,
        "{:?}",
        run.finished.report
    );
    assert_contained(&run.finished, run.took, &run.leaf);
}

/// A cgroup tree of `command` told its leaf: the test writes the leaf's path
/// to the file `$LEAF_FILE` once spawned (the command waits for it), then
/// reads the readiness line. `None` (said as skipped) without the cgroup
/// backend.
async fn spawn_told_its_leaf(
    mut command: Command,
    marks: &Scratch,
) -> Option<(corral::Child, PathBuf, Vec<Proc>, CancellationToken)> {
    let token = CancellationToken::new();
    let leaf_file = marks.path("leaf");
    let command = command
        .env("LEAF_FILE", &leaf_file)
        .backend(BackendChoice::Only(Backend::Cgroup))
        .final_bound(FINAL)
        .cancel_on(token.clone());
    let child = spawned(command.spawn())?;
    let leaf = child.cgroup().expect("a leaf").to_owned();
    std::fs::write(&leaf_file, leaf.as_os_str().as_encoded_bytes()).expect("the leaf file");
    let mut tap = child.stdout_tap().expect("captured");
    let procs = parse_ready(&first_line(&mut tap).await);
    Some((child, leaf, procs, token))
}

/// Waits for the leaf's path in `$LEAF_FILE`, as `$leaf`.
const READ_LEAF: &str =
    "until [ -s \"$LEAF_FILE\" ]; do sleep 0.01; done; leaf=$(cat \"$LEAF_FILE\"); ";

/// The cgroup v2 path of this process, as `/proc/self/cgroup` says.
fn own_cgroup() -> String {
    std::fs::read_to_string("/proc/self/cgroup")
        .expect("/proc/self/cgroup")
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .expect("a cgroup v2 line")
        .to_owned()
}

/// A member that moves its supervisor (this test process) into its own leaf
/// (root may write any `cgroup.procs`): frozen there, the supervisor would
/// never thaw the leaf, and `cgroup.kill` would end it with the tree. corral
/// moves itself back out to the leaf's parent before the freeze, ends the
/// tree all the same, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_moves_its_supervisor_into_the_leaf_is_ended_all_the_same() {
    if cgroup_parent().is_none() {
        return;
    }
    let marks = Scratch::new("supervisor-moved-in");
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            &format!(
                "{READ_LEAF}echo \"$SUPERVISOR\" > \"$leaf/cgroup.procs\" && echo ready $$; \
                 trap '' TERM; while :; do sleep 0.05; done"
            ),
        ])
        .env("SUPERVISOR", std::process::id().to_string())
        .grace(GRACE);
    let Some((mut child, leaf, procs, token)) = spawn_told_its_leaf(command, &marks).await else {
        return;
    };
    let _cleanup = Guard::of(procs.clone());
    let leaf_name = leaf
        .file_name()
        .expect("a name")
        .to_string_lossy()
        .into_owned();
    assert!(
        own_cgroup().ends_with(&format!("/{leaf_name}")),
        "the member moved this process into {}: it is in {}",
        leaf.display(),
        own_cgroup()
    );
    let started = std::time::Instant::now();
    token.cancel();
    let finished = child.wait().await.expect("a result");
    assert_eq!(
        finished.outcome,
        Outcome::Cancelled,
        "{:?}",
        finished.report
    );
    assert!(
        finished
            .report
            .notes
            .iter()
            .any(|note| note.contains("it was moved back out")),
        "{:?}",
        finished.report
    );
    assert!(
        !own_cgroup().ends_with(&format!("/{leaf_name}")),
        "still in the leaf"
    );
    assert!(!procs[0].is_alive(), "the member still runs");
    assert_contained(&finished, started.elapsed(), &leaf);
}

/// A member that left its leaf and then thaws it over and over (root may
/// write its `cgroup.freeze`): the freeze of each signal step's look is
/// undone, and the report says that what members forked meanwhile may be
/// unnamed. The tree is still ended, the thawing member by identity.
///
/// The thawer must write while a step holds the leaf frozen, a window of
/// well under a millisecond. Made a real-time (`SCHED_FIFO`) process, it
/// was still not always scheduled there: the kernel throttles a real-time
/// process that never sleeps for 50 ms of each second (docs/flakes.md (32)
/// and (40)). So the step is made slow (the `slow-frozen-look` fault: the
/// leaf held frozen 300 ms before the look), which any scheduling of the
/// thawer covers. The policy is set here, not with `chrt`, which the guest
/// lane's system lacks.
#[test]
fn a_freeze_undone_during_a_signal_step_is_noted() {
    const NAME: &str = "a_freeze_undone_during_a_signal_step_is_noted";
    if let support::Run::Done = support::in_child(NAME, "slow-frozen-look", false) {
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(freeze_undone_during_a_signal_step());
}

async fn freeze_undone_during_a_signal_step() {
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let marks = Scratch::new("freeze-undone");
    let thawer = format!(
        "{READ_LEAF}trap '' TERM; echo 0 > \"$PARENT/cgroup.procs\" && echo ready $$; \
         while :; do echo 0 > \"$leaf/cgroup.freeze\"; done"
    );
    let mut command = Command::new("sh");
    command
        .args(["-c", "sh -c \"$THAWER\" & wait"])
        .env("THAWER", thawer)
        .env("PARENT", &parent)
        .grace(GRACE);
    let Some((mut child, leaf, procs, token)) = spawn_told_its_leaf(command, &marks).await else {
        return;
    };
    let _cleanup = Guard::of(procs.clone());
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: `param` is plain data the call only reads; the thawer is the
    // test's own process, alive (it loops until it is killed).
    let raised =
        unsafe { libc::sched_setscheduler(procs[0].pid, libc::SCHED_FIFO, &raw const param) };
    assert_eq!(
        raised,
        0,
        "SCHED_FIFO for the thawer: {}",
        std::io::Error::last_os_error()
    );
    let started = std::time::Instant::now();
    token.cancel();
    let finished = child.wait().await.expect("a result");
    assert!(
        finished
            .report
            .notes
            .iter()
            .any(|note| note.contains("freeze was undone")),
        "{:?}",
        finished.report
    );
    assert_eq!(moved_out(&finished), procs, "{:?}", finished.report);
    assert!(!procs[0].is_alive(), "the thawing member still runs");
    assert_contained(&finished, started.elapsed(), &leaf);
}

/// A leaf frozen by someone else (a debugger, a checkpoint) before the
/// cleanup is left frozen by the signal steps: corral never thaws a freeze
/// it did not write. Its members receive `SIGTERM` but never run to handle
/// it (the trap's mark is never written), and `SIGKILL` (which the freezer
/// does not hold) ends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_frozen_by_someone_else_is_left_frozen() {
    if cgroup_parent().is_none() {
        return;
    }
    let marks = Scratch::new("frozen-outside");
    let term = marks.path("term");
    let mut command = Command::new("sh");
    command
        .args([
            "-c",
            &format!(
                "{READ_LEAF}trap ': > \"$TERM_MARK\"' TERM; echo ready $$; \
                 while :; do sleep 0.05; done"
            ),
        ])
        .env("TERM_MARK", &term)
        // Long enough for a thawed member to run its trap, however loaded
        // the machine: ended by SIGKILL at its end.
        .grace(Duration::from_secs(2));
    let Some((mut child, leaf, procs, token)) = spawn_told_its_leaf(command, &marks).await else {
        return;
    };
    let _cleanup = Guard::of(procs.clone());
    std::fs::write(leaf.join("cgroup.freeze"), b"1").expect("freezing the leaf");
    let frozen = corral_tests::wait_until_async(SLACK, || {
        std::fs::read_to_string(leaf.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "frozen 1"))
    })
    .await;
    assert!(frozen, "the leaf did not freeze");
    let started = std::time::Instant::now();
    token.cancel();
    let finished = child.wait().await.expect("a result");
    assert!(
        !term.exists(),
        "the leaf was thawed: its member ran its SIGTERM trap: {:?}",
        finished.report
    );
    assert!(finished.report.escalated, "{:?}", finished.report);
    assert!(!procs[0].is_alive(), "the member still runs");
    assert_contained(&finished, started.elapsed(), &leaf);
}

/// Run as another user (here `nobody`), the same move is refused by the
/// kernel: the leaf and its ancestors belong to root. The tree is contained
/// and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_run_as_another_user_cannot_leave_the_leaf() {
    if !is_root() {
        return println!("SKIPPED: running as another user needs root");
    }
    let Some(parent) = cgroup_parent() else {
        return;
    };
    // Tries at once and again on SIGTERM, and says how the first went.
    let script = "trap 'echo 0 > \"$PARENT/cgroup.procs\"; exec sleep 60' TERM; \
                  if echo 0 > \"$PARENT/cgroup.procs\"; then r=moved; else r=refused; fi; \
                  sleep 60 & echo ready $$ $r $(id -u) $(id -g) $(id -G); wait";
    let token = CancellationToken::new();
    let mut command = Command::new("sh");
    command
        .args(["-c", script])
        .env("PARENT", &parent)
        .current_dir("/")
        .user(NOBODY)
        .group(NOBODY)
        .backend(BackendChoice::Only(Backend::Cgroup))
        .grace(GRACE)
        .final_bound(FINAL)
        .cancel_on(token.clone());
    let Some(mut child) = spawned(command.spawn()) else {
        return;
    };
    let leaf = child.cgroup().expect("a leaf").to_owned();
    let mut tap = child.stdout_tap().expect("captured");
    let line = first_line(&mut tap).await;
    let words: Vec<&str> = line.split_whitespace().collect();
    let leader = parse_ready(&words[..2].join(" "));
    let _cleanup = Guard::of(leader.clone());

    let started = std::time::Instant::now();
    token.cancel();
    let finished = child.wait().await.expect("a result");
    let took = started.elapsed();

    let nobody = NOBODY.to_string();
    assert_eq!(
        words[2..],
        ["refused", &nobody, &nobody, &nobody],
        "runs as nobody:nobody with no other group, and the move is refused \
         (stderr: {})",
        finished.stderr.text()
    );
    assert!(
        finished.stderr.text().contains("Permission denied"),
        "the kernel said EACCES: {}",
        finished.stderr.text()
    );
    assert!(
        finished.report.moved_out.is_empty(),
        "{:?}",
        finished.report
    );
    assert!(!leader[0].is_alive());
    assert_contained(&finished, took, &leaf);
}

/// A user change is applied on every backend (through clone3 into the leaf,
/// or through the pre-exec hook of std's spawn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_and_group_are_applied_on_every_backend() {
    if !is_root() {
        return println!("SKIPPED: running as another user needs root");
    }
    for backend in [Backend::Cgroup, Backend::Subreaper, Backend::Group] {
        let mut command = Command::new("sh");
        command
            .args(["-c", "echo $(id -u) $(id -g) $(id -G)"])
            .current_dir("/")
            .user(NOBODY)
            .group(NOBODY)
            .backend(BackendChoice::Only(backend))
            .timeout(Duration::from_secs(10));
        let finished = match command.run().await {
            Ok(finished) => finished,
            Err(Error::BackendUnavailable { reason, .. }) => {
                println!("SKIPPED: backend {backend} is not available here: {reason}");
                continue;
            }
            Err(error) => panic!("{backend}: {error}"),
        };
        assert_eq!(
            finished.outcome,
            Outcome::Exited { code: 0 },
            "{backend}: {}",
            finished.stderr.text()
        );
        let nobody = NOBODY.to_string();
        assert_eq!(
            finished.stdout.text().trim(),
            [nobody.as_str(); 3].join(" "),
            "{backend}"
        );
    }
}

/// A command started as another user leaves the supervisor dumpable: the
/// kernel marks the memory map of a task that changes credentials
/// non-dumpable, and a child that shared ours (`CLONE_VM`) would have taken
/// away our core dumps, ptrace access and `/proc` ownership.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_change_leaves_the_supervisor_dumpable() {
    if !is_root() {
        return println!("SKIPPED: running as another user needs root");
    }
    // This test's own process: fresh, so dumpable unless something here
    // changed it.
    // SAFETY: PR_SET_DUMPABLE with 1 takes no pointer.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1) };
    for backend in [Backend::Cgroup, Backend::Subreaper, Backend::Group] {
        let mut command = Command::new("true");
        command
            .current_dir("/")
            .user(NOBODY)
            .group(NOBODY)
            .backend(BackendChoice::Only(backend))
            .timeout(Duration::from_secs(10));
        match command.run().await {
            Ok(finished) => assert_eq!(finished.outcome, Outcome::Exited { code: 0 }),
            Err(Error::BackendUnavailable { reason, .. }) => {
                println!("SKIPPED: backend {backend} is not available here: {reason}");
                continue;
            }
            Err(error) => panic!("{backend}: {error}"),
        }
        // SAFETY: PR_GET_DUMPABLE takes no pointer.
        let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
        assert_eq!(
            dumpable, 1,
            "{backend}: the supervisor lost its dumpable flag"
        );
    }
}

/// A command run as another user enters its working directory with that
/// user's rights, on every backend: a directory only root may enter is
/// refused, and the error names the directory, not the program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_directory_is_entered_as_the_commands_user() {
    if !is_root() {
        return println!("SKIPPED: running as another user needs root");
    }
    let private = corral_tests::scratch("root-only");
    std::fs::create_dir_all(&private).expect("scratch directory");
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod 0700");
    for backend in [Backend::Cgroup, Backend::Subreaper, Backend::Group] {
        let result = Command::new("true")
            .current_dir(&private)
            .user(NOBODY)
            .group(NOBODY)
            .backend(BackendChoice::Only(backend))
            .timeout(Duration::from_secs(10))
            .run()
            .await;
        match result {
            Err(Error::BackendUnavailable { reason, .. }) => {
                println!("SKIPPED: backend {backend} is not available here: {reason}");
            }
            Err(Error::Spawn {
                failure: corral::SpawnFailure::BadCwd,
                ..
            }) => {}
            other => panic!("{backend}: entered as root, or misreported: {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&private);
}

/// Without root, a user change is refused before anything runs, with a
/// message that names the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_change_without_root_is_refused_up_front() {
    if is_root() {
        return println!("SKIPPED: as root any user may be taken on");
    }
    let other = if rustix::process::geteuid().as_raw() == NOBODY {
        NOBODY - 1
    } else {
        NOBODY
    };
    let result = Command::new("true").user(other).run().await;
    let Err(error @ Error::Spawn { .. }) = result else {
        panic!("not refused: {result:?}");
    };
    assert!(error.to_string().contains("needs root"), "{error}");
}

/// Where the cgroup2 mount has `nsdelegate`, the leader gets a cgroup
/// namespace rooted at its leaf (the kernel then refuses moves out of it,
/// root's too). This machine's mount may lack the option, so the test
/// injects it (`CORRAL_FAULTS=nsdelegate`) and checks the namespace: the
/// leader sees its leaf as `/`. The kernel's refusal itself is exercised
/// only on a machine mounted with `nsdelegate`.
#[test]
fn the_leader_gets_a_cgroup_namespace_where_nsdelegate() {
    const NAME: &str = "the_leader_gets_a_cgroup_namespace_where_nsdelegate";
    if !is_root() {
        return println!("SKIPPED: a cgroup namespace needs root");
    }
    if let support::Run::Done = support::in_child(NAME, "nsdelegate", false) {
        return;
    }
    let runtime = support::runtime();
    let Some(finished) = runtime.block_on(async {
        let mut command = Command::new("cat");
        command
            .arg("/proc/self/cgroup")
            .backend(BackendChoice::Only(Backend::Cgroup))
            .timeout(Duration::from_secs(10));
        spawned(command.spawn())?.wait().await.ok()
    }) else {
        return;
    };
    let cgroup = finished.stdout.text();
    assert!(
        cgroup.lines().any(|line| line == "0::/"),
        "the leader is the root of its own cgroup namespace: {cgroup:?} ({})",
        finished.stderr.text()
    );
}

/// Where `clone3` is refused, the child joins its leaf in std's pre-exec
/// hook, then takes on the namespace, group and user in the same order.
#[test]
fn the_pre_exec_path_joins_the_leaf_then_changes_user_and_namespace() {
    const NAME: &str = "the_pre_exec_path_joins_the_leaf_then_changes_user_and_namespace";
    if !is_root() {
        return println!("SKIPPED: a cgroup namespace and a user change need root");
    }
    if let support::Run::Done = support::in_child(NAME, "no-clone3,nsdelegate", false) {
        return;
    }
    let Some(parent) = cgroup_parent() else {
        return;
    };
    let script = "grep '^0::' /proc/self/cgroup; echo $(id -u) $(id -g) $(id -G); \
                  echo 0 > \"$PARENT/cgroup.procs\" && echo moved";
    let runtime = support::runtime();
    let Some(finished) = runtime.block_on(async {
        let mut command = Command::new("sh");
        command
            .args(["-c", script])
            .env("PARENT", &parent)
            .current_dir("/")
            .user(NOBODY)
            .group(NOBODY)
            .backend(BackendChoice::Only(Backend::Cgroup))
            .timeout(Duration::from_secs(10));
        spawned(command.spawn())?.wait().await.ok()
    }) else {
        return;
    };
    let nobody = NOBODY.to_string();
    let stdout = finished.stdout.text();
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["0::/", &[nobody.as_str(); 3].join(" ")],
        "stderr: {}",
        finished.stderr.text()
    );
    assert!(finished.stderr.text().contains("Permission denied"));
    assert!(finished.report.moved_out.is_empty());
}

/// Without `nsdelegate` (and without the injected fault) the leader shares
/// corral's cgroup namespace and sees its leaf's full path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cgroup_namespace_without_nsdelegate() {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    if mountinfo
        .lines()
        .any(|l| l.contains(" - cgroup2 ") && l.contains("nsdelegate"))
    {
        return println!("SKIPPED: this machine's cgroup2 mount has nsdelegate");
    }
    let mut command = Command::new("cat");
    command
        .arg("/proc/self/cgroup")
        .backend(BackendChoice::Only(Backend::Cgroup))
        .timeout(Duration::from_secs(10));
    let Some(mut child) = spawned(command.spawn()) else {
        return;
    };
    let leaf = child.cgroup().expect("a leaf").to_owned();
    let finished = child.wait().await.expect("a result");
    let name = leaf.file_name().expect("a name").to_string_lossy();
    let text = finished.stdout.text();
    assert!(
        text.lines()
            .any(|line| line.starts_with("0::/") && line.ends_with(&*name)),
        "{text:?}"
    );
}
