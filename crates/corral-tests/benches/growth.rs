//! Growth: how the cost of owning a tree grows with the tree, from 1 to
//! 1,000 processes, on each corral backend beside process-wrap's process
//! group and GNU `timeout -k`.
//!
//! Two scenarios, each with trees of N = 1, 10, 100 and 1,000 processes
//! (the leader included):
//!
//! - **spawn-to-exit**: the fixture's `tree-exit N-1` (N-1 children exist at
//!   once, then all exit by themselves and the leader reaps them and exits
//!   0), timed from building the command to having its exit status (which
//!   must be 0);
//! - **deadline-to-empty**: the fixture's `tree-ignore N-1` (every process
//!   ignores `SIGTERM`, every third child is in a new session via `setsid()`:
//!   an escapee of the process group), given a deadline and a grace of
//!   50 ms (corral: `.timeout(T).grace(50 ms)`; GNU: `timeout -k 0.05 T`;
//!   process-wrap, which has no deadline of its own: at T `SIGTERM` to the
//!   group, 50 ms later `start_kill()`), timed from the deadline to the call
//!   returning. T is set per N so that the tree is complete well before it
//!   (twice the slowest readiness seen so far); a run whose tree was not
//!   ready by its deadline is discarded and counted.
//!
//! After each deadline run every pid of the readiness line is checked
//! through `/proc/PID/stat` (same start time, not a zombie): alive when the
//! call returned, and 100 ms later (a process sent `SIGKILL` needs a moment
//! to die, an escapee does not); what still runs is then killed by identity
//! (pidfd, start time re-checked). Contenders run interleaved, the order
//! rotating every round; one warm-up round per N is not counted.
//!
//! ```text
//! cargo bench -p corral-tests --bench growth                  # 1, 10, 100, 1000
//! cargo bench -p corral-tests --bench growth -- --quick       # 1, 10, 100; 2 rounds
//! cargo bench -p corral-tests --bench growth -- --sizes 1000 --rounds 3
//! ```
//! Results: `growth.json` in the results directory (`--results DIR`,
//! `CORRAL_BENCH_RESULTS`, else `docs/bench/`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use corral::{Backend, BackendChoice, Outcome};
use corral_tests::{
    Guard, Proc,
    bench::{Knobs, machine_line, median, ms, ms_f64, p90, ratio, write_results},
    proc::count_alive,
    try_parse_ready,
};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

const TIMEOUT: &str = "/usr/bin/timeout";
/// The grace between `SIGTERM` and `SIGKILL`, the same for every contender.
const GRACE: Duration = Duration::from_millis(50);
/// The shortest deadline given.
const MIN_DEADLINE: Duration = Duration::from_millis(150);
/// Bounds reading the readiness line.
const READY_BOUND: Duration = Duration::from_secs(60);
/// Bounds one call (a spawn-to-exit run, or the wait after a deadline).
const ONE_BOUND: Duration = Duration::from_secs(30);
/// How long after the return the tree is checked a second time.
const SETTLE: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Contender {
    Corral(Backend),
    ProcessWrap,
    Timeout,
}

