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

use std::{
    ffi::{CString, OsStr, OsString},
    fmt,
    io::{self, BufRead, Read, Write},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::{ffi::OsStrExt, fs::PermissionsExt},
    },
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command as StdCommand, Stdio},
    sync::OnceLock,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use corral::{
    Backend, BackendChoice,
    identity::{self, Stat},
    ledger::{self, SweepAction},
};

/// The argument that makes this binary run as the bystander factory.
const FACTORY_ARG: &str = "__reuse-factory";
/// The `pid_max` written inside the namespace: pids cycle through 300..512.
const SMALL_PID_MAX: i32 = 512;
/// After the first wrap the kernel allocates pids from here on.
const RESERVED_PIDS: i32 = 300;
/// A pid space with a longer cycle than this is not cycled through.
const MAX_CYCLE: i32 = 200_000;
/// Longer than the supervisor's first re-scan (100 ms) plus one interval
/// (250 ms): by then every member has been seen at least once.
const LEARN: Duration = Duration::from_millis(450);
/// The owner-death guarantee, and the slack a loaded 2-core machine needs.
const WATCHDOG_BOUND: Duration = Duration::from_secs(1);
const SLACK: Duration = Duration::from_millis(500);
/// Exit status for "this machine cannot run the scenario".
const EXIT_SKIP: i32 = 77;

const USAGE: &str = "usage: reuse (cancel|watchdog|ledger) (cgroup|subreaper|group), \
                     as PID 1 of a private PID namespace: \
                     unshare --pid --fork --mount-proc reuse SCENARIO BACKEND";

/// Why a scenario did not pass.
enum Failure {
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

type Res<T> = Result<T, Failure>;

fn fail<T>(message: impl Into<String>) -> Res<T> {
    Err(Failure::Fail(message.into()))
}

/// Progress on stderr, with the time since start.
fn note(message: impl fmt::Display) {
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

// ---------------------------------------------------------------------------
// Processes by identity.

/// A process: pid plus start time (clock ticks after boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ident {
    pid: i32,
    start: u64,
}

impl Ident {
    fn of(pid: i32) -> Option<Self> {
        identity::read_stat(pid).ok().map(|s| Ident {
            pid,
            start: s.start_time,
        })
    }

    /// This very process's `/proc` entry, if it still exists (zombie included).
    fn stat(&self) -> Option<Stat> {
        identity::read_stat(self.pid)
            .ok()
            .filter(|s| s.start_time == self.start)
    }

    fn is_running(&self) -> bool {
        self.stat().is_some_and(|s| s.is_running())
    }

    /// Running and not stopped: a bystander nobody signalled (every signal
    /// that does anything to `fixture sleep` kills or stops it).
    fn untouched(&self) -> bool {
        self.stat()
            .is_some_and(|s| s.is_running() && !matches!(s.state, 'T' | 't'))
    }

    /// What `/proc` says is at this pid now, for messages.
    fn describe_pid(&self) -> String {
        match identity::read_stat(self.pid) {
            Ok(stat) if stat.start_time == self.start => {
                format!("state {} ({})", stat.state, identity::command_line(&stat))
            }
            Ok(stat) => format!(
                "pid {} now belongs to start {} ({})",
                self.pid,
                stat.start_time,
                identity::command_line(&stat)
            ),
            Err(_) => format!("pid {} is gone", self.pid),
        }
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (start {})", self.pid, self.start)
    }
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags, no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(io::Error::other)?;
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// SIGKILL through a pidfd, only if `p` is still that very process (checked
/// after the pidfd pinned whatever holds the pid). Returns whether it was sent.
fn kill_verified(p: Ident) -> bool {
    let Ok(pidfd) = pidfd_open(p.pid) else {
        return false;
    };
    if !p.is_running() {
        return false;
    }
    // SAFETY: pidfd_send_signal(2) with a live pidfd, no siginfo, no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

/// Reaps `pid` if it is an exited child of ours. A zombie's pid cannot be
/// reused before it is reaped, so naming it here is safe.
fn reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: `status` is a valid place for waitpid to write to.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

/// Reaps the zombies whose parent is this process (orphans adopted as PID
/// 1), except `keep`. Only called while the library supervises nothing here.
fn reap_adopted(keep: &[i32]) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(1);
    identity::all_processes()
        .unwrap_or_default()
        .iter()
        .filter(|s| s.ppid == me && !s.is_running() && !keep.contains(&s.pid))
        .filter(|s| reap(s.pid))
        .count()
}

/// Polls `check` every 2 ms until it holds (true) or `within` passes (false,
/// after one last check).
async fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return check();
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `p` no longer holds its pid (its parent reaped it).
async fn wait_freed(p: Ident, within: Duration) -> Res<()> {
    if wait_until(within, || p.stat().is_none()).await {
        Ok(())
    } else {
        fail(format!(
            "{p} was not reaped by its parent within {within:?}: {}",
            p.describe_pid()
        ))
    }
}

/// The running children of `parent`.
fn children(parent: i32) -> Vec<Stat> {
    identity::all_processes()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.ppid == parent && s.is_running())
        .collect()
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(2) on a descriptor we own, integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lines from a child's stdout, read without blocking the runtime (so the
/// supervisor task keeps re-scanning) and without a reader thread (a thread
/// takes a pid, which could land on the one being hunted).
struct Lines {
    reader: ChildStdout,
    pending: Vec<u8>,
    eof: bool,
}

impl Lines {
    fn new(reader: ChildStdout) -> Res<Self> {
        set_nonblocking(reader.as_raw_fd()).map_err(|e| format!("O_NONBLOCK: {e}"))?;
        Ok(Self {
            reader,
            pending: Vec::new(),
            eof: false,
        })
    }

