//! `reuse`: PID-reuse scenarios for corral, run as PID 1 of a private PID
//! namespace:
//!
//! `unshare --pid --fork --mount-proc reuse SCENARIO BACKEND`
//!
//! with SCENARIO one of `cancel`, `watchdog`, `ledger` and BACKEND one of
//! `cgroup`, `subreaper`, `group`. Each scenario kills one process of an owned
//! tree, makes the kernel hand its pid to a new **bystander** (a process that
//! was never in the tree and runs the very same command line, in a session of
//! its own, so its process group id is that pid too), then runs one cleanup
//! path of the library and checks that the bystander was not signalled (still
//! running, same start time, not stopped) while the rest of the tree was
//! ended.
//!
//! The tree is `sh -c 'FIXTURE sleep 600 & FIXTURE sleep 600 & wait'`: the
//! leader `sh` reaps a member that dies, which frees its pid.
//!
//! | scenario   | cleanup path | the reused pid belongs to |
//! |------------|--------------|---------------------------|
//! | `cancel`   | the call is cancelled (`Child::terminate`) after the supervisor's re-scans learnt both members | a member |
//! | `watchdog` | the `owner` program (which runs the tree with a watchdog) is killed with SIGKILL; the watchdog must end the tree within 1 s | a member the watchdog was told of |
//! | `ledger`   | `owner --no-watchdog` is killed; its leader is killed and reaped here; then `corral::ledger::sweep` runs over its record | the leader (and its process group id) |
//!
//! Output: progress on stderr, then one result line on stdout: `PASS ...`
//! (exit 0), `FAIL ...` (exit 1), or `SKIP ...` (exit 77: the machine cannot
//! run the scenario: the cgroup backend is unavailable, or `pid_max` cannot
//! be lowered and a full pid cycle would take too long). Usage errors exit 2.
//!
//! # How a pid is made to be reused
//! The namespace gets a small `pid_max` (per-namespace since Linux 6.14).
//! After the first wrap the kernel allocates from `RESERVED_PIDS` (300) up,
//! so before the tree starts, pids are burnt until one above 300 has been
//! handed out: every later pid then lies in the cycled range. To reuse pid X,
//! new processes are forked until one gets X; that one stays as the
//! bystander, the others exit at once and are reaped. If `pid_max` cannot be
//! lowered, the same loop cycles through the whole pid space, within a bound.
//!
//! # Who spawns the bystander
//! A separate *factory* process (this binary with [`FACTORY_ARG`]), started
//! before the tree. The supervising process must not fork the bystander
//! itself: with the subreaper backend, a child of the supervisor that starts
//! after the leader is by design a member of the tree (an adopted orphan
//! looks exactly like that), so that would test the documented rule, not pid
//! reuse. The factory's children are not ours, and the factory predates the
//! tree.
//!
//! # Reaping
//! As PID 1 this process adopts every orphan of the namespace. It never waits
//! for "any child" while the library supervises a tree here (that could reap
//! the leader, whose pid the library keeps as a guard): it reaps only pids it
//! knows, and adopted zombies once the library is done.

mod cancel;
mod factory;
mod ledger_sweep;
mod owner;
mod pid_space;
mod procs;
mod tree;
mod watchdog;

use std::{
    ffi::OsString,
    fmt,
    io::{self, Write},
    sync::OnceLock,
    time::{Duration, Instant},
};

use corral::Backend;

use crate::{
    cancel::cancel,
    owner::owner_killed,
    pid_space::{Factory, small_pid_space},
    procs::reap_adopted,
};

/// The argument that makes this binary run as the bystander factory.
pub(crate) const FACTORY_ARG: &str = "__reuse-factory";
/// The `pid_max` written inside the namespace: pids cycle through 300..512.
pub(crate) const SMALL_PID_MAX: i32 = 512;
/// After the first wrap the kernel allocates pids from here on.
pub(crate) const RESERVED_PIDS: i32 = 300;
/// A pid space with a longer cycle than this is not cycled through.
pub(crate) const MAX_CYCLE: i32 = 200_000;
/// Longer than the supervisor's first re-scan (100 ms) plus one interval
/// (250 ms): by then every member has been seen at least once.
pub(crate) const LEARN: Duration = Duration::from_millis(450);
/// The owner-death guarantee, and the slack a loaded 2-core machine needs.
pub(crate) const WATCHDOG_BOUND: Duration = Duration::from_secs(1);
pub(crate) const SLACK: Duration = Duration::from_millis(500);
/// Exit status for "this machine cannot run the scenario".
pub(crate) const EXIT_SKIP: i32 = 77;

