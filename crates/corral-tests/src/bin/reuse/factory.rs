//! The bystander factory, the process side (`reuse __reuse-factory
//! FIXTURE`); [`crate::pid_space::Factory`] drives it. The factory process: answers one line per request on stdout.
//!
//! - `burn MIN TRIES`: forks children that exit at once until one gets a pid
//!   of at least MIN → `burned PID` (or `miss TRIES`).
//! - `hunt PID TRIES`: forks until a child gets PID; that child calls
//!   `setsid()` and execs `FIXTURE sleep 600` with stdin/stdout on
//!   `/dev/null`; the others exit at once and are reaped →
//!   `bystander PID START`, `taken PID BY` (another process took it), or
//!   `miss TRIES`.
//!
//! At end of input it reaps its children (for a bounded time) and exits.
//! Single-threaded, so its forked children may do anything; they only make
//! raw system calls anyway.

use std::{
    ffi::{CString, OsStr},
    io::{self, BufRead, Write},
    os::{
        fd::{AsRawFd, RawFd},
        unix::ffi::OsStrExt,
    },
    time::{Duration, Instant},
};

use corral_tests::proc;

pub(crate) fn run(fixture: &OsStr) -> ! {
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
            && let Some(stat) = proc::stat(target)
        {
            return format!(
                "taken {target} by {:?} (start {}) after {attempt} forks",
                proc::command_line(&stat),
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
            let Some(stat) = proc::stat(pid) else {
                break;
            };
            if proc::command_line(&stat).ends_with(" sleep 600") {
                return format!("bystander {pid} {}", stat.start_time);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        return format!("error the process at {pid} did not run the fixture");
    }
    format!("miss {tries} forks without getting pid {target}")
}
