//! `fixture`: small misbehaving programs for corral's tests.
//!
//! Usage: `fixture MODE [ARGS...]`. Every mode that creates processes prints
//! exactly one readiness line on stdout, `ready <own pid> <pid>...`, listing
//! itself and then every process it created that is expected to be alive.
//! It is printed only after each listed descendant has finished its setup
//! (new session, signal dispositions, ...). Anything that "sleeps forever"
//! exits with status 0 by itself after 600 s, so nothing leaks for good.
//! Children are counted from 0. SIGPIPE has its default action (Rust
//! programs normally ignore it), as in an ordinary C program.
//!
//! | mode                     | behaviour |
//! |--------------------------|-----------|
//! | `exit CODE [OUT] [ERR]`  | writes OUT to stdout and ERR to stderr verbatim (no newline added), exits with CODE (0-255); no readiness line |
//! | `kill-self SIGNUM`       | ready; raises SIGNUM with its default action; exits 1 if it survives that |
//! | `sleep SECS`             | ready; sleeps SECS (fractions allowed); exits 0 |
//! | `echo-stdin`             | copies stdin to stdout unbuffered until EOF; exits 0; no readiness line |
//! | `ignore-term`            | ignores SIGTERM; ready; sleeps forever |
//! | `fork N`                 | N children sleep forever; ready with all; sleeps forever |
//! | `setsid`                 | one child calls setsid() and sleeps forever; ready with both; sleeps forever |
//! | `daemon`                 | double fork; the final process calls setsid(), ignores SIGTERM and SIGHUP, moves to `/` with stdio on /dev/null; ready `<leader> <final>`; sleeps forever |
//! | `leave-children N`       | N children sleep forever, keeping stdout/stderr (odd ones call setsid()); ready with all; the leader exits 0 |
//! | `hold-stdout`            | a grandchild keeps stdout and sleeps forever; ready `<leader> <grandchild>`, then `leader-done`; the leader exits 0 |
//! | `slow-die MS`            | ready; on SIGTERM prints `term-received`, waits MS ms, exits 0 |
//! | `flood`                  | ready; writes `0123456789abcdef` repeated, 64 KiB per write, forever (SIGALRM after 600 s); EPIPE ends it quietly |
//! | `fork-storm [N]`         | N (default 200) children that ignore SIGTERM, forked as fast as possible; ready with all; sleeps forever |
//! | `tree-ignore N`          | ignores SIGTERM; N children that ignore it too, every third (i % 3 == 2) calls setsid(); ready with all; sleeps forever |
//! | `tree-exit N`            | N children exist at once, then all exit by themselves; the leader reaps them and exits 0 (a tree of N + 1 that ends on its own); no readiness line |
//! | `fork-bomb SECS`         | ready; then every process forks as fast as it can, its children too (refused forks sleep 1 ms, then retry); after SECS the leader prints `refused N` (its own refused forks) and exits 1 if any fork was refused, else 0; the others go on (up to 600 s) |
//! | `hog MIB`                | a setsid child sleeps forever; ready with both; then allocates and touches MIB MiB, 1 MiB at a time; prints `hog-done` and sleeps forever |
//! | `spin N`                 | N children (odd ones call setsid()) and the leader busy-loop for 600 s; ready with all |
//! | `leader-thread-exits`    | ignores SIGTERM; a second thread sleeps forever; ready; then the first thread exits (the `exit` system call): the process lives on, and its `/proc/PID/stat` reads `Z` |
//! | `hop SECS OUT`           | ready; then "hops" for SECS: forks, and the parent exits at once, over and over; the last one alive writes `survived` to the file OUT and exits 0 |
//! | `breed SECS OUT`         | a child calls setsid(), ignores SIGTERM and SIGCHLD (its children are reaped by the kernel) and detaches stdio; ready with both; for SECS it forks a child every 100 µs (a refused fork is retried), each living 20 ms, and outlives the last by 100 ms; a child whose parent is gone by then (orphaned: it was forked just before the breeder was killed) sleeps until SECS have passed, writes `survived` to the file OUT and exits 0; the leader sleeps forever |
//!
//! Bad arguments print a one-line usage error on stderr and exit with 2.

#[path = "fixture/sys.rs"]
mod sys;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sys::{Fork, ReportPipe};

/// The one-line usage text for an unknown mode.
const MODES: &str = "MODE [ARGS...] with MODE one of: exit, kill-self, sleep, echo-stdin, \
                     ignore-term, fork, setsid, daemon, leave-children, hold-stdout, slow-die, \
                     flood, fork-storm, tree-ignore, tree-exit, hop, breed, fork-bomb, hog, spin, \
                     leader-thread-exits";

