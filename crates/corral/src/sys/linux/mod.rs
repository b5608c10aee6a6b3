//! Linux syscalls, through `rustix` where it has them, `libc` where it does not.

use std::{
    io,
    os::{
        fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
        unix::process::CommandExt,
    },
    path::Path,
};

use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};

mod clock;
mod clone3;
mod creds;
pub(crate) mod dirfd;

pub(crate) use clock::boot_ticks;
pub(crate) use clone3::{Clone3Error, Exec, exit_in_cgroup, spawn_into_cgroup};
pub(crate) use creds::Credentials;

use crate::{exit::Exit, signal::Signal};

fn pid(raw: i32) -> io::Result<Pid> {
    Pid::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// `signal` as rustix's, real-time signals (which rustix only builds
/// unchecked) included. Used only to send a signal to other processes.
fn rustix_signal(signal: Signal) -> io::Result<rustix::process::Signal> {
    let number = signal.number();
    if let Some(named) = rustix::process::Signal::from_named_raw(number) {
        return Ok(named);
    }
    if !(1..=Signal::MAX).contains(&number) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `number` is non-zero and a signal the kernel knows (1 to
    // SIGRTMAX, checked just above and by `Signal`'s constructors). The
    // value is only ever sent to other processes (`kill`, `killpg`,
    // `pidfd_send_signal`), never used on this process's handlers or mask,
    // which is what rustix's caveat about the C library's reserved signals
    // is about.
    Ok(unsafe { rustix::process::Signal::from_raw_unchecked(number) })
}

/// This process's id.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getpid.2.html>
pub(crate) fn getpid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// Sends what `socket` takes of `bytes` now, without waiting and without
/// touching the descriptor's own blocking mode (another thread may be
/// blocked writing to it): `send` with `MSG_DONTWAIT | MSG_NOSIGNAL`.
///
/// # Errors
/// `WouldBlock` when the socket's buffer is full; otherwise as `send`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/send.2.html>
pub(crate) fn send_now(socket: BorrowedFd<'_>, bytes: &[u8]) -> io::Result<usize> {
    use rustix::net::SendFlags;
    loop {
        match rustix::net::send(socket, bytes, SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
            Err(rustix::io::Errno::INTR) => {}
            other => return Ok(other?),
        }
    }
}

/// This process's executable (`readlink /proc/self/exe`), read once: the
/// start-up sweep, the ledger record and the watchdog all name it, and it
/// cannot change under a running process (a fork runs the same one).
///
/// # Errors
/// The reason, if it cannot be read.
///
/// # References
/// - <https://man7.org/linux/man-pages/man5/proc_pid_exe.5.html>
pub(crate) fn current_exe() -> Result<&'static std::path::Path, String> {
    static EXE: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    EXE.get_or_init(|| std::env::current_exe().map_err(|e| e.to_string()))
        .as_deref()
        .map_err(Clone::clone)
}

/// `pidfd_open(pid, 0)`: a descriptor that refers to this one process for ever.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html>
pub(crate) fn pidfd_open(raw: i32) -> io::Result<OwnedFd> {
    if crate::fault::active("no-pidfd") {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(rustix::process::pidfd_open(pid(raw)?, PidfdFlags::empty())?)
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html>
pub(crate) fn pidfd_signal(pidfd: impl AsFd, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::pidfd_send_signal(
        pidfd,
        rustix_signal(signal)?,
    )?)
}

/// `kill(pid, sig)`: only for kernels without pidfds, after an identity check.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/kill.2.html>
pub(crate) fn kill(raw: i32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process(
        pid(raw)?,
        rustix_signal(signal)?,
    )?)
}

/// Descriptors held in reserve: taken before a command starts and given
/// back when its cleanup needs them, so a process that runs out of
/// descriptors meanwhile (its own, or a host's other work) can still end
/// the tree. Each is a duplicate of an `O_PATH` descriptor of `/`, which
/// grants nothing.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fcntl.2.html> (`F_DUPFD_CLOEXEC`)
#[derive(Debug, Default)]
pub(crate) struct Reserve(Vec<OwnedFd>);

impl Reserve {
    /// Takes `count` descriptors; `EMFILE` (or `ENFILE`) if they are not there.
    pub(crate) fn take(count: usize) -> io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let mut held = Vec::with_capacity(count);
        if count == 0 {
            return Ok(Self(held));
        }
        let first = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
        for _ in 1..count {
            held.push(rustix::io::fcntl_dupfd_cloexec(&first, 0)?);
        }
        held.push(first);
        Ok(Self(held))
    }

    /// Gives `count` of them back (all, if fewer are held).
    pub(crate) fn release(&mut self, count: usize) {
        let keep = self.0.len().saturating_sub(count);
        self.0.truncate(keep);
    }
}

