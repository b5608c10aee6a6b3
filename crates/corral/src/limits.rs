//! Resource limits on a whole tree, as plain data: what the caller asks for
//! ([`Limits`]), which limit ended a tree ([`Limit`]), and what the kernel
//! counted ([`LimitsReport`]).
//!
//! Two sorts, each with its own best-effort switch:
//! - tree-wide limits (processes, memory, swap, CPUs, CPU time): the kernel
//!   enforces them on the tree's leaf cgroup (cgroup v2 controllers `pids`,
//!   `memory`, `cpu`), so they hold for every process of the tree at once;
//!   the CPU-time budget is read from the leaf's `cpu.stat` and spent budget
//!   ends the tree with its termination policy. Only the cgroup backend can
//!   apply them ([`Limits::best_effort_tree`]);
//! - per-process limits (open files, core size, address space): resource
//!   limits (`RLIMIT_*`) set on the leader before `exec` and inherited by
//!   every process it starts, on every backend; above this process's own
//!   hard limit only root may set them ([`Limits::best_effort_process`]).
//!
//! See `docs/limits.md`.

use std::{fmt, time::Duration};

use serde::Serialize;

/// Limits on the whole tree, and on each of its processes. Empty by default
/// (no limit).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use std::time::Duration;
/// use corral::{Command, Limit, Limits, Outcome};
/// let finished = Command::new("make")
///     .arg("-j8")
///     .timeout(Duration::from_secs(600))
///     .limits(
///         Limits::new()
///             .max_processes(256)
///             .max_memory(2 << 30)
///             .cpus(1.5)
///             .cpu_time(Duration::from_secs(1200)),
///     )
///     .run()
///     .await?;
/// if let Outcome::LimitExceeded { limit: Limit::Memory } = finished.outcome {
///     eprintln!("make ran out of memory; the whole tree is gone");
/// }
/// let counted = finished.report.limits.expect("a tree with limits reports them");
/// eprintln!("{} forks refused, {:?} of CPU", counted.fork_refusals, counted.cpu_used);
/// # Ok(()) }
/// ```
///
/// Every setter, and what the tree's cgroup must enforce:
///
/// ```
/// use corral::{LimitKind, Limits};
/// assert!(Limits::new().is_empty());
/// let limits = Limits::new()
///     .open_files(1024)
///     .core_size(0)
///     .address_space(8 << 30)
///     .best_effort_process(true);
/// assert!(!limits.is_empty());
/// assert!(limits.wanted().is_empty()); // per-process limits need no cgroup
/// let limits = limits.max_memory(1 << 30).max_swap(0).cpus(0.5).best_effort_tree(true);
/// assert_eq!(limits.wanted(), [LimitKind::Memory, LimitKind::Cpus]);
/// assert_eq!(LimitKind::Memory.controller(), Some("memory"));
/// assert_eq!(LimitKind::OpenFiles.controller(), None);
/// assert_eq!(Limits::new().best_effort(true), Limits::new().best_effort_tree(true).best_effort_process(true));
/// assert_eq!(limits.validate(), Ok(()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct Limits {
    /// At most this many processes (and threads) at once: `pids.max`. A
    /// `fork` beyond it fails with `EAGAIN`; the tree is not ended for it.
    pub max_processes: Option<u64>,
    /// At most this many bytes of memory: `memory.max`, with
    /// `memory.oom.group` set so that an out-of-memory kill takes the whole
    /// tree at once.
    pub max_memory: Option<u64>,
    /// Swap the tree may use beyond `max_memory`: `memory.swap.max` (zero
    /// unless set; only with `max_memory`).
    pub max_swap: Option<u64>,
    /// CPU bandwidth as a number of CPUs (`0.5` is half of one CPU):
    /// `cpu.max`. Throttling is reported, never fatal.
    pub cpus: Option<f64>,
    /// CPU time the whole tree may use (user and system, all CPUs summed);
    /// when spent, the tree is ended with the termination policy.
    pub cpu_time: Option<Duration>,
    /// At most this many open descriptors per process (`RLIMIT_NOFILE`, soft
    /// and hard), set on the leader before `exec` and inherited by every
    /// process it starts. Works on every backend.
    pub open_files: Option<u64>,
    /// The largest core dump per process, in bytes (`RLIMIT_CORE`; 0: none),
    /// as [`Limits::open_files`].
    pub core_size: Option<u64>,
    /// The most virtual memory per process, in bytes (`RLIMIT_AS`), as
    /// [`Limits::open_files`]. Per process, unlike [`Limits::max_memory`].
    pub address_space: Option<u64>,
    /// Whether a tree-wide limit (processes, memory, swap, CPUs, CPU time)
    /// this host cannot enforce (no cgroup for the tree, a controller
    /// missing) is skipped and reported ([`LimitsReport::not_applied`])
    /// instead of refusing to spawn.
    pub best_effort_tree: bool,
    /// Whether a per-process limit (open files, core size, address space)
    /// this process cannot set (above its own hard limit, without root) is
    /// skipped and reported ([`LimitsReport::not_applied`]) instead of
    /// refusing to spawn.
    pub best_effort_process: bool,
}

