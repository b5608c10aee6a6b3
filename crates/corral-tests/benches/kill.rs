//! Time from grace expiry to an empty tree, for a tree of N processes that
//! ignore `SIGTERM` (the fixture's `tree-ignore N`: a leader and N children,
//! every third child in a new session), on each corral backend, beside
//! process-wrap's process-group kill of the same tree.
//!
//! corral is spawned with `grace = 0` (so `terminate()` sends `SIGKILL` at
//! once: the moment of the call *is* grace expiry) and a generous final bound;
//! the time is the library's own `report.cleanup_time` (trigger to empty
//! tree), with the wall time from `terminate()` to `wait()` returning beside
//! it. process-wrap is timed from `start_kill()` to `wait()` returning.
//!
//! After each run every pid from the readiness line is checked independently
//! through `/proc/PID/stat` (same start time, not a zombie): "alive@return"
//! right when the call returned, "alive@+200ms" after a short settle (a
//! process that was sent `SIGKILL` needs a moment to die, an escapee does
//! not). Whatever still runs is then killed by identity (pidfd, start time
//! re-checked, `pidfd_send_signal`).
//!
//! ```text
//! cargo bench -p corral-tests --bench kill                      # 100 and 1000
//! cargo bench -p corral-tests --bench kill -- --quick           # 2 rounds each
//! cargo bench -p corral-tests --bench kill -- --rounds 5 --sizes 1000
//! cargo bench -p corral-tests --bench kill -- --only cgroup,process-wrap
//! ```

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use bare_kill::{WAIT_BOUND, read_ready};
use corral::{Backend, BackendChoice};
use corral_tests::{
    Guard, Proc,
    bench::{Knobs, machine_line, median, ms, p90, ratio},
    proc::count_alive,
};
use process_wrap::tokio::{CommandWrap, ProcessGroup};

mod bare_kill;

/// corral's final bound: generous, so a slow kill is measured, not cut off.
const FINAL_BOUND: Duration = Duration::from_secs(10);
/// How long after the return the tree is checked a second time.
const SETTLE: Duration = Duration::from_millis(200);
/// Target for the cgroup backend with 1000 processes.
const CGROUP_TARGET_1000: Duration = Duration::from_millis(25);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Contender {
    Corral(BackendKey),
    ProcessWrap,
    /// Diagnostic: no library at all: `cgroup.kill` on a leaf holding the
    /// tree, then `poll(POLLPRI)` on `cgroup.events` until `populated 0`.
    /// The kernel's own cost of killing the tree: a floor for any backend.
    CgroupFloor,
}

/// `Backend` in a sortable form (for the result map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum BackendKey {
    Cgroup,
    Subreaper,
    Group,
}

impl BackendKey {
    fn of(backend: Backend) -> Self {
        match backend {
            Backend::Cgroup => BackendKey::Cgroup,
            Backend::Subreaper => BackendKey::Subreaper,
            Backend::Group => BackendKey::Group,
        }
    }

    fn backend(self) -> Backend {
        match self {
            BackendKey::Cgroup => Backend::Cgroup,
            BackendKey::Subreaper => Backend::Subreaper,
            BackendKey::Group => Backend::Group,
        }
    }
}

impl Contender {
    fn label(self) -> String {
        match self {
            Contender::Corral(b) => format!("corral {}", b.backend()),
            Contender::ProcessWrap => "process-wrap ProcessGroup".to_owned(),
            Contender::CgroupFloor => "(diag) bare cgroup.kill".to_owned(),
        }
    }
}

/// One measured kill.
#[derive(Debug, Clone)]
struct Sample {
    /// corral's `report.cleanup_time` (None for process-wrap).
    cleanup: Option<Duration>,
    /// From the kill call to the wait returning.
    wall: Duration,
    /// corral's `report.survivors.len()` (None for process-wrap).
    reported_survivors: Option<usize>,
    /// Processes of the tree running when the call returned.
    alive_at_return: usize,
    /// ... and `SETTLE` later.
    alive_after_settle: usize,
    /// Of those, how many are setsid children (i % 3 == 2).
    setsid_alive: usize,
    /// Processes in the tree (leader included).
    tree: usize,
}