/// A usage error: the expected command line for the mode.
type Usage = &'static str;

fn main() {
    // SAFETY: restoring the default action of SIGPIPE, which Rust's runtime
    // set to "ignore" before `main`.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Err(usage) = run(&args) {
        let _ = sys::write_all(2, format!("fixture: usage: fixture {usage}\n").as_bytes());
        sys::exit_now(2);
    }
}

fn run(args: &[OsString]) -> Result<(), Usage> {
    let Some((mode, rest)) = args.split_first() else {
        return Err(MODES);
    };
    let args = |usage| Args {
        rest: rest.iter(),
        usage,
    };
    match mode.to_str().unwrap_or_default() {
        "exit" => exit(args("exit CODE [OUT] [ERR]")),
        "kill-self" => kill_self(args("kill-self SIGNUM")),
        "sleep" => sleep(args("sleep SECS")),
        "echo-stdin" => echo_stdin(args("echo-stdin")),
        "ignore-term" => ignore_term(args("ignore-term")),
        "fork" => fork(args("fork N")),
        "setsid" => setsid(args("setsid")),
        "daemon" => daemon(args("daemon")),
        "leave-children" => leave_children(args("leave-children N")),
        "hold-stdout" => hold_stdout(args("hold-stdout")),
        "slow-die" => slow_die(args("slow-die MS")),
        "flood" => flood(args("flood")),
        "fork-storm" => fork_storm(args("fork-storm [N]")),
        "tree-ignore" => tree_ignore(args("tree-ignore N")),
        "tree-exit" => tree_exit(args("tree-exit N")),
        "hop" => hop(args("hop SECS OUT")),
        "breed" => breed(args("breed SECS OUT")),
        "fork-bomb" => fork_bomb(args("fork-bomb SECS")),
        "hog" => hog(args("hog MIB")),
        "spin" => spin(args("spin N")),
        "leader-thread-exits" => leader_thread_exits(args("leader-thread-exits")),
        _ => Err(MODES),
    }
}

/// The arguments after the mode, with the mode's usage line for errors.
struct Args<'a> {
    rest: std::slice::Iter<'a, OsString>,
    usage: Usage,
}

impl<'a> Args<'a> {
    /// The next argument, parsed; a usage error if missing or malformed.
    fn num<T: FromStr>(&mut self) -> Result<T, Usage> {
        let arg = self.rest.next().ok_or(self.usage)?;
        arg.to_str().and_then(|s| s.parse().ok()).ok_or(self.usage)
    }

    /// The next argument, parsed, or `default` if there is none.
    fn num_or<T: FromStr>(&mut self, default: T) -> Result<T, Usage> {
        match self.rest.as_slice() {
            [] => Ok(default),
            _ => self.num(),
        }
    }

    /// The next argument as raw bytes, if any.
    fn raw(&mut self) -> Option<&'a OsStr> {
        self.rest.next().map(OsString::as_os_str)
    }

    /// A usage error if arguments are left over.
    fn end(self) -> Result<(), Usage> {
        match self.rest.as_slice() {
            [] => Ok(()),
            _ => Err(self.usage),
        }
    }
}

fn exit(mut args: Args) -> Result<(), Usage> {
    let code: u8 = args.num()?;
    let (out, err) = (args.raw(), args.raw());
    args.end()?;
    // Write errors are ignored: the exit code is what matters.
    let _ = sys::write_all(1, out.map(OsStr::as_bytes).unwrap_or_default());
    let _ = sys::write_all(2, err.map(OsStr::as_bytes).unwrap_or_default());
    sys::exit_now(code.into())
}

fn kill_self(mut args: Args) -> Result<(), Usage> {
    let sig: libc::c_int = args.num()?;
    let usage = args.usage;
    args.end()?;
    if !(1..=libc::SIGRTMAX()).contains(&sig) {
        return Err(usage);
    }
    sys::print_ready(&[]);
    sys::raise_with_default_action(sig);
    // The signal's default action is to be ignored, or to stop and we were
    // continued.
    sys::exit_now(1)
}

fn sleep(mut args: Args) -> Result<(), Usage> {
    let secs: f64 = args.num()?;
    let usage = args.usage;
    args.end()?;
    let duration = Duration::try_from_secs_f64(secs).map_err(|_| usage)?;
    sys::print_ready(&[]);
    std::thread::sleep(duration);
    Ok(())
}

fn echo_stdin(args: Args) -> Result<(), Usage> {
    args.end()?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match sys::read(0, &mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                if let Err(err) = sys::write_all(1, &buf[..n]) {
                    sys::die("writing stdout", err);
                }
            }
            Err(err) => sys::die("reading stdin", err),
        }
    }
}