impl Limits {
    /// No limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Limits::max_processes`].
    pub fn max_processes(mut self, n: u64) -> Self {
        self.max_processes = Some(n);
        self
    }

    /// Sets [`Limits::max_memory`], in bytes.
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.max_memory = Some(bytes);
        self
    }

    /// Sets [`Limits::max_swap`], in bytes.
    pub fn max_swap(mut self, bytes: u64) -> Self {
        self.max_swap = Some(bytes);
        self
    }

    /// Sets [`Limits::cpus`].
    pub fn cpus(mut self, cpus: f64) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Sets [`Limits::cpu_time`].
    pub fn cpu_time(mut self, budget: Duration) -> Self {
        self.cpu_time = Some(budget);
        self
    }

    /// Sets [`Limits::open_files`].
    pub fn open_files(mut self, n: u64) -> Self {
        self.open_files = Some(n);
        self
    }

    /// Sets [`Limits::core_size`], in bytes.
    pub fn core_size(mut self, bytes: u64) -> Self {
        self.core_size = Some(bytes);
        self
    }

    /// Sets [`Limits::address_space`], in bytes.
    pub fn address_space(mut self, bytes: u64) -> Self {
        self.address_space = Some(bytes);
        self
    }

    /// Sets both [`Limits::best_effort_tree`] and
    /// [`Limits::best_effort_process`]: every limit this host cannot
    /// enforce is skipped and reported instead of refusing to spawn.
    pub fn best_effort(self, on: bool) -> Self {
        self.best_effort_tree(on).best_effort_process(on)
    }

    /// Sets [`Limits::best_effort_tree`].
    pub fn best_effort_tree(mut self, on: bool) -> Self {
        self.best_effort_tree = on;
        self
    }

    /// Sets [`Limits::best_effort_process`].
    pub fn best_effort_process(mut self, on: bool) -> Self {
        self.best_effort_process = on;
        self
    }

    /// Whether any limit is asked for.
    pub fn is_empty(&self) -> bool {
        self.max_processes.is_none()
            && self.max_memory.is_none()
            && self.max_swap.is_none()
            && self.cpus.is_none()
            && self.cpu_time.is_none()
            && self.open_files.is_none()
            && self.core_size.is_none()
            && self.address_space.is_none()
    }

    /// Checks the values themselves (not whether this host can enforce them).
    ///
    /// ```
    /// use corral::{LimitError, Limits};
    /// assert_eq!(Limits::new().max_swap(0).validate(), Err(LimitError::SwapWithoutMemory));
    /// ```
    ///
    /// # Errors
    /// The first value that cannot be, naming the limit and the fix.
    pub fn validate(&self) -> Result<(), LimitError> {
        if self.max_processes == Some(0) {
            return Err(LimitError::NoProcesses);
        }
        if self.max_memory == Some(0) {
            return Err(LimitError::NoMemory);
        }
        if self.max_swap.is_some() && self.max_memory.is_none() {
            return Err(LimitError::SwapWithoutMemory);
        }
        if let Some(cpus) = self.cpus
            && !(cpus.is_finite() && (MIN_CPUS..=MAX_CPUS).contains(&cpus))
        {
            return Err(LimitError::CpusOutOfRange { cpus });
        }
        if self.cpu_time == Some(Duration::ZERO) {
            return Err(LimitError::NoCpuTime);
        }
        if self.open_files == Some(0) {
            return Err(LimitError::NoOpenFiles);
        }
        Ok(())
    }

    /// The kinds of limit asked for that the tree's cgroup enforces (the
    /// per-process limits are set on the leader and need none).
    pub fn wanted(&self) -> Vec<LimitKind> {
        let asked = [
            self.max_processes.is_some(),
            self.max_memory.is_some(),
            self.cpus.is_some(),
            self.cpu_time.is_some(),
        ];
        LimitKind::ALL
            .into_iter()
            .zip(asked)
            .filter_map(|(kind, on)| on.then_some(kind))
            .collect()
    }
}

