//! Scale: one host supervising many long-running trees at once.
//!
//! For each backend that can hold many trees in one process (cgroup and
//! process group; the subreaper backend is one tree per process by design),
//! one process spawns N trees (`sh -c 'sleep 1000 & exec sleep 1000'`: a
//! leader and a background escapee), all with one common deadline, on a
//! two-worker tokio runtime as an agent host would run. It measures the
//! supervisor's resident memory, threads and descriptors with every tree
//! running, its CPU while all of them wait (a whole-process figure from
//! `/proc/self/stat`, over an idle window), and, at the deadline, the time
//! from the deadline to the last tree's result; then it checks that every
//! process it started is gone (survivors reported by corral, and a census of
//! the processes it spawned, by identity).
//!
//! Usage: `cargo bench -p corral-tests --bench scale -- [--trees N]
//! [--idle SECS] [--backend cgroup|group]...`. Prints one line per backend
//! and writes `scale.json` in the results directory (`--results DIR`,
//! `CORRAL_BENCH_RESULTS`, else `docs/bench/`).

use std::time::{Duration, Instant};

use corral::{Backend, BackendChoice, Command, Outcome};
use corral_tests::Proc;

/// What one backend did.
#[derive(Debug)]
struct Row {
    backend: &'static str,
    trees: usize,
    spawn_secs: f64,
    rss_mib: f64,
    threads: usize,
    fds: usize,
    idle_cpu_percent: f64,
    idle_secs: f64,
    back_after_deadline_secs: f64,
    timed_out: usize,
    survivors_reported: usize,
    left_running: usize,
}

fn status_field(name: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(Iterator::count).unwrap_or(0)
}

/// This process's CPU time (user + system), in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(14) + field(15)
}

fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf with a valid name only returns a value.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 { n as f64 } else { 100.0 }
}

/// `pid` by identity, if it runs.
fn identity(pid: i32) -> Option<Proc> {
    Proc::of(pid).filter(Proc::is_alive)
}

/// The children of `pid` (its first thread's `children` file).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

