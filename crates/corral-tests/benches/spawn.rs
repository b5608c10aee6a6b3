//! Spawn-and-wait of `/bin/true` through each corral backend against plain
//! `tokio::process::Command::status()`, measured in the same run.
//!
//! Every round runs each contender once, in an order rotated from round to
//! round (so no contender always goes first after a pause); the table gives
//! the median and p90 of each and their ratio to tokio's.
//!
//! ```text
//! cargo bench -p corral-tests --bench spawn                 # 300 rounds
//! cargo bench -p corral-tests --bench spawn -- --quick      # 30 rounds
//! cargo bench -p corral-tests --bench spawn -- --rounds 1000
//! CORRAL_BENCH_ROUNDS=100 cargo bench -p corral-tests --bench spawn
//! ```
//!
//! Diagnostic rows (no targets) break the costs down, measured in the same
//! run: tokio with a no-op `pre_exec` hook (std then uses `fork`+`exec`
//! instead of `posix_spawn`; the cgroup backend needs a hook to join its
//! cgroup); one walk of `/proc` as the group and subreaper backends make; an
//! inotify instance created and closed (the cgroup backend's emptiness
//! watch); a bare cgroup leaf `mkdir` + `open(cgroup.procs)` + `rmdir`; and
//! the proposed cgroup spawn, `clone3(CLONE_INTO_CGROUP)` with no hook.

use std::{
    fs,
    path::PathBuf,
    process::{ExitCode, Stdio},
    time::{Duration, Instant},
};

use corral::{Backend, BackendChoice, Outcome};
use corral_tests::bench::{
    Knobs, leaf_parent, machine_line, median, ms, p90, ratio, timing_row, write_results,
};

const PROGRAM: &str = "/bin/true";
/// Bounds one spawn+wait; a hang is reported as a failure, not waited out.
const ONE_BOUND: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Tokio,
    Corral(Backend),
    /// Diagnostic: tokio through std's fork+exec path (a no-op pre_exec).
    TokioForkPath,
    /// Diagnostic: the cgroup leaf's own mkdir/open/rmdir, no process.
    CgroupLeafOnly,
    /// Diagnostic: one walk of `/proc` reading every `/proc/PID/stat` with
    /// the parser the group and subreaper backends use
    /// (`corral_tests::proc::all_processes`).
    ProcScan,
    /// Diagnostic: an inotify instance watching one file, then closed (what
    /// the cgroup backend does per call to learn `populated 0`).
    InotifyOnly,
    /// Diagnostic: the proposed cgroup spawn: leaf mkdir, `clone3` with
    /// `CLONE_INTO_CGROUP | CLONE_VFORK | CLONE_PIDFD` (no pre-exec hook, no
    /// migration), async wait on the pidfd, `cgroup.events` read, rmdir.
    Clone3IntoCgroup,
}

impl Contender {
    fn label(self) -> String {
        match self {
            Contender::Tokio => "tokio::process status()".to_owned(),
            Contender::Corral(b) => format!("corral {b}"),
            Contender::TokioForkPath => "(diag) tokio + no-op pre_exec".to_owned(),
            Contender::CgroupLeafOnly => "(diag) cgroup leaf mkdir+rmdir".to_owned(),
            Contender::InotifyOnly => "(diag) inotify watch + close".to_owned(),
            Contender::ProcScan => "(diag) one /proc walk".to_owned(),
            Contender::Clone3IntoCgroup => "(diag) clone3 INTO_CGROUP + leaf".to_owned(),
        }
    }

    fn target(self) -> Option<f64> {
        match self {
            Contender::Corral(Backend::Group) => Some(1.2),
            Contender::Corral(Backend::Cgroup) => Some(1.5),
            _ => None,
        }
    }
}

struct Bench {
    leaf_parent: Option<PathBuf>,
    leaf_seq: u64,
}

