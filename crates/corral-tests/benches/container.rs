//! The scanned backends where they are the default: corral in the
//! unprivileged-container shape (`corral_tests::shapes::Shape::Unprivileged`:
//! user, PID and mount namespaces with a fresh `/proc`, cgroup2 mounted
//! read-only in a private cgroup namespace), where `auto` gives the
//! subreaper backend and its `/proc` walks cover only the container.
//!
//! The bench runs itself again inside the shape as a worker (the namespace's
//! PID 1, as a container's entrypoint is) and drives it over a pipe, one
//! request a line, so that everything is measured in one run, interleaved:
//! - *spawn + wait* of `/bin/true` (stdio on `/dev/null`) through
//!   `corral::Command` with the default backend, against
//!   `tokio::process::Command` `.status()`, both in the shape;
//! - the *kill* of the fixture's `tree-ignore 1000` (1,001 processes ignoring
//!   `SIGTERM`, every third child in a session of its own) by corral in the
//!   shape (`grace(0)`: `terminate()` is grace expiry, the library's
//!   `report.cleanup_time`), against a bare `cgroup.kill` of the same tree
//!   on the host (a leaf the bench makes in its own cgroup, as root);
//! - and, to say where corral's kill time goes, two diagnostics in the
//!   shape: one walk of its `/proc` while the tree runs (taken just before
//!   corral's kill), and a kill with nothing to find: the tree's 1,001
//!   pidfds opened from its readiness line, then one `SIGKILL` each
//!   (*signals*) and a wait until every pidfd says the process exited
//!   (*waits*).
//!
//! Without user namespaces, root or cgroup v2 it prints a `SKIPPED:` line and
//! succeeds.
//!
//! ```text
//! cargo bench -p corral-tests --bench container               # 300 spawn rounds, 10 kill rounds
//! cargo bench -p corral-tests --bench container -- --quick    # 30 and 2
//! cargo bench -p corral-tests --bench container -- --rounds N # N kill rounds, 30 N spawn rounds
//! ```

