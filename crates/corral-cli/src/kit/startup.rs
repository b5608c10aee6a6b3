//! Start-up and end of a `corral` process, the same for every subcommand
//! that supervises a tree (`corral run`, `corral mcp wrap`).

use std::{future::Future, process::ExitCode};

use anyhow::Context;

use crate::kit::{
    exit::Status,
    logging,
    sink::{self, ReportArgs, Sink},
};

/// First thing in `main`. Started as our own watchdog (`corral
/// __corral-watchdog`): runs it and never returns. Otherwise records that
/// this executable is the watchdog that ends the tree if corral itself is
/// killed, sets `SIGCHLD` back to its default, and returns the parent's
/// pid, against which a parent that dies later is noticed.
pub fn begin() -> i32 {
    corral::watchdog::hook();
    // A parent may have left SIGCHLD ignored; the library refuses to spawn
    // then, and a dedicated process can restore it, as GNU timeout does. If
    // that fails, the spawn says so.
    let _ = corral::host::default_sigchld();
    corral::host::parent_pid()
}

/// Forks the owner-death watchdog first thing (`corral run`, before its
/// arguments are parsed; as `timeout`, after its own short parse, and
/// before either holds its signals): after a fork, every page the owner writes that
/// the two processes still share is copied, and each copy on a process with
/// a second thread flushes the other CPU's TLB. Forked before the argument
/// parse fills the heap, the owner shares a few pages with the watchdog
/// instead of the parse's hundreds of kilobytes (`corral run -- true`
/// about 0.15 ms sooner, BENCHMARKS.md section 3). A failure is left to
/// [`supervisor`], which tries again and logs why. No thread watches this
/// watchdog: `corral run`'s loop does, with
/// [`watch_over`](corral::watchdog::watch_over), for as long as its tree runs.
pub fn watchdog_first() {
    let _ = corral::watchdog::fork_now_for_runtime();
}

/// Makes this process a supervisor, right after its arguments are parsed
/// (still single-threaded, nothing spawned): keeps `--report-fd` from the
/// command, forks the owner-death watchdog (unless [`watchdog_first`] did),
/// installs the log subscriber and opens the report's destination.
///
/// # Errors
/// If the report's destination cannot be opened (exit status 125, before
/// the command runs).
pub fn supervisor(report: &ReportArgs, verbose: bool) -> anyhow::Result<Option<Sink>> {
    // Before the watchdog fork and the spawn: the command must not inherit
    // the report's descriptor.
    sink::keep_from_command(report.report_fd);
    // Forking while corral is still single-threaded is much cheaper than
    // executing a second copy of corral; if it fails, the first spawn
    // executes one instead.
    if let Err(reason) = corral::watchdog::fork_now() {
        tracing::debug!(%reason, "watchdog not forked early");
    }
    logging::init(verbose);
    Sink::open(report.report.as_deref(), report.report_fd)
}

/// Makes every descriptor this process inherited above the standard three
/// close-on-exec, for a server whose commands come from less trusted
/// parties (`corral mcp serve`): a terminal, a log or a root-only file its
/// parent left open is not passed on to them. (`corral run` passes
/// inherited descriptors on, as `timeout` does.)
///
/// # Errors
/// If `/proc/self/fd` cannot be read or a descriptor's flags cannot be set.
pub fn keep_inherited_descriptors() -> anyhow::Result<()> {
    let listing = std::fs::read_dir("/proc/self/fd")
        .context("listing this process's descriptors (/proc/self/fd) to keep them from runs")?;
    for entry in listing {
        let entry = entry.context("listing /proc/self/fd")?;
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if fd < 3 {
            continue;
        }
        match corral::host::close_on_exec(fd) {
            // The listing's own descriptor, closed since.
            Err(error) if error.raw_os_error() == Some(rustix::io::Errno::BADF.raw_os_error()) => {}
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("making inherited descriptor {fd} close-on-exec"));
            }
            Ok(()) => {}
        }
    }
    Ok(())
}

/// The descriptors free at start-up that a supervising `corral` needs
/// before its first spawn reserves its own: the runtime's (its poller, its
/// waker, the signal driver's socket pair), the signal streams', the log's.
const SPARE_DESCRIPTORS: usize = 16;

/// Runs `work` on a current-thread runtime in a process that does nothing
/// but supervise (so the subreaper backend is fair game for `auto`), then
/// stops the watchdog without waiting for it: every tree is gone by then,
/// and the process exits right after (the helper exits by itself at
/// end-of-file; init reaps it).
///
/// # Errors
/// If too few descriptors are free, if the runtime cannot be started, or
/// as `work`.
pub fn supervise(work: impl Future<Output = anyhow::Result<Status>>) -> anyhow::Result<Status> {
    corral::host::spare_descriptors(SPARE_DESCRIPTORS).with_context(|| {
        format!(
            "corral needs {SPARE_DESCRIPTORS} free file descriptors to start and supervise a \
             tree (nothing was started); raise the open-file limit (ulimit -n) or close \
             inherited descriptors"
        )
    })?;
    corral::settings::Settings::new().subreaper().apply();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let status = runtime.block_on(work);
    // A blocking read of a terminal stdin (the relay's) must not hold the
    // exit.
    runtime.shutdown_background();
    // The watchdog is reaped, not left to exit after corral: a caller that
    // waits for corral and then removes the cgroup it ran corral in (or a
    // service manager that counts what is left) finds nothing of corral's
    // (docs/flakes.md (36)). It exits as soon as it reads end-of-file, well
    // under a millisecond after a clean finish.
    corral::watchdog::shutdown();
    status
}

/// The process exit code of a subcommand's result; an error is said on
/// standard error with its whole chain, and is corral's failure (125).
pub fn exit_code(result: anyhow::Result<Status>) -> ExitCode {
    // Whatever ended the command (a finished tree, or an error before or
    // after the watchdog started), the watchdog is reaped before corral
    // exits: nothing of corral's outlives it (docs/flakes.md (36)). A no-op
    // when it is already gone or never ran.
    corral::watchdog::shutdown();
    match result {
        Ok(status) => ExitCode::from(status.code()),
        Err(error) => {
            say!("{error:#}");
            ExitCode::from(Status::Failed.code())
        }
    }
}
