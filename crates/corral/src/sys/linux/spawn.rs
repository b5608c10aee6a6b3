//! A child started through std's `Command` with corral's set-up applied
//! between `fork` and `exec` (the path where `clone3` is not used), and the
//! working-directory step both paths share.

use std::{
    io,
    os::{
        fd::{AsRawFd, BorrowedFd},
        unix::process::CommandExt,
    },
};

use super::{
    creds::Credentials,
    signals::{reset_to_default, thread_blocks_signals},
};

/// What a freshly forked child does before `exec`.
#[derive(Debug, Default)]
pub(crate) struct ChildSetup<'a> {
    /// Join this cgroup (its `cgroup.procs`, opened close-on-exec) before exec.
    pub(crate) cgroup_procs: Option<BorrowedFd<'a>>,
    /// Start a new process group led by the child.
    pub(crate) new_group: bool,
    /// Start a new session (and process group) led by the child, with no
    /// controlling terminal (`setsid`).
    pub(crate) new_session: bool,
    /// Namespace, user and groups to take on (after joining the cgroup).
    pub(crate) creds: Credentials,
    /// Start the program with `SIGPIPE` ignored (std resets it to the
    /// default first).
    pub(crate) ignore_sigpipe: bool,
    /// Signals to reset to their default before `exec` (bit N-1 for N).
    pub(crate) default_signals: u64,
    /// Enter this directory after the credentials changed (std's
    /// `current_dir` would enter it before, with our rights, and cannot
    /// take a descriptor).
    pub(crate) cwd: Option<ChildDir<'a>>,
}

/// The directory a child enters before `exec`, after its credentials
/// changed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChildDir<'a> {
    /// `chdir(path)`.
    Path(&'a std::ffi::CStr),
    /// `fchdir(fd)`: a directory (an `O_PATH` descriptor will do), open
    /// and close-on-exec for the whole spawn, at 3 or above (clear of the
    /// standard descriptors the child sets up).
    Fd(BorrowedFd<'a>),
    /// The directory `fd` holds, entered by `path` (where it is now), with
    /// the child's own rights: `chdir(path)`, then refused (`ESTALE`) unless
    /// that is `fd`'s directory. For a child that changes its user: a
    /// descriptor opened with our rights must not let it into a directory
    /// whose path it could not walk.
    Reach {
        fd: BorrowedFd<'a>,
        path: &'a std::ffi::CStr,
    },
}

impl ChildDir<'_> {
    /// The path to `chdir` to (or null) and the directory descriptor (or
    /// -1), as [`enter_dir`] takes them.
    pub(crate) fn raw(&self) -> (*const libc::c_char, libc::c_int) {
        match *self {
            Self::Path(path) => (path.as_ptr(), -1),
            Self::Fd(fd) => (std::ptr::null(), fd.as_raw_fd()),
            Self::Reach { fd, path } => (path.as_ptr(), fd.as_raw_fd()),
        }
    }
}

/// Enters a child's working directory before `exec`: `chdir(path)` (then,
/// with `fd` as well, checks that it is `fd`'s directory), or `fchdir(fd)`.
/// Returns 0 or the errno.
///
/// # Safety
/// In a forked child before `exec`: raw system calls only. `path` is null
/// or a C string, `fd` is -1 or open.
pub(crate) unsafe fn enter_dir(path: *const libc::c_char, fd: libc::c_int) -> libc::c_int {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EACCES)
    };
    // SAFETY: plain system calls on the caller's pointer and descriptor;
    // the stat buffers are valid out-parameters.
    unsafe {
        if path.is_null() {
            return if fd >= 0 && libc::fchdir(fd) != 0 {
                errno()
            } else {
                0
            };
        }
        if libc::chdir(path) != 0 {
            return errno();
        }
        if fd < 0 {
            return 0;
        }
        let mut here: libc::stat = std::mem::zeroed();
        let mut held: libc::stat = std::mem::zeroed();
        if libc::stat(c".".as_ptr(), &mut here) != 0 || libc::fstat(fd, &mut held) != 0 {
            return errno();
        }
        if (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino) {
            0
        } else {
            libc::ESTALE
        }
    }
}

/// Marks an error of the child's `chdir`: the working directory was
/// refused (to the command's user, say), not the program.
#[derive(Debug)]
pub(crate) struct CwdRefused(pub(crate) io::Error);