impl Bench {
    async fn once(&mut self, contender: Contender) -> Result<Duration, String> {
        let started = Instant::now();
        match contender {
            Contender::Tokio => {
                let status = tokio::time::timeout(
                    ONE_BOUND,
                    tokio::process::Command::new(PROGRAM)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .kill_on_drop(true)
                        .status(),
                )
                .await
                .map_err(|_| "tokio: timed out".to_owned())?
                .map_err(|e| format!("tokio: {e}"))?;
                if !status.success() {
                    return Err(format!("tokio: {status}"));
                }
            }
            Contender::TokioForkPath => {
                let mut command = tokio::process::Command::new(PROGRAM);
                command
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true);
                // SAFETY: the hook does nothing at all; it only makes std
                // take its fork+exec path instead of posix_spawn.
                unsafe {
                    command.pre_exec(|| Ok(()));
                }
                let status = tokio::time::timeout(ONE_BOUND, command.status())
                    .await
                    .map_err(|_| "tokio fork path: timed out".to_owned())?
                    .map_err(|e| format!("tokio fork path: {e}"))?;
                if !status.success() {
                    return Err(format!("tokio fork path: {status}"));
                }
            }
            Contender::Corral(backend) => {
                let mut child = corral::Command::new(PROGRAM)
                    .backend(BackendChoice::Only(backend))
                    .stdin(corral::Stdio::Null)
                    .stdout(corral::Stdio::Null)
                    .stderr(corral::Stdio::Null)
                    .spawn()
                    .map_err(|e| format!("corral {backend}: {e}"))?;
                // A timeout drops the child, which terminates the tree.
                let finished = tokio::time::timeout(ONE_BOUND, child.wait())
                    .await
                    .map_err(|_| format!("corral {backend}: timed out"))?
                    .map_err(|e| format!("corral {backend}: {e}"))?;
                if finished.outcome != (Outcome::Exited { code: 0 }) {
                    return Err(format!("corral {backend}: {:?}", finished.outcome));
                }
                if !finished.report.survivors.is_empty() || finished.report.cgroup_not_removed {
                    return Err(format!("corral {backend}: {:?}", finished.report));
                }
            }
            Contender::CgroupLeafOnly => {
                let parent = self.leaf_parent.as_ref().ok_or("no cgroup v2 parent")?;
                self.leaf_seq += 1;
                let leaf = parent.join(format!(
                    "corral-bench-{}-{}",
                    std::process::id(),
                    self.leaf_seq
                ));
                fs::create_dir(&leaf).map_err(|e| format!("mkdir {}: {e}", leaf.display()))?;
                let procs = fs::OpenOptions::new()
                    .write(true)
                    .open(leaf.join("cgroup.procs"));
                drop(procs);
                fs::remove_dir(&leaf).map_err(|e| format!("rmdir {}: {e}", leaf.display()))?;
            }
            Contender::ProcScan => {
                let table =
                    corral_tests::proc::all_processes().map_err(|e| format!("/proc: {e}"))?;
                if table.is_empty() {
                    return Err("/proc walk found nothing".to_owned());
                }
            }
            Contender::InotifyOnly => {
                use rustix::fs::inotify;
                let fd = inotify::init(inotify::CreateFlags::CLOEXEC)
                    .map_err(|e| format!("inotify_init: {e}"))?;
                inotify::add_watch(&fd, PROGRAM, inotify::WatchFlags::MODIFY)
                    .map_err(|e| format!("inotify_add_watch: {e}"))?;
                drop(fd);
            }
            Contender::Clone3IntoCgroup => {
                let parent = self.leaf_parent.as_ref().ok_or("no cgroup v2 parent")?;
                self.leaf_seq += 1;
                let leaf = parent.join(format!(
                    "corral-bench-{}-c{}",
                    std::process::id(),
                    self.leaf_seq
                ));
                fs::create_dir(&leaf).map_err(|e| format!("mkdir {}: {e}", leaf.display()))?;
                let result = clone3::run_true_in(&leaf).await;
                let removed = fs::remove_dir(&leaf);
                result?;
                removed.map_err(|e| format!("rmdir {}: {e}", leaf.display()))?;
            }
        }
        Ok(started.elapsed())
    }
}

