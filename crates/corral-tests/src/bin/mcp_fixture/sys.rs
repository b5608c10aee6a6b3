//! The only home of `unsafe` in `mcp-fixture`: signal dispositions and the
//! forks that start the helpers.

use std::ffi::CStr;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Ignores SIGTERM from now on (`signal(SIGTERM, SIG_IGN)`); the disposition
/// survives `fork` and `exec`.
///
/// # References
/// - [`signal(2)`](https://man7.org/linux/man-pages/man2/signal.2.html)
pub fn ignore_sigterm() {
    // SAFETY: `SIG_IGN` is a valid disposition for SIGTERM; no handler runs.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
}

/// Makes `command`'s child call `setsid()` before it execs.
pub fn in_new_session(command: &mut Command) -> &mut Command {
    // SAFETY: the closure only calls `setsid`, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        })
    }
}

/// Makes `command`'s child ignore SIGTERM before it execs.
pub fn ignoring_sigterm(command: &mut Command) -> &mut Command {
    // SAFETY: the closure only calls `signal`, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            ignore_sigterm();
            Ok(())
        })
    }
}

/// Starts a classic daemon running `/bin/sleep SECS`: fork, `setsid()`, fork
/// again; the grandchild puts its stdio on /dev/null and execs, the middle
/// process exits (and is reaped here). Returns the grandchild's pid.
///
/// Must be called while the process has a single thread (before any thread
/// is started): the children do more than async-signal-safe calls.
///
/// # References
/// - [`fork(2)`](https://man7.org/linux/man-pages/man2/fork.2.html),
///   [`setsid(2)`](https://man7.org/linux/man-pages/man2/setsid.2.html),
///   [`daemon(7)`](https://man7.org/linux/man-pages/man7/daemon.7.html)
pub fn double_forked_daemon(secs: &CStr) -> io::Result<i32> {
    let (mut parent_end, mut child_end) = UnixStream::pair()?;
    let argv = [c"/bin/sleep".as_ptr(), secs.as_ptr(), std::ptr::null()];
    // SAFETY: the process is single-threaded (the caller's contract), so the
    // child may run ordinary code.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(parent_end);
            let _ = rustix::process::setsid();
            // SAFETY: still single-threaded, as above.
            match unsafe { libc::fork() } {
                0 => {
                    drop(child_end);
                    if let Ok(null) = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null")
                    {
                        for fd in 0..3 {
                            // SAFETY: `null` is an open descriptor; 0..3 are the stdio slots.
                            unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) };
                        }
                    }
                    // SAFETY: `argv` is a null-terminated array of C strings
                    // that outlive the call.
                    unsafe { libc::execv(argv[0], argv.as_ptr()) };
                    // SAFETY: `_exit` is always safe; exec failed.
                    unsafe { libc::_exit(127) }
                }
                pid => {
                    let code = i32::from(child_end.write_all(&pid.to_ne_bytes()).is_err());
                    // SAFETY: `_exit` is always safe; the middle process ends
                    // without running the parent's exit hooks.
                    unsafe { libc::_exit(code) }
                }
            }
        }
        middle => {
            drop(child_end);
            let mut bytes = [0u8; 4];
            let read = parent_end.read_exact(&mut bytes);
            let mut status = 0;
            // SAFETY: `status` is a valid place for `waitpid` to write to.
            unsafe { libc::waitpid(middle, &mut status, 0) };
            read?;
            Ok(i32::from_ne_bytes(bytes))
        }
    }
}

/// Closes standard input (fd 0).
pub fn close_stdin() {
    // SAFETY: closing fd 0, which no Rust object of this program owns any
    // more (the caller dropped its lock on stdin and never reads it again).
    unsafe { libc::close(0) };
}
