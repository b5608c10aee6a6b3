//! cgroup v2 controllers on a tree's leaf: the parent hands them down
//! (`cgroup.subtree_control`), the leaf carries the tree's limits
//! (`pids.max`, `memory.max`, `cpu.max`), and the kernel's counters say what
//! the limits did (`pids.events`, `memory.events`, `cpu.stat`).
//!
//! The rule that shapes it: a cgroup other than the root that holds
//! processes cannot hand any controller to leaves (cgroup v2's
//! no-internal-process rule). The kernel refuses to enable a domain
//! controller (`memory`, `io`) there (`EBUSY`); it does enable a threaded one
//! (`pids`, `cpu`), but the cgroup then becomes a thread root (`cgroup.type`
//! `domain threaded`), whose domain children cannot hold processes: a leaf's
//! leader is refused with `EOPNOTSUPP`, and so are the leaves of every later
//! tree. So the leaves of a tree with a limit need a parent without
//! processes: the root cgroup, or a delegated cgroup named by
//! `CORRAL_CGROUP_PARENT` (see `docs/limits.md`); corral checks that before
//! it enables anything.

use std::{
    fs,
    io::{self, Read, Seek},
    path::{Path, PathBuf},
    time::Duration,
};

use super::cgroup::{PARENT_VARIABLE, not_a_domain};
use crate::{
    backend::Backend,
    exit::Exit,
    limits::{Limit, LimitKind, Limits, LimitsReport, NotApplied},
};

/// `cpu.max`'s period, in microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// Makes `controller` available to the children of `parent`, or says why it
/// cannot be, and what would fix it.
pub(crate) fn enable(parent: &Path, controller: &str, mountinfo: &str) -> Result<(), String> {
    if check(parent, controller, mountinfo)? == Ready::Enabled {
        return Ok(());
    }
    let control = parent.join("cgroup.subtree_control");
    match fs::write(&control, format!("+{controller}")) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::ResourceBusy => {
            Err(holds_processes(parent, controller))
        }
        Err(error) => Err(format!(
            "cannot enable the {controller} controller in {} ({error}): run as root, or in a \
             delegated subtree (systemd Delegate=yes) named by {PARENT_VARIABLE}",
            control.display(),
        )),
    }
}

/// Whether `controller` is handed to `parent`'s children, or could be, without
/// changing anything: the kernel's reasons for refusing it, or for refusing
/// processes in the leaves once it is enabled, as far as they can be read
/// from outside. [`enable`] checks this before it writes; `capabilities`
/// adds a real leaf ([`probe`]).
pub(crate) fn check(parent: &Path, controller: &str, mountinfo: &str) -> Result<Ready, String> {
    let read = |name: &str| fs::read_to_string(parent.join(name)).unwrap_or_default();
    // The root cgroup is exempt from the no-internal-process rule (it has no
    // cgroup.type); any other parent must be a plain domain, or its leaves
    // hold no process at all.
    let root = !parent.join("cgroup.type").exists();
    let kind = read("cgroup.type");
    if !root && kind.trim() != "domain" {
        return Err(not_a_domain(parent, kind.trim()));
    }
    if !listed(&read("cgroup.controllers"), controller) {
        let why = if bound_to_v1(mountinfo, controller) {
            "this host binds it to a cgroup v1 hierarchy (a hybrid layout); boot with \
             systemd.unified_cgroup_hierarchy=1 for a pure cgroup v2 host"
                .to_owned()
        } else {
            format!(
                "enable it in the cgroup.subtree_control of {}'s parent (systemd: \
                 Delegate=yes delegates it)",
                parent.display()
            )
        };
        return Err(format!(
            "the {controller} controller is not available in {} (not in its \
             cgroup.controllers): {why}",
            parent.display()
        ));
    }
    // Domain or threaded, enabled already or not: see the module's comment.
    if !root && !read("cgroup.procs").trim().is_empty() {
        return Err(holds_processes(parent, controller));
    }
    if listed(&read("cgroup.subtree_control"), controller) {
        return Ok(Ready::Enabled);
    }
    // The kernel checks the writer's permission on the file: an open for
    // writing asks the same question and writes nothing.
    let control = parent.join("cgroup.subtree_control");
    if let Err(error) = fs::OpenOptions::new().write(true).open(&control) {
        return Err(format!(
            "cannot enable the {controller} controller in {} ({error}): run as root, or in a \
             delegated subtree (systemd Delegate=yes) named by {PARENT_VARIABLE}",
            control.display(),
        ));
    }
    Ok(Ready::CanEnable)
}