/// `kill(-pgid, sig)`: only while the group's leader is our unreaped child, so
/// the group id cannot have been reused.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/killpg.2.html>
pub(crate) fn kill_group(pgid: i32, signal: Signal) -> io::Result<()> {
    Ok(rustix::process::kill_process_group(
        pid(pgid)?,
        rustix_signal(signal)?,
    )?)
}

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG [| WNOWAIT])`: the exit of our
/// child, if it has exited. With `reap == false` the child stays a zombie, so
/// its pid (and process group id) cannot be reused yet.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn exit_status(pidfd: BorrowedFd<'_>, reap: bool) -> io::Result<Option<Exit>> {
    let mut options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
    if !reap {
        options |= WaitIdOptions::NOWAIT;
    }
    let Some(status) = rustix::process::waitid(WaitId::PidFd(pidfd), options)? else {
        return Ok(None);
    };
    if let Some(signal) = status.terminating_signal() {
        return Ok(Signal::from_number(signal).map(Exit::Signal));
    }
    Ok(status.exit_status().map(Exit::Code))
}

/// `waitpid(pid, WNOHANG)` for a zombie child adopted as subreaper. True if
/// it was reaped.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitpid.2.html>
pub(crate) fn reap(raw: i32) -> io::Result<bool> {
    let options = rustix::process::WaitOptions::NOHANG;
    Ok(rustix::process::waitpid(Some(pid(raw)?), options)?.is_some())
}

/// `waitid(P_ALL, 0, WEXITED | WNOHANG | WNOWAIT)`: the pid of a child of
/// ours that has exited, left unreaped (its status stays for whoever waits
/// for it), if there is one. Which one, when several have, is the kernel's
/// choice: the same one again until it is reaped.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn peek_exited_child() -> io::Result<Option<i32>> {
    // SAFETY: `siginfo_t` is plain data, valid all zeroes; the kernel fills
    // it, and `waitid` keeps no pointer to it after the call.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let options = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a valid, writable `siginfo_t` for the call's length.
    if unsafe { libc::waitid(libc::P_ALL, 0, &raw mut info, options) } == -1 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ECHILD) => Ok(None),
            _ => Err(error),
        };
    }
    // SAFETY: `waitid` filled `info` for a child's state change (or left it
    // zeroed with WNOHANG when none had changed): `si_pid` is set either way.
    let pid = unsafe { info.si_pid() };
    Ok((pid != 0).then_some(pid))
}

/// Whether the process behind `pidfd` has exited (the pidfd polls readable
/// once it has: zombie or reaped), without waiting.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html> (NOTES: poll)
/// - <https://man7.org/linux/man-pages/man2/poll.2.html>
pub(crate) fn pidfd_exited(pidfd: BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

/// Waits until the process behind `pidfd` exits (true) or `until` passes
/// (false), through tokio's reactor (epoll on the pidfd: no polling).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html> (NOTES: poll)
/// - <https://man7.org/linux/man-pages/man7/epoll.7.html>
pub(crate) async fn pidfd_wait_until(
    pidfd: BorrowedFd<'_>,
    until: tokio::time::Instant,
) -> io::Result<bool> {
    // SAFETY: the descriptor is borrowed for the whole life of the `AsyncFd`
    // (which cannot outlive the borrow), so it stays open, and is not
    // replaced, while registered; dropping the `AsyncFd` deregisters it and
    // closes nothing.
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(|e| e.into_parts().1)?;
    match tokio::time::timeout_at(until, fd.readable()).await {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(error)) => Err(error),
        Err(_) => Ok(false),
    }
}

/// The soft limit on open descriptors (`RLIMIT_NOFILE`), `None` if unlimited.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getrlimit.2.html>
pub(crate) fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// A per-process resource limit a command can be started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessLimit {
    /// `RLIMIT_NOFILE`.
    OpenFiles,
    /// `RLIMIT_CORE`.
    CoreSize,
    /// `RLIMIT_AS`.
    AddressSpace,
}

impl ProcessLimit {
    /// The kernel's `RLIMIT_*` number.
    pub(crate) fn resource(self) -> u32 {
        match self {
            Self::OpenFiles => libc::RLIMIT_NOFILE,
            Self::CoreSize => libc::RLIMIT_CORE,
            Self::AddressSpace => libc::RLIMIT_AS,
        }
    }

    /// The kernel's name for it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::OpenFiles => "RLIMIT_NOFILE",
            Self::CoreSize => "RLIMIT_CORE",
            Self::AddressSpace => "RLIMIT_AS",
        }
    }

    /// This process's hard limit for it (`None`: unlimited), which only a
    /// privileged process may raise.
    ///
    /// # References
    /// - <https://man7.org/linux/man-pages/man2/getrlimit.2.html>
    pub(crate) fn hard_limit(self) -> Option<u64> {
        use rustix::process::{Resource, getrlimit};
        let resource = match self {
            Self::OpenFiles => Resource::Nofile,
            Self::CoreSize => Resource::Core,
            Self::AddressSpace => Resource::As,
        };
        getrlimit(resource).maximum
    }
}

/// Lowers the soft limit on open descriptors (`RLIMIT_NOFILE`) to `soft`;
/// for tests of what corral keeps open.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getrlimit.2.html>
#[cfg(test)]
pub(crate) fn limit_open_files(soft: u64) -> io::Result<()> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let maximum = getrlimit(Resource::Nofile).maximum;
    Ok(setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(soft),
            maximum,
        },
    )?)
}

/// Whether an error means this process has no descriptor left (`EMFILE`,
/// `ENFILE`).
pub(crate) fn is_out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether an error of a wait means the process is no child of ours to wait
/// for (`ECHILD`): for our own child, something else reaped it.
pub(crate) fn is_no_child(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ECHILD)
}

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: reaps the process behind
/// `pidfd` if it is our child and has exited. True if it was reaped.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn reap_pidfd(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
    Ok(rustix::process::waitid(WaitId::PidFd(pidfd), options)?.is_some())
}

/// `prctl(PR_SET_CHILD_SUBREAPER, on)`: orphans below us re-parent to us.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/PR_SET_CHILD_SUBREAPER.2const.html>
pub(crate) fn set_child_subreaper(on: bool) -> io::Result<()> {
    let me = on.then(rustix::process::getpid);
    Ok(rustix::process::set_child_subreaper(me)?)
}

/// `prctl(PR_GET_CHILD_SUBREAPER)`: whether this process is a subreaper.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/PR_GET_CHILD_SUBREAPER.2const.html>
pub(crate) fn is_child_subreaper() -> io::Result<bool> {
    Ok(rustix::process::child_subreaper()?.is_some())
}

/// Opens a kernfs file such as `cgroup.events` for change notification:
/// the kernel wakes `poll` with `POLLPRI` after each change, re-armed by
/// reading the file again (cheaper than inotify, whose teardown waits for an
/// SRCU grace period).
///
/// # References
/// - <https://docs.kernel.org/admin-guide/cgroup-v2.html> ("cgroup.events")
pub(crate) fn open_events(path: &Path) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    // SAFETY: the `OwnedFd` is valid and owned by the `AsyncFd`, which closes
    // it only after deregistering it.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::PRIORITY) }
        .map_err(|e| e.into_parts().1)
}

/// Reads a small kernfs file from the start through an open descriptor.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pread.2.html>
pub(crate) fn read_from_start(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 512];
    let n = rustix::io::pread(fd, &mut buf, 0)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

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

/// Resets each signal of `signals` (bit N-1 for signal N) to its default
/// disposition, in a child about to `exec`.
///
/// # Safety
/// Only in a forked child before `exec` (it changes the whole process's
/// dispositions); async-signal-safe.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signal.2.html>
pub(crate) unsafe fn reset_to_default(signals: u64) {
    for number in 1..=64 {
        if signals & (1 << (number - 1)) != 0 {
            // SAFETY: SIG_DFL installs no handler code; `signal` is
            // async-signal-safe. A number the kernel refuses changes nothing.
            unsafe { libc::signal(number, libc::SIG_DFL) };
        }
    }
}

/// Whether the calling thread blocks any signal.
fn thread_blocks_signals() -> bool {
    // SAFETY: a null `set` only reads this thread's mask into `current`, a
    // valid out-parameter.
    unsafe {
        let mut current: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut current);
        (1..=libc::SIGRTMAX()).any(|n| libc::sigismember(&current, n) == 1)
    }
}

/// Whether `signal`'s disposition in this process is "ignore" (as `nohup`
/// leaves SIGHUP), without changing it.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn is_ignored(signal: Signal) -> io::Result<bool> {
    // SAFETY: an all-zero sigaction is a valid out-parameter.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null `act` only queries; `current` is a valid pointer.
    let rc = unsafe { libc::sigaction(signal.number(), std::ptr::null(), &mut current) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(current.sa_sigaction == libc::SIG_IGN)
}

/// `prctl(PR_SET_PDEATHSIG, sig)` for this process, then checks the parent
/// did not die before it took effect: `Ok(false)` if it already had.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/PR_SET_PDEATHSIG.2const.html>
pub(crate) fn parent_death_signal(signal: Signal, expected_parent: i32) -> io::Result<bool> {
    rustix::process::set_parent_process_death_signal(Some(rustix_signal(signal)?))?;
    Ok(getppid() == expected_parent)
}

/// Whether an error means the process no longer exists.
pub(crate) fn is_gone(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ESRCH)
}

/// Whether an error means the kernel lacks the call (e.g. pidfds before 5.3).
pub(crate) fn is_unsupported(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOSYS)
}

/// Whether `error`, from `clone3(CLONE_INTO_CGROUP)` or a write to a
/// cgroup's `cgroup.procs`, is the cgroup refusing the process: `EOPNOTSUPP`
/// (no valid domain: below a thread root, or threaded) or `EBUSY` (it hands
/// controllers to children of its own).
///
/// # References
/// - <https://docs.kernel.org/admin-guide/cgroup-v2.html#threads>
pub(crate) fn is_refused_by_cgroup(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EBUSY))
}

/// Registers an owned descriptor with tokio's reactor; on failure the
/// descriptor is handed back.
///
/// # References
/// - <https://man7.org/linux/man-pages/man7/epoll.7.html>
pub(crate) fn async_fd_or_back(
    fd: OwnedFd,
) -> Result<tokio::io::unix::AsyncFd<OwnedFd>, (io::Error, OwnedFd)> {
    // SAFETY: the `OwnedFd` is valid and owned by the `AsyncFd`, which closes
    // it only after deregistering it; nothing else closes or replaces it.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(|e| {
        let (fd, error) = e.into_parts();
        (error, fd)
    })
}

/// Whether a spawn error means the file is not an executable format.
pub(crate) fn is_not_executable(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOEXEC)
}

/// This process's parent pid (0 if it has none, e.g. in a new PID namespace).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getppid.2.html>
pub(crate) fn getppid() -> i32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
}

/// The effective user id.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/geteuid.2.html>
pub(crate) fn geteuid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The effective group id.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getegid.2.html>
pub(crate) fn getegid() -> u32 {
    rustix::process::getegid().as_raw()
}

/// Blocks until `fd` is readable (a pidfd: until its process exits).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/poll.2.html>
pub(crate) fn wait_readable(fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) if !fds[0].revents().is_empty() => return Ok(()),
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// Sets `signal` to be ignored by this process.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signal.2.html>
pub(crate) fn ignore(signal: Signal) -> io::Result<()> {
    // SAFETY: SIG_IGN installs no handler code; `signal` is a valid number.
    if unsafe { libc::signal(signal.number(), libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens a directory for use as a handle (a cgroup for `CLONE_INTO_CGROUP`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/openat.2.html>
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// A pipe whose both ends are close-on-exec: (read end, write end).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pipe2.2.html>
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// Whether `path` (relative to the directory `at`, or to ours for `None`)
/// is a regular file this process may execute.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fstatat.2.html>
/// - <https://man7.org/linux/man-pages/man2/faccessat.2.html>
pub(crate) fn is_executable_file(at: Option<BorrowedFd<'_>>, path: &Path) -> io::Result<bool> {
    let at = at.unwrap_or(rustix::fs::CWD);
    let stat = rustix::fs::statat(at, path, rustix::fs::AtFlags::empty())?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Ok(false);
    }
    Ok(rustix::fs::accessat(
        at,
        path,
        rustix::fs::Access::EXEC_OK,
        rustix::fs::AtFlags::empty(),
    )
    .is_ok())
}

/// A close-on-exec copy of `fd` numbered 3 or above, clear of the standard
/// descriptors a child sets up.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fcntl.2.html>
pub(crate) fn dup_above_stdio(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 3)?)
}

/// Kills our child through its pidfd and reaps it (spawn error paths).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html>
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn kill_and_reap(pidfd: BorrowedFd<'_>) {
    let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
    let _ = rustix::process::waitid(WaitId::PidFd(pidfd), WaitIdOptions::EXITED);
}

/// Whether this process's children are reaped by the kernel (SIGCHLD set to
/// `SIG_IGN`, or `SA_NOCLDWAIT`): their pids are then freed while corral still
/// names them, so supervision is refused.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn children_autoreaped() -> io::Result<bool> {
    // SAFETY: an all-zero sigaction is a valid out-parameter.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null `act` only queries; `current` is a valid pointer.
    if unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(current.sa_sigaction == libc::SIG_IGN || current.sa_flags & libc::SA_NOCLDWAIT != 0)
}

/// Whether this process has a single thread (so that `fork` copies no lock
/// another thread holds).
///
/// # References
/// - <https://man7.org/linux/man-pages/man5/proc_pid_task.5.html>
pub(crate) fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count() == 1)
        .unwrap_or(false)
}

/// What [`fork`] returned.
#[derive(Debug)]
pub(crate) enum Forked {
    /// We are the new process.
    Child,
    /// We are the parent; this is the child's pid.
    Parent(i32),
}

/// `fork()`. Only for a single-threaded process (see [`single_threaded`]):
/// the child may then run ordinary code.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fork.2.html>
pub(crate) fn fork() -> io::Result<Forked> {
    // SAFETY: the caller checked that this process has one thread, so the
    // child's copy of memory has no lock held by a thread that is gone.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Makes this process the leader of a new process group.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/setpgid.2.html>
pub(crate) fn own_process_group() -> io::Result<()> {
    Ok(rustix::process::setpgid(None, None)?)
}

/// Points standard output at `/dev/null`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/dup2.2.html>
pub(crate) fn stdout_to_null() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    Ok(rustix::stdio::dup2_stdout(&null)?)
}

/// Reaps our child through its pidfd, waiting at most `limit` for it to exit
/// (woken by the pidfd, not by polling).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/poll.2.html>
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn reap_within(pidfd: BorrowedFd<'_>, limit: std::time::Duration) {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let timeout = Timespec::try_from(limit).unwrap_or(Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    });
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let _ = poll(&mut fds, Some(&timeout));
    let _ = exit_status(pidfd, true);
}

/// Sets close-on-exec on descriptor `raw` (`fcntl(F_SETFD, FD_CLOEXEC)`), so
/// programs this process executes do not inherit it.
///
/// # References
/// - [`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html)
pub(crate) fn set_cloexec(raw: i32) -> io::Result<()> {
    if raw < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the number is only borrowed for these two `fcntl` calls, which
    // read and set descriptor flags and touch no memory; on a number that is
    // not open they fail with `EBADF`.
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    let flags = rustix::io::fcntl_getfd(fd)?;
    rustix::io::fcntl_setfd(fd, flags | rustix::io::FdFlags::CLOEXEC)?;
    Ok(())
}

