//! Whole-process benchmark: `corral run -- true` against GNU
//! `timeout 10 true`, in paired, interleaved runs (each round runs both, the
//! order alternating from round to round), with `std::process`.
//!
//! ```text
//! cargo bench -p corral-cli --bench cli                # 200 rounds
//! cargo bench -p corral-cli --bench cli -- --quick     # 20 rounds
//! cargo bench -p corral-cli --bench cli -- --rounds 500
//! CORRAL_BENCH_ROUNDS=50 cargo bench -p corral-cli --bench cli
//! ```
//!
//! Diagnostic rows (not the target): `true` run directly (the floor both
//! wrappers add to), `corral --version` (starting the binary alone: `exec`,
//! dynamic linking, argument parsing), `corral run --backend
//! group|subreaper -- true` (what the default, auto = cgroup on a cgroup v2
//! host with root, costs against the backends that need no cgroup), and,
//! with `CORRAL_BENCH_STATIC=PATH`, `corral run -- true` from a static-pie
//! build of the same code (`cargo release-static`, see `.cargo/config.toml`).
//! `CORRAL_BENCH_CORRAL=PATH` measures that binary instead of the bench
//! build (the shipped one: `scripts/package-deb` or `scripts/install` build
//! it), with the bench build as one more diagnostic row.
//! Every run is bounded (killed through its pidfd after 30 s, never by name),
//! and the bench checks that no `corral-PID-*` cgroup of any corral process it
//! started is left behind.

use std::{
    os::{fd::AsRawFd, unix::process::ExitStatusExt},
    path::PathBuf,
    process::{Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use corral_tests::bench::{
    Knobs, leaves_named, machine_line, ms, quantile, ratio, timing_row, write_results,
};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

const CORRAL: &str = env!("CARGO_BIN_EXE_corral");
const TIMEOUT: &str = "/usr/bin/timeout";
/// Bounds one run; a hang is killed (by pidfd) and reported as a failure.
const ONE_BOUND: Duration = Duration::from_secs(30);
const TARGET: f64 = 1.3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Corral,
    Timeout,
    Direct,
    Version,
    CorralBackend(&'static str),
    Static,
    BenchBuild,
}

/// The corral measured: `$CORRAL_BENCH_CORRAL`, else the bench build.
fn corral() -> PathBuf {
    given_build().unwrap_or_else(|| PathBuf::from(CORRAL))
}

/// `$CORRAL_BENCH_CORRAL`: the build to measure instead of the bench's.
fn given_build() -> Option<PathBuf> {
    std::env::var_os("CORRAL_BENCH_CORRAL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// `$CORRAL_BENCH_STATIC`: another build of corral to measure beside (named
/// for the static-pie build it was first used for).
fn static_build() -> Option<PathBuf> {
    std::env::var_os("CORRAL_BENCH_STATIC")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

impl Contender {
    fn label(self) -> &'static str {
        match self {
            Contender::Corral => "corral run -- true",
            Contender::Timeout => "timeout 10 true (GNU)",
            Contender::Direct => "(diag) true, directly",
            Contender::Version => "(diag) corral --version",
            Contender::Static => "(diag) corral run, $CORRAL_BENCH_STATIC",
            Contender::BenchBuild => "(diag) corral run, cargo bench build",
            Contender::CorralBackend("group") => "(diag) corral --backend group",
            Contender::CorralBackend("subreaper") => "(diag) corral --backend subreaper",
            Contender::CorralBackend(_) => "(diag) corral --backend ?",
        }
    }

    fn command(self) -> Command {
        let mut command = match self {
            Contender::Corral => {
                let mut c = Command::new(corral());
                c.args(["run", "--", "true"]);
                c
            }
            Contender::Timeout => {
                let mut c = Command::new(TIMEOUT);
                c.args(["10", "true"]);
                c
            }
            Contender::Direct => Command::new("true"),
            Contender::Version => {
                let mut c = Command::new(corral());
                c.arg("--version");
                c
            }
            Contender::Static => {
                let mut c = Command::new(static_build().unwrap_or_default());
                c.args(["run", "--", "true"]);
                c
            }
            Contender::BenchBuild => {
                let mut c = Command::new(CORRAL);
                c.args(["run", "--", "true"]);
                c
            }
            Contender::CorralBackend(backend) => {
                let mut c = Command::new(corral());
                c.args(["run", "--backend", backend, "--", "true"]);
                c
            }
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }
}

/// One run: spawn, wait (bounded), return the time and the pid.
fn once(contender: Contender) -> Result<(Duration, u32), String> {
    let started = Instant::now();
    let mut child = contender
        .command()
        .spawn()
        .map_err(|e| format!("{}: spawn: {e}", contender.label()))?;
    let pid = child.id();
    // Our unreaped child: this pidfd is it.
    let pidfd = Pid::from_raw(pid as i32)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
        .ok_or_else(|| format!("{}: pidfd_open failed", contender.label()))?;
    let deadline = started + ONE_BOUND;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = pidfd_send_signal(&pidfd, Signal::KILL);
                let _ = child.wait();
                return Err(format!("{}: still running after 30 s", contender.label()));
            }
            Ok(None) => {
                // A pidfd polls readable when the process exits.
                let mut fd = libc::pollfd {
                    fd: pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, for the duration of the call.
                unsafe { libc::poll(&mut fd, 1, 50) };
            }
            Err(e) => return Err(format!("{}: wait: {e}", contender.label())),
        }
    };
    let elapsed = started.elapsed();
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read;
            let _ = pipe.read_to_string(&mut stderr);
        }
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (_, Some(signal)) => format!("signal {signal}"),
            _ => status.to_string(),
        };
        return Err(format!(
            "{}: {how}; stderr: {}",
            contender.label(),
            stderr.trim()
        ));
    }
    Ok((elapsed, pid))
}