/// How many children i with i % 3 == 2 (the setsid ones) still run.
/// `procs[0]` is the leader, `procs[1 + i]` child i.
fn setsid_running(procs: &[Proc]) -> usize {
    procs
        .iter()
        .skip(1)
        .enumerate()
        .filter(|(i, p)| i % 3 == 2 && p.is_alive())
        .count()
}

async fn settle_and_count(procs: &[Proc]) -> (usize, usize) {
    tokio::time::sleep(SETTLE).await;
    (count_alive(procs), setsid_running(procs))
}

async fn run_corral(fixture: &PathBuf, n: usize, backend: Backend) -> Result<Sample, String> {
    let mut child = corral::Command::new(fixture)
        .args(["tree-ignore".to_owned(), n.to_string()])
        .backend(BackendChoice::Only(backend))
        .grace(Duration::ZERO)
        .final_bound(FINAL_BOUND)
        .stdin(corral::Stdio::Null)
        .stdout(corral::Stdio::Piped)
        .stderr(corral::Stdio::Inherit)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.take_stdout().ok_or("no stdout pipe")?;
    // If anything below fails, dropping `child` terminates the tree and the
    // guard kills whatever of it still runs.
    let mut guard = Guard::default();
    guard.procs = read_ready(stdout).await?;
    if guard.procs.len() != n + 1 {
        return Err(format!(
            "expected {} processes, {} are running",
            n + 1,
            guard.procs.len()
        ));
    }
    let started = Instant::now();
    child.terminate();
    let finished = tokio::time::timeout(WAIT_BOUND, child.wait())
        .await
        .map_err(|_| "corral did not return in time".to_owned())?
        .map_err(|e| format!("wait: {e}"))?;
    let wall = started.elapsed();
    let alive_at_return = count_alive(&guard.procs);
    let (alive_after_settle, setsid_alive) = settle_and_count(&guard.procs).await;
    if finished.report.cgroup_not_removed {
        eprintln!(
            "  WARNING: corral left its cgroup {:?}",
            finished.report.cgroup
        );
    }
    Ok(Sample {
        cleanup: Some(finished.report.cleanup_time),
        wall,
        reported_survivors: Some(finished.report.survivors.len()),
        alive_at_return,
        alive_after_settle,
        setsid_alive,
        tree: guard.procs.len(),
    })
}

async fn run_process_wrap(fixture: &PathBuf, n: usize) -> Result<Sample, String> {
    let mut child = CommandWrap::with_new(fixture, |command| {
        command
            .args(["tree-ignore".to_owned(), n.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
    })
    .wrap(ProcessGroup::leader())
    .spawn()
    .map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.stdout().take().ok_or("no stdout pipe")?;
    let mut guard = Guard::default();
    let ready = read_ready(stdout).await;
    let ready = match ready {
        Ok(procs) => procs,
        Err(error) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(WAIT_BOUND, child.wait()).await;
            return Err(error);
        }
    };
    guard.procs = ready;
    if guard.procs.len() != n + 1 {
        let _ = child.start_kill();
        let _ = tokio::time::timeout(WAIT_BOUND, child.wait()).await;
        return Err(format!(
            "expected {} processes, {} are running",
            n + 1,
            guard.procs.len()
        ));
    }
    let started = Instant::now();
    child.start_kill().map_err(|e| format!("start_kill: {e}"))?;
    tokio::time::timeout(WAIT_BOUND, child.wait())
        .await
        .map_err(|_| "process-wrap did not return in time".to_owned())?
        .map_err(|e| format!("wait: {e}"))?;
    let wall = started.elapsed();
    let alive_at_return = count_alive(&guard.procs);
    let (alive_after_settle, setsid_alive) = settle_and_count(&guard.procs).await;
    Ok(Sample {
        cleanup: None,
        wall,
        reported_survivors: None,
        alive_at_return,
        alive_after_settle,
        setsid_alive,
        tree: guard.procs.len(),
    })
    // `guard` kills the escapees here, by pidfd.
}

/// The diagnostic floor: the tree killed with a bare `cgroup.kill`
/// ([`bare_kill::bare_cgroup_kill`]).
async fn run_cgroup_floor(fixture: &std::path::Path, n: usize) -> Result<Sample, String> {
    let bare = bare_kill::bare_cgroup_kill(fixture, n).await?;
    let (alive_after_settle, setsid_alive) = settle_and_count(&bare.guard.procs).await;
    Ok(Sample {
        cleanup: Some(bare.cleanup),
        wall: bare.wall,
        reported_survivors: None,
        alive_at_return: bare.alive_at_return,
        alive_after_settle,
        setsid_alive,
        tree: bare.guard.procs.len(),
    })
}

/// A short pause between runs, so the exits of one run do not overlap the
/// next measurement.
async fn quiesce() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

fn main() -> ExitCode {
    let knobs = Knobs::from_env();
    let sizes: Vec<usize> = knobs
        .get("sizes")
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 1000]);
    corral_tests::bench::run_checked(run(&knobs, &sizes))
}