impl std::fmt::Display for CwdRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot enter the working directory: {}", self.0)
    }
}

impl std::error::Error for CwdRefused {}

/// The error a child reported: errno, negated if its `chdir` failed.
pub(crate) fn child_error(code: i32) -> io::Error {
    if code < 0 {
        let source = io::Error::from_raw_os_error(code.saturating_neg());
        io::Error::new(source.kind(), CwdRefused(source))
    } else {
        io::Error::from_raw_os_error(code)
    }
}

/// Spawns `command` with `setup` applied in the child before `exec`.
///
/// Between fork and exec the child only makes raw, async-signal-safe system
/// calls: `write`, `unshare`, `setgroups`, `setgid` and `setuid`, with no
/// allocation and no locks.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fork.2.html>
/// - <https://man7.org/linux/man-pages/man2/setpgid.2.html>
/// - <https://man7.org/linux/man-pages/man2/execve.2.html>
pub(crate) fn spawn(
    command: &mut std::process::Command,
    setup: ChildSetup<'_>,
) -> io::Result<std::process::Child> {
    // A new session makes the child a group leader too; `setsid` fails in
    // a child that already leads a group.
    if setup.new_group && !setup.new_session {
        command.process_group(0);
    }
    let new_session = setup.new_session;
    let procs_fd = setup.cgroup_procs.map(|fd| fd.as_raw_fd());
    let creds = setup.creds;
    let ignore_sigpipe = setup.ignore_sigpipe;
    let default_signals = setup.default_signals;
    // std (since Rust 1.66) passes the calling thread's signal mask on to
    // the program; it must start with none blocked, as on the `clone3` path
    // (`corral run` holds SIGRTMAX blocked).
    let masked = thread_blocks_signals();
    let cwd_path = match setup.cwd {
        Some(ChildDir::Path(path) | ChildDir::Reach { path, .. }) => Some(path.to_owned()),
        _ => None,
    };
    let cwd_fd = match setup.cwd {
        Some(ChildDir::Fd(fd) | ChildDir::Reach { fd, .. }) => fd.as_raw_fd(),
        _ => -1,
    };
    if procs_fd.is_some()
        || !creds.is_empty()
        || ignore_sigpipe
        || default_signals != 0
        || masked
        || new_session
        || setup.cwd.is_some()
    {
        let hook = move || -> io::Result<()> {
            // SAFETY: `setsid` is async-signal-safe.
            if new_session && unsafe { libc::setsid() } < 0 {
                return Err(io::Error::last_os_error());
            }
            if masked {
                // SAFETY: an empty set is a valid mask; `pthread_sigmask` is
                // async-signal-safe.
                unsafe {
                    let mut empty: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut empty);
                    libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                }
            }
            if let Some(fd) = procs_fd {
                // "0" moves the writing process itself into the cgroup.
                // SAFETY: `fd` is open for the whole spawn (the caller borrows
                // it); `write` is async-signal-safe and the buffer is static.
                let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
                if written != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            // After the move: a new cgroup namespace is rooted at the leaf.
            // SAFETY: in the forked child before exec; raw syscalls only.
            unsafe { creds.apply() }.map_err(io::Error::from_raw_os_error)?;
            // With the user's rights; a refusal comes back negated (std
            // passes the raw code on), told apart from the program's.
            // SAFETY: `chdir` and `fchdir` are async-signal-safe; the string
            // lives in this closure, the descriptor for the whole spawn.
            let path = cwd_path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
            let errno = unsafe { enter_dir(path, cwd_fd) };
            if errno != 0 {
                return Err(io::Error::from_raw_os_error(-errno));
            }
            // SAFETY: in the forked child before exec; `signal` only.
            unsafe { reset_to_default(default_signals) };
            // std has set SIGPIPE to its default by now (hooks run after).
            // SAFETY: SIG_IGN installs no handler code; `signal` is
            // async-signal-safe.
            if ignore_sigpipe
                && unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) } == libc::SIG_ERR
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        // SAFETY: the hook only calls async-signal-safe functions (write,
        // raw credential syscalls and signal) and does not allocate: an `io::Error` from
        // an OS code is stored inline.
        unsafe { command.pre_exec(hook) };
    }
    command.spawn().map_err(|error| match error.raw_os_error() {
        Some(code) if code < 0 => child_error(code),
        _ => error,
    })
}