use std::{
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use bare_kill::{WAIT_BOUND, read_ready};
use corral::Outcome;
use corral_tests::{
    Guard,
    bench::{Knobs, machine_line, median, ms, ms_f64, p90, ratio, timing_row},
    proc::count_alive,
    shapes::Shape,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

mod bare_kill;

/// Set in the worker's environment: the fixture's path.
const INNER: &str = "CORRAL_BENCH_CONTAINER_FIXTURE";
/// The command spawned and waited for.
const PROGRAM: &str = "/bin/true";
/// Children of the killed tree's leader.
const N: usize = 1000;
/// corral's final bound: generous, so a slow kill is measured, not cut off.
const FINAL_BOUND: Duration = Duration::from_secs(10);
/// Targets (issue 25): ratios of medians, same run.
const SPAWN_TARGET: f64 = 1.3;
const KILL_TARGET: f64 = 2.0;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Some(fixture) = std::env::var_os(INNER) {
        corral::settings::Settings::new().subreaper().apply();
        let code = runtime.block_on(worker(PathBuf::from(fixture)));
        runtime.shutdown_timeout(Duration::from_secs(5));
        return code;
    }
    drop(runtime);
    let knobs = Knobs::from_env();
    corral_tests::bench::run_checked(outer(&knobs))
}

// ---- inside the shape ----

/// Answers one request a line with one JSON line, until `quit` or the end
/// of stdin.
async fn worker(fixture: PathBuf) -> ExitCode {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Ok(Some(request)) = lines.next_line().await {
        let answer = match request.as_str() {
            "spawn corral" => spawn_corral().await,
            "spawn tokio" => spawn_tokio().await,
            "kill corral" => kill_corral(&fixture).await,
            "kill pidfd" => kill_pidfd(&fixture).await,
            "quit" => break,
            other => Err(format!("unknown request {other:?}")),
        };
        let mut answer = answer.unwrap_or_else(|error| json!({ "error": error }));
        answer["zombies_after"] = json!(own_zombies());
        let line = answer.to_string() + "\n";
        if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// This process's children that are zombies (the namespace's orphans that
/// no one has reaped).
fn own_zombies() -> usize {
    let me = std::process::id() as i32;
    corral_tests::proc::all_processes()
        .map(|all| {
            all.iter()
                .filter(|s| s.ppid == me && s.state == 'Z')
                .count()
        })
        .unwrap_or(0)
}

async fn spawn_corral() -> Result<Value, String> {
    let started = Instant::now();
    let mut child = corral::Command::new(PROGRAM)
        .stdin(corral::Stdio::Null)
        .stdout(corral::Stdio::Null)
        .stderr(corral::Stdio::Null)
        .spawn()
        .map_err(|e| format!("corral spawn: {e}"))?;
    let backend = child.backend();
    let finished = child
        .wait()
        .await
        .map_err(|e| format!("corral wait: {e}"))?;
    let elapsed = started.elapsed();
    if finished.outcome != (Outcome::Exited { code: 0 }) || !finished.report.survivors.is_empty() {
        return Err(format!(
            "corral: {:?} {:?}",
            finished.outcome, finished.report
        ));
    }
    Ok(json!({ "ms": ms_f64(elapsed), "backend": backend.name() }))
}

async fn spawn_tokio() -> Result<Value, String> {
    let started = Instant::now();
    let status = tokio::process::Command::new(PROGRAM)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| format!("tokio: {e}"))?;
    let elapsed = started.elapsed();
    if !status.success() {
        return Err(format!("tokio: {status}"));
    }
    Ok(json!({ "ms": ms_f64(elapsed) }))
}

/// A pidfd for each of `procs`, or an error if one is gone.
fn pidfds_of(procs: &[corral_tests::Proc]) -> Result<Vec<OwnedFd>, String> {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let pidfds: Vec<OwnedFd> = procs
        .iter()
        .filter_map(|p| pidfd_open(Pid::from_raw(p.pid)?, PidfdFlags::empty()).ok())
        .collect();
    if pidfds.len() != procs.len() || count_alive(procs) != procs.len() {
        return Err(format!(
            "{} pidfds for {} processes",
            pidfds.len(),
            procs.len()
        ));
    }
    Ok(pidfds)
}

/// Waits, one after the other, until each pidfd says its process exited;
/// the time from `started` to the last exit seen.
fn wait_exited(pidfds: &[OwnedFd], started: Instant) -> Result<Duration, String> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let deadline = started + WAIT_BOUND;
    for pidfd in pidfds {
        loop {
            let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
            let timeout = Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            if poll(&mut fds, Some(&timeout)).is_ok_and(|n| n > 0) {
                break;
            }
            if Instant::now() >= deadline {
                return Err("a process did not exit in time".to_owned());
            }
        }
    }
    Ok(started.elapsed())
}

/// corral's kill of the tree, with one walk of `/proc` timed just before it.
async fn kill_corral(fixture: &Path) -> Result<Value, String> {
    let mut child = corral::Command::new(fixture)
        .args(["tree-ignore".to_owned(), N.to_string()])
        .grace(Duration::ZERO)
        .final_bound(FINAL_BOUND)
        .stdin(corral::Stdio::Null)
        .stdout(corral::Stdio::Piped)
        .stderr(corral::Stdio::Inherit)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let backend = child.backend();
    let stdout = child.take_stdout().ok_or("no stdout pipe")?;
    let mut guard = Guard::default();
    guard.procs = read_ready(stdout).await?;
    if guard.procs.len() != N + 1 {
        return Err(format!("{} processes are running", guard.procs.len()));
    }
    let walk_started = Instant::now();
    let walked = corral_tests::proc::all_processes().map_err(|e| format!("/proc: {e}"))?;
    let walk = walk_started.elapsed();
    // Watched from outside corral: when the last member exits.
    let pidfds = pidfds_of(&guard.procs)?;
    let started = Instant::now();
    let last_exit = tokio::task::spawn_blocking(move || wait_exited(&pidfds, started));
    child.terminate();
    let finished = tokio::time::timeout(WAIT_BOUND, child.wait())
        .await
        .map_err(|_| "corral did not return in time".to_owned())?
        .map_err(|e| format!("wait: {e}"))?;
    let wall = started.elapsed();
    let last_exit = last_exit.await.map_err(|e| format!("the watcher: {e}"))??;
    Ok(json!({
        "backend": backend.name(),
        "last_exit_ms": ms_f64(last_exit),
        "cleanup_ms": ms_f64(finished.report.cleanup_time),
        "wall_ms": ms_f64(wall),
        "walk_ms": ms_f64(walk),
        "walked": walked.len(),
        "zombies": walked.iter().filter(|s| s.state == 'Z').count(),
        "tree": guard.procs.len(),
        "alive_at_return": count_alive(&guard.procs),
        "reported_survivors": finished.report.survivors.len(),
    }))
}

/// The tree killed with nothing to find: pidfds of its readiness line, one
/// `SIGKILL` each, then a wait on all of them.
async fn kill_pidfd(fixture: &Path) -> Result<Value, String> {
    use rustix::process::{Signal, pidfd_send_signal};
    let mut child = tokio::process::Command::new(fixture)
        .args(["tree-ignore".to_owned(), N.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let mut guard = Guard::default();
    guard.procs = read_ready(stdout).await?;
    let pidfds = pidfds_of(&guard.procs)?;
    let started = Instant::now();
    for pidfd in &pidfds {
        pidfd_send_signal(pidfd, Signal::KILL).map_err(|e| format!("pidfd_send_signal: {e}"))?;
    }
    let signals = started.elapsed();
    let total = wait_exited(&pidfds, started)?;
    // The leader is ours; its children were adopted by this process (the
    // namespace's PID 1): reap them all.
    let _ = tokio::time::timeout(WAIT_BOUND, child.wait()).await;
    // (`-1`: any child; rustix's `waitpid(None)` is `0`, this process group
    // only, which the `setsid` children left.)
    // SAFETY: `waitpid` with a valid pointer to a local.
    while unsafe { libc::waitpid(-1, &mut 0, libc::WNOHANG) } > 0 {}
    Ok(json!({
        "signals_ms": ms_f64(signals),
        "waits_ms": ms_f64(total - signals),
        "cleanup_ms": ms_f64(total),
    }))
}

// ---- on the host ----

/// The worker in the shape.
struct Worker {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Worker {
    async fn ask(&mut self, request: &str) -> Result<Value, String> {
        let stdin = self.child.stdin.as_mut().ok_or("no stdin")?;
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .map_err(|e| format!("to the worker: {e}"))?;
        let line = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
            .await
            .map_err(|_| format!("the worker did not answer {request:?} in time"))?
            .map_err(|e| format!("from the worker: {e}"))?
            .ok_or("the worker exited")?;
        let answer: Value =
            serde_json::from_str(&line).map_err(|e| format!("worker said {line:?}: {e}"))?;
        if answer["zombies_after"].as_u64().is_some_and(|z| z > 0) {
            return Err(format!(
                "{request} left {} zombies in the namespace",
                answer["zombies_after"]
            ));
        }
        match answer.get("error") {
            Some(error) => Err(format!("{request}: {error}")),
            None => Ok(answer),
        }
    }
}

fn field(answer: &Value, key: &str) -> Result<Duration, String> {
    answer
        .get(key)
        .and_then(Value::as_f64)
        .map(|v| Duration::from_secs_f64(v / 1e3))
        .ok_or_else(|| format!("no {key} in {answer}"))
}

#[derive(Default)]
struct Kills {
    corral: Vec<Duration>,
    corral_wall: Vec<Duration>,
    walk: Vec<Duration>,
    last_exit: Vec<Duration>,
    walked: usize,
    bare: Vec<Duration>,
    bare_wall: Vec<Duration>,
    signals: Vec<Duration>,
    waits: Vec<Duration>,
    pidfd: Vec<Duration>,
    alive_at_return: usize,
    reported: usize,
    backend: String,
}

async fn outer(knobs: &Knobs) -> ExitCode {
    let shape = Shape::Unprivileged;
    let lane = match shape.lane("bench-container") {
        Ok(lane) => lane,
        Err(reason) => {
            corral_tests::skipped(format!("{}: {reason}", shape.name()));
            return ExitCode::SUCCESS;
        }
    };
    if !corral_tests::is_root() || corral_tests::bench::leaf_parent().is_none() {
        corral_tests::skipped("container bench: the bare cgroup.kill needs root and cgroup v2");
        return ExitCode::SUCCESS;
    }
    let fixture = PathBuf::from(env!("CARGO_BIN_EXE_fixture"));
    let exe = std::env::current_exe().expect("this bench binary");
    let mut command = tokio::process::Command::from(lane.command(exe));
    command
        .env(INNER, &fixture)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            println!("the worker did not start in the shape: {error}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let mut worker = Worker {
        child,
        lines: BufReader::new(stdout).lines(),
    };
    let kill_rounds = knobs.rounds_or(10, 2);
    let spawn_rounds = knobs.rounds.map_or(knobs.rounds_or(300, 30), |r| 30 * r);
    println!(
        "corral in the {} shape: spawn + wait against tokio, kill of tree-ignore {N} against a bare cgroup.kill on the host",
        shape.name()
    );
    println!("{}", machine_line());
    let result = measure(&mut worker, &fixture, spawn_rounds, kill_rounds).await;
    let _ = worker.ask("quit").await;
    drop(worker.child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), worker.child.wait()).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            println!("FAILED: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn measure(
    worker: &mut Worker,
    fixture: &Path,
    spawn_rounds: usize,
    kill_rounds: usize,
) -> Result<(), String> {
    // Spawn + wait, interleaved, the order alternating.
    let warmup = (spawn_rounds / 10).clamp(3, 30);
    let (mut corral, mut tokio) = (Vec::new(), Vec::new());
    let mut backend = String::new();
    println!("spawn + wait: {spawn_rounds} rounds after {warmup} warm-up rounds");
    for round in 0..warmup + spawn_rounds {
        for j in 0..2 {
            let corral_turn = (round + j) % 2 == 0;
            let request = if corral_turn {
                "spawn corral"
            } else {
                "spawn tokio"
            };
            let answer = worker.ask(request).await?;
            if round < warmup {
                continue;
            }
            if corral_turn {
                corral.push(field(&answer, "ms")?);
                backend = answer["backend"].as_str().unwrap_or("?").to_owned();
            } else {
                tokio.push(field(&answer, "ms")?);
            }
        }
    }
    if backend != "subreaper" {
        return Err(format!(
            "corral picked the {backend} backend in the shape, not the subreaper one"
        ));
    }

    // The kill, interleaved, the order rotating; one warm-up round.
    println!("kill of tree-ignore {N}: {kill_rounds} rounds after one warm-up round");
    let mut kills = Kills::default();
    for round in 0..=kill_rounds {
        for j in 0..3 {
            match (round + j) % 3 {
                0 => {
                    let answer = worker.ask("kill corral").await?;
                    let cleanup = field(&answer, "cleanup_ms")?;
                    eprintln!(
                        "  round {round} corral {} (in the shape): cleanup {} ms, walk {} ms of {} processes ({} zombies)",
                        answer["backend"].as_str().unwrap_or("?"),
                        ms(cleanup),
                        ms(field(&answer, "walk_ms")?),
                        answer["walked"],
                        answer["zombies"]
                    );
                    if round == 0 {
                        continue;
                    }
                    kills.corral.push(cleanup);
                    kills.corral_wall.push(field(&answer, "wall_ms")?);
                    kills.walk.push(field(&answer, "walk_ms")?);
                    kills.last_exit.push(field(&answer, "last_exit_ms")?);
                    let count = |key: &str| answer[key].as_u64().unwrap_or(u64::MAX) as usize;
                    kills.walked = kills.walked.max(count("walked"));
                    kills.alive_at_return = kills.alive_at_return.max(count("alive_at_return"));
                    kills.reported = kills.reported.max(count("reported_survivors"));
                    kills.backend = answer["backend"].as_str().unwrap_or("?").to_owned();
                }
                1 => {
                    let bare = bare_kill::bare_cgroup_kill(fixture, N).await?;
                    eprintln!(
                        "  round {round} bare cgroup.kill (host): cleanup {} ms, {} processes",
                        ms(bare.cleanup),
                        bare.guard.procs.len()
                    );
                    if bare.alive_at_return > 0 {
                        return Err(format!("{} alive after cgroup.kill", bare.alive_at_return));
                    }
                    if round > 0 {
                        kills.bare.push(bare.cleanup);
                        kills.bare_wall.push(bare.wall);
                    }
                }
                _ => {
                    let answer = worker.ask("kill pidfd").await?;
                    eprintln!(
                        "  round {round} (diag) pidfd kill (in the shape): {} ms",
                        ms(field(&answer, "cleanup_ms")?)
                    );
                    if round > 0 {
                        kills.signals.push(field(&answer, "signals_ms")?);
                        kills.waits.push(field(&answer, "waits_ms")?);
                        kills.pidfd.push(field(&answer, "cleanup_ms")?);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if kills.backend != "subreaper" {
        return Err(format!("the kill ran on the {} backend", kills.backend));
    }
    if kills.alive_at_return > 0 || kills.reported > 0 {
        return Err(format!(
            "corral's kill left {} alive ({} reported)",
            kills.alive_at_return, kills.reported
        ));
    }
    report(&corral, &tokio, &kills)
}

fn report(corral: &[Duration], tokio: &[Duration], kills: &Kills) -> Result<(), String> {
    let spawn_ratio = ratio(median(corral), median(tokio));
    let kill_ratio = ratio(median(&kills.corral), median(&kills.bare));
    let verdict = |r: f64, target: f64| if r <= target { "met" } else { "MISSED" };
    let line = |name: &str, s: &[Duration], base: &[Duration]| {
        println!(
            "| {name:<44} | {:>3} | {:>9} | {:>9} | {:>6.2}x |",
            s.len(),
            ms(median(s)),
            ms(p90(s)),
            ratio(median(s), median(base))
        );
    };
    println!();
    println!(
        "| {:<44} | {:>3} | {:>9} | {:>9} | {:>7} |",
        "contender", "n", "median ms", "p90 ms", "ratio"
    );
    println!(
        "|{:-<46}|{:->5}|{:->11}|{:->11}|{:->9}|",
        "", "", "", "", ""
    );
    line("spawn+wait: tokio::process status()", tokio, tokio);
    line("spawn+wait: corral (auto: subreaper)", corral, tokio);
    line(
        "kill 1,001: bare cgroup.kill (host)",
        &kills.bare,
        &kills.bare,
    );
    line(
        "kill 1,001: corral subreaper (in the shape)",
        &kills.corral,
        &kills.bare,
    );
    line(
        "(diag) one /proc walk, tree running",
        &kills.walk,
        &kills.bare,
    );
    line(
        "(diag) corral: trigger to the last exit",
        &kills.last_exit,
        &kills.bare,
    );
    line("(diag) pidfd kill: signals", &kills.signals, &kills.bare);
    line("(diag) pidfd kill: waits", &kills.waits, &kills.bare);
    line("(diag) pidfd kill: total", &kills.pidfd, &kills.bare);
    println!();
    println!(
        "target: spawn+wait <= {SPAWN_TARGET}x tokio: {spawn_ratio:.2}x: {}",
        verdict(spawn_ratio, SPAWN_TARGET)
    );
    println!(
        "target: kill <= {KILL_TARGET}x bare cgroup.kill: {kill_ratio:.2}x, {}/{} alive at return: {}",
        kills.alive_at_return,
        N + 1,
        verdict(kill_ratio, KILL_TARGET)
    );
    println!(
        "the walk read {} processes (the container's /proc)",
        kills.walked
    );
    let mut rows = vec![
        with(timing_row("tokio::process status()", tokio, tokio), "spawn"),
        with(
            timing_row("corral (auto: subreaper)", corral, tokio),
            "spawn",
        ),
        with(
            timing_row("bare cgroup.kill (host)", &kills.bare, &kills.bare),
            "kill",
        ),
        with(
            timing_row(
                "corral subreaper (in the shape)",
                &kills.corral,
                &kills.bare,
            ),
            "kill",
        ),
        with(
            timing_row("(diag) one /proc walk", &kills.walk, &kills.bare),
            "kill",
        ),
        with(
            timing_row(
                "(diag) corral: to the last exit",
                &kills.last_exit,
                &kills.bare,
            ),
            "kill",
        ),
        with(
            timing_row("(diag) pidfd kill: signals", &kills.signals, &kills.bare),
            "kill",
        ),
        with(
            timing_row("(diag) pidfd kill: waits", &kills.waits, &kills.bare),
            "kill",
        ),
        with(
            timing_row("(diag) pidfd kill: total", &kills.pidfd, &kills.bare),
            "kill",
        ),
    ];
    rows[3]["wall_median_ms"] = json!(ms_f64(median(&kills.corral_wall)));
    rows[3]["tree"] = json!(N + 1);
    rows[3]["alive_at_return"] = json!(kills.alive_at_return);
    rows[4]["walked"] = json!(kills.walked);
    rows[2]["wall_median_ms"] = json!(ms_f64(median(&kills.bare_wall)));
    corral_tests::bench::write_results("container", rows)
        .map(|_| ())
        .map_err(|e| format!("results file: {e}"))
}

fn with(mut row: Value, section: &str) -> Value {
    row["section"] = json!(section);
    row
}