    fn try_line(&mut self) -> io::Result<Option<String>> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                return Ok(Some(String::from_utf8_lossy(&line).trim_end().to_owned()));
            }
            if self.eof {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "end of file before a complete line",
                ));
            }
            let mut chunk = [0u8; 4096];
            match self.reader.read(&mut chunk) {
                Ok(0) => self.eof = true,
                Ok(n) => self
                    .pending
                    .extend_from_slice(chunk.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    async fn line(&mut self, within: Duration, what: &str) -> Res<String> {
        let deadline = Instant::now() + within;
        loop {
            match self.try_line() {
                Ok(Some(line)) => return Ok(line),
                Ok(None) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                Ok(None) => return fail(format!("no {what} within {within:?}")),
                Err(e) => return fail(format!("reading {what}: {e}")),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The pid space and the bystander factory.

/// Lowers `pid_max` inside the namespace; returns the length of the cycle
/// the factory may have to go through to reach a given pid.
fn small_pid_space() -> Res<i32> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    match std::fs::write(PATH, SMALL_PID_MAX.to_string()) {
        Ok(()) => {
            note(format!("pid_max = {SMALL_PID_MAX} in this namespace"));
            Ok(SMALL_PID_MAX - RESERVED_PIDS)
        }
        Err(error) => {
            let current: i32 = std::fs::read_to_string(PATH)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| format!("cannot read {PATH}"))?;
            if current > MAX_CYCLE {
                return Err(Failure::Skip(format!(
                    "cannot lower pid_max in this namespace ({error}; per-namespace pid_max \
                     needs Linux 6.14) and pid_max = {current}: a full pid cycle is too long"
                )));
            }
            note(format!(
                "cannot lower pid_max ({error}); cycling through all {current} pids instead"
            ));
            Ok(current - RESERVED_PIDS)
        }
    }
}

/// The bystander factory, seen from the scenario.
struct Factory {
    child: Child,
    input: Option<ChildStdin>,
    output: Lines,
    /// Forks allowed per hunt: two full cycles.
    tries: i32,
    bystanders: Vec<Ident>,
}

impl Factory {
    fn start(fixture: &Path, cycle: i32) -> Res<Self> {
        let here = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = StdCommand::new(here)
            .arg(FACTORY_ARG)
            .arg(fixture)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the bystander factory: {e}"))?;
        let input = child.stdin.take();
        let output = Lines::new(child.stdout.take().ok_or("factory stdout")?)?;
        Ok(Self {
            child,
            input,
            output,
            tries: cycle.saturating_mul(2).saturating_add(64),
            bystanders: Vec::new(),
        })
    }

    async fn ask(&mut self, request: &str) -> Res<Vec<String>> {
        let input = self.input.as_mut().ok_or("the factory's input is closed")?;
        writeln!(input, "{request}")
            .and_then(|()| input.flush())
            .map_err(|e| format!("asking the factory {request:?}: {e}"))?;
        let answer = self
            .output
            .line(Duration::from_secs(90), &format!("answer to {request:?}"))
            .await?;
        Ok(answer.split_whitespace().map(str::to_owned).collect())
    }

    /// Allocates pids until one above `RESERVED_PIDS` has been handed out,
    /// so every later pid (the tree's) is in the range that wraps.
    async fn burn(&mut self) -> Res<()> {
        let answer = self
            .ask(&format!("burn {} {}", RESERVED_PIDS + 1, self.tries))
            .await?;
        match answer.as_slice() {
            [word, pid] if word == "burned" => {
                note(format!("burnt pids up to {pid}"));
                Ok(())
            }
            _ => fail(format!("burning pids failed: {answer:?}")),
        }
    }

    /// Forks until a new process gets `target`'s pid and keeps that one
    /// running `fixture sleep 600` in a session of its own: the bystander.
    async fn hunt(&mut self, target: Ident) -> Res<Ident> {
        let started = Instant::now();
        let answer = self
            .ask(&format!("hunt {} {}", target.pid, self.tries))
            .await?;
        let bystander = match answer.as_slice() {
            [word, pid, start] if word == "bystander" => Ident {
                pid: pid.parse().map_err(|_| format!("bad answer {answer:?}"))?,
                start: start
                    .parse()
                    .map_err(|_| format!("bad answer {answer:?}"))?,
            },
            _ => {
                return fail(format!(
                    "pid {} of {target} could not be given to a bystander: the factory says {}",
                    target.pid,
                    answer.join(" ")
                ));
            }
        };
        self.bystanders.push(bystander);
        if bystander.pid != target.pid {
            return fail(format!("the factory landed on {bystander}, not {target}"));
        }
        if bystander.start == target.start {
            return fail(format!(
                "the bystander {bystander} has the start time of {target}: \
                 identities cannot tell them apart"
            ));
        }
        note(format!(
            "bystander {bystander} now holds the pid of {target} (hunt took {:?}); \
             pgid {}",
            started.elapsed(),
            bystander.stat().map_or(0, |s| s.pgid)
        ));
        Ok(bystander)
    }

    /// Kills the bystanders (by identity), closes the factory's input and
    /// waits for it to reap them and exit.
    async fn finish(mut self) {
        for bystander in &self.bystanders {
            kill_verified(*bystander);
        }
        drop(self.input.take());
        let child = &mut self.child;
        let exited = wait_until(Duration::from_secs(5), || {
            matches!(child.try_wait(), Ok(Some(_)) | Err(_))
        })
        .await;
        if !exited {
            note("the factory did not exit; leaving it to the end of the namespace");
        }
    }
}

/// The factory process: answers one line per request on stdout.
///
/// - `burn MIN TRIES`: forks children that exit at once until one gets a pid
///   of at least MIN → `burned PID` (or `miss TRIES`).
/// - `hunt PID TRIES`: forks until a child gets PID; that child calls
///   `setsid()` and execs `FIXTURE sleep 600` with stdin/stdout on
///   `/dev/null`; the others exit at once and are reaped →
///   `bystander PID START`, `taken PID BY` (another process took it), or
///   `miss TRIES`.
///
/// At end of input it reaps its children (for a bounded time) and exits.
/// Single-threaded, so its forked children may do anything; they only make
/// raw system calls anyway.
mod factory {
    use super::*;

    pub(super) fn run(fixture: &OsStr) -> ! {
        let fail = |what: &str| -> ! {
            eprintln!("reuse factory: {what}");
            std::process::exit(1)
        };
        let devnull = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap_or_else(|e| fail(&format!("/dev/null: {e}")));
        let program =
            CString::new(fixture.as_bytes()).unwrap_or_else(|_| fail("NUL in the fixture path"));
        let (sleep, secs) = (c"sleep", c"600");
        let argv = [
            program.as_ptr(),
            sleep.as_ptr(),
            secs.as_ptr(),
            std::ptr::null(),
        ];
        let exec = Exec {
            devnull: devnull.as_raw_fd(),
            program: &program,
            argv: &argv,
        };
        let mut out = io::stdout().lock();
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let words: Vec<&str> = line.split_whitespace().collect();
            let number = |at: usize| words.get(at).and_then(|w| w.parse::<i32>().ok());
            let answer = match (words.first().copied(), number(1), number(2)) {
                (Some("burn"), Some(min), Some(tries)) => burn(min, tries),
                (Some("hunt"), Some(target), Some(tries)) => hunt(target, tries, &exec),
                _ => format!("error bad request {line:?}"),
            };
            if writeln!(out, "{answer}")
                .and_then(|()| out.flush())
                .is_err()
            {
                break;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let mut status = 0;
            // SAFETY: `status` is a valid place for waitpid to write to.
            match unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } {
                -1 => break,
                0 => std::thread::sleep(Duration::from_millis(5)),
                _ => {}
            }
        }
        std::process::exit(0)
    }

    /// Everything the bystander needs, prepared before the fork.
    struct Exec<'a> {
        devnull: RawFd,
        program: &'a CString,
        argv: &'a [*const libc::c_char; 4],
    }

    /// Forks; in the child runs `child` and exits, in the parent returns the
    /// child's pid.
    fn fork(child: impl FnOnce()) -> Result<i32, String> {
        // SAFETY: this process is single-threaded, so the child may run
        // anything; `child` only makes raw system calls.
        match unsafe { libc::fork() } {
            -1 => Err(format!("fork: {}", io::Error::last_os_error())),
            0 => {
                child();
                exit_now()
            }
            pid => Ok(pid),
        }
    }

    fn exit_now() -> ! {
        // SAFETY: _exit(2) is always safe and never returns.
        unsafe { libc::_exit(0) }
    }

    fn wait_for(pid: i32) {
        let mut status = 0;
        // SAFETY: `status` is a valid place for waitpid to write to.
        while unsafe { libc::waitpid(pid, &mut status, 0) } == -1
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }

    fn burn(min: i32, tries: i32) -> String {
        for _ in 0..tries {
            match fork(|| ()) {
                Ok(pid) => {
                    wait_for(pid);
                    if pid >= min {
                        return format!("burned {pid}");
                    }
                }
                Err(error) => return format!("error {error}"),
            }
        }
        format!("miss {tries}")
    }

    fn hunt(target: i32, tries: i32, exec: &Exec<'_>) -> String {
        for attempt in 0..tries {
            if attempt % 32 == 0
                && let Ok(stat) = identity::read_stat(target)
            {
                return format!(
                    "taken {target} by {:?} (start {}) after {attempt} forks",
                    identity::command_line(&stat),
                    stat.start_time
                );
            }
            let forked = fork(|| {
                // SAFETY: getpid(2) has no preconditions.
                if unsafe { libc::getpid() } != target {
                    exit_now();
                }
                // SAFETY: raw system calls on descriptors and NUL-terminated
                // strings prepared before the fork; execv only returns on error.
                unsafe {
                    libc::setsid();
                    libc::dup2(exec.devnull, 0);
                    libc::dup2(exec.devnull, 1);
                    libc::execv(exec.program.as_ptr(), exec.argv.as_ptr());
                    libc::_exit(127)
                }
            });
            let pid = match forked {
                Ok(pid) => pid,
                Err(error) => return format!("error {error} after {attempt} forks"),
            };
            if pid != target {
                wait_for(pid);
                continue;
            }
            // Wait (bounded) until it runs the fixture: it then looks exactly
            // like the member that held the pid before.
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                let Ok(stat) = identity::read_stat(pid) else {
                    break;
                };
                if identity::command_line(&stat).ends_with(" sleep 600") {
                    return format!("bystander {pid} {}", stat.start_time);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            return format!("error the process at {pid} did not run the fixture");
        }
        format!("miss {tries} forks without getting pid {target}")
    }
}

// ---------------------------------------------------------------------------
// The tree.

/// `sh -c` script of the tree: two fixture sleepers, reaped by `sh`'s `wait`.
fn tree_script(fixture: &Path) -> Res<String> {
    let path = fixture.to_str().ok_or("the fixture path is not UTF-8")?;
    if path.contains('\'') {
        return fail("the fixture path contains a quote");
    }
    Ok(format!(
        "'{path}' sleep 600 &\n'{path}' sleep 600 &\nwait\n"
    ))
}

/// The leader's members, once both sleepers run the fixture.
async fn members_of(leader: Ident) -> Res<(Ident, Ident)> {
    let mut found = Vec::new();
    let ready = wait_until(Duration::from_secs(10), || {
        found = children(leader.pid)
            .iter()
            .filter(|s| identity::command_line(s).ends_with(" sleep 600"))
            .map(|s| Ident {
                pid: s.pid,
                start: s.start_time,
            })
            .collect();
        found.len() == 2
    })
    .await;
    match found.as_slice() {
        [x, y] if ready => Ok((*x, *y)),
        _ => fail(format!(
            "the leader {leader} did not get its two sleepers: {found:?}"
        )),
    }
}

/// Checks the bystander; the error says what happened to it.
fn check_bystander(bystander: Ident, when: &str) -> Res<()> {
    if bystander.untouched() {
        Ok(())
    } else {
        fail(format!(
            "BUG: the bystander {bystander}, which took the pid of a dead process of the tree, was signalled {when}: {}",
            bystander.describe_pid()
        ))
    }
}

// ---------------------------------------------------------------------------
// Scenario `cancel`.

async fn cancel(backend: Backend, fixture: &Path, factory: &mut Factory) -> Res<String> {
    corral::disable_startup_sweep();
    let script = tree_script(fixture)?;
    let child = corral::Command::new("/bin/sh")
        .args(["-c", &script])
        .backend(BackendChoice::Only(backend))
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(1))
        .watchdog(false)
        .ledger(false)
        .spawn()
        .await
        .map_err(|error| match error {
            corral::Error::BackendUnavailable { .. } => Failure::Skip(error.to_string()),
            error => Failure::Fail(format!("spawn: {error}")),
        })?;
    let leader = Ident::of(child.id()).ok_or("the leader vanished")?;
    let mut tap = child.stdout_tap().ok_or("no stdout tap")?;
    let two_lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() >= 2;
    let ready = tokio::time::timeout(Duration::from_secs(10), tap.wait_for(two_lines)).await;
    if !matches!(ready, Ok(true)) {
        return fail(format!(
            "no two readiness lines: {:?}",
            String::from_utf8_lossy(&tap.snapshot())
        ));
    }
    let snapshot = tap.snapshot();
    let members: Vec<Ident> = String::from_utf8_lossy(&snapshot)
        .lines()
        .filter_map(|l| l.strip_prefix("ready "))
        .filter_map(|pid| pid.trim().parse().ok())
        .filter_map(Ident::of)
        .collect();
    let [x, y] = members.as_slice() else {
        return fail(format!("expected two live members, got {members:?}"));
    };
    let (x, y) = (*x, *y);
    note(format!(
        "tree: leader sh {leader}, members {x} and {y} ({backend})"
    ));
    // Let the supervisor's re-scans learn both members by identity.
    tokio::time::sleep(LEARN).await;
    if !kill_verified(x) {
        return fail(format!("could not kill the member {x}"));
    }
    wait_freed(x, Duration::from_secs(5)).await?;
    note(format!("member {x} killed and reaped by sh"));
    let bystander = factory.hunt(x).await?;
    // The re-scans now see the bystander at the member's old pid.
    tokio::time::sleep(LEARN).await;
    check_bystander(bystander, "before the cancel")?;
    let cancelled = Instant::now();
    child.terminate();
    let finished = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .map_err(|_| "the cancelled call did not return within 10 s")?
        .map_err(|e| format!("wait: {e}"))?;
    let took = cancelled.elapsed();
    note(format!(
        "cancelled: {:?} in {took:?}, signals {:?}, survivors {}",
        finished.outcome,
        finished
            .report
            .signals
            .iter()
            .map(|s| format!("{} to {:?}", s.signal, s.delivered))
            .collect::<Vec<_>>(),
        finished.report.survivors.len()
    ));
    check_bystander(bystander, "by the cancellation")?;
    if finished
        .report
        .survivors
        .iter()
        .any(|s| s.pid == bystander.pid)
    {
        return fail(format!(
            "the report names the bystander {bystander} as a survivor: {:?}",
            finished.report.survivors
        ));
    }
    if !finished.report.survivors.is_empty() {
        return fail(format!("survivors: {:?}", finished.report.survivors));
    }
    if finished.outcome != corral::Outcome::Cancelled {
        return fail(format!("outcome {:?}, not Cancelled", finished.outcome));
    }
    for (what, p) in [("leader", leader), ("member", y)] {
        if p.is_running() {
            return fail(format!(
                "the {what} {p} survived the cancel: {}",
                p.describe_pid()
            ));
        }
    }
    Ok(format!(
        "bystander {bystander} took the pid of killed member {x}; cancel ended leader {} \
         and member {} in {} ms; the bystander was not signalled",
        leader.pid,
        y.pid,
        took.as_millis()
    ))
}

// ---------------------------------------------------------------------------
// Scenarios `watchdog` and `ledger`: the `owner` program runs the tree.

/// A directory holding a hard link (or copy) of `owner` and, as `fixture`
/// beside it, a script that is the scenario's tree: `owner` runs
/// `<its directory>/fixture ARGS`, so this makes it run `sh` with the two
/// sleepers. Removed on drop.
struct OwnerDir {
    dir: PathBuf,
}

impl OwnerDir {
    fn new(fixture: &Path) -> Res<Self> {
        let here = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let owner = here.with_file_name("owner");
        let dir = unique_temp("owner");
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let made = Self { dir };
        let copy = made.owner();
        if std::fs::hard_link(&owner, &copy).is_err() {
            std::fs::copy(&owner, &copy)
                .map_err(|e| format!("copying {}: {e}", owner.display()))?;
        }
        let script = made.dir.join("fixture");
        let text = format!(
            "#!/bin/sh\n# The PID-reuse tree, in place of the fixture binary.\n{}",
            tree_script(fixture)?
        );
        std::fs::write(&script, text)
            .and_then(|()| {
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("{}: {e}", script.display()))?;
        Ok(made)
    }

    fn owner(&self) -> PathBuf {
        self.dir.join("owner")
    }
}

impl Drop for OwnerDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh path under the temporary directory (not created). Pids say
/// little inside a PID namespace, so the name uses the clock.
fn unique_temp(what: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("corral-reuse-{what}-{nanos}"))
}

/// Removes a directory on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The owner process and what it printed.
struct Owner {
    child: Child,
    me: Ident,
    watchdog: Option<Ident>,
    leader: Ident,
}

async fn start_owner(
    dir: &OwnerDir,
    ledger_dir: &Path,
    backend: Backend,
    watchdog: bool,
) -> Res<Owner> {
    let mut command = StdCommand::new(dir.owner());
    command.arg(backend.name());
    if !watchdog {
        command.arg("--no-watchdog");
    }
    let mut child = command
        .args(["--grace-ms", "300", "--", "reuse-tree"])
        .env("CORRAL_LEDGER_DIR", ledger_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting owner: {e}"))?;
    let mut out = Lines::new(child.stdout.take().ok_or("owner stdout")?)?;
    let line = match out.line(Duration::from_secs(10), "the owner's line").await {
        Ok(line) => line,
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(error);
        }
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let pid = |at: usize| words.get(at).and_then(|w| w.parse::<i32>().ok());
    let (Some(&"owner"), Some(me), Some(&"watchdog"), Some(watchdog_pid)) =
        (words.first(), pid(1), words.get(2), pid(3))
    else {
        return fail(format!("unexpected owner line {line:?}"));
    };
    let me = Ident::of(me).ok_or("the owner vanished")?;
    let watchdog = (watchdog_pid != 0)
        .then(|| Ident::of(watchdog_pid).ok_or("the watchdog vanished"))
        .transpose()?;
    let leaders: Vec<Stat> = children(me.pid)
        .into_iter()
        .filter(|s| Some(s.pid) != watchdog.map(|w| w.pid))
        .collect();
    let [leader] = leaders.as_slice() else {
        return fail(format!(
            "the owner should have one child besides its watchdog: {leaders:?}"
        ));
    };
    Ok(Owner {
        child,
        me,
        watchdog,
        leader: Ident {
            pid: leader.pid,
            start: leader.start_time,
        },
    })
}

async fn owner_killed(
    backend: Backend,
    fixture: &Path,
    factory: &mut Factory,
    watchdog: bool,
) -> Res<String> {
    let dir = OwnerDir::new(fixture)?;
    let ledger_dir = TempDir(unique_temp("ledger"));
    let mut owner = start_owner(&dir, &ledger_dir.0, backend, watchdog).await?;
    if watchdog && owner.watchdog.is_none() {
        return fail("the owner runs without a watchdog");
    }
    let leader = owner.leader;
    let (x, y) = members_of(leader).await?;
    note(format!(
        "owner {}, watchdog {}, tree: leader sh {leader}, members {x} and {y} ({backend})",
        owner.me,
        owner.watchdog.map_or("none".to_owned(), |w| w.to_string())
    ));
    let result = if watchdog {
        watchdog_kills(&mut owner, backend, factory, &ledger_dir.0, (x, y)).await
    } else {
        sweep_after_owner(&mut owner, backend, factory, &ledger_dir.0, (x, y)).await
    };
    // Whatever happened: nothing of the tree stays (by identity), and the
    // owner is reaped.
    for p in [owner.me, leader, x, y] {
        kill_verified(p);
    }
    let _ = wait_until(Duration::from_secs(2), || {
        reap_adopted(&[factory.child.id().try_into().unwrap_or(0)]);
        matches!(owner.child.try_wait(), Ok(Some(_)) | Err(_))
            && ![leader, x, y].iter().any(Ident::is_running)
    })
    .await;
    result
}

/// `watchdog`: member X's pid goes to a bystander, then the owner dies; the
/// watchdog ends the tree and leaves the bystander alone.
async fn watchdog_kills(
    owner: &mut Owner,
    backend: Backend,
    factory: &mut Factory,
    ledger_dir: &Path,
    (x, y): (Ident, Ident),
) -> Res<String> {
    let leader = owner.leader;
    let watchdog = owner.watchdog.ok_or("no watchdog")?;
    // The owner's re-scans learn both members and tell the watchdog.
    tokio::time::sleep(LEARN).await;
    if !kill_verified(x) {
        return fail(format!("could not kill the member {x}"));
    }
    wait_freed(x, Duration::from_secs(5)).await?;
    note(format!("member {x} killed and reaped by sh"));
    let bystander = factory.hunt(x).await?;
    tokio::time::sleep(LEARN).await;
    check_bystander(bystander, "before the owner died")?;
    if !kill_verified(owner.me) {
        return fail(format!("could not kill the owner {}", owner.me));
    }
    let killed = Instant::now();
    let factory_pid = factory.child.id().try_into().unwrap_or(0);
    let gone = wait_until(WATCHDOG_BOUND + SLACK, || {
        reap_adopted(&[factory_pid]);
        !leader.is_running() && !y.is_running()
    })
    .await;
    let took = killed.elapsed();
    note(format!(
        "owner killed; tree gone: {gone} after {} ms",
        took.as_millis()
    ));
    let watchdog_exited = wait_until(Duration::from_secs(3), || {
        reap_adopted(&[factory_pid]);
        watchdog.stat().is_none()
    })
    .await;
    check_bystander(bystander, "by the watchdog")?;
    if !gone {
        return fail(format!(
            "the watchdog did not end the tree within {:?}: leader {}, member {}",
            WATCHDOG_BOUND + SLACK,
            leader.describe_pid(),
            y.describe_pid()
        ));
    }
    if !watchdog_exited {
        return fail(format!(
            "the watchdog {watchdog} did not exit: {}",
            watchdog.describe_pid()
        ));
    }
    let left = ledger::load(ledger_dir).expect("ledger").0;
    if !left.is_empty() {
        return fail(format!(
            "the watchdog left {} ledger record(s): {left:?}",
            left.len()
        ));
    }
    Ok(format!(
        "bystander {bystander} took the pid of killed member {x}; after the owner's SIGKILL \
         the watchdog ended leader {} and member {} ({backend}) in {} ms and removed the \
         record; the bystander was not signalled",
        leader.pid,
        y.pid,
        took.as_millis()
    ))
}

/// `ledger`: the owner dies without a watchdog, its leader is killed and
/// reaped here, a bystander (a session leader) takes the leader's pid, and the
/// sweep runs over the dead owner's record.
async fn sweep_after_owner(
    owner: &mut Owner,
    backend: Backend,
    factory: &mut Factory,
    ledger_dir: &Path,
    (x, y): (Ident, Ident),
) -> Res<String> {
    let leader = owner.leader;
    let records = ledger::load(ledger_dir).expect("ledger").0;
    match records.as_slice() {
        [record]
            if record.leader.map(|l| (l.pid, l.start_time)) == Some((leader.pid, leader.start)) => {
        }
        _ => {
            return fail(format!(
                "expected one record naming the leader {leader}: {records:?}"
            ));
        }
    }
    if !kill_verified(owner.me) {
        return fail(format!("could not kill the owner {}", owner.me));
    }
    let child = &mut owner.child;
    if !wait_until(Duration::from_secs(5), || {
        matches!(child.try_wait(), Ok(Some(_)) | Err(_))
    })
    .await
    {
        return fail("the owner did not die of SIGKILL");
    }
    let me = i32::try_from(std::process::id()).unwrap_or(1);
    if !wait_until(Duration::from_secs(2), || {
        leader.stat().is_some_and(|s| s.ppid == me)
    })
    .await
    {
        return fail(format!(
            "the leader {leader} was not re-parented to PID 1: {}",
            leader.describe_pid()
        ));
    }
    note(format!(
        "owner killed; leader {leader} re-parented to PID 1"
    ));
    // Now the leader is ours: kill it and reap it, which frees its pid (and,
    // for the group backend, its process group id).
    if !kill_verified(leader) {
        return fail(format!("could not kill the leader {leader}"));
    }
    if !wait_until(Duration::from_secs(5), || {
        leader.stat().is_some_and(|s| !s.is_running()) && reap(leader.pid)
    })
    .await
    {
        return fail(format!(
            "could not reap the leader: {}",
            leader.describe_pid()
        ));
    }
    note(format!("leader {leader} killed and reaped"));
    if backend == Backend::Group {
        // The kernel keeps a pid allocated while it is still some process's
        // group id, so the leader's pid (= the group id) is free only once
        // the whole group is gone: end the members too. This is the only
        // window in which a stale group id can name a new group.
        for p in [x, y] {
            kill_verified(p);
        }
        let reaped = wait_until(Duration::from_secs(5), || {
            for p in [x, y] {
                if p.stat().is_some_and(|s| !s.is_running()) {
                    reap(p.pid);
                }
            }
            x.stat().is_none() && y.stat().is_none()
        })
        .await;
        if !reaped {
            return fail(format!(
                "the members were not reaped: {}, {}",
                x.describe_pid(),
                y.describe_pid()
            ));
        }
        note(format!(
            "members {x} and {y} killed and reaped: group {} is empty",
            leader.pid
        ));
    }
    let bystander = factory.hunt(leader).await?;
    let swept = corral::ledger::sweep(ledger_dir, false, |_| true).expect("sweep");
    note(format!(
        "sweep: {:?}",
        swept
            .actions
            .iter()
            .map(|(r, a)| (&r.id, a))
            .collect::<Vec<_>>()
    ));
    check_bystander(bystander, "by the sweep")?;
    let [(_, action)] = swept.actions.as_slice() else {
        return fail(format!(
            "expected one sweep action, got {:?}",
            swept.actions
        ));
    };
    let expected = match (backend, action) {
        // The leaf still holds both sleepers: `cgroup.kill` names no pids.
        (Backend::Cgroup, SweepAction::Killed { members, survivors }) => {
            let mut pids: Vec<i32> = members.iter().map(|m| m.pid).collect();
            pids.sort_unstable();
            // Both members are in the leaf; the list is what the sweep saw
            // running when it began (a member can be caught mid-exit), so it
            // must name nothing else, and afterwards neither may run.
            let want = [x.pid, y.pid];
            if pids.is_empty() || pids.iter().any(|p| !want.contains(p)) || !survivors.is_empty() {
                return fail(format!(
                    "the sweep killed {members:?} (survivors {survivors:?}); expected {x} and {y}"
                ));
            }
            if x.is_running() || y.is_running() {
                return fail("the sweep left members of the cgroup running");
            }
            "killed the two members through the leaf"
        }
        // The record names only the leader, whose identity no longer holds:
        // nothing is found, nothing signalled (the members it cannot know of
        // are still running).
        // (`Dropped` is returned only when the sweep found no member, i.e.
        // signalled nothing; whether the members still run is noted, not
        // asserted: they are orphans of a killed owner by now.)
        (Backend::Subreaper, SweepAction::Dropped) => {
            note(format!(
                "members after the sweep: {} running, {} running",
                x.is_running(),
                y.is_running()
            ));
            "dropped the record without signalling"
        }
        // The bystander leads a process group with the recorded group id.
        (Backend::Group, SweepAction::Dropped) => {
            "dropped the record without signalling the reused group id"
        }
        _ => return fail(format!("unexpected sweep action {action:?}")),
    };
    let left = ledger::load(ledger_dir).expect("ledger").0;
    if !left.is_empty() {
        return fail(format!("the sweep kept the record: {left:?}"));
    }
    Ok(format!(
        "bystander {bystander} (its own process group) took the pid of the dead owner's leader \
         {leader}; the sweep {expected}; the bystander was not signalled"
    ))
}