/// The smallest CPU bandwidth `cpu.max` takes with its default period
/// (1 ms of each 100 ms).
pub const MIN_CPUS: f64 = 0.01;
/// The largest CPU bandwidth accepted (a sanity bound, not the machine's).
pub const MAX_CPUS: f64 = 4096.0;

/// A limit whose value cannot be ([`Limits::validate`], and
/// [`Error::InvalidLimits`](crate::Error::InvalidLimits) from a spawn);
/// each message names the limit and what to ask for instead.
///
/// ```
/// use corral::{LimitError, Limits};
/// assert_eq!(Limits::new().max_processes(0).validate(), Err(LimitError::NoProcesses));
/// let error = Limits::new().cpus(0.0).validate().unwrap_err();
/// assert_eq!(error, LimitError::CpusOutOfRange { cpus: 0.0 });
/// assert_eq!(error.to_string(), "cpus must be a number of CPUs from 0.01 to 4096, not 0");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// [`Limits::max_processes`] is 0.
    #[error("max_processes must be at least 1; ask for 1 or more, or for no process limit")]
    NoProcesses,
    /// [`Limits::max_memory`] is 0 bytes.
    #[error("max_memory must be more than 0 bytes; ask for more, or for no memory limit")]
    NoMemory,
    /// [`Limits::max_swap`] without [`Limits::max_memory`].
    #[error("max_swap needs max_memory; set max_memory too, or drop max_swap")]
    SwapWithoutMemory,
    /// [`Limits::cpus`] outside [`MIN_CPUS`]..=[`MAX_CPUS`] (or not a number).
    #[error("cpus must be a number of CPUs from {MIN_CPUS} to {MAX_CPUS}, not {cpus}")]
    CpusOutOfRange {
        /// The value asked for.
        cpus: f64,
    },
    /// [`Limits::cpu_time`] is zero.
    #[error("cpu_time must be more than 0; ask for a budget, or for none")]
    NoCpuTime,
    /// [`Limits::open_files`] is 0.
    #[error("open_files must be at least 1 (a program needs its standard streams)")]
    NoOpenFiles,
    /// A per-process limit above this process's hard limit, which only root
    /// may raise (checked when spawning, as an unprivileged user).
    #[error(
        "{limit} of {value} is above this process's hard limit of {hard}, which only root may \
         raise; ask for at most {hard}"
    )]
    AboveHardLimit {
        /// The kernel's name for it (`RLIMIT_NOFILE`, `RLIMIT_CORE`,
        /// `RLIMIT_AS`).
        limit: &'static str,
        /// The value asked for.
        value: u64,
        /// This process's hard limit.
        hard: u64,
    },
}

/// Which limit ended a tree ([`Outcome::LimitExceeded`](crate::Outcome::LimitExceeded)).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use std::time::Duration;
/// use corral::{Command, Limit, Limits, Outcome};
/// let finished = Command::new("sh")
///     .args(["-c", "while :; do :; done"])
///     .limits(Limits::new().cpu_time(Duration::from_millis(200)))
///     .run()
///     .await?;
/// assert_eq!(finished.outcome, Outcome::LimitExceeded { limit: Limit::CpuTime });
/// assert_eq!(Limit::CpuTime.to_string(), "cpu time");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Limit {
    /// The tree ran out of memory and the kernel killed it (`memory.max`).
    Memory,
    /// The tree reached its process limit and its leader then failed
    /// (`pids.max`; refused forks are counted in
    /// [`LimitsReport::fork_refusals`]).
    Processes,
    /// The tree used its CPU-time budget and corral ended it.
    CpuTime,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::CpuTime => "cpu time",
        })
    }
}