/// `corral-PID-*` leaves of the corral processes this bench started (all
/// `corral-*` leaves with no pids given).
fn leaves_left(pids: &[u32]) -> Vec<PathBuf> {
    let mut prefixes: Vec<String> = pids.iter().map(|p| format!("corral-{p}-")).collect();
    if pids.is_empty() {
        prefixes.push("corral-".to_owned());
    }
    leaves_named(&prefixes)
}

fn main() -> ExitCode {
    let rounds = Knobs::from_env().rounds_or(200, 20);
    let warmup = (rounds / 10).clamp(3, 20);

    println!(
        "corral run -- true vs timeout 10 true: {rounds} paired rounds after {warmup} warm-up rounds"
    );
    println!("{}", machine_line());
    println!("command: cargo bench -p corral-cli --bench cli -- --rounds {rounds}");
    println!("corral binary: {}", corral().display());

    // Does `corral run -- true` work at all?
    // Leaves other runs left on this machine: a recycled pid could match one.
    let stale = leaves_left(&[]);
    let mut corral_pids = Vec::new();
    match once(Contender::Corral) {
        Ok((_, pid)) => corral_pids.push(pid),
        Err(error) => {
            println!();
            println!("NOT MEASURED: `corral run -- true` does not work yet: {error}");
            return ExitCode::FAILURE;
        }
    }
    if let Err(error) = once(Contender::Timeout) {
        println!("NOT MEASURED: {error}");
        return ExitCode::FAILURE;
    }

    let mut contenders = vec![
        Contender::Corral,
        Contender::Timeout,
        Contender::Direct,
        Contender::Version,
        Contender::CorralBackend("group"),
        Contender::CorralBackend("subreaper"),
    ];
    if let Some(path) = static_build() {
        println!("$CORRAL_BENCH_STATIC build: {}", path.display());
        if let Err(error) = once(Contender::Static) {
            println!("NOT MEASURED: {error}");
            return ExitCode::FAILURE;
        }
        contenders.push(Contender::Static);
    }
    if given_build().is_some() {
        println!("the bench build, beside it: {CORRAL}");
        if let Err(error) = once(Contender::BenchBuild) {
            println!("NOT MEASURED: {error}");
            return ExitCode::FAILURE;
        }
        contenders.push(Contender::BenchBuild);
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); contenders.len()];
    let mut paired: Vec<f64> = Vec::with_capacity(rounds);
    let mut failures = Vec::new();
    let total = warmup + rounds;
    let progress_every = (total / 10).max(1);
    let started = Instant::now();
    for round in 0..total {
        // Alternate which of the pair goes first; the diagnostics go last.
        let mut order: Vec<usize> = (0..contenders.len()).collect();
        if round % 2 == 1 {
            order.swap(0, 1);
        }
        let mut this_round = vec![None; contenders.len()];
        for index in order {
            match once(contenders[index]) {
                Ok((d, pid)) => {
                    if matches!(
                        contenders[index],
                        Contender::Corral
                            | Contender::CorralBackend(_)
                            | Contender::Static
                            | Contender::BenchBuild
                    ) {
                        corral_pids.push(pid);
                    }
                    this_round[index] = Some(d);
                }
                Err(error) => {
                    eprintln!("round {round}: {error}");
                    failures.push(error);
                }
            }
        }
        if round >= warmup {
            for (index, d) in this_round.iter().enumerate() {
                if let Some(d) = d {
                    samples[index].push(*d);
                }
            }
            if let (Some(c), Some(t)) = (this_round[0], this_round[1]) {
                paired.push(ratio(c, t));
            }
        }
        if failures.len() > 20 {
            eprintln!("too many failures; stopping early");
            break;
        }
        if (round + 1) % progress_every == 0 {
            eprintln!(
                "  round {}/{total} ({:.1} s)",
                round + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }

    let (base_median, base_p90) = (quantile(&samples[1], 0.5), quantile(&samples[1], 0.9));
    println!();
    println!(
        "| {:<34} | {:>4} | {:>11} | {:>9} | {:>16} | {:>13} |",
        "command", "n", "median (ms)", "p90 (ms)", "median / timeout", "p90 / timeout"
    );
    println!(
        "|{:-<36}|{:->6}|{:->13}|{:->11}|{:->18}|{:->15}|",
        "", "", "", "", "", ""
    );
    for (contender, s) in contenders.iter().zip(&samples) {
        let (m, p) = (quantile(s, 0.5), quantile(s, 0.9));
        println!(
            "| {:<34} | {:>4} | {:>11} | {:>9} | {:>15.2}x | {:>12.2}x |",
            contender.label(),
            s.len(),
            ms(m),
            ms(p),
            ratio(m, base_median),
            ratio(p, base_p90)
        );
    }
    paired.sort_by(f64::total_cmp);
    let paired_median = paired.get(paired.len() / 2).copied().unwrap_or(f64::NAN);
    let r = ratio(quantile(&samples[0], 0.5), base_median);
    println!();
    println!("median of per-round ratios corral/timeout: {paired_median:.2}x");
    println!(
        "target: corral run -- true <= {TARGET}x timeout 10 true (ratio of medians): {:.2}x, {}",
        r,
        if r <= TARGET { "met" } else { "MISSED" }
    );
    let left: Vec<PathBuf> = leaves_left(&corral_pids)
        .into_iter()
        .filter(|leaf| !stale.contains(leaf))
        .collect();
    if left.is_empty() {
        println!("cgroups left behind by corral runs: none");
    } else {
        println!("cgroups left behind by corral runs: {}", left.len());
        for path in &left {
            println!("  {}", path.display());
        }
    }
    let mut rows: Vec<serde_json::Value> = contenders
        .iter()
        .zip(&samples)
        .map(|(contender, s)| timing_row(contender.label(), s, &samples[1]))
        .collect();
    rows.push(serde_json::json!({
        "paired_ratio_median": paired_median,
        "corral_binary": corral().display().to_string(),
    }));
    if write_results("cli", rows).is_err() {
        failures.push("results file".to_owned());
    }
    if failures.is_empty() && left.is_empty() {
        println!("failures: none");
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failures.len());
        ExitCode::FAILURE
    }
}
