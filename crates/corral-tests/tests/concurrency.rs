//! Trees of one host never touch each other, whatever mix of backends.
//!
//! Each test runs 2 or 8 trees side by side in one runtime, each on a backend
//! of its own choosing (forced, or `Auto` with and without
//! `Settings::new().subreaper()`), each ended a different way at a different
//! time: its leader exiting with nothing left, its leader exiting with a
//! leftover, the time limit, a cancellation token, a dropped handle.
//!
//! A tree proves it was left alone in two ways:
//! - its leader is a shell that sleeps until its own end and exits 0 only if
//!   that sleep was not cut short, so its outcome (and when it came) is its
//!   own only if no other tree signalled it;
//! - its leftover is an orphan (its parent exits at once: it re-parents to
//!   the host while a subreaper tree runs) that writes the time it received
//!   `SIGTERM` to a file: that time must be its own tree's end, not an
//!   earlier one's.
//!
//! Backends unavailable here (cgroup as an ordinary user, a second
//! subreaper tree in one process) skip that tree with a printed reason. Run
//! under cargo-nextest: each test is its own process, since the subreaper
//! role is process-global.

mod common;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use corral::{Backend, BackendChoice, Command, Error, Finished, Leftovers, Outcome, Stdio};
use corral_tests::{Proc, Scratch, kill_leftovers, wait_until_async};
use tokio_util::sync::CancellationToken;

/// How early a time may read because clocks are read a little apart.
const EARLY: Duration = Duration::from_millis(100);
/// Scheduling slack on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// Between two spawns.
const STAGGER: Duration = Duration::from_millis(100);

/// How a tree ends, and when (seconds after its spawn).
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    /// The leader exits 0 and leaves nothing behind.
    Exit(f64),
    /// The leader exits 0; its leftover is terminated.
    LeaderExit(f64),
    /// The leader exits 0; its leftover ignores `SIGTERM` and is killed once
    /// the grace is over, meanwhile the exited leader waits unreaped.
    Stubborn(f64),
    /// The time limit.
    Timeout(f64),
    /// A cancellation token.
    Cancel(f64),
    /// The handle is dropped.
    Drop(f64),
}

impl End {
    fn at(self) -> Duration {
        let (End::Exit(s)
        | End::LeaderExit(s)
        | End::Stubborn(s)
        | End::Timeout(s)
        | End::Cancel(s)
        | End::Drop(s)) = self;
        Duration::from_secs_f64(s)
    }

    /// Whether the tree has an orphan that records its `SIGTERM`.
    fn has_orphan(self) -> bool {
        !matches!(self, End::Exit(_) | End::Stubborn(_))
    }

    /// The leader's script. `$1` is the orphan's file.
    fn script(self) -> String {
        // The orphan: a subshell that exits at once leaves it to the host (or
        // init). It writes its pid, then on SIGTERM the time, and exits.
        // The time is the file's: written by a builtin, so the trap starts
        // no process (a `date` could be cut short by the SIGKILL after the
        // grace on a loaded machine: docs/flakes.md).
        let orphan = "( sh -c 'trap \"echo term > $0.term; exit 0\" TERM; \
                      echo $$ > $0.pid; sleep 30 & wait' \"$1\" & ); ";
        match self {
            // Two sleeps of the tree's own length; any signal to either (or
            // to the shell) makes the exit code, or the time, wrong.
            End::Exit(s) => format!("sleep {s} & c=$!; sleep {s} || exit 11; wait $c || exit 12"),
            End::LeaderExit(s) => format!("{orphan}sleep {s} || exit 11"),
            End::Stubborn(s) => format!(
                "( sh -c 'trap \"\" TERM; echo $$ > $0.pid; exec sleep 30' \"$1\" & ); \
                 sleep {s} || exit 11"
            ),
            End::Timeout(_) | End::Cancel(_) | End::Drop(_) => {
                format!("{orphan}sleep 30 || exit 11")
            }
        }
    }
}

/// One tree of a test.
#[derive(Debug, Clone, Copy)]
struct Spec {
    choice: BackendChoice,
    end: End,
}

fn only(backend: Backend, end: End) -> Spec {
    Spec {
        choice: BackendChoice::Only(backend),
        end,
    }
}

fn auto(end: End) -> Spec {
    Spec {
        choice: BackendChoice::Auto,
        end,
    }
}