fn ignore_term(args: Args) -> Result<(), Usage> {
    args.end()?;
    sys::ignore_signal(libc::SIGTERM);
    sys::print_ready(&[]);
    sys::sleep_forever()
}

fn fork(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num()?;
    args.end()?;
    // Children keep the inherited SIGTERM disposition (normally the default).
    let pids = sys::spawn_sleepers(n, |_| {});
    sys::print_ready(&pids);
    sys::sleep_forever()
}

fn setsid(args: Args) -> Result<(), Usage> {
    args.end()?;
    let pids = sys::spawn_sleepers(1, |_| sys::setsid());
    sys::print_ready(&pids);
    sys::sleep_forever()
}

fn daemon(args: Args) -> Result<(), Usage> {
    args.end()?;
    let pipe = ReportPipe::new();
    let middle = match sys::fork() {
        Fork::Child => match sys::fork() {
            Fork::Child => {
                sys::setsid();
                sys::ignore_signal(libc::SIGTERM);
                sys::ignore_signal(libc::SIGHUP);
                // Detach before reporting: once the leader is ready, the
                // daemon holds none of its pipes.
                sys::detach_stdio();
                pipe.report();
                sys::sleep_forever()
            }
            Fork::Parent(_) => sys::exit_now(0),
        },
        Fork::Parent(pid) => pid,
    };
    sys::reap(middle);
    let pids = pipe.collect(1);
    sys::print_ready(&pids);
    sys::sleep_forever()
}

fn leave_children(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num()?;
    args.end()?;
    let pids = sys::spawn_sleepers(n, |i| {
        if i % 2 == 1 {
            sys::setsid();
        }
    });
    sys::print_ready(&pids);
    Ok(())
}

fn hold_stdout(args: Args) -> Result<(), Usage> {
    args.end()?;
    let pipe = ReportPipe::new();
    let child = match sys::fork() {
        Fork::Child => match sys::fork() {
            Fork::Child => {
                pipe.report();
                sys::sleep_forever()
            }
            Fork::Parent(_) => sys::exit_now(0),
        },
        Fork::Parent(pid) => pid,
    };
    sys::reap(child);
    let pids = pipe.collect(1);
    sys::print_ready(&pids);
    if let Err(err) = sys::write_all(1, b"leader-done\n") {
        sys::die("writing stdout", err);
    }
    Ok(())
}

/// Set by the SIGTERM handler of `slow-die`; only ever stored to there.
static TERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERM_RECEIVED.store(true, Ordering::SeqCst);
}