/// One kind of limit, for reports and errors.
///
/// ```
/// use corral::LimitKind;
/// let controllers: Vec<_> = LimitKind::ALL.iter().map(|k| k.controller()).collect();
/// assert_eq!(controllers, [Some("pids"), Some("memory"), Some("cpu"), None]);
/// assert_eq!(LimitKind::OpenFiles.to_string(), "open files");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitKind {
    /// [`Limits::max_processes`].
    Processes,
    /// [`Limits::max_memory`] (and [`Limits::max_swap`]).
    Memory,
    /// [`Limits::cpus`].
    Cpus,
    /// [`Limits::cpu_time`].
    CpuTime,
    /// [`Limits::open_files`] (per process).
    OpenFiles,
    /// [`Limits::core_size`] (per process).
    CoreSize,
    /// [`Limits::address_space`] (per process).
    AddressSpace,
}

impl LimitKind {
    /// Every tree-wide kind: the ones the tree's cgroup enforces.
    pub const ALL: [Self; 4] = [Self::Processes, Self::Memory, Self::Cpus, Self::CpuTime];

    /// The cgroup v2 controller it needs, if any.
    pub fn controller(self) -> Option<&'static str> {
        match self {
            Self::Processes => Some("pids"),
            Self::Memory => Some("memory"),
            Self::Cpus => Some("cpu"),
            Self::CpuTime | Self::OpenFiles | Self::CoreSize | Self::AddressSpace => None,
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Processes => "max processes",
            Self::Memory => "max memory",
            Self::Cpus => "cpus",
            Self::CpuTime => "cpu time",
            Self::OpenFiles => "open files",
            Self::CoreSize => "core size",
            Self::AddressSpace => "address space",
        })
    }
}

/// A limit that was asked for but not applied
/// ([`Limits::best_effort_tree`], [`Limits::best_effort_process`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use corral::{Command, Limits};
/// let limits = Limits::new().cpus(0.5).best_effort(true);
/// let finished = Command::new("true").limits(limits).run().await?;
/// for skipped in finished.report.limits.iter().flat_map(|l| &l.not_applied) {
///     eprintln!("{} not applied: {}", skipped.limit, skipped.reason);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotApplied {
    /// The limit.
    pub limit: LimitKind,
    /// Why, and what would make this host enforce it.
    pub reason: String,
}

/// What the limits did: which applied, and what the kernel counted
/// (the example of [`Limits`] reads it).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// let finished = corral::Command::new("make")
///     .limits(corral::Limits::new().max_processes(64))
///     .run()
///     .await?;
/// if let Some(report) = &finished.report.limits {
///     println!("{:?}: {} forks refused, peak {:?} bytes", report.applied,
///              report.fork_refusals, report.memory_peak);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LimitsReport {
    /// The limits in force on the tree, as written to its leaf (e.g.
    /// `pids.max=64`, `memory.max=67108864`, `cpu.max=20000 100000`,
    /// `cpu_time=1s`).
    pub applied: Vec<String>,
    /// Limits asked for that this host could not enforce (best effort only).
    pub not_applied: Vec<NotApplied>,
    /// `fork`/`clone` calls the process limit refused (`pids.events` `max`).
    pub fork_refusals: u64,
    /// Out-of-memory kills in the tree (`memory.events` `oom_kill`).
    pub oom_kills: u64,
    /// The most memory the tree used at once, in bytes (`memory.peak`), when
    /// the memory controller was on.
    pub memory_peak: Option<u64>,
    /// CPU time the tree used (`cpu.stat` `usage_usec`).
    #[serde(serialize_with = "crate::duration::secs")]
    pub cpu_used: Duration,
    /// How many periods the CPU bandwidth limit throttled the tree, and for
    /// how long in total (`cpu.stat` `nr_throttled`, `throttled_usec`).
    pub throttled_periods: u64,
    /// See [`LimitsReport::throttled_periods`].
    #[serde(serialize_with = "crate::duration::secs")]
    pub throttled_time: Duration,
}