/// Sets `SIGCHLD`'s disposition back to the default: `SIG_DFL`, and no
/// flags, so without `SA_NOCLDWAIT` either.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn default_sigchld() -> io::Result<()> {
    // SAFETY: an all-zero sigaction is a valid value: empty mask, no flags.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `action` is a valid sigaction installing no handler code; the
    // old action is not asked for.
    if unsafe { libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `mallopt(M_MMAP_THRESHOLD, bytes)`: every block of at least `bytes` is
/// its own mapping, unmapped when freed, and glibc's dynamic threshold is
/// off. Whether the allocator took it (`false` with another C library).
///
/// # References
/// - <https://man7.org/linux/man-pages/man3/mallopt.3.html>
#[cfg(target_env = "gnu")]
pub(crate) fn fixed_mmap_threshold(bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: `mallopt` takes two integers and changes only the
    // allocator's settings, which it synchronises itself.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
}

/// Without glibc: not available.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn fixed_mmap_threshold(_bytes: usize) -> bool {
    false
}

/// `SIGPIPE`'s disposition as this program found it, before Rust's runtime
/// set it to ignored: 0 not recorded, 1 not ignored, 2 ignored.
static SIGPIPE_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Runs before `main` (and so before Rust's runtime ignores `SIGPIPE`), as
/// the C runtime calls every function in `.init_array`.
extern "C" fn record_sigpipe() {
    let ignored = is_ignored(Signal::PIPE).unwrap_or(false);
    SIGPIPE_AT_START.store(
        if ignored { 2 } else { 1 },
        std::sync::atomic::Ordering::Relaxed,
    );
}

// SAFETY: the function only reads a disposition (`sigaction` with a null
// `act`) and stores an atomic: nothing that needs the Rust runtime.
#[used]
#[unsafe(link_section = ".init_array")]
static RECORD_SIGPIPE: extern "C" fn() = record_sigpipe;

/// Whether `SIGPIPE` was ignored when this program started (as a parent with
/// `trap '' PIPE` leaves it), as recorded before `main`; `None` if the
/// record did not run (a program that does not link the constructor).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
/// - <https://doc.rust-lang.org/std/process/index.html> (std ignores `SIGPIPE` before `main`)
pub(crate) fn sigpipe_ignored_at_start() -> Option<bool> {
    match SIGPIPE_AT_START.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

/// The highest signal number (`SIGRTMAX`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man7/signal.7.html>
pub(crate) fn sigrtmax() -> i32 {
    libc::SIGRTMAX()
}

/// The lowest real-time signal a program may use (`SIGRTMIN`: glibc keeps
/// 32 and 33 for its threads).
pub(crate) fn sigrtmin() -> i32 {
    libc::SIGRTMIN()
}

/// The pid of the process behind `pidfd` as `/proc` numbers it: the `Pid:`
/// line of the descriptor's `fdinfo`, which the kernel gives in the PID
/// namespace of the `/proc` mount. `None` once the process is gone.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html> (the `fdinfo` fields)
pub(crate) fn proc_pid_of(pidfd: BorrowedFd<'_>) -> io::Result<Option<i32>> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))?;
    let pid = text
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|value| value.trim().parse::<i32>().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "no Pid line in a pidfd's fdinfo",
            )
        })?;
    Ok((pid > 0).then_some(pid))
}