fn slow_die(mut args: Args) -> Result<(), Usage> {
    let ms: u64 = args.num()?;
    args.end()?;
    sys::handle_signal(libc::SIGTERM, on_term);
    sys::print_ready(&[]);
    let deadline = Instant::now() + sys::SAFETY_NET;
    while !TERM_RECEIVED.load(Ordering::SeqCst) {
        if Instant::now() >= deadline {
            sys::exit_now(0);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if let Err(err) = sys::write_all(1, b"term-received\n") {
        sys::die("writing stdout", err);
    }
    std::thread::sleep(Duration::from_millis(ms));
    Ok(())
}

fn flood(args: Args) -> Result<(), Usage> {
    args.end()?;
    let chunk = b"0123456789abcdef".repeat(64 * 1024 / 16);
    sys::print_ready(&[]);
    // A blocked writer cannot check a deadline: let SIGALRM end it instead.
    sys::alarm(sys::SAFETY_NET.as_secs().try_into().unwrap_or(u32::MAX));
    loop {
        match sys::write_all(1, &chunk) {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::EPIPE) => sys::exit_now(0),
            Err(err) => sys::die("writing stdout", err),
        }
    }
}

fn fork_storm(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num_or(200)?;
    args.end()?;
    let pids = sys::spawn_sleepers(n, |_| sys::ignore_signal(libc::SIGTERM));
    sys::print_ready(&pids);
    sys::sleep_forever()
}

fn hop(mut args: Args) -> Result<(), Usage> {
    let secs: f64 = args.num()?;
    let usage = args.usage;
    let out = args.raw().ok_or(usage)?.to_owned();
    args.end()?;
    let end = Instant::now() + Duration::try_from_secs_f64(secs).map_err(|_| usage)?;
    sys::print_ready(&[]);
    while Instant::now() < end {
        if let Fork::Parent(_) = sys::fork() {
            sys::exit_now(0);
        }
    }
    if let Err(err) = std::fs::write(&out, b"survived") {
        sys::die("writing OUT", err);
    }
    Ok(())
}

fn breed(mut args: Args) -> Result<(), Usage> {
    let secs: f64 = args.num()?;
    let usage = args.usage;
    let out = args.raw().ok_or(usage)?.to_owned();
    args.end()?;
    let end = Instant::now() + Duration::try_from_secs_f64(secs).map_err(|_| usage)?;
    let pipe = ReportPipe::new();
    let breeder = match sys::fork() {
        Fork::Child => {
            sys::setsid();
            sys::ignore_signal(libc::SIGTERM);
            sys::ignore_signal(libc::SIGCHLD);
            sys::detach_stdio();
            pipe.report();
            let me = sys::getpid();
            while Instant::now() < end {
                // A refused fork (a host short of pids) is tried again: the
                // breeder dying of it would orphan its children.
                let Ok(forked) = sys::try_fork() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                if let Fork::Child = forked {
                    std::thread::sleep(Duration::from_millis(20));
                    if std::os::unix::process::parent_id() == me.cast_unsigned() {
                        sys::exit_now(0);
                    }
                    std::thread::sleep(end.saturating_duration_since(Instant::now()));
                    if let Err(err) = std::fs::write(&out, b"survived") {
                        sys::die("writing OUT", err);
                    }
                    sys::exit_now(0);
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            // Outlives its last children, so that none is orphaned.
            std::thread::sleep(Duration::from_millis(100));
            sys::exit_now(0)
        }
        Fork::Parent(pid) => pid,
    };
    pipe.collect(1);
    sys::print_ready(&[breeder]);
    sys::sleep_forever()
}

fn fork_bomb(mut args: Args) -> Result<(), Usage> {
    let secs: f64 = args.num()?;
    let usage = args.usage;
    args.end()?;
    let secs = Duration::try_from_secs_f64(secs).map_err(|_| usage)?;
    let leader = sys::getpid();
    sys::print_ready(&[]);
    let start = Instant::now();
    let mut refused = 0u64;
    loop {
        let is_leader = sys::getpid() == leader;
        if is_leader && start.elapsed() >= secs {
            let _ = sys::write_all(1, format!("refused {refused}\n").as_bytes());
            sys::exit_now(i32::from(refused > 0));
        }
        if start.elapsed() >= Duration::from_secs(600) {
            sys::exit_now(0);
        }
        match sys::try_fork() {
            Ok(Fork::Child) => refused = 0,
            Ok(Fork::Parent(_)) => {}
            Err(_) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

fn hog(mut args: Args) -> Result<(), Usage> {
    let mib: usize = args.num()?;
    args.end()?;
    let child = sys::spawn_sleepers(1, |_| sys::setsid());
    sys::print_ready(&child);
    let mut held: Vec<Vec<u8>> = Vec::with_capacity(mib);
    for _ in 0..mib {
        // Every page written, so the memory is really used.
        held.push(vec![0xa5; 1 << 20]);
    }
    std::hint::black_box(&held);
    let _ = sys::write_all(1, b"hog-done\n");
    sys::sleep_forever()
}

fn leader_thread_exits(args: Args) -> Result<(), Usage> {
    args.end()?;
    sys::ignore_signal(libc::SIGTERM);
    std::thread::spawn(|| sys::sleep_forever());
    sys::print_ready(&[]);
    // The raw `exit` system call ends this thread only, without unwinding
    // (`pthread_exit` unwinds, and Rust's `main` aborts the process on that
    // foreign unwind).
    // SAFETY: nothing of this thread is used afterwards; no destructor of
    // `main` runs, which this program does not need.
    unsafe { libc::syscall(libc::SYS_exit, 0) };
    unreachable!("the exit system call returned")
}

fn spin(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num()?;
    args.end()?;
    fn busy() -> ! {
        let end = Instant::now() + Duration::from_secs(600);
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        sys::exit_now(0)
    }
    let pipe = ReportPipe::new();
    let mut pids = Vec::with_capacity(n);
    for i in 0..n {
        match sys::fork() {
            Fork::Child => {
                if i % 2 == 1 {
                    sys::setsid();
                }
                pipe.report();
                busy();
            }
            Fork::Parent(pid) => pids.push(pid),
        }
    }
    pipe.collect(n);
    sys::print_ready(&pids);
    busy()
}

fn tree_ignore(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num()?;
    args.end()?;
    // Children inherit the ignored SIGTERM from the leader.
    sys::ignore_signal(libc::SIGTERM);
    let pids = sys::spawn_sleepers(n, |i| {
        if i % 3 == 2 {
            sys::setsid();
        }
    });
    sys::print_ready(&pids);
    sys::sleep_forever()
}

fn tree_exit(mut args: Args) -> Result<(), Usage> {
    let n: usize = args.num()?;
    args.end()?;
    sys::fork_gated_and_reap(n);
    Ok(())
}