/// What one tree did, for the checks.
#[derive(Debug)]
struct Ran {
    name: String,
    spec: Spec,
    backend: Backend,
    finished: Option<Finished>,
    /// When the tree was spawned, by the wall clock (the orphan's `.term` file's).
    spawned_wall: SystemTime,
    /// When the test saw the call end (or the drop's cleanup finish).
    ended_after: Duration,
    leader: Proc,
    orphan: Option<Proc>,
    /// When the orphan received SIGTERM, by the wall clock.
    orphan_term: Option<SystemTime>,
}

/// The orphan's recorded pid, once written.
fn orphan_of(file: &Path) -> Option<Proc> {
    let text = std::fs::read_to_string(file.with_extension("pid")).ok()?;
    Proc::of(text.trim().parse().ok()?)
}

fn term_time(file: &Path) -> Option<SystemTime> {
    let term = file.with_extension("term");
    let text = std::fs::read_to_string(&term).ok()?;
    (text.trim() == "term")
        .then(|| std::fs::metadata(&term).and_then(|m| m.modified()).ok())
        .flatten()
}

/// Spawns and ends one tree as its spec says; `None` if its backend is not
/// available here (printed).
async fn run_tree(name: String, spec: Spec, file: PathBuf) -> Option<Ran> {
    let token = CancellationToken::new();
    let at = spec.end.at();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(spec.end.script())
        .arg("tree")
        .arg(&file)
        .stdout(Stdio::Null)
        .stderr(Stdio::Null)
        .backend(spec.choice)
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(1));
    match spec.end {
        End::Timeout(_) => command.timeout(at),
        End::Cancel(_) => command.cancel_on(token.clone()),
        _ => command.timeout(Duration::from_secs(20)),
    };
    let spawned_wall = SystemTime::now();
    let spawned = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(Error::BackendUnavailable { backend, reason }) => {
            println!("SKIPPED: tree {name}: backend {backend} is not available here: {reason}");
            return None;
        }
        Err(error) => panic!("tree {name}: {error}"),
    };
    let backend = child.backend();
    let leader = Proc::of(child.id()).expect("the leader runs");
    let finished = match spec.end {
        End::Cancel(_) | End::Drop(_) => {
            tokio::time::sleep_until((spawned + at).into()).await;
            assert!(
                leader.is_alive(),
                "tree {name} ({backend}): the leader died before its own end at {at:?}"
            );
            if matches!(spec.end, End::Cancel(_)) {
                token.cancel();
                Some(child.wait().await.expect("a result"))
            } else {
                drop(child);
                None
            }
        }
        _ => Some(child.wait().await.expect("a result")),
    };
    let mut orphan = orphan_of(&file);
    if spec.end.has_orphan() {
        // After a drop the cleanup runs on; elsewhere the orphan is gone by now.
        let recorded = wait_until_async(SLACK, || {
            orphan = orphan.or_else(|| orphan_of(&file));
            term_time(&file).is_some() && !orphan.as_ref().is_some_and(Proc::is_alive)
        })
        .await;
        // What the orphan left says which step did not happen: no `.term`
        // (no SIGTERM, or killed before its trap wrote), an empty one (killed
        // while writing), or a live orphan; the report says whether the tree
        // escalated to SIGKILL.
        assert!(
            recorded,
            "tree {name} ({backend}): its orphan recorded no SIGTERM or survived: \
             orphan {orphan:?} alive {:?}, .term {:?}; report {:?}",
            orphan.as_ref().map(Proc::is_alive),
            std::fs::read_to_string(file.with_extension("term")),
            finished.as_ref().map(|f| &f.report)
        );
    }
    let ended_after = spawned.elapsed();
    if finished.is_none() {
        // A dropped tree's cleanup runs on: its leader goes too.
        let gone = wait_until_async(SLACK, || !leader.is_alive()).await;
        assert!(
            gone,
            "tree {name} ({backend}): the dropped tree's leader survived"
        );
    }
    Some(Ran {
        name,
        spec,
        backend,
        finished,
        spawned_wall,
        ended_after,
        leader,
        orphan,
        orphan_term: term_time(&file),
    })
}