async fn run_backend(backend: Backend, trees: usize, idle: Duration) -> Result<Row, String> {
    let spawn_started = Instant::now();
    // Long enough to spawn every tree (about 2.5 ms each here, given 10)
    // and wait out the idle window.
    let deadline =
        spawn_started + Duration::from_secs(5) + Duration::from_millis(10) * trees as u32 + idle;
    let mut handles = Vec::with_capacity(trees);
    let mut started: Vec<Proc> = Vec::new();
    for _ in 0..trees {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 1000 & exec sleep 1000"])
            .backend(BackendChoice::Only(backend))
            .timeout(deadline.saturating_duration_since(Instant::now()))
            .grace(Duration::from_secs(2))
            .final_bound(Duration::from_secs(2))
            .spawn()
            .map_err(|e| format!("spawn on {backend}: {e}"))?;
        if let Some(id) = identity(child.id()) {
            started.push(id);
        }
        handles.push(tokio::spawn(async move { child.wait().await }));
    }
    let spawn_secs = spawn_started.elapsed().as_secs_f64();
    // Let every tree reach its steady state (the escapee forked, the first
    // re-scans done), then note the escapees by identity for the census.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let leaders = started.clone();
    for leader in &leaders {
        started.extend(children(leader.pid).into_iter().filter_map(identity));
    }
    let rss_mib = status_field("VmRSS:").unwrap_or(0.0) / 1024.0;
    let threads = count("/proc/self/task");
    let fds = count("/proc/self/fd");
    let idle_started = Instant::now();
    let ticks = cpu_ticks();
    tokio::time::sleep(idle.min(deadline.saturating_duration_since(Instant::now()))).await;
    let idle_secs = idle_started.elapsed().as_secs_f64();
    let idle_cpu_percent =
        100.0 * (cpu_ticks() - ticks) as f64 / ticks_per_sec() / idle_secs.max(1e-9);
    let mut timed_out = 0;
    let mut survivors_reported = 0;
    for handle in handles {
        let finished = handle
            .await
            .map_err(|e| format!("join: {e}"))?
            .map_err(|e| format!("wait: {e}"))?;
        timed_out += usize::from(finished.outcome == Outcome::TimedOut);
        survivors_reported += finished.report.survivors.len();
    }
    let back_after_deadline_secs = Instant::now()
        .saturating_duration_since(deadline)
        .as_secs_f64();
    let left: Vec<&Proc> = started.iter().filter(|p| p.is_alive()).collect();
    for proc in &left {
        // Ours by identity (pidfd, start time re-checked): clean up.
        proc.kill();
    }
    Ok(Row {
        backend: backend.name(),
        trees,
        spawn_secs,
        rss_mib,
        threads,
        fds,
        idle_cpu_percent,
        idle_secs,
        back_after_deadline_secs,
        timed_out,
        survivors_reported,
        left_running: left.len(),
    })
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let trees: usize = value("--trees")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 50 } else { 1000 });
    let idle = Duration::from_secs(
        value("--idle")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if quick { 2 } else { 10 }),
    );
    let mut backends: Vec<Backend> = args
        .windows(2)
        .filter(|w| w[0] == "--backend")
        .filter_map(|w| w[1].parse::<BackendChoice>().ok())
        .filter_map(|c| match c {
            BackendChoice::Only(b) => Some(b),
            BackendChoice::Auto => None,
        })
        .collect();
    if backends.is_empty() {
        backends = vec![Backend::Cgroup, Backend::Group];
    }
    if backends.len() > 1 {
        // One process per backend: memory a run leaves to the allocator
        // must not count against the next.
        let mut failed = false;
        let mut rows = Vec::new();
        for backend in &backends {
            let output = std::process::Command::new(std::env::current_exe().expect("exe"))
                .args(&args)
                .args(["--backend", backend.name()])
                .env("CORRAL_SCALE_CHILD", "1")
                .stderr(std::process::Stdio::inherit())
                .output()
                .expect("run one backend");
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            for line in text.lines() {
                match line.strip_prefix("ROW ") {
                    Some(json) => rows
                        .push(serde_json::from_str::<serde_json::Value>(json).unwrap_or_default()),
                    None => println!("{line}"),
                }
            }
            failed |= !output.status.success();
        }
        write_results(&rows);
        std::process::exit(i32::from(failed));
    }
    corral::settings::Settings::new()
        .ledger_dir(std::env::temp_dir().join(format!("corral-scale-{}", std::process::id())))
        .apply();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut rows = Vec::new();
    let mut failed = false;
    for backend in backends {
        match runtime.block_on(run_backend(backend, trees, idle)) {
            Ok(row) => {
                println!(
                    "scale {:<6} N={:<5} spawn {:>6.2} s  rss {:>6.1} MiB  threads {:>3}  fds {:>5}  \
                     idle cpu {:>6.1} %  back {:>6.2} s after the deadline  timed out {}  \
                     survivors {}  left running {}",
                    row.backend,
                    row.trees,
                    row.spawn_secs,
                    row.rss_mib,
                    row.threads,
                    row.fds,
                    row.idle_cpu_percent,
                    row.back_after_deadline_secs,
                    row.timed_out,
                    row.survivors_reported,
                    row.left_running
                );
                failed |= row.left_running > 0 || row.survivors_reported > 0;
                rows.push(row);
            }
            Err(error) if error.contains("not available") => {
                println!("scale {backend}: SKIPPED: {error}");
            }
            Err(error) => {
                eprintln!("scale {backend}: {error}");
                failed = true;
            }
        }
    }
    let rows_json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "backend": r.backend, "trees": r.trees, "spawn_secs": r.spawn_secs,
                "rss_mib": r.rss_mib, "threads": r.threads, "fds": r.fds,
                "idle_cpu_percent": r.idle_cpu_percent, "idle_secs": r.idle_secs,
                "back_after_deadline_secs": r.back_after_deadline_secs,
                "timed_out": r.timed_out, "survivors_reported": r.survivors_reported,
                "left_running": r.left_running,
            })
        })
        .collect();
    for row in &rows_json {
        println!("ROW {row}");
    }
    if backends_requested_once(&args) {
        write_results(&rows_json);
    }
    if failed {
        std::process::exit(1);
    }
}

/// Whether this process was asked for one backend by the user (not by a
/// parent run of this bench, which writes the results itself).
fn backends_requested_once(args: &[String]) -> bool {
    args.iter().filter(|a| *a == "--backend").count() == 1
        && std::env::var_os("CORRAL_SCALE_CHILD").is_none()
}

/// Writes `scale.json` in the results directory (see
/// `corral_tests::bench::results_dir`).
fn write_results(rows: &[serde_json::Value]) {
    if corral_tests::bench::write_results("scale", rows.to_vec()).is_err() {
        std::process::exit(1);
    }
}
