//! The cost of the owner-death guard (issue 4), measured in one run:
//!
//! 1. spawn + wait of `/bin/true` on the cgroup backend with the guard off
//!    (no ledger, no watchdog), with the ledger only, and with ledger and
//!    watchdog, interleaved round by round; ratios against "guard off";
//! 2. the memory of a watchdog: VmRSS of the helper started by executing the
//!    `owner` program (a library user with the hook), and of the one the
//!    `corral` command forks at start-up.
//!
//! `cargo bench -p corral-tests --bench watchdog` (`--rounds N` or
//! `CORRAL_BENCH_ROUNDS`; `--quick`).

use std::{
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use corral::{Backend, BackendChoice};
use corral_tests::bench::{
    Knobs, machine_line, median, ms, ms_f64, p90, ratio, timing_row, write_results,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Guard {
    Off,
    LedgerOnly,
    LedgerAndWatchdog,
}

impl Guard {
    fn name(self) -> &'static str {
        match self {
            Guard::Off => "guard off (no ledger, no watchdog)",
            Guard::LedgerOnly => "crash ledger only",
            Guard::LedgerAndWatchdog => "ledger + watchdog (default)",
        }
    }
}

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fixture"))
        .parent()
        .expect("target dir")
        .to_owned()
}

async fn spawn_true(guard: Guard) -> Result<Duration, String> {
    let started = Instant::now();
    let mut child = corral::Command::new("/bin/true")
        .backend(BackendChoice::Only(Backend::Cgroup))
        .stdin(corral::Stdio::Null)
        .stdout(corral::Stdio::Null)
        .stderr(corral::Stdio::Null)
        .ledger(guard != Guard::Off)
        .watchdog(guard == Guard::LedgerAndWatchdog)
        .spawn()
        .map_err(|e| e.to_string())?;
    let finished = child.wait().await.map_err(|e| e.to_string())?;
    if finished.outcome != (corral::Outcome::Exited { code: 0 }) {
        return Err(format!("{:?}", finished.outcome));
    }
    Ok(started.elapsed())
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The RSS of the watchdog that `corral run -- sleep 2` forks, read from
/// corral's other child while it runs.
fn forked_watchdog_rss(corral: &PathBuf) -> Option<u64> {
    let mut child = Command::new(corral)
        .args(["run", "--", "sleep", "2"])
        .env(
            "CORRAL_LEDGER_DIR",
            std::env::temp_dir().join("corral-bench-watchdog"),
        )
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut rss = None;
    while rss.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        rss = std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .find_map(|entry| {
                let other: u32 = entry.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{other}/stat")).ok()?;
                let ppid: u32 = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()?;
                let command =
                    std::fs::read_to_string(format!("/proc/{other}/cmdline")).unwrap_or_default();
                // corral's children: the command (`sleep`) and the watchdog (a fork of corral).
                (ppid == pid && command.contains("corral")).then(|| rss_kib(other))?
            });
    }
    let _ = child.wait();
    rss
}

fn main() -> ExitCode {
    let knobs = Knobs::from_env();
    let rounds = knobs.rounds_or(300, 30);
    if corral::capabilities().cgroup_parent.is_none() {
        println!("SKIPPED: the cgroup backend is not available here");
        return ExitCode::SUCCESS;
    }
    // The `owner` program calls `corral::watchdog::hook()`: it can serve as
    // the watchdog of this process.
    corral::settings::Settings::new()
        .watchdog_executable(target_dir().join("owner"))
        .apply();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let guards = [Guard::Off, Guard::LedgerOnly, Guard::LedgerAndWatchdog];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); guards.len()];
    let failures = runtime.block_on(async {
        let mut failures = 0;
        for round in 0..rounds + 10 {
            for (i, &guard) in guards.iter().enumerate() {
                match spawn_true(guard).await {
                    Ok(took) if round >= 10 => samples[i].push(took),
                    Ok(_) => {}
                    Err(error) => {
                        eprintln!("{}: {error}", guard.name());
                        failures += 1;
                    }
                }
            }
        }
        failures
    });
    let exec_rss = corral::watchdog::helper_pid().and_then(|pid| rss_kib(pid as u32));
    runtime.shutdown_timeout(Duration::from_secs(5));
    corral::watchdog::shutdown();

    println!("{}", machine_line());
    println!("\nspawn + wait of /bin/true, cgroup backend, {rounds} interleaved rounds\n");
    println!("| guard | median (ms) | p90 (ms) | median / off | p90 / off |");
    println!("|---|---|---|---|---|");
    let off = &samples[0];
    for (guard, s) in guards.iter().zip(&samples) {
        println!(
            "| {} | {} | {} | {:.2}x | {:.2}x |",
            guard.name(),
            ms(median(s)),
            ms(p90(s)),
            ratio(median(s), median(off)),
            ratio(p90(s), p90(off))
        );
    }
    let added = median(&samples[2]).saturating_sub(median(off));
    println!(
        "\nadded spawn latency of the whole guard (median): {:.3} ms",
        added.as_secs_f64() * 1e3
    );
    let corral = target_dir().join("corral");
    println!("\nwatchdog memory (VmRSS):");
    match exec_rss {
        Some(kib) => println!("- executed helper (`owner __corral-watchdog`): {kib} KiB"),
        None => println!("- executed helper: not measured"),
    }
    let mut forked_rss = None;
    if corral.exists() {
        forked_rss = forked_watchdog_rss(&corral);
        match forked_rss {
            Some(kib) => println!("- forked by `corral run` at start-up: {kib} KiB"),
            None => println!("- forked by `corral run`: not measured"),
        }
    } else {
        println!(
            "- forked by `corral run`: build the corral binary first (cargo build --release -p corral-cli)"
        );
    }
    let mut rows: Vec<serde_json::Value> = guards
        .iter()
        .zip(&samples)
        .map(|(guard, s)| timing_row(guard.name(), s, off))
        .collect();
    rows.push(serde_json::json!({
        "added_median_ms": ms_f64(added),
        "executed_helper_rss_kib": exec_rss,
        "forked_helper_rss_kib": forked_rss,
    }));
    let failures = failures + usize::from(write_results("watchdog", rows).is_err());
    println!("failures: {failures}");
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