fn main() -> ExitCode {
    let knobs = Knobs::from_env();
    let rounds = knobs.rounds_or(300, 30);
    let warmup = (rounds / 10).clamp(3, 30);
    corral_tests::bench::run_checked(run(rounds, warmup))
}

async fn run(rounds: usize, warmup: usize) -> ExitCode {
    // The subreaper backend is for a process dedicated to supervision; this
    // bench is one.
    corral::settings::Settings::new().subreaper().apply();
    let caps = corral::capabilities();
    let mut contenders = vec![Contender::Tokio];
    for status in &caps.backends {
        if status.available {
            contenders.push(Contender::Corral(status.backend));
        } else {
            println!(
                "skipping corral {}: {}",
                status.backend.name(),
                status.detail
            );
        }
    }
    let leaf_parent = caps
        .backends
        .iter()
        .any(|s| s.backend == Backend::Cgroup && s.available)
        .then(leaf_parent)
        .flatten();
    contenders.push(Contender::TokioForkPath);
    contenders.push(Contender::ProcScan);
    contenders.push(Contender::InotifyOnly);
    if leaf_parent.is_some() {
        contenders.push(Contender::CgroupLeafOnly);
        contenders.push(Contender::Clone3IntoCgroup);
    }
    let mut bench = Bench {
        leaf_parent,
        leaf_seq: 0,
    };
    // A diagnostic this machine cannot do (an old kernel without clone3's
    // CLONE_INTO_CGROUP, say) is skipped, not counted as a failure.
    let mut usable = Vec::new();
    for contender in contenders {
        let diagnostic = !matches!(contender, Contender::Tokio | Contender::Corral(_));
        match bench.once(contender).await {
            Err(error) if diagnostic => println!("skipping {}: {error}", contender.label()),
            _ => usable.push(contender),
        }
    }
    let contenders = usable;

    println!("spawn+wait of {PROGRAM}: {rounds} interleaved rounds after {warmup} warm-up rounds");
    println!("{}", machine_line());
    println!("command: cargo bench -p corral-tests --bench spawn -- --rounds {rounds}");

    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); contenders.len()];
    let mut failures: Vec<String> = Vec::new();
    let total = warmup + rounds;
    let progress_every = (total / 10).max(1);
    let started = Instant::now();
    for round in 0..total {
        let n = contenders.len();
        for k in 0..n {
            let index = (round + k) % n;
            match bench.once(contenders[index]).await {
                Ok(d) if round >= warmup => samples[index].push(d),
                Ok(_) => {}
                Err(error) => {
                    eprintln!("round {round}: {error}");
                    failures.push(error);
                }
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

    let base = samples[0].clone();
    let (base_median, base_p90) = (median(&base), p90(&base));
    println!();
    println!(
        "| {:<32} | {:>5} | {:>11} | {:>9} | {:>13} | {:>10} | {:<14} |",
        "contender", "n", "median (ms)", "p90 (ms)", "median ratio", "p90 ratio", "target"
    );
    println!(
        "|{:-<34}|{:->7}|{:->13}|{:->11}|{:->15}|{:->12}|{:-<16}|",
        "", "", "", "", "", "", ""
    );
    let mut missed = Vec::new();
    for (contender, s) in contenders.iter().zip(&samples) {
        let (m, p) = (median(s), p90(s));
        let r = ratio(m, base_median);
        let verdict = match contender.target() {
            Some(t) if r <= t => format!("<= {t}x  met"),
            Some(t) => {
                missed.push(contender.label());
                format!("<= {t}x  MISSED")
            }
            None => String::new(),
        };
        println!(
            "| {:<32} | {:>5} | {:>11} | {:>9} | {:>12.2}x | {:>9.2}x | {:<14} |",
            contender.label(),
            s.len(),
            ms(m),
            ms(p),
            r,
            ratio(p, base_p90),
            verdict
        );
    }
    println!();
    println!("ratios are against tokio::process status() in the same run (median/median, p90/p90)");
    let rows = contenders
        .iter()
        .zip(&samples)
        .map(|(contender, s)| timing_row(&contender.label(), s, &base))
        .collect();
    if write_results("spawn", rows).is_err() {
        failures.push("results file".to_owned());
    }
    if !missed.is_empty() {
        println!("targets missed: {}", missed.join(", "));
    }
    if failures.is_empty() {
        println!("failures: none");
        ExitCode::SUCCESS
    } else {
        println!("failures: {}", failures.len());
        ExitCode::FAILURE
    }
}

/// The proposed spawn path for the cgroup backend, for the diagnostic row:
/// `clone3(CLONE_INTO_CGROUP | CLONE_VFORK | CLONE_PIDFD)` puts the child in
/// its leaf at birth, so there is no pre-exec write to `cgroup.procs` (a
/// migration, which waits for an RCU grace period) and no inotify instance
/// (whose close waits for an SRCU grace period).
mod clone3 {
    use std::{
        ffi::CString,
        fs,
        os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
        path::Path,
    };

    use tokio::io::unix::AsyncFd;

    /// linux/sched.h (libc's constant is an overflowing `c_int`).
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

    /// `struct clone_args` (linux/sched.h), version 2 (with `cgroup`).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }

    pub async fn run_true_in(leaf: &Path) -> Result<(), String> {
        let dir = fs::File::open(leaf).map_err(|e| format!("open leaf: {e}"))?;
        let null = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|e| format!("open /dev/null: {e}"))?;
        let program = CString::new(super::PROGRAM.as_bytes()).map_err(|e| e.to_string())?;
        let argv = [program.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        let null_fd = null.as_raw_fd();
        let mut pidfd: libc::c_int = -1;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP | (libc::CLONE_VFORK as u64) | (libc::CLONE_PIDFD as u64),
            pidfd: std::ptr::addr_of_mut!(pidfd) as u64,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: dir.as_raw_fd() as u64,
            ..CloneArgs::default()
        };
        // SAFETY: `args` is a valid clone_args of the size passed. In the
        // child (return value 0) only async-signal-safe calls are made
        // (dup2, execve, _exit) on data prepared before the clone; without
        // CLONE_VM the child has its own copy of memory.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                std::ptr::addr_of!(args),
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid == 0 {
            // SAFETY: see above; this is the child and never returns.
            unsafe {
                libc::dup2(null_fd, 0);
                libc::dup2(null_fd, 1);
                libc::dup2(null_fd, 2);
                libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
                libc::_exit(127);
            }
        }
        if pid < 0 {
            return Err(format!("clone3: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: CLONE_PIDFD stored a fresh descriptor that we now own.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        // SAFETY: the descriptor is valid and owned by the AsyncFd, which
        // closes it only after deregistering it.
        let pidfd = unsafe { AsyncFd::register(pidfd) }
            .map_err(|e| format!("register pidfd: {}", e.into_parts().1))?;
        let waited = tokio::time::timeout(super::ONE_BOUND, pidfd.readable()).await;
        let status = rustix::process::waitid(
            rustix::process::WaitId::PidFd(pidfd.get_ref().as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
        if waited.is_err() {
            return Err("clone3 child: timed out".to_owned());
        }
        let status = status
            .map_err(|e| format!("waitid: {e}"))?
            .and_then(|s| s.exit_status());
        if status != Some(0) {
            return Err(format!("clone3 child: {status:?}"));
        }
        let events =
            fs::read_to_string(leaf.join("cgroup.events")).map_err(|e| format!("events: {e}"))?;
        if !events.contains("populated 0") {
            return Err("leaf still populated".to_owned());
        }
        Ok(())
    }
}