/// Starts a process in the probe's `leaf` (`dir`) under `parent`, which
/// exits at once: a tree's leader would be refused there too if it is. Then
/// reads the leaf's `cgroup.controllers` (for [`probe`]).
pub(crate) fn hosts_processes(
    parent: &Path,
    leaf: &Path,
    dir: std::os::fd::BorrowedFd<'_>,
) -> Result<String, String> {
    crate::sys::exit_in_cgroup(dir).map_err(|error| refused_process(parent, &error))?;
    fs::read_to_string(leaf.join("cgroup.controllers")).map_err(|error| {
        format!(
            "cannot read cgroup.controllers of {}: {error}",
            leaf.display()
        )
    })
}

/// Checks a real leaf that a probe made under the parent [`check`] passed:
/// a `controller` the parent hands down already must be in the leaf's
/// `cgroup.controllers` (`leaf_controllers`), as the limit's files are.
pub(crate) fn probe(
    parent: &Path,
    controller: &str,
    ready: Ready,
    leaf_controllers: &str,
) -> Result<(), String> {
    if ready == Ready::Enabled && !listed(leaf_controllers, controller) {
        return Err(format!(
            "{} hands the {controller} controller down (cgroup.subtree_control), but a new \
             leaf under it does not have it (its cgroup.controllers: {:?})",
            parent.display(),
            leaf_controllers.trim(),
        ));
    }
    Ok(())
}

/// Where [`check`] found a controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ready {
    /// Already handed to the children.
    Enabled,
    /// Available to the parent; enabling it should work.
    CanEnable,
}

fn holds_processes(parent: &Path, controller: &str) -> String {
    let domain = !matches!(controller, "cpu" | "cpuset" | "pids" | "perf_event");
    let rule = if domain {
        format!("cgroup v2 will not hand the {controller} controller to its children")
    } else {
        format!(
            "enabling the {controller} controller there would make it a thread root, and the \
             kernel refuses processes in a thread root's domain children (EOPNOTSUPP), so no \
             tree could start in its leaves"
        )
    };
    format!(
        "{} holds processes, so {rule} (the no-internal-process rule); set {PARENT_VARIABLE} \
         to a cgroup without processes that this user may write (systemd: Delegate=yes with \
         DelegateSubgroup=, see docs/limits.md)",
        parent.display(),
    )
}

/// Why the kernel refused a process in a leaf under `parent` (`error`, from
/// `clone3(CLONE_INTO_CGROUP)` or a write to its `cgroup.procs`): the
/// leaf is no valid domain (`EOPNOTSUPP`), or hands controllers down
/// itself (`EBUSY`).
pub(crate) fn refused_process(parent: &Path, error: &std::io::Error) -> String {
    let kind = fs::read_to_string(parent.join("cgroup.type")).unwrap_or_default();
    let kind = kind.trim();
    if kind.is_empty() || kind == "domain" {
        format!(
            "the kernel refuses processes in a new leaf under {} ({error}): the leaf is no \
             valid domain or hands controllers down itself; set {PARENT_VARIABLE} to a cgroup \
             without processes (see docs/limits.md), or use another backend",
            parent.display(),
        )
    } else {
        not_a_domain(parent, kind)
    }
}

/// Whether `list` (a `cgroup.controllers` or `cgroup.subtree_control` line)
/// names `controller`.
fn listed(list: &str, controller: &str) -> bool {
    list.split_whitespace().any(|c| c == controller)
}

/// Whether a cgroup v1 hierarchy holds `controller` (the hybrid layout).
pub(crate) fn bound_to_v1(mountinfo: &str, controller: &str) -> bool {
    mountinfo.lines().any(|line| {
        let Some((_, right)) = line.split_once(" - ") else {
            return false;
        };
        let mut fields = right.split_whitespace();
        fields.next() == Some("cgroup")
            && fields
                .nth(1)
                .is_some_and(|options| options.split(',').any(|o| o == controller))
    })
}

