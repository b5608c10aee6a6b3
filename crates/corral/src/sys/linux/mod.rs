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
pub(crate) use clone3::{Clone3Error, Exec, spawn_into_cgroup};
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
    /// Namespace, user and groups to take on (after joining the cgroup).
    pub(crate) creds: Credentials,
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
    if setup.new_group {
        command.process_group(0);
    }
    let procs_fd = setup.cgroup_procs.map(|fd| fd.as_raw_fd());
    let creds = setup.creds;
    if procs_fd.is_some() || !creds.is_empty() {
        let hook = move || -> io::Result<()> {
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
            Ok(())
        };
        // SAFETY: the hook only calls async-signal-safe functions (write and
        // raw credential syscalls) and does not allocate: an `io::Error` from
        // an OS code is stored inline.
        unsafe { command.pre_exec(hook) };
    }
    command.spawn()
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

/// Whether `path` is a regular file this process may execute.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/access.2.html>
pub(crate) fn is_executable_file(path: &Path) -> io::Result<bool> {
    if !std::fs::metadata(path)?.is_file() {
        return Ok(false);
    }
    Ok(rustix::fs::access(path, rustix::fs::Access::EXEC_OK).is_ok())
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
