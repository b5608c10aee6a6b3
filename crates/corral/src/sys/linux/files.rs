//! Files and descriptors: opened, duplicated, registered with tokio's
//! reactor, held in reserve.

use std::{
    io,
    os::fd::{BorrowedFd, OwnedFd},
    path::Path,
};

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

/// A close-on-exec copy, numbered 3 or above, of descriptor `raw` that this
/// process was handed (a file, a pipe or a socket alike: the copy shares
/// what the original is open on, where reopening `/proc/self/fd/N` fails
/// for a socket).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fcntl.2.html>
pub(crate) fn dup_raw(raw: i32) -> io::Result<OwnedFd> {
    if raw < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: the number is only borrowed for this one `fcntl`, which
    // touches no memory; on a number that is not open it fails with `EBADF`.
    let fd = unsafe { BorrowedFd::borrow_raw(raw) };
    dup_above_stdio(fd)
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

/// Points standard output at `/dev/null`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/dup2.2.html>
pub(crate) fn stdout_to_null() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    Ok(rustix::stdio::dup2_stdout(&null)?)
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