/// Writes the limit of one `kind` to `leaf`: its lines of
/// [`LimitsReport::applied`], or why it failed. The CPU-time budget writes
/// nothing: its meter on the leaf's `cpu.stat` goes to `meter_out`.
fn write(
    leaf: &Path,
    limits: &Limits,
    kind: LimitKind,
    meter_out: &mut Option<(CpuMeter, Duration)>,
) -> Result<Vec<String>, String> {
    let set = |file: &str, value: String| -> Result<String, String> {
        fs::write(leaf.join(file), &value)
            .map(|()| format!("{file}={value}"))
            .map_err(|error| {
                format!(
                    "cannot write {value:?} to {file} of {}: {error}",
                    leaf.display()
                )
            })
    };
    match kind {
        LimitKind::Processes => {
            let n = limits.max_processes.unwrap_or(u64::MAX);
            Ok(vec![set("pids.max", n.to_string())?])
        }
        LimitKind::Memory => {
            let bytes = limits.max_memory.unwrap_or(u64::MAX);
            let mut applied = vec![set("memory.max", bytes.to_string())?];
            let swap = limits.max_swap.unwrap_or(0);
            if leaf.join("memory.swap.max").exists() {
                applied.push(set("memory.swap.max", swap.to_string())?);
            } else if swap > 0 {
                return Err(format!(
                    "a swap limit was asked for, but {} has no memory.swap.max (swap \
                     accounting is off: boot with swapaccount=1)",
                    leaf.display()
                ));
            } else {
                applied.push("memory.swap.max=unavailable (no swap accounting)".to_owned());
            }
            applied.push(set("memory.oom.group", "1".to_owned())?);
            Ok(applied)
        }
        LimitKind::Cpus => {
            let cpus = limits.cpus.unwrap_or(f64::from(u32::MAX));
            Ok(vec![set("cpu.max", cpu_max(cpus))?])
        }
        LimitKind::CpuTime => {
            let budget = limits.cpu_time.unwrap_or(Duration::MAX);
            let meter = CpuMeter::open(leaf)
                .map_err(|error| format!("cannot read cpu.stat of {}: {error}", leaf.display()))?;
            *meter_out = Some((meter, budget));
            Ok(vec![format!("cpu_time={}s", budget.as_secs_f64())])
        }
        // Set on the leader, not on the leaf: never in `Limits::wanted`.
        LimitKind::OpenFiles | LimitKind::CoreSize | LimitKind::AddressSpace => Ok(Vec::new()),
    }
}

/// `cpu.max`'s value for a bandwidth of `cpus` CPUs: a quota (at least the
/// kernel's minimum of 1 ms) per default period.
pub(crate) fn cpu_max(cpus: f64) -> String {
    // Validated to 0.01..=4096 CPUs: the product fits and is positive.
    let quota = (cpus * CPU_PERIOD_US as f64).round() as u64;
    format!("{} {CPU_PERIOD_US}", quota.max(1_000))
}

/// The limits in force on one tree, from its spawn to its end.
#[derive(Debug)]
pub(crate) struct Applied {
    leaf: Option<PathBuf>,
    kinds: Vec<LimitKind>,
    /// The process limit, to tell this tree's own limit from an ancestor's.
    max_processes: Option<u64>,
    report: LimitsReport,
    /// The CPU-time budget and the meter that spends it.
    budget: Option<(CpuMeter, Duration)>,
}

/// Applies `limits` to a tree's `leaf` (`None`: its backend has no leaf)
/// before its leader starts. A limit this host cannot enforce is the error
/// (with why and the fix), or, with [`Limits::best_effort_tree`], listed as not
/// applied.
pub(crate) fn apply(
    leaf: Option<&Path>,
    backend: Backend,
    limits: &Limits,
    mountinfo: &str,
) -> Result<Applied, (LimitKind, String)> {
    let mut applied = Applied {
        leaf: leaf.map(Path::to_owned),
        kinds: Vec::new(),
        max_processes: limits.max_processes,
        report: LimitsReport::default(),
        budget: None,
    };
    for kind in limits.wanted() {
        let result = match leaf {
            None => Err(format!(
                "only the cgroup backend can enforce limits, and this tree uses the {backend} \
                 backend"
            )),
            Some(leaf) => kind
                .controller()
                .map_or(Ok(()), |controller| {
                    let parent = leaf.parent().unwrap_or(leaf);
                    enable(parent, controller, mountinfo)
                })
                .and_then(|()| write(leaf, limits, kind, &mut applied.budget)),
        };
        match result {
            Ok(lines) => {
                applied.report.applied.extend(lines);
                applied.kinds.push(kind);
            }
            Err(reason) if limits.best_effort_tree => {
                applied.report.not_applied.push(NotApplied {
                    limit: kind,
                    reason,
                });
            }
            Err(reason) => return Err((kind, reason)),
        }
    }
    Ok(applied)
}

