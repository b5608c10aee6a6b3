//! `--max-procs`, `--max-memory`, `--max-swap`, `--cpus`, `--cpu-time`, the
//! per-process `--max-open-files`, `--max-core-size`, `--max-address-space`,
//! and `--limits-best-effort`: resource limits on the whole tree, the same for
//! every subcommand that runs one (see docs/limits.md).

use std::time::Duration;

use clap::Args;

/// The limit options.
#[derive(Debug, Default, Clone, Args)]
pub struct LimitArgs {
    /// At most N processes (and threads) in the whole tree at once; a fork
    /// beyond it fails (cgroup pids.max). Refused forks are counted in the
    /// report; a command that then fails ends "limit_exceeded processes".
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_procs: Option<u64>,

    /// At most SIZE of memory for the whole tree (512M, 2G; binary units),
    /// no swap unless --max-swap; out of memory, the kernel kills the whole
    /// tree at once and corral exits 137 (cgroup memory.max, memory.oom.group).
    #[arg(long, value_name = "SIZE", value_parser = corral::parse_size)]
    pub max_memory: Option<u64>,

    /// Swap the tree may use beyond --max-memory (default 0).
    #[arg(long, value_name = "SIZE", value_parser = corral::parse_size, requires = "max_memory")]
    pub max_swap: Option<u64>,

    /// CPU bandwidth for the whole tree, in CPUs (0.5 is half of one CPU,
    /// 2 is two); the tree is throttled, never ended for it (cgroup cpu.max).
    #[arg(long, value_name = "FRACTION", value_parser = parse_cpus)]
    pub cpus: Option<f64>,

    /// CPU time the whole tree may use (all its processes and CPUs summed);
    /// when spent, the tree is ended as on a timeout (--signal, then
    /// --kill-after) and corral exits 152 (128+SIGXCPU, as ulimit -t).
    #[arg(long, value_name = "DURATION", value_parser = parse_cpu_time)]
    pub cpu_time: Option<Duration>,

    /// At most N open files per process (RLIMIT_NOFILE, soft and hard), set
    /// on the command and inherited by everything it starts; any backend.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_open_files: Option<u64>,

    /// The largest core dump per process (RLIMIT_CORE; 0: none), as
    /// --max-open-files.
    #[arg(long, value_name = "SIZE", value_parser = corral::parse_size)]
    pub max_core_size: Option<u64>,

    /// The most virtual memory per process (RLIMIT_AS), as
    /// --max-open-files; per process, unlike --max-memory.
    #[arg(long, value_name = "SIZE", value_parser = corral::parse_size)]
    pub max_address_space: Option<u64>,

    /// Run even where a limit cannot be enforced (no cgroup, a controller
    /// missing, a per-process limit above the hard limit without root): the
    /// report lists which limits applied and why not the others. Without it, such a limit is an error (125) and nothing runs.
    #[arg(long)]
    pub limits_best_effort: bool,
}

impl LimitArgs {
    /// The library's limits.
    pub fn limits(&self) -> corral::Limits {
        let mut limits = corral::Limits::new().best_effort(self.limits_best_effort);
        limits.max_processes = self.max_procs;
        limits.max_memory = self.max_memory;
        limits.max_swap = self.max_swap;
        limits.cpus = self.cpus;
        // An unbounded budget (`inf`, as GNU durations allow) is none.
        limits.cpu_time = self.cpu_time.filter(|budget| *budget < NO_BUDGET);
        limits.open_files = self.max_open_files;
        limits.core_size = self.max_core_size;
        limits.address_space = self.max_address_space;
        limits
    }
}

/// A CPU-time budget this large (over a century of CPU) is no budget.
const NO_BUDGET: Duration = Duration::from_secs(1 << 32);

fn parse_cpus(text: &str) -> Result<f64, String> {
    let (min, max) = (corral::MIN_CPUS, corral::MAX_CPUS);
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|cpus| cpus.is_finite() && (min..=max).contains(cpus))
        .ok_or_else(|| {
            format!("invalid CPU count {text:?}: give a number from {min} to {max}, e.g. 0.5 or 2")
        })
}

fn parse_cpu_time(text: &str) -> Result<Duration, String> {
    match crate::gnu_duration::parse_lenient(text) {
        Ok(d) if d.is_zero() => Err("a CPU-time budget must be more than 0".to_owned()),
        Ok(d) => Ok(d),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_a_bounded_number() {
        assert_eq!(parse_cpus("0.2"), Ok(0.2));
        assert_eq!(parse_cpus(" 2 "), Ok(2.0));
        for bad in ["0", "-1", "nan", "inf", "1e9", "half", "", "0.001"] {
            assert!(
                parse_cpus(bad).expect_err(bad).contains("e.g. 0.5"),
                "{bad}"
            );
        }
    }

    #[test]
    fn cpu_time_is_a_positive_duration() {
        assert_eq!(parse_cpu_time("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_cpu_time("1.5"), Ok(Duration::from_millis(1500)));
        assert!(
            parse_cpu_time("0")
                .expect_err("zero")
                .contains("more than 0")
        );
        assert!(parse_cpu_time("soon").is_err());
    }

    #[test]
    fn the_options_become_the_library_limits() {
        let args = LimitArgs {
            max_procs: Some(64),
            max_memory: Some(64 << 20),
            max_swap: None,
            cpus: Some(0.5),
            cpu_time: Some(Duration::from_secs(2)),
            max_open_files: Some(64),
            max_core_size: Some(0),
            max_address_space: None,
            limits_best_effort: true,
        };
        let limits = args.limits();
        assert_eq!(limits.max_processes, Some(64));
        assert_eq!(limits.max_memory, Some(64 << 20));
        assert_eq!(limits.cpus, Some(0.5));
        assert_eq!(limits.cpu_time, Some(Duration::from_secs(2)));
        assert!(limits.best_effort_tree && limits.best_effort_process);
        assert_eq!(limits.open_files, Some(64));
        assert_eq!(limits.core_size, Some(0));
        assert!(LimitArgs::default().limits().is_empty());
        let unbounded = LimitArgs {
            cpu_time: parse_cpu_time("inf").ok(),
            ..LimitArgs::default()
        };
        assert!(unbounded.limits().is_empty(), "--cpu-time inf is no budget");
    }
}