async fn run(knobs: &Knobs, sizes: &[usize]) -> ExitCode {
    let fixture = PathBuf::from(env!("CARGO_BIN_EXE_fixture"));
    corral::settings::Settings::new().subreaper().apply();
    let mut contenders: Vec<Contender> = corral_tests::bench::corral_backends()
        .into_iter()
        .map(|backend| Contender::Corral(BackendKey::of(backend)))
        .collect();
    contenders.push(Contender::ProcessWrap);
    if contenders.contains(&Contender::Corral(BackendKey::Cgroup)) {
        contenders.push(Contender::CgroupFloor);
    }
    if let Some(only) = knobs.get("only") {
        let wanted: Vec<&str> = only.split(',').map(str::trim).collect();
        contenders.retain(|c| {
            let name = match c {
                Contender::Corral(key) => key.backend().name(),
                Contender::ProcessWrap => "process-wrap",
                Contender::CgroupFloor => "floor",
            };
            wanted.contains(&name)
        });
    }

    println!("kill of a TERM-ignoring tree (fixture tree-ignore N, every third child setsid)");
    println!("{}", machine_line());
    let mut results: BTreeMap<(usize, Contender), Vec<Sample>> = BTreeMap::new();
    let mut failures = Vec::new();
    for &n in sizes {
        let rounds = if n >= 1000 {
            knobs.rounds_or(10, 2)
        } else {
            knobs.rounds_or(20, 2)
        };
        println!("N = {n}: {rounds} interleaved rounds, one warm-up round");
        for round in 0..=rounds {
            let k = contenders.len();
            for j in 0..k {
                let contender = contenders[(round + j) % k];
                let sample = match contender {
                    Contender::Corral(key) => run_corral(&fixture, n, key.backend()).await,
                    Contender::ProcessWrap => run_process_wrap(&fixture, n).await,
                    Contender::CgroupFloor => run_cgroup_floor(&fixture, n).await,
                };
                match sample {
                    Ok(sample) => {
                        eprintln!(
                            "  N={n} round {round}{} {:<26} cleanup {:>9} ms  wall {:>9} ms  alive@return {:>4}  alive@+200ms {:>4}",
                            if round == 0 { " (warm-up)" } else { "" },
                            contender.label(),
                            sample.cleanup.map_or("-".to_owned(), ms),
                            ms(sample.wall),
                            sample.alive_at_return,
                            sample.alive_after_settle,
                        );
                        if round > 0 {
                            results.entry((n, contender)).or_default().push(sample);
                        }
                    }
                    Err(error) => {
                        eprintln!(
                            "  N={n} round {round} {}: FAILED: {error}",
                            contender.label()
                        );
                        failures.push(format!("N={n} {}: {error}", contender.label()));
                    }
                }
                quiesce().await;
            }
        }
    }

    println!();
    println!(
        "| {:>4} | {:<26} | {:>2} | {:>14} | {:>11} | {:>11} | {:>8} | {:>10} | {:>9} | {:>12} | {:>12} |",
        "N",
        "contender",
        "n",
        "cleanup median",
        "cleanup p90",
        "wall median",
        "wall p90",
        "wall vs pw",
        "reported",
        "alive@return",
        "alive@+200ms"
    );
    println!(
        "|{:->6}|{:-<28}|{:->4}|{:->16}|{:->13}|{:->13}|{:->10}|{:->12}|{:->11}|{:->14}|{:->14}|",
        "", "", "", "", "", "", "", "", "", "", ""
    );
    let mut verdicts = Vec::new();
    for &n in sizes {
        let pw_wall = results
            .get(&(n, Contender::ProcessWrap))
            .map(|s| median(&s.iter().map(|x| x.wall).collect::<Vec<_>>()));
        for contender in &contenders {
            let Some(samples) = results.get(&(n, *contender)) else {
                continue;
            };
            let walls: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
            let cleanups: Vec<Duration> = samples.iter().filter_map(|s| s.cleanup).collect();
            let max = |f: fn(&Sample) -> usize| samples.iter().map(f).max().unwrap_or(0);
            let reported = samples
                .iter()
                .filter_map(|s| s.reported_survivors)
                .max()
                .map_or("-".to_owned(), |v| v.to_string());
            let tree = max(|s| s.tree);
            let alive_return = max(|s| s.alive_at_return);
            let alive_settle = max(|s| s.alive_after_settle);
            let setsid = max(|s| s.setsid_alive);
            println!(
                "| {:>4} | {:<26} | {:>2} | {:>11} ms | {:>8} ms | {:>8} ms | {:>5} ms | {:>9.2}x | {:>9} | {:>7}/{:<4} | {:>7}/{:<4} |",
                n,
                contender.label(),
                samples.len(),
                if cleanups.is_empty() {
                    "-".to_owned()
                } else {
                    ms(median(&cleanups))
                },
                if cleanups.is_empty() {
                    "-".to_owned()
                } else {
                    ms(p90(&cleanups))
                },
                ms(median(&walls)),
                ms(p90(&walls)),
                pw_wall.map_or(f64::NAN, |pw| ratio(median(&walls), pw)),
                reported,
                alive_return,
                tree,
                alive_settle,
                tree,
            );
            if setsid > 0 && setsid == alive_settle {
                verdicts.push(format!(
                    "N={n} {}: the {setsid} processes left alive are all setsid children",
                    contender.label()
                ));
            } else if alive_settle > 0 {
                verdicts.push(format!(
                    "N={n} {}: {alive_settle} processes left alive ({setsid} of them setsid children)",
                    contender.label()
                ));
            }
            if n == 1000 && *contender == Contender::Corral(BackendKey::Cgroup) {
                let m = median(&cleanups);
                let met = m <= CGROUP_TARGET_1000 && alive_return == 0;
                verdicts.push(format!(
                    "target: cgroup, N=1000: cleanup median {} ms (<= {} ms) with none left: {}",
                    ms(m),
                    CGROUP_TARGET_1000.as_millis(),
                    if met { "met" } else { "MISSED" }
                ));
            }
        }
    }
    println!();
    println!(
        "alive columns: worst round, as alive/tree size; 'reported' = corral's report.survivors (worst round)"
    );
    println!("'wall vs pw' = median wall time / process-wrap's median wall time for the same N");
    for verdict in &verdicts {
        println!("{verdict}");
    }
    write_kill_results(&results, &mut failures);
    if failures.is_empty() {
        println!("failures: none");
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failures.len());
        for failure in &failures {
            println!("  {failure}");
        }
        ExitCode::FAILURE
    }
}