impl Applied {
    /// How long until the CPU-time budget could be spent at the earliest
    /// (every CPU of the machine busy), or `None` when it is spent (or
    /// there is no budget: then never). A read that fails ends the budget
    /// (reported in the error) rather than the tree.
    pub(crate) fn budget_left(&mut self, cpus: u32) -> Result<Option<Duration>, String> {
        let Some((meter, budget)) = &mut self.budget else {
            return Ok(Some(Duration::MAX));
        };
        match meter.used() {
            Ok(used) if used >= *budget => Ok(None),
            Ok(used) => Ok(Some((*budget - used) / cpus.max(1))),
            Err(error) => {
                let reason = format!("the CPU-time budget stopped counting: {error}");
                self.budget_lost(reason.clone());
                Err(reason)
            }
        }
    }

    /// Adds a limit applied elsewhere (on the leader) to the report.
    pub(crate) fn applied(&mut self, line: String) {
        self.report.applied.push(line);
    }

    /// Adds a limit skipped elsewhere (on the leader) to the report.
    pub(crate) fn not_applied(&mut self, skipped: NotApplied) {
        self.report.not_applied.push(skipped);
    }

    /// Whether the tree has a CPU-time budget.
    pub(crate) fn has_budget(&self) -> bool {
        self.budget.is_some()
    }

    /// Reads what the limits did, before the leaf is removed; and which
    /// limit ended the tree, if one did: a CPU-time budget corral enforced
    /// (`budget_spent`), an out-of-memory kill, or a leader that failed
    /// after forks were refused.
    pub(crate) fn finish(
        &mut self,
        budget_spent: bool,
        leader: Option<Exit>,
    ) -> (LimitsReport, Option<Limit>) {
        let own = self
            .leaf
            .as_deref()
            .map(OwnLimitHit::read)
            .unwrap_or_default();
        if let Some(leaf) = &self.leaf {
            count(leaf, &mut self.report);
        }
        let report = std::mem::take(&mut self.report);
        let has = |kind| self.kinds.contains(&kind);
        let failed = !matches!(leader, Some(Exit::Code(0)));
        // Only the tree's own limits: an out-of-memory kill of the whole host
        // or a parent's process limit is not this tree's limit exceeded.
        let reached_max_processes = match (own.pids_peak, self.max_processes) {
            (Some(peak), Some(max)) => peak >= max,
            _ => true,
        };
        let limit = if budget_spent {
            Some(Limit::CpuTime)
        } else if has(LimitKind::Memory) && report.oom_kills > 0 && own.memory_oom && failed {
            Some(Limit::Memory)
        } else if has(LimitKind::Processes)
            && report.fork_refusals > 0
            && reached_max_processes
            && failed
        {
            Some(Limit::Processes)
        } else {
            None
        };
        (report, limit)
    }

    /// The CPU-time budget could not be read any more: it is no longer
    /// applied (said in the report), and `reason` says why.
    pub(crate) fn budget_lost(&mut self, reason: String) {
        self.budget = None;
        self.kinds.retain(|&k| k != LimitKind::CpuTime);
        self.report.applied.retain(|a| !a.starts_with("cpu_time="));
        self.report.not_applied.push(NotApplied {
            limit: LimitKind::CpuTime,
            reason,
        });
    }
}

/// Whether the tree reached its own limits (not an ancestor's, not the
/// host's): the leaf's `memory.events` `oom` (its own `memory.max` made an
/// allocation fail), and its `pids.peak` (to compare with its `pids.max`).
#[derive(Debug, Default)]
struct OwnLimitHit {
    memory_oom: bool,
    pids_peak: Option<u64>,
}

