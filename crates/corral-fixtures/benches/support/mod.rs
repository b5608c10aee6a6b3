//! Helpers shared by the benchmark binaries (`benches/spawn.rs`,
//! `benches/kill.rs`): command-line knobs, statistics, process identity and
//! clean-up by identity, and the check that no cgroup leaf is left behind.
//!
//! Processes are only ever signalled by *identity*: a pidfd is opened first,
//! then the start time in `/proc/PID/stat` is checked against the one read
//! when the process was first seen, and only then is the signal sent through
//! the pidfd. Nothing is ever signalled by name or by bare pid.

// Each bench binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::{
    fs,
    path::PathBuf,
    time::{Duration, Instant},
};

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

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

/// The fields of `/proc/PID/stat` used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub start_time: u64,
}

/// Reads `/proc/PID/stat`; `None` if there is no such process (any more).
pub fn stat(pid: i32) -> Option<Stat> {
    if pid <= 0 {
        return None;
    }
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// A process as first seen: pid plus start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Proc {
    pub pid: i32,
    pub start_time: u64,
}

impl Proc {
    /// Reads the identity of a running process now.
    pub fn identify(pid: i32) -> Option<Self> {
        stat(pid).map(|s| Self {
            pid,
            start_time: s.start_time,
        })
    }

    /// Whether this very process still runs (a zombie, a reaped process or a
    /// recycled pid all count as gone).
    pub fn is_running(&self) -> bool {
        match stat(self.pid) {
            Some(s) => s.start_time == self.start_time && !matches!(s.state, 'Z' | 'X' | 'x'),
            None => false,
        }
    }

    /// `SIGKILL` by identity: pidfd first, then the start-time check, then
    /// the signal through the pidfd. True if the signal was sent.
    pub fn kill(&self) -> bool {
        let Some(pid) = Pid::from_raw(self.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        // The pidfd pins the process; check it is still the one we saw.
        if !self.is_running() {
            return false;
        }
        pidfd_send_signal(&pidfd, Signal::KILL).is_ok()
    }
}

/// Identities of the pids on a readiness line (`ready <pid> <pid>...`).
/// Pids already gone are skipped.
pub fn parse_ready(line: &str) -> Option<Vec<Proc>> {
    let rest = line.trim().strip_prefix("ready")?;
    let pids: Vec<i32> = rest
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if pids.is_empty() {
        return None;
    }
    Some(pids.into_iter().filter_map(Proc::identify).collect())
}

/// How many of `procs` still run.
pub fn count_running(procs: &[Proc]) -> usize {
    procs.iter().filter(|p| p.is_running()).count()
}

/// Kills (by identity) every process of `procs` that still runs, then waits
/// up to `bound` for them to be gone. Returns (killed, still running).
pub fn kill_leftovers(procs: &[Proc], bound: Duration) -> (usize, usize) {
    let killed = procs.iter().filter(|p| p.kill()).count();
    let until = Instant::now() + bound;
    loop {
        let running = count_running(procs);
        if running == 0 || Instant::now() >= until {
            return (killed, running);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Kills whatever of the tree still runs when dropped (also on panic), so a
/// failing bench never leaks processes.
#[derive(Debug, Default)]
pub struct TreeGuard {
    pub procs: Vec<Proc>,
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        let (killed, running) = kill_leftovers(&self.procs, Duration::from_secs(5));
        if killed > 0 {
            eprintln!("  (guard: killed {killed} leftover processes by pidfd)");
        }
        if running > 0 {
            eprintln!("  WARNING: {running} processes still running after SIGKILL");
        }
    }
}

/// The directory corral creates its cgroup leaves in (the cgroup v2 mount
/// joined with this process's own cgroup), if there is one.
pub fn cgroup_parent() -> Option<PathBuf> {
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

/// `corral-*` directories in the leaf parent (cgroups left behind).
pub fn corral_cgroups() -> Vec<PathBuf> {
    let Some(parent) = cgroup_parent() else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("corral-"))
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
    let (left, others): (Vec<PathBuf>, Vec<PathBuf>) =
        corral_cgroups().into_iter().partition(|p| {
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