/// Writes `kill.json`: one row per size and contender (times in ms, the
/// alive counts of the worst round).
fn write_kill_results(
    results: &BTreeMap<(usize, Contender), Vec<Sample>>,
    failures: &mut Vec<String>,
) {
    let ms_of = |d: Duration| d.as_secs_f64() * 1e3;
    let rows = results
        .iter()
        .map(|((n, contender), samples)| {
            let walls: Vec<Duration> = samples.iter().map(|s| s.wall).collect();
            let cleanups: Vec<Duration> = samples.iter().filter_map(|s| s.cleanup).collect();
            let worst = |f: fn(&Sample) -> usize| samples.iter().map(f).max().unwrap_or(0);
            serde_json::json!({
                "n": n,
                "contender": contender.label(),
                "samples": samples.len(),
                "cleanup_median_ms": (!cleanups.is_empty()).then(|| ms_of(median(&cleanups))),
                "cleanup_p90_ms": (!cleanups.is_empty()).then(|| ms_of(p90(&cleanups))),
                "wall_median_ms": ms_of(median(&walls)),
                "wall_p90_ms": ms_of(p90(&walls)),
                "tree": worst(|s| s.tree),
                "alive_at_return": worst(|s| s.alive_at_return),
                "alive_after_settle": worst(|s| s.alive_after_settle),
                "reported_survivors": samples.iter().filter_map(|s| s.reported_survivors).max(),
            })
        })
        .collect();
    if corral_tests::bench::write_results("kill", rows).is_err() {
        failures.push("results file".to_owned());
    }
}