impl Contender {
    fn label(self) -> String {
        match self {
            Contender::Corral(b) => format!("corral {b}"),
            Contender::ProcessWrap => "process-wrap ProcessGroup".to_owned(),
            Contender::Timeout => "GNU timeout -k".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Scenario {
    SpawnToExit,
    DeadlineToEmpty,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::SpawnToExit => "spawn-to-exit",
            Scenario::DeadlineToEmpty => "deadline-to-empty",
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
struct Sample {
    took: Duration,
    /// Processes of the tree running when the call returned.
    alive_at_return: usize,
    /// ... and `SETTLE` later.
    alive_after_settle: usize,
    /// Processes in the tree (deadline runs; 0 when not identified).
    tree: usize,
    /// corral's `report.survivors.len()`.
    reported: Option<usize>,
}

impl Sample {
    fn exited(took: Duration, reported: Option<usize>) -> Self {
        Self {
            took,
            alive_at_return: 0,
            alive_after_settle: 0,
            tree: 0,
            reported,
        }
    }
}

/// A run's result: measured, or discarded (its tree was not ready by its
/// deadline), with the time the tree took to be ready.
enum Run {
    Measured(Sample, Duration),
    Late(Duration),
}

async fn read_ready(stdout: impl AsyncRead + Unpin) -> Result<Vec<Proc>, String> {
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(READY_BOUND, lines.next_line())
        .await
        .map_err(|_| "no readiness line in time".to_owned())?
        .map_err(|e| format!("reading the readiness line: {e}"))?
        .ok_or("the fixture closed stdout without a readiness line")?;
    let procs = try_parse_ready(&line).ok_or_else(|| format!("bad readiness line: {line:?}"))?;
    Ok(procs)
}

fn check_size(procs: &[Proc], n: usize) -> Result<(), String> {
    if procs.len() == n {
        Ok(())
    } else {
        Err(format!(
            "expected {n} processes, {} are running",
            procs.len()
        ))
    }
}

/// The survivors of a deadline run, then the run's result.
async fn finish(
    procs: &[Proc],
    took: Duration,
    ready_in: Duration,
    late: bool,
    reported: Option<usize>,
) -> Run {
    let alive_at_return = count_alive(procs);
    tokio::time::sleep(SETTLE).await;
    let sample = Sample {
        took,
        alive_at_return,
        alive_after_settle: count_alive(procs),
        tree: procs.len(),
        reported,
    };
    if late {
        Run::Late(ready_in)
    } else {
        Run::Measured(sample, ready_in)
    }
}

async fn spawn_to_exit(fixture: &Path, n: usize, contender: Contender) -> Result<Sample, String> {
    let args = ["tree-exit".to_owned(), (n - 1).to_string()];
    let started = Instant::now();
    match contender {
        Contender::Corral(backend) => {
            let mut child = corral::Command::new(fixture)
                .args(args)
                .backend(BackendChoice::Only(backend))
                .stdin(corral::Stdio::Null)
                .stdout(corral::Stdio::Null)
                .stderr(corral::Stdio::Inherit)
                .spawn()
                .map_err(|e| format!("spawn: {e}"))?;
            // A timeout drops the child, which terminates the tree.
            let finished = tokio::time::timeout(ONE_BOUND, child.wait())
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("wait: {e}"))?;
            let took = started.elapsed();
            if finished.outcome != (Outcome::Exited { code: 0 }) {
                return Err(format!("outcome {:?}", finished.outcome));
            }
            if finished.report.cgroup_not_removed {
                return Err(format!("left its cgroup {:?}", finished.report.cgroup));
            }
            Ok(Sample::exited(took, Some(finished.report.survivors.len())))
        }
        Contender::ProcessWrap => {
            let mut child = CommandWrap::with_new(fixture, |command| {
                command
                    .args(&args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .kill_on_drop(true);
            })
            .wrap(ProcessGroup::leader())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
            let status = tokio::time::timeout(ONE_BOUND, child.wait())
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("wait: {e}"))?;
            let took = started.elapsed();
            status
                .success()
                .then_some(Sample::exited(took, None))
                .ok_or_else(|| format!("status {status}"))
        }
        Contender::Timeout => {
            let status = tokio::process::Command::new(TIMEOUT)
                .args(["-k", "5", "60"])
                .arg(fixture)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .kill_on_drop(true)
                .status();
            let status = tokio::time::timeout(ONE_BOUND, status)
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("spawn: {e}"))?;
            let took = started.elapsed();
            status
                .success()
                .then_some(Sample::exited(took, None))
                .ok_or_else(|| format!("status {status}"))
        }
    }
}

async fn deadline_to_empty(
    fixture: &Path,
    n: usize,
    contender: Contender,
    limit: Duration,
) -> Result<Run, String> {
    let args = ["tree-ignore".to_owned(), (n - 1).to_string()];
    let mut guard = Guard::default();
    let started = Instant::now();
    let deadline = started + limit;
    match contender {
        Contender::Corral(backend) => {
            let mut child = corral::Command::new(fixture)
                .args(args)
                .backend(BackendChoice::Only(backend))
                .timeout(limit)
                .grace(GRACE)
                .final_bound(Duration::from_secs(10))
                .stdin(corral::Stdio::Null)
                .stdout(corral::Stdio::Piped)
                .stderr(corral::Stdio::Inherit)
                .spawn()
                .map_err(|e| format!("spawn: {e}"))?;
            let stdout = child.take_stdout().ok_or("no stdout pipe")?;
            // If anything below fails, dropping `child` terminates the tree
            // and the guard kills whatever of it still runs.
            guard.procs = read_ready(stdout).await?;
            let ready_in = started.elapsed();
            check_size(&guard.procs, n)?;
            let finished = tokio::time::timeout(ONE_BOUND + limit, child.wait())
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("wait: {e}"))?;
            let took = Instant::now().saturating_duration_since(deadline);
            if finished.outcome != Outcome::TimedOut {
                return Err(format!("outcome {:?}", finished.outcome));
            }
            if finished.report.cgroup_not_removed {
                return Err(format!("left its cgroup {:?}", finished.report.cgroup));
            }
            let reported = Some(finished.report.survivors.len());
            let late = ready_in >= limit;
            Ok(finish(&guard.procs, took, ready_in, late, reported).await)
        }
        Contender::ProcessWrap => {
            let mut child = CommandWrap::with_new(fixture, |command| {
                command
                    .args(&args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .kill_on_drop(true);
            })
            .wrap(ProcessGroup::leader())
            .spawn()
            .map_err(|e| format!("spawn: {e}"))?;
            let stdout = child.stdout().take().ok_or("no stdout pipe")?;
            let ready = read_ready(stdout).await;
            let ready_in = started.elapsed();
            let ready = ready.and_then(|procs| check_size(&procs, n).map(|()| procs));
            match ready {
                Ok(procs) => guard.procs = procs,
                Err(error) => {
                    let _ = child.start_kill();
                    let _ = tokio::time::timeout(ONE_BOUND, child.wait()).await;
                    return Err(error);
                }
            }
            tokio::time::sleep_until(deadline.into()).await;
            child
                .signal(libc::SIGTERM)
                .map_err(|e| format!("SIGTERM: {e}"))?;
            tokio::time::sleep(GRACE).await;
            child.start_kill().map_err(|e| format!("start_kill: {e}"))?;
            tokio::time::timeout(ONE_BOUND, child.wait())
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("wait: {e}"))?;
            let took = Instant::now().saturating_duration_since(deadline);
            let late = ready_in >= limit;
            Ok(finish(&guard.procs, took, ready_in, late, None).await)
            // `guard` kills the escapees here, by pidfd.
        }
        Contender::Timeout => {
            let mut child = tokio::process::Command::new(TIMEOUT)
                .arg("-k")
                .arg(format!("{:.3}", GRACE.as_secs_f64()))
                .arg(format!("{:.3}", limit.as_secs_f64()))
                .arg(fixture)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("spawn: {e}"))?;
            let stdout = child.stdout.take().ok_or("no stdout pipe")?;
            guard.procs = read_ready(stdout).await?;
            let ready_in = started.elapsed();
            check_size(&guard.procs, n)?;
            let status = tokio::time::timeout(ONE_BOUND + limit, child.wait())
                .await
                .map_err(|_| "did not return in time".to_owned())?
                .map_err(|e| format!("wait: {e}"))?;
            let took = Instant::now().saturating_duration_since(deadline);
            // 124: timed out and the command died of SIGTERM; 137 or
            // SIGKILL: timeout killed the group, itself included.
            if status.success() {
                return Err(format!("status {status}: the deadline did not fire"));
            }
            let late = ready_in >= limit;
            Ok(finish(&guard.procs, took, ready_in, late, None).await)
        }
    }
}