impl OwnLimitHit {
    fn read(leaf: &Path) -> Self {
        let read = |name: &str| fs::read_to_string(leaf.join(name)).unwrap_or_default();
        Self {
            memory_oom: field(&read("memory.events"), "oom").is_some_and(|n| n > 0),
            pids_peak: read("pids.peak").trim().parse().ok(),
        }
    }
}

/// How many CPUs are online (`/sys/devices/system/cpu/online`, read once),
/// the most a tree can use at once whatever its affinity; else this
/// process's available parallelism.
pub(crate) fn online_cpus() -> u32 {
    static CPUS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|list| count_cpus(&list))
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            })
    })
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpus(list: &str) -> Option<u32> {
    let mut total = 0u32;
    for part in list.trim().split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let n = part.parse::<u32>().ok()?;
                (n, n)
            }
        };
        total = total.checked_add(last.checked_sub(first)?.checked_add(1)?)?;
    }
    (total > 0).then_some(total)
}

/// `KEY VALUE` from a flat-keyed cgroup file (`cpu.stat`, `*.events`).
pub(crate) fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Reads the leaf's counters into `report`: what the limits did. Files a
/// controller did not provide are left out.
pub(crate) fn count(leaf: &Path, report: &mut LimitsReport) {
    let read = |name: &str| fs::read_to_string(leaf.join(name)).unwrap_or_default();
    let pids = read("pids.events");
    report.fork_refusals = field(&pids, "max").unwrap_or(0);
    let memory = read("memory.events");
    report.oom_kills = field(&memory, "oom_kill").unwrap_or(0);
    report.memory_peak = read("memory.peak").trim().parse().ok();
    let cpu = read("cpu.stat");
    report.cpu_used = Duration::from_micros(field(&cpu, "usage_usec").unwrap_or(0));
    report.throttled_periods = field(&cpu, "nr_throttled").unwrap_or(0);
    report.throttled_time = Duration::from_micros(field(&cpu, "throttled_usec").unwrap_or(0));
}

/// The tree's CPU time so far, read from its leaf's `cpu.stat` (present in
/// every cgroup v2 leaf, with or without the `cpu` controller).
#[derive(Debug)]
pub(crate) struct CpuMeter {
    file: fs::File,
    path: PathBuf,
}

impl CpuMeter {
    pub(crate) fn open(leaf: &Path) -> io::Result<Self> {
        let path = leaf.join("cpu.stat");
        let mut meter = Self {
            file: fs::File::open(&path)?,
            path,
        };
        meter.used()?;
        Ok(meter)
    }

    /// CPU time used by the tree so far (user and system, all CPUs).
    pub(crate) fn used(&mut self) -> io::Result<Duration> {
        let mut text = String::new();
        self.file.rewind()?;
        self.file.read_to_string(&mut text)?;
        field(&text, "usage_usec")
            .map(Duration::from_micros)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("no usage_usec in {}", self.path.display()),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_of_flat_keyed_files() {
        let stat = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_throttled 3\n";
        assert_eq!(field(stat, "usage_usec"), Some(1500));
        assert_eq!(field(stat, "nr_throttled"), Some(3));
        assert_eq!(field(stat, "usage"), None);
        assert_eq!(field("max 7\n", "max"), Some(7));
        assert_eq!(field("oom 1\noom_kill 2\n", "oom_kill"), Some(2));
        assert_eq!(field("max x\n", "max"), None);
    }

    #[test]
    fn cpu_max_is_a_quota_per_period_with_the_kernel_minimum() {
        assert_eq!(cpu_max(0.2), "20000 100000");
        assert_eq!(cpu_max(1.5), "150000 100000");
        assert_eq!(cpu_max(0.01), "1000 100000");
        assert_eq!(cpu_max(0.001), "1000 100000");
    }

    #[test]
    fn a_controller_bound_to_v1_is_recognised() {
        let hybrid = "\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert!(bound_to_v1(hybrid, "memory"));
        assert!(bound_to_v1(hybrid, "cpu"));
        assert!(!bound_to_v1(hybrid, "pids"));
        assert!(!bound_to_v1(hybrid, "io"));
        assert!(!bound_to_v1(
            "41 31 0:38 / /x rw - cgroup2 cgroup2 rw,memory\n",
            "memory"
        ));
    }

    #[test]
    fn a_budget_that_stops_counting_is_no_longer_applied() {
        let meter = CpuMeter {
            file: fs::File::open("/dev/null").expect("/dev/null"),
            path: PathBuf::from("/dev/null"),
        };
        let mut applied = Applied {
            leaf: None,
            kinds: vec![LimitKind::CpuTime],
            max_processes: None,
            report: LimitsReport {
                applied: vec!["cpu_time=1s".to_owned()],
                ..LimitsReport::default()
            },
            budget: Some((meter, Duration::from_secs(1))),
        };
        let error = applied.budget_left(2).expect_err("no usage_usec");
        assert!(error.contains("stopped counting"), "{error}");
        assert!(!applied.has_budget());
        let (report, limit) = applied.finish(false, Some(Exit::Code(0)));
        assert!(report.applied.is_empty(), "{report:?}");
        assert_eq!(report.not_applied.len(), 1);
        assert_eq!(report.not_applied[0].limit, LimitKind::CpuTime);
        assert_eq!(limit, None);
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpus("0-1\n"), Some(2));
        assert_eq!(count_cpus("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpus("5"), Some(1));
        assert_eq!(count_cpus(""), None);
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(count_cpus("x"), None);
    }

    /// A directory with a cgroup's files as plain files: `check` only reads
    /// them (and opens `cgroup.subtree_control` for writing).
    fn fake_cgroup(files: &[(&str, &str)]) -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("corral-fake-cgroup-{}-{n}", std::process::id()));
        fs::create_dir_all(&dir).expect("a scratch directory");
        for (name, text) in files {
            fs::write(dir.join(name), text).expect("a cgroup file");
        }
        dir
    }