/// The number in a size such as `512M`, `2G`, `64k` or `1048576`: binary
/// units (`K` = 1024), an optional `B`/`iB`, case-insensitive.
///
/// ```
/// use corral::parse_size;
/// assert_eq!(parse_size("512M"), Ok(512 << 20));
/// assert_eq!(parse_size("2GiB"), Ok(2 << 30));
/// assert_eq!(parse_size("64k"), Ok(65_536));
/// assert_eq!(parse_size("1048576"), Ok(1 << 20));
/// assert!(parse_size("1.5G").unwrap_err().contains("e.g. 512M or 2G"));
/// ```
///
/// # Errors
/// What is wrong with it, with the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid size {text:?}: use a whole number of bytes with an optional unit K, M, G \
             or T (binary: 1K = 1024), e.g. 512M or 2G"
        )
    };
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let unitless = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match unitless.char_indices().last() {
        Some((i, 'k')) => (&unitless[..i], 10),
        Some((i, 'm')) => (&unitless[..i], 20),
        Some((i, 'g')) => (&unitless[..i], 30),
        Some((i, 't')) => (&unitless[..i], 40),
        _ if lower.ends_with("ib") => return Err(bad()),
        _ => (unitless, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("1mb"), Ok(1 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("100B"), Ok(100));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
    }

    #[test]
    fn bad_sizes_are_refused_with_the_forms() {
        for bad in [
            "", "M", "-1M", "1.5G", "12X", "0x10", "1 G", "iB", "1Gi", "G1",
        ] {
            let error = parse_size(bad).expect_err(bad);
            assert!(error.contains("512M or 2G"), "{bad:?}: {error}");
        }
        assert!(
            parse_size("99999999999999T")
                .expect_err("too large")
                .contains("too large")
        );
    }

    #[test]
    fn validation_names_the_limit() {
        assert!(Limits::new().validate().is_ok());
        assert!(Limits::new().is_empty());
        let error = |l: Limits| l.validate().expect_err("invalid");
        assert_eq!(
            error(Limits::new().max_processes(0)),
            LimitError::NoProcesses
        );
        assert_eq!(error(Limits::new().max_memory(0)), LimitError::NoMemory);
        assert_eq!(
            error(Limits::new().max_swap(1)),
            LimitError::SwapWithoutMemory
        );
        for cpus in [0.0, f64::NAN, 1e9] {
            let refused = error(Limits::new().cpus(cpus));
            assert!(
                matches!(refused, LimitError::CpusOutOfRange { .. }),
                "{cpus}"
            );
            assert!(refused.to_string().starts_with("cpus must be"), "{refused}");
        }
        assert_eq!(
            error(Limits::new().cpu_time(Duration::ZERO)),
            LimitError::NoCpuTime
        );
        assert_eq!(error(Limits::new().open_files(0)), LimitError::NoOpenFiles);
        assert!(
            error(Limits::new().max_swap(1))
                .to_string()
                .contains("set max_memory too")
        );
        assert!(
            Limits::new()
                .max_processes(64)
                .max_memory(1 << 26)
                .max_swap(0)
                .cpus(0.2)
                .cpu_time(Duration::from_secs(1))
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn wanted_lists_the_kinds_asked_for() {
        let all = Limits::new()
            .max_processes(1)
            .max_memory(1)
            .cpus(1.0)
            .cpu_time(Duration::from_secs(1));
        assert_eq!(all.wanted(), LimitKind::ALL.to_vec());
        assert_eq!(Limits::new().cpus(1.0).wanted(), vec![LimitKind::Cpus]);
        assert_eq!(LimitKind::Memory.controller(), Some("memory"));
        assert_eq!(LimitKind::CpuTime.controller(), None);
    }
}