/// Runs `specs` side by side, spawned `STAGGER` apart, and checks that each
/// tree ended its own way at its own time.
async fn trees(test: &str, specs: &[Spec]) {
    let scratch = Scratch::new(test);
    let mut tasks = Vec::new();
    for (i, &spec) in specs.iter().enumerate() {
        let name = format!("{i}:{:?}", spec.end);
        let file = scratch.0.join(format!("tree{i}"));
        tasks.push(tokio::spawn(run_tree(name, spec, file)));
        tokio::time::sleep(STAGGER).await;
    }
    let mut ran = Vec::new();
    let mut panics = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Some(r)) => ran.push(r),
            Ok(None) => {}
            Err(error) => panics.push(error),
        }
    }
    // Whatever failed, nothing is left running.
    let everyone: Vec<Proc> = ran
        .iter()
        .flat_map(|r| [Some(r.leader), r.orphan])
        .flatten()
        .collect();
    kill_leftovers(&everyone);
    if let Some(panic) = panics.into_iter().next() {
        std::panic::resume_unwind(panic.into_panic());
    }
    let backends: Vec<String> = ran
        .iter()
        .map(|r| format!("{} {}", r.name, r.backend))
        .collect();
    println!("ran: {backends:?}");
    for r in &ran {
        check(r);
    }
}

fn check(r: &Ran) {
    let at = r.spec.end.at();
    let who = format!("tree {} on {}", r.name, r.backend);
    if let BackendChoice::Only(backend) = r.spec.choice {
        assert_eq!(r.backend, backend, "{who}");
    }
    assert!(
        r.ended_after + EARLY >= at,
        "{who} ended after {:?}, before its own end at {at:?}",
        r.ended_after
    );
    assert!(
        r.ended_after <= at + SLACK + SLACK,
        "{who} ended after {:?}, long after its own end at {at:?}",
        r.ended_after
    );
    if let Some(finished) = &r.finished {
        println!("{who}: {:?} {:?}", finished.outcome, finished.report);
        let expected = match r.spec.end {
            End::Exit(_) | End::LeaderExit(_) | End::Stubborn(_) => Outcome::Exited { code: 0 },
            End::Timeout(_) => Outcome::TimedOut,
            End::Cancel(_) | End::Drop(_) => Outcome::Cancelled,
        };
        assert_eq!(finished.outcome, expected, "{who}");
        assert!(
            finished.report.run_time + EARLY >= at,
            "{who}: its call ended after {:?}, before its own end at {at:?}",
            finished.report.run_time
        );
        assert!(
            finished.report.survivors.is_empty(),
            "{who}: survivors {:?}",
            finished.report.survivors
        );
        if r.spec.end == End::Stubborn(at.as_secs_f64()) {
            assert!(
                finished.report.escalated,
                "{who}: its leftover, which ignores SIGTERM, was not its own to kill"
            );
        } else if r.spec.end.has_orphan() {
            assert!(
                !finished.report.signals.is_empty(),
                "{who}: its leftover was not its own to terminate"
            );
        } else {
            assert!(
                finished.report.signals.is_empty(),
                "{who}: signalled something with nothing left: {:?}",
                finished.report.signals
            );
        }
    }
    if r.spec.end.has_orphan() {
        let term = r.orphan_term.expect("checked in run_tree");
        let after = term.duration_since(r.spawned_wall).unwrap_or_default();
        assert!(
            after + EARLY >= at,
            "{who}: its orphan received SIGTERM {after:?} after the spawn, before its own \
             tree's end at {at:?}: another tree signalled it"
        );
    }
}

/// Both orders of every pair of forced backends: the first tree's leader
/// exits at 1 s with a leftover (a subreaper tree terminates every process
/// it adopted), the second's at 2.5 s, with a leftover of its own.
macro_rules! pairs {
    ($($name:ident: $a:ident, $b:ident;)+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                trees(stringify!($name), &[
                    only(Backend::$a, End::LeaderExit(1.0)),
                    only(Backend::$b, End::LeaderExit(2.5)),
                ]).await;
            }
        )+
    };
}

pairs! {
    two_trees_subreaper_then_group: Subreaper, Group;
    two_trees_subreaper_then_cgroup: Subreaper, Cgroup;
    two_trees_subreaper_then_subreaper: Subreaper, Subreaper;
    two_trees_group_then_subreaper: Group, Subreaper;
    two_trees_group_then_group: Group, Group;
    two_trees_group_then_cgroup: Group, Cgroup;
    two_trees_cgroup_then_subreaper: Cgroup, Subreaper;
    two_trees_cgroup_then_group: Cgroup, Group;
    two_trees_cgroup_then_cgroup: Cgroup, Cgroup;
}

