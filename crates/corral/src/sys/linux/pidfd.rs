//! Other processes, named by pidfd (or, where none can be had, by pid
//! after an identity check): signals sent to them, and their exits waited
//! for and reaped.

use std::{
    io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
};

use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};

use crate::{exit::Exit, signal::Signal};

fn pid(raw: i32) -> io::Result<Pid> {
    Pid::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// `signal` as rustix's, real-time signals (which rustix only builds
/// unchecked) included. Used only to send a signal to other processes.
pub(super) fn rustix_signal(signal: Signal) -> io::Result<rustix::process::Signal> {
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

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: reaps the process behind
/// `pidfd` if it is our child and has exited. True if it was reaped.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn reap_pidfd(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG;
    Ok(rustix::process::waitid(WaitId::PidFd(pidfd), options)?.is_some())
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

/// Waits until the process behind `pidfd` exits, through tokio's reactor.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_open.2.html> (NOTES: poll)
pub(crate) async fn pidfd_wait(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: as in `pidfd_wait_until`.
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
    }
    .map_err(|e| e.into_parts().1)?;
    fd.readable().await.map(drop)
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

/// Kills our child through its pidfd and reaps it (spawn error paths).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html>
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn kill_and_reap(pidfd: BorrowedFd<'_>) {
    let _ = rustix::process::pidfd_send_signal(pidfd, rustix::process::Signal::KILL);
    let _ = rustix::process::waitid(WaitId::PidFd(pidfd), WaitIdOptions::EXITED);
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