/// The deadline for a tree of `n`: twice the slowest readiness seen so far
/// (a guess of 1 ms per process before any), at least [`MIN_DEADLINE`].
fn deadline_for(slowest_ready: Option<Duration>, n: usize) -> Duration {
    let slowest = slowest_ready.unwrap_or(Duration::from_millis(n as u64));
    (slowest * 2 + Duration::from_millis(50)).max(MIN_DEADLINE)
}

/// Rounds for a size: explicit, else full or quick.
fn rounds(knobs: &Knobs, scenario: Scenario, n: usize) -> usize {
    let full = match (scenario, n) {
        (Scenario::SpawnToExit, ..=10) => 30,
        (Scenario::SpawnToExit, ..=100) => 15,
        (Scenario::SpawnToExit, _) => 6,
        (Scenario::DeadlineToEmpty, ..=10) => 10,
        (Scenario::DeadlineToEmpty, ..=100) => 8,
        (Scenario::DeadlineToEmpty, _) => 5,
    };
    knobs.rounds_or(full, 2)
}

type Key = (Scenario, usize, Contender);

struct Results {
    samples: HashMap<Key, Vec<Sample>>,
    late: HashMap<Key, usize>,
    failures: Vec<String>,
}

async fn measure(
    fixture: &Path,
    knobs: &Knobs,
    sizes: &[usize],
    contenders: &[Contender],
) -> Results {
    let mut results = Results {
        samples: HashMap::new(),
        late: HashMap::new(),
        failures: Vec::new(),
    };
    let mut slowest_ready: HashMap<usize, Duration> = HashMap::new();
    for &n in sizes {
        for scenario in [Scenario::SpawnToExit, Scenario::DeadlineToEmpty] {
            let rounds = rounds(knobs, scenario, n);
            println!(
                "{} N = {n}: {rounds} interleaved rounds, one warm-up round",
                scenario.name()
            );
            for round in 0..=rounds {
                let k = contenders.len();
                for j in 0..k {
                    let contender = contenders[(round + j) % k];
                    let key = (scenario, n, contender);
                    let limit = deadline_for(slowest_ready.get(&n).copied(), n);
                    let run = match scenario {
                        Scenario::SpawnToExit => spawn_to_exit(fixture, n, contender)
                            .await
                            .map(|s| Run::Measured(s, Duration::ZERO)),
                        Scenario::DeadlineToEmpty => {
                            deadline_to_empty(fixture, n, contender, limit).await
                        }
                    };
                    let label = contender.label();
                    let warm = if round == 0 { " (warm-up)" } else { "" };
                    match run {
                        Ok(Run::Measured(sample, ready_in)) => {
                            if scenario == Scenario::DeadlineToEmpty {
                                let slowest = slowest_ready.entry(n).or_default();
                                *slowest = (*slowest).max(ready_in);
                            }
                            eprintln!(
                                "  {} N={n} round {round}{warm} {label:<26} {:>9} ms  alive@return {:>4}  alive@+100ms {:>4}",
                                scenario.name(),
                                ms(sample.took),
                                sample.alive_at_return,
                                sample.alive_after_settle,
                            );
                            if round > 0 {
                                results.samples.entry(key).or_default().push(sample);
                            }
                        }
                        Ok(Run::Late(ready_in)) => {
                            let slowest = slowest_ready.entry(n).or_default();
                            *slowest = (*slowest).max(ready_in);
                            eprintln!(
                                "  {} N={n} round {round} {label}: discarded, ready after {} ms (deadline {} ms)",
                                scenario.name(),
                                ms(ready_in),
                                ms(limit)
                            );
                            *results.late.entry(key).or_default() += 1;
                        }
                        Err(error) => {
                            eprintln!(
                                "  {} N={n} round {round} {label}: FAILED: {error}",
                                scenario.name()
                            );
                            results
                                .failures
                                .push(format!("{} N={n} {label}: {error}", scenario.name()));
                        }
                    }
                    // Let the exits of one run settle before the next.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    results
}

fn main() -> ExitCode {
    let knobs = Knobs::from_env();
    let sizes: Vec<usize> = knobs
        .get("sizes")
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| {
            if knobs.quick {
                vec![1, 10, 100]
            } else {
                vec![1, 10, 100, 1000]
            }
        })
        .into_iter()
        .filter(|&n| n >= 1)
        .collect();
    corral_tests::bench::run_checked(run(&knobs, &sizes))
}

async fn run(knobs: &Knobs, sizes: &[usize]) -> ExitCode {
    let fixture = PathBuf::from(env!("CARGO_BIN_EXE_fixture"));
    corral::settings::Settings::new().subreaper().apply();
    let mut contenders: Vec<Contender> = corral_tests::bench::corral_backends()
        .into_iter()
        .map(Contender::Corral)
        .collect();
    contenders.push(Contender::ProcessWrap);
    if Path::new(TIMEOUT).exists() {
        contenders.push(Contender::Timeout);
    } else {
        println!("skipping GNU timeout: {TIMEOUT} is missing");
    }

    println!(
        "growth: trees of N processes (leader included), grace {} ms",
        GRACE.as_millis()
    );
    println!("{}", machine_line());
    let results = measure(&fixture, knobs, sizes, &contenders).await;

    println!();
    println!(
        "| scenario | N | contender | n | median (ms) | p90 (ms) | vs corral cgroup | alive@return | alive@+100ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    let mut leaks = Vec::new();
    for scenario in [Scenario::SpawnToExit, Scenario::DeadlineToEmpty] {
        for &n in sizes {
            let took_of = |c: Contender| -> Option<Vec<Duration>> {
                let samples = results.samples.get(&(scenario, n, c))?;
                Some(samples.iter().map(|s| s.took).collect())
            };
            let base = took_of(Contender::Corral(Backend::Cgroup)).map(|t| median(&t));
            for &contender in &contenders {
                let key = (scenario, n, contender);
                let Some(samples) = results.samples.get(&key) else {
                    continue;
                };
                let took: Vec<Duration> = samples.iter().map(|s| s.took).collect();
                let worst = |f: fn(&Sample) -> usize| samples.iter().map(f).max().unwrap_or(0);
                let (at_return, after_settle) = (
                    worst(|s| s.alive_at_return),
                    worst(|s| s.alive_after_settle),
                );
                let tree = worst(|s| s.tree);
                let reported = samples.iter().filter_map(|s| s.reported).max();
                let late = results.late.get(&key).copied().unwrap_or(0);
                println!(
                    "| {} | {n} | {} | {} | {} | {} | {} | {} | {} |",
                    scenario.name(),
                    contender.label(),
                    took.len(),
                    ms(median(&took)),
                    ms(p90(&took)),
                    base.map_or("-".to_owned(), |b| format!(
                        "{:.2}x",
                        ratio(median(&took), b)
                    )),
                    if tree > 0 {
                        format!("{at_return}/{tree}")
                    } else {
                        "-".to_owned()
                    },
                    if tree > 0 {
                        format!("{after_settle}/{tree}")
                    } else {
                        "-".to_owned()
                    },
                );
                if matches!(contender, Contender::Corral(_)) && after_settle > 0 {
                    leaks.push(format!(
                        "{} N={n} {}: {after_settle} processes left running",
                        scenario.name(),
                        contender.label()
                    ));
                }
                rows.push(serde_json::json!({
                    "scenario": scenario.name(),
                    "n": n,
                    "contender": contender.label(),
                    "samples": took.len(),
                    "median_ms": ms_f64(median(&took)),
                    "p90_ms": ms_f64(p90(&took)),
                    "tree": tree,
                    "alive_at_return": at_return,
                    "alive_after_settle": after_settle,
                    "reported_survivors": reported,
                    "discarded_late": late,
                }));
            }
        }
    }
    println!();
    println!(
        "deadline-to-empty: from the deadline to the call returning, {} ms grace included; \
         alive columns: worst round, identity-checked through /proc",
        GRACE.as_millis()
    );
    let late: usize = results.late.values().sum();
    if late > 0 {
        println!("runs discarded (tree not ready by its deadline): {late}");
    }
    let written = write_results("growth", rows);
    let failures: Vec<&String> = results.failures.iter().chain(&leaks).collect();
    if failures.is_empty() && written.is_ok() {
        println!("failures: none");
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failures.len());
        for failure in failures {
            println!("  {failure}");
        }
        ExitCode::FAILURE
    }
}