/// The reproduction of the bug: `sleep 1` then `sleep 4` 200 ms apart, the
/// first on the subreaper backend, the second on the group backend; the
/// second's leader was adopted and terminated at 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subreaper_tree_leaves_a_later_group_tree_alone() {
    trees(
        "repro",
        &[
            only(Backend::Subreaper, End::LeaderExit(1.0)),
            only(Backend::Group, End::Exit(3.0)),
        ],
    )
    .await;
}

/// `Auto` alone: an ordinary user gets the group backend for both (root, the
/// cgroup backend).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_trees_auto() {
    trees(
        "auto",
        &[auto(End::LeaderExit(1.0)), auto(End::LeaderExit(2.5))],
    )
    .await;
}

/// `Auto` after `Settings::new().subreaper()`: an ordinary user's first tree takes the
/// subreaper role, the second falls back to the group backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_trees_auto_claimed() {
    corral::settings::Settings::new().subreaper().apply();
    trees(
        "auto-claimed",
        &[auto(End::LeaderExit(1.0)), auto(End::LeaderExit(2.5))],
    )
    .await;
}

/// Every ending, at eight different times, for up to eight trees.
fn eight(choices: impl IntoIterator<Item = BackendChoice>) -> Vec<Spec> {
    let ends = [
        End::LeaderExit(0.8),
        End::Exit(3.5),
        End::Timeout(1.2),
        End::Cancel(1.6),
        End::Drop(2.0),
        End::LeaderExit(2.4),
        End::Exit(3.0),
        End::Timeout(2.8),
    ];
    choices
        .into_iter()
        .zip(ends)
        .map(|(choice, end)| Spec { choice, end })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_trees_forced_mix() {
    use Backend::{Cgroup, Group, Subreaper};
    let choices = [
        Subreaper, Group, Cgroup, Group, Cgroup, Group, Cgroup, Group,
    ]
    .map(BackendChoice::Only);
    trees("eight-forced", &eight(choices)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_trees_auto() {
    trees("eight-auto", &eight([BackendChoice::Auto; 8])).await;
}

/// As an ordinary user: the first tree on the subreaper backend, the others
/// on the group backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_trees_auto_claimed() {
    corral::settings::Settings::new().subreaper().apply();
    trees("eight-auto-claimed", &eight([BackendChoice::Auto; 8])).await;
}

/// The forced mix with the subreaper tree ending last, so that every other
/// tree's leader exits, and its leftovers re-parent, while the host is a
/// subreaper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_trees_subreaper_last() {
    use Backend::{Cgroup, Group, Subreaper};
    let mut specs = vec![only(Subreaper, End::Timeout(3.8))];
    let others = [Group, Cgroup, Group, Cgroup, Group, Cgroup, Group].map(BackendChoice::Only);
    specs.extend(eight(others));
    trees("eight-subreaper-last", &specs).await;
}

/// A tree that lets its leftover go ([`Leftovers::Release`]) while a
/// subreaper tree runs: the leftover, an orphan of the host now, is nobody's,
/// and the subreaper tree, ending later, leaves it running.
async fn released_leftover_outlives_a_subreaper_tree(backend: Backend) {
    let scratch = Scratch::new("released");
    let subreaper = tokio::spawn(run_tree(
        "0:Timeout(2.0)".to_owned(),
        only(Backend::Subreaper, End::Timeout(2.0)),
        scratch.0.join("tree0"),
    ));
    tokio::time::sleep(STAGGER).await;
    let file = scratch.0.join("released");
    let releasing = Command::new("sh")
        .arg("-c")
        .arg("( sh -c 'echo $$ > \"$0.pid\"; exec sleep 30' \"$1\" & ); sleep 0.5")
        .arg("tree")
        .arg(&file)
        .stdout(Stdio::Null)
        .stderr(Stdio::Null)
        .backend(BackendChoice::Only(backend))
        .leftovers(Leftovers::Release {
            drain: Duration::ZERO,
        })
        .run()
        .await;
    let released = match releasing {
        Ok(finished) => Some(finished),
        Err(Error::BackendUnavailable { reason, .. }) => {
            println!(
                "SKIPPED: the releasing tree: backend {backend} is not available here: {reason}"
            );
            None
        }
        Err(error) => panic!("{error}"),
    };
    let leftover = orphan_of(&file);
    let subreaper = subreaper.await;
    if let Some(leftover) = leftover {
        let alive = leftover.is_alive();
        kill_leftovers(&[leftover]);
        assert!(
            alive,
            "the subreaper tree killed a process another tree had released"
        );
    }
    let Some(released) = released else { return };
    println!(
        "releasing tree: {:?} {:?}",
        released.outcome, released.report
    );
    assert_eq!(released.outcome, Outcome::Exited { code: 0 });
    assert!(
        leftover.is_some_and(|p| released.report.released.iter().any(|r| r.pid == p.pid)),
        "the leftover {leftover:?} is in the report's released list"
    );
    if let Some(ran) = subreaper.expect("the subreaper tree's task") {
        check(&ran);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_leftover_of_a_group_tree_outlives_a_subreaper_tree() {
    released_leftover_outlives_a_subreaper_tree(Backend::Group).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_leftover_of_a_cgroup_tree_outlives_a_subreaper_tree() {
    released_leftover_outlives_a_subreaper_tree(Backend::Cgroup).await;
}

/// Trees on other backends whose leaders exit while a subreaper tree runs,
/// and wait unreaped through their cleanup (a leftover ignores `SIGTERM`):
/// the subreaper tree reaps zombies it did not start, but never another
/// tree's leader, whose status is that tree's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subreaper_tree_never_reaps_another_trees_leader() {
    trees(
        "never-reaps",
        &[
            only(Backend::Subreaper, End::Timeout(3.0)),
            only(Backend::Group, End::Stubborn(0.6)),
            only(Backend::Cgroup, End::Stubborn(0.9)),
            auto(End::Stubborn(1.2)),
        ],
    )
    .await;
}

/// The reaper of a supervisor that is its PID namespace's init
/// (`corral::init::reap_orphans`), run over and over on a thread of its
/// own while trees run: it reaps a child nobody waits for, and never a
/// tree's leader, whose status is the tree's outcome (each leader here
/// exits 7 and is a zombie while its tree is ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_reaper_never_takes_a_trees_leader() {
    use std::sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reaping = Arc::clone(&stop);
    let reaper = std::thread::spawn(move || {
        let mut reaped = 0;
        while !reaping.load(Ordering::SeqCst) {
            reaped += corral::init::reap_orphans();
            std::thread::sleep(Duration::from_micros(200));
        }
        reaped
    });
    // Nobody's: std's `Child` dropped without a wait.
    #[allow(clippy::zombie_processes)] // the reaper under test reaps it
    let stray = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let stray = Proc::of(stray.id() as i32);
    let mut outcomes = Vec::new();
    for backend in [
        Backend::Group,
        Backend::Cgroup,
        Backend::Group,
        Backend::Cgroup,
    ] {
        // Bounded: a supervisor whose leader was reaped by someone else
        // never finishes (waiting for the leader fails with ECHILD, and
        // `supervise::wait_exit` then waits for ever).
        let run = tokio::time::timeout(
            Duration::from_secs(10),
            Command::new("sh")
                .args(["-c", "sleep 0.05 & exit 7"])
                .backend(BackendChoice::Only(backend))
                .grace(Duration::from_secs(1))
                .run(),
        )
        .await
        .unwrap_or_else(|_| panic!("{backend:?}: the tree's call did not return within 10 s"));
        match run {
            Err(Error::BackendUnavailable { .. }) => continue,
            other => outcomes.push((backend, other.map(|f| f.outcome))),
        }
    }
    let gone = wait_until_async(Duration::from_secs(5), || {
        stray.is_none_or(|p| corral_tests::stat(p.pid).is_none_or(|s| s.start_time != p.start_time))
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    let reaped = reaper.join().expect("the reaper thread");
    for (backend, outcome) in &outcomes {
        assert!(
            matches!(outcome, Ok(Outcome::Exited { code: 7 })),
            "{backend:?}: {outcome:?}"
        );
    }
    assert!(
        gone && reaped >= 1,
        "the stray child was not reaped ({reaped} reaped)"
    );
}
