//! Soak: thousands of supervised invocations, many at once, then proof that
//! the supervisor leaked nothing.
//!
//! Each invocation runs a `fixture` mode drawn at random (exit, sleep,
//! ignore-term, fork 3, setsid, daemon, leave-children 2, hold-stdout,
//! slow-die 50, flood, fork-storm 20) on a backend drawn at random among
//! those available, with a short policy (grace 50-200 ms, final bound
//! 200 ms, time limit 50-400 ms), and is interrupted at a random point (see
//! `plan::Cancel`): before spawn returns, during output, during the grace,
//! during the final bound, or never.
//!
//! The subreaper backend runs one tree per process and counts every child of
//! this process started after its leader as a member, so a subreaper draw is
//! deferred to the next quiet point and run alone there.
//!
//! This process is a child subreaper from the start, so every orphan of every
//! tree comes to it, and every tree carries its invocation's number in its
//! environment. At quiet points (no tree running, every supervisor task
//! ended) it takes stock: running processes of the run (descendants, or
//! anything carrying the run's mark) are killed by identity and counted as
//! leaks, except the process-group backend's documented escapes (an orphan
//! in a session of its own), which are counted apart; then the adopted
//! zombies are reaped. At the end it asserts and prints: no live process
//! from the run, tokio's alive tasks and the open descriptors back to their
//! baselines, no cgroup leaf and no ledger record left, and resident memory
//! flat from 10 % of the run to its end (within 10 %; 25 % for the CI size,
//! whose early point comes after only 50 invocations). Memory is measured at
//! quiet points after `malloc_trim(0)`, with glibc's thread cache off, one
//! arena and a fixed mmap threshold (see `tame_the_allocator`), so that it
//! shows what is allocated rather than what the allocator keeps. Any leak,
//! failed check or hang makes the exit status 1.
//!
//! ```text
//! scripts/soak                  # 10,000 invocations, concurrency 32
//! scripts/soak --ci             # 500 invocations
//! scripts/soak --count 2000 --concurrency 16 --seed 7 --samples
//! ```
//! Options: `--ci`, `--count N`, `--concurrency N`, `--seed N` (a run is
//! reproducible in its draws, not in its timing), `--max-secs N` (time bound;
//! 300 for `--ci`, else 3600), `--backends cgroup,group` (narrow a finding),
//! `--no-watchdog`, `--samples` (print every quiet point's measurements).
//! A progress line is kept on stderr when it is a terminal.

#[path = "soak/census.rs"]
mod census;
#[path = "soak/driver.rs"]
mod driver;
#[path = "soak/invoke.rs"]
mod invoke;
#[path = "soak/plan.rs"]
mod plan;
#[path = "soak/tally.rs"]
mod tally;

use std::{process::ExitCode, time::Duration};

use corral::{Backend, BackendChoice};

/// corral's bound on draining the output pipes after the tree is gone.
const DRAIN: Duration = Duration::from_millis(250);
/// A call that returns later than its policy allows by more than this hung.
const HANG: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Options {
    count: usize,
    concurrency: usize,
    seed: u64,
    ci: bool,
    watchdog: bool,
    /// Print the measurements at every quiet point.
    samples: bool,
    /// Only these backends (`--backends cgroup,group`), for narrowing a leak.
    only: Option<Vec<Backend>>,
    /// The bound on the whole run (`--max-secs`).
    max_time: Duration,
}

impl Options {
    fn parse() -> Result<Self, String> {
        let mut options = Self {
            count: 10_000,
            concurrency: 32,
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64),
            ci: false,
            watchdog: true,
            samples: false,
            only: None,
            max_time: Duration::ZERO,
        };
        let mut max_secs = None;
        let mut count = None;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut number = |name: &str| -> Result<u64, String> {
                args.next()
                    .and_then(|v| v.parse().ok())
                    .ok_or(format!("{name} needs a number"))
            };
            match arg.as_str() {
                "--ci" => options.ci = true,
                "--count" => count = Some(number("--count")? as usize),
                "--concurrency" => options.concurrency = number("--concurrency")?.max(1) as usize,
                "--seed" => options.seed = number("--seed")?,
                "--max-secs" => max_secs = Some(number("--max-secs")?),
                "--no-watchdog" => options.watchdog = false,
                "--samples" => options.samples = true,
                "--backends" => {
                    let list = args.next().unwrap_or_default();
                    let parsed: Result<Vec<Backend>, String> = list
                        .split(',')
                        .map(|name| match name.parse::<BackendChoice>()? {
                            BackendChoice::Only(backend) => Ok(backend),
                            BackendChoice::Auto => Err("--backends takes backend names".to_owned()),
                        })
                        .collect();
                    options.only = Some(parsed?);
                }
                // `cargo bench` adds `--bench`; a name filter is meaningless here.
                "--bench" => {}
                other if other.starts_with('-') => {
                    return Err(format!(
                        "unknown option {other}; use --ci, --count N, --concurrency N, --seed N, --max-secs N, --backends A,B, --no-watchdog, --samples"
                    ));
                }
                _ => {}
            }
        }
        options.count = count
            .unwrap_or(if options.ci { 500 } else { 10_000 })
            .max(10);
        options.max_time =
            Duration::from_secs(max_secs.unwrap_or(if options.ci { 300 } else { 3600 }));
        Ok(options)
    }

    /// Where the early memory sample is taken: after 10 % of the run.
    fn early_mark(&self) -> usize {
        self.count / 10
    }

    /// How much resident memory may grow from the early mark to the end.
    fn rss_bound(&self) -> f64 {
        if self.ci { 0.25 } else { 0.10 }
    }

    /// Quiet points (drain, census, reaping) come this often.
    fn quiet_every(&self) -> usize {
        if self.ci { 100 } else { 250 }
    }
}

fn main() -> ExitCode {
    // This binary serves as its own watchdog executable.
    corral::watchdog::hook();
    tame_the_allocator();
    let options = match Options::parse() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("soak: {message}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes no pointers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        eprintln!("soak: cannot become a child subreaper");
        return ExitCode::from(2);
    }
    let ledger = std::env::temp_dir().join(format!("corral-soak-ledger-{}", std::process::id()));
    corral::settings::Settings::new()
        .ledger_dir(&ledger)
        .apply();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("soak: cannot start a runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let passed = runtime.block_on(async { driver::Soak::new(options, ledger.clone()).run().await });
    drop(runtime);
    let _ = std::fs::remove_dir(&ledger);
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Makes glibc's allocator give freed memory back, so that memory figures
/// show what is allocated, not what the allocator keeps:
/// - no per-thread cache (its chunks count as in use, so the live-heap figure
///   creeps up for a while without any leak);
/// - one arena (`malloc_trim` returns the free top of the main arena only);
/// - a fixed mmap threshold (otherwise it rises after the first large free and
///   later 1 MiB capture buffers stay in the heap).
///
/// glibc reads these at start-up, so the soak starts itself again with them
/// (once: the variable then says so).
fn tame_the_allocator() {
    const TUNABLE: &str =
        "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=131072";
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if current.contains(TUNABLE) || !cfg!(target_env = "gnu") {
        return;
    }
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let tunables = if current.is_empty() {
        TUNABLE.to_owned()
    } else {
        format!("{current}:{TUNABLE}")
    };
    let error = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(me)
            .args(std::env::args_os().skip(1))
            .env("GLIBC_TUNABLES", tunables),
    );
    eprintln!(
        "soak: cannot restart with {TUNABLE} ({error}); memory figures include what the allocator keeps"
    );
}

fn is_subreaper() -> bool {
    let mut flag: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut flag as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    rc == 0 && flag != 0
}
