//! What the benchmarks share: command-line knobs, statistics, a line about
//! the machine, the results files, and the check that no cgroup leaf is left
//! behind.

use std::{
    fs,
    path::PathBuf,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// The environment variable naming the directory results files go to.
pub const RESULTS_ENV: &str = "CORRAL_BENCH_RESULTS";

/// Command-line and environment knobs common to the benches.
///
/// `cargo bench` appends `--bench` to the arguments of `harness = false`
/// targets; it and anything unknown is ignored.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Quick (CI-sized) run: fewer rounds.
    pub quick: bool,
    /// Explicit round count (`--rounds N` or `CORRAL_BENCH_ROUNDS`).
    pub rounds: Option<usize>,
    /// Other `--key value` pairs, for bench-specific options.
    pub extra: Vec<(String, String)>,
}

impl Knobs {
    pub fn from_env() -> Self {
        let mut quick = std::env::var_os("CORRAL_BENCH_QUICK").is_some_and(|v| v != "0");
        let mut rounds = std::env::var("CORRAL_BENCH_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok());
        let mut extra = Vec::new();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()),
                "--bench" => {}
                other if other.starts_with("--") => {
                    if let Some(value) = args.next() {
                        extra.push((other.trim_start_matches("--").to_owned(), value));
                    }
                }
                _ => {}
            }
        }
        Self {
            quick,
            rounds,
            extra,
        }
    }

    /// The value of `--key value`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Rounds to run: explicit, else `quick` or `full`.
    pub fn rounds_or(&self, full: usize, quick: usize) -> usize {
        self.rounds
            .unwrap_or(if self.quick { quick } else { full })
            .max(1)
    }
}

/// The `q`-quantile (nearest rank) of `samples` (sorted here).
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median (nearest rank, lower middle for even counts).
pub fn median(samples: &[Duration]) -> Duration {
    quantile(samples, 0.5)
}

/// The 90th percentile (nearest rank).
pub fn p90(samples: &[Duration]) -> Duration {
    quantile(samples, 0.9)
}

/// A duration in milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// `a / b` as a ratio.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        f64::NAN
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

/// One line saying what machine this is (for the record).
pub fn machine_line() -> String {
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "machine: Linux {}, {cpus} CPUs, loadavg {}",
        kernel.trim(),
        load.join(" ")
    )
}

/// The directory the results files go to: `--results DIR` on the command
/// line, else `$CORRAL_BENCH_RESULTS`, else `docs/bench/` of the workspace
/// (the checked-in results BENCHMARKS.md is drawn from).
pub fn results_dir() -> PathBuf {
    let args: Vec<String> = std::env::args().collect();
    let flag = args
        .windows(2)
        .rev()
        .find(|w| w[0] == "--results")
        .map(|w| PathBuf::from(&w[1]));
    flag.or_else(|| std::env::var_os(RESULTS_ENV).map(PathBuf::from))
        .unwrap_or_else(|| {
            let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let workspace = crate_dir.ancestors().nth(2).unwrap_or(crate_dir);
            workspace.join("docs/bench")
        })
}

/// Writes `BENCH.json` in [`results_dir`]: the bench's name, whether the
/// run was quick (CI-sized: its figures are not the recorded ones), when
/// (Unix time), the load average and the machine, and `rows`, one object per
/// measured row. Prints where it went; an error is printed and returned.
pub fn write_results(bench: &str, rows: Vec<serde_json::Value>) -> std::io::Result<PathBuf> {
    let dir = results_dir();
    let path = dir.join(format!("{bench}.json"));
    let knobs = Knobs::from_env();
    let document = serde_json::json!({
        "bench": bench,
        "quick": knobs.quick || std::env::args().any(|a| a == "--quick"),
        "unix_time": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "load_average": fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "machine": machine_line(),
        "rows": rows,
    });
    let text = serde_json::to_string_pretty(&document).map_err(std::io::Error::other);
    let written = fs::create_dir_all(&dir)
        .and(text)
        .and_then(|text| fs::write(&path, text + "\n"));
    match written {
        Ok(()) => {
            println!("results: {}", path.display());
            Ok(path)
        }
        Err(error) => {
            println!("results: could not write {}: {error}", path.display());
            Err(error)
        }
    }
}

/// A results row for one contender timed against a baseline: `contender`,
/// `samples`, `median_ms`, `p90_ms`, and the ratios of its median and p90 to
/// the baseline's.
pub fn timing_row(contender: &str, samples: &[Duration], base: &[Duration]) -> serde_json::Value {
    serde_json::json!({
        "contender": contender,
        "samples": samples.len(),
        "median_ms": ms_f64(median(samples)),
        "p90_ms": ms_f64(p90(samples)),
        "ratio_median": ratio(median(samples), median(base)),
        "ratio_p90": ratio(p90(samples), p90(base)),
    })
}

/// A duration in milliseconds, for a results file.
pub fn ms_f64(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The directory corral creates its cgroup leaves in (the cgroup v2 mount
/// joined with this process's own cgroup), if there is one. Read here, not
/// asked of corral, so that the check does not trust what it checks.
pub fn leaf_parent() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(own.trim_start_matches('/')))
}

/// The directories in the leaf parent whose names start with one of
/// `prefixes`, sorted.
pub fn leaves_named(prefixes: &[String]) -> Vec<PathBuf> {
    let Some(entries) = leaf_parent().and_then(|p| fs::read_dir(p).ok()) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            prefixes.iter().any(|p| name.starts_with(p.as_str()))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Prints (and returns the number of) the `corral-*` cgroups this process
/// created (`corral-PID-N` by the library, `corral-bench-PID-N` by the
/// diagnostics) that still exist. Leaves of other processes (a colleague's
/// test running at the same time) are mentioned but not counted.
pub fn report_cgroups_left() -> usize {
    let pid = std::process::id();
    let ours = [format!("corral-{pid}-"), format!("corral-bench-{pid}-")];
    let (left, others): (Vec<PathBuf>, Vec<PathBuf>) = leaves_named(&["corral-".to_owned()])
        .into_iter()
        .partition(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| ours.iter().any(|prefix| n.starts_with(prefix.as_str())))
        });
    if left.is_empty() {
        println!("cgroups left behind by this run: none");
    } else {
        println!("cgroups left behind by this run: {}", left.len());
        for path in &left {
            println!("  {}", path.display());
        }
    }
    if !others.is_empty() {
        println!(
            "(other processes' corral cgroups exist right now, not counted: {})",
            others.len()
        );
    }
    left.len()
}

/// Runs a bench's `work` on a two-worker runtime, shuts it down within 5 s
/// (a blocking reaper thread cannot hold the exit up for ever), and fails if
/// the run left a cgroup leaf of its own behind.
pub fn run_checked(
    work: impl std::future::Future<Output = std::process::ExitCode>,
) -> std::process::ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(work);
    runtime.shutdown_timeout(Duration::from_secs(5));
    if report_cgroups_left() > 0 {
        return std::process::ExitCode::FAILURE;
    }
    code
}

/// The corral backends this machine offers, in the order cgroup,
/// subreaper, group; each one it does not offer is said with the reason.
pub fn corral_backends() -> Vec<corral::Backend> {
    use corral::Backend;
    let caps = corral::capabilities();
    [Backend::Cgroup, Backend::Subreaper, Backend::Group]
        .into_iter()
        .filter(
            |&backend| match caps.backends.iter().find(|s| s.backend == backend) {
                Some(s) if s.available => true,
                Some(s) => {
                    println!("skipping corral {}: {}", s.backend, s.detail);
                    false
                }
                None => false,
            },
        )
        .collect()
}