pub(crate) const USAGE: &str = "usage: reuse (cancel|watchdog|ledger) (cgroup|subreaper|group), \
                     as PID 1 of a private PID namespace: \
                     unshare --pid --fork --mount-proc reuse SCENARIO BACKEND";

/// Why a scenario did not pass.
pub(crate) enum Failure {
    /// The property does not hold, or the scenario could not be set up.
    Fail(String),
    /// This machine cannot run the scenario at all.
    Skip(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Fail(message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::Fail(message.to_owned())
    }
}

pub(crate) type Res<T> = Result<T, Failure>;

pub(crate) fn fail<T>(message: impl Into<String>) -> Res<T> {
    Err(Failure::Fail(message.into()))
}

/// Progress on stderr, with the time since start.
pub(crate) fn note(message: impl fmt::Display) {
    static START: OnceLock<Instant> = OnceLock::new();
    let at = START.get_or_init(Instant::now).elapsed();
    eprintln!("reuse [{:>7.3}s] {message}", at.as_secs_f64());
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == FACTORY_ARG) {
        match args.get(1) {
            Some(fixture) => factory::run(fixture),
            None => usage(),
        }
    }
    let (Some(scenario), Some(backend), None) = (
        args.first().and_then(|a| a.to_str()),
        args.get(1).and_then(|a| a.to_str()),
        args.get(2),
    ) else {
        usage()
    };
    let backend = match backend {
        "cgroup" => Backend::Cgroup,
        "subreaper" => Backend::Subreaper,
        "group" => Backend::Group,
        _ => usage(),
    };
    if !matches!(scenario, "cancel" | "watchdog" | "ledger") {
        usage();
    }
    if std::process::id() != 1 {
        eprintln!("reuse: not PID 1 of a PID namespace; {USAGE}");
        std::process::exit(2);
    }
    note(format!("{scenario} {backend}: start"));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            println!("FAIL {scenario} {backend}: no tokio runtime: {error}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(run(scenario, backend));
    drop(runtime);
    let code = match result {
        Ok(summary) => {
            println!("PASS {scenario} {backend}: {summary}");
            0
        }
        Err(Failure::Skip(reason)) => {
            println!("SKIP {scenario} {backend}: {reason}");
            EXIT_SKIP
        }
        Err(Failure::Fail(message)) => {
            println!("FAIL {scenario} {backend}: {message}");
            1
        }
    };
    note(format!("{scenario} {backend}: done (exit {code})"));
    let _ = io::stdout().flush();
    // Leaving PID 1 ends whatever is still running in the namespace.
    std::process::exit(code);
}

fn usage() -> ! {
    eprintln!("reuse: {USAGE}");
    std::process::exit(2);
}

async fn run(scenario: &str, backend: Backend) -> Res<String> {
    let here = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let fixture = here.with_file_name("fixture");
    if !fixture.is_file() {
        return fail(format!("no fixture binary at {}", fixture.display()));
    }
    if backend == Backend::Cgroup {
        let capabilities = corral::capabilities();
        if let Some(status) = capabilities
            .backends
            .iter()
            .find(|s| s.backend == Backend::Cgroup && !s.available)
        {
            return Err(Failure::Skip(format!(
                "the cgroup backend is unavailable here: {}",
                status.detail
            )));
        }
    }
    let cycle = small_pid_space()?;
    let mut factory = Factory::start(&fixture, cycle)?;
    factory.burn().await?;
    let result = match scenario {
        "cancel" => cancel(backend, &fixture, &mut factory).await,
        "watchdog" => owner_killed(backend, &fixture, &mut factory, true).await,
        _ => owner_killed(backend, &fixture, &mut factory, false).await,
    };
    factory.finish().await;
    let reaped = reap_adopted(&[]);
    if reaped > 0 {
        note(format!("reaped {reaped} adopted zombies"));
    }
    result
}