/// Whether `/proc` numbers processes as this process's PID namespace does.
/// Not so after `unshare --pid --fork` without `--mount-proc`: `/proc` is
/// still the parent namespace's, while `cgroup.procs`, `getpid` and
/// `pidfd_open` speak the new one. Read once.
///
/// # References
/// - <https://man7.org/linux/man-pages/man7/pid_namespaces.7.html>
/// - <https://man7.org/linux/man-pages/man5/proc.5.html> (`/proc/self`)
pub(crate) fn proc_is_own_namespace() -> bool {
    static OWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| {
        std::fs::read_link("/proc/self")
            .ok()
            .and_then(|link| link.to_str()?.parse::<i32>().ok())
            .is_none_or(|pid| pid == getpid())
    })
}

/// The number this process's PID namespace gives the process `/proc` shows
/// as `proc_pid` (where `/proc` is an ancestor namespace's): the entry of its
/// `NSpid` line at this process's own depth. `None` if it is not in this
/// namespace (or below), or is gone.
///
/// # References
/// - <https://man7.org/linux/man-pages/man5/proc_pid_status.5.html> (`NSpid`)
pub(crate) fn pid_in_own_namespace(proc_pid: i32) -> io::Result<Option<i32>> {
    fn nspid(path: &str) -> io::Result<Option<Vec<i32>>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        Ok(text.lines().find_map(|line| {
            let values = line.strip_prefix("NSpid:")?;
            values
                .split_whitespace()
                .map(|v| v.parse::<i32>().ok())
                .collect::<Option<Vec<_>>>()
        }))
    }
    static DEPTH: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let depth = *DEPTH.get_or_init(|| {
        let own = nspid("/proc/self/status").ok().flatten()?;
        own.contains(&getpid()).then_some(own.len())
    });
    let Some(depth) = depth else {
        return Ok(None);
    };
    Ok(nspid(&format!("/proc/{proc_pid}/status"))?
        .and_then(|levels| levels.get(depth - 1).copied()))
}

/// Blocks `signal` in the calling thread, and so in every thread it starts
/// from now on: a blocked signal stays pending instead of acting.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigprocmask.2.html>
pub(crate) fn block(signal: Signal) -> io::Result<()> {
    // SAFETY: an all-zero sigset_t is a valid value for `sigemptyset`.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, initialised set; the calls only write it and
    // this thread's mask.
    let rc = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal.number());
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}