    #[test]
    fn a_parent_other_than_the_root_that_holds_processes_gives_no_controller() {
        let all = ("cgroup.controllers", "cpu io memory pids\n");
        let busy = fake_cgroup(&[
            all,
            ("cgroup.type", "domain\n"),
            ("cgroup.procs", "1\n42\n"),
            ("cgroup.subtree_control", ""),
        ]);
        for controller in ["pids", "cpu", "memory"] {
            let error = check(&busy, controller, "").expect_err(controller);
            assert!(error.contains("holds processes"), "{error}");
            assert!(error.contains(PARENT_VARIABLE), "{error}");
        }
        let threaded = check(&busy, "pids", "").expect_err("pids");
        assert!(threaded.contains("thread root"), "{threaded}");
        // Enabled already, with processes: a thread root, whose leaves refuse
        // every process.
        fs::write(busy.join("cgroup.subtree_control"), "pids\n").expect("write");
        assert!(check(&busy, "pids", "").is_err());
        // A thread root, or a threaded cgroup: no leaf holds a process.
        let root_of_threads = fake_cgroup(&[all, ("cgroup.type", "domain threaded\n")]);
        let error = check(&root_of_threads, "cpu", "").expect_err("domain threaded");
        assert!(error.contains("\"domain threaded\""), "{error}");
        // The root cgroup (no cgroup.type) is exempt; an empty parent is fine.
        let root = fake_cgroup(&[all, ("cgroup.procs", "1\n"), ("cgroup.subtree_control", "")]);
        assert_eq!(check(&root, "pids", ""), Ok(Ready::CanEnable));
        let empty = fake_cgroup(&[
            all,
            ("cgroup.type", "domain\n"),
            ("cgroup.procs", ""),
            ("cgroup.subtree_control", "pids\n"),
        ]);
        assert_eq!(check(&empty, "pids", ""), Ok(Ready::Enabled));
        assert_eq!(check(&empty, "memory", ""), Ok(Ready::CanEnable));
        for dir in [busy, root_of_threads, root, empty] {
            let _ = fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn a_leaf_without_a_controller_its_parent_hands_down_is_no_probe_success() {
        let parent = Path::new("/sys/fs/cgroup/p");
        assert_eq!(probe(parent, "pids", Ready::Enabled, "cpu pids\n"), Ok(()));
        assert!(probe(parent, "pids", Ready::Enabled, "cpu\n").is_err());
        assert_eq!(probe(parent, "pids", Ready::CanEnable, ""), Ok(()));
    }

    #[test]
    fn listed_matches_whole_names() {
        assert!(listed("cpuset cpu io memory pids", "cpu"));
        assert!(!listed("cpuset io", "cpu"));
    }
}
