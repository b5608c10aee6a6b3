//! Processes by identity, reaping, and reading a child's lines.

use std::{
    fmt,
    io::{self, Read},
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
    process::ChildStdout,
    time::{Duration, Instant},
};

use corral_tests::proc::{self, Stat};

use crate::{Res, fail};

/// A process: pid plus start time (clock ticks after boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ident {
    pub(crate) pid: i32,
    pub(crate) start: u64,
}

impl Ident {
    pub(crate) fn of(pid: i32) -> Option<Self> {
        proc::stat(pid).map(|s| Ident {
            pid,
            start: s.start_time,
        })
    }

    /// This very process's `/proc` entry, if it still exists (zombie included).
    pub(crate) fn stat(&self) -> Option<Stat> {
        proc::stat(self.pid).filter(|s| s.start_time == self.start)
    }

    pub(crate) fn is_running(&self) -> bool {
        self.stat().is_some_and(|s| s.is_running())
    }

    /// Running and not stopped: a bystander nobody signalled (every signal
    /// that does anything to `fixture sleep` kills or stops it).
    pub(crate) fn untouched(&self) -> bool {
        self.stat()
            .is_some_and(|s| s.is_running() && !matches!(s.state, 'T' | 't'))
    }

    /// What `/proc` says is at this pid now, for messages.
    pub(crate) fn describe_pid(&self) -> String {
        match proc::stat(self.pid) {
            Some(stat) if stat.start_time == self.start => {
                format!("state {} ({})", stat.state, proc::command_line(&stat))
            }
            Some(stat) => format!(
                "pid {} now belongs to start {} ({})",
                self.pid,
                stat.start_time,
                proc::command_line(&stat)
            ),
            None => format!("pid {} is gone", self.pid),
        }
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (start {})", self.pid, self.start)
    }
}

pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
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
pub(crate) fn kill_verified(p: Ident) -> bool {
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
pub(crate) fn reap(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: `status` is a valid place for waitpid to write to.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

/// Reaps the zombies whose parent is this process (orphans adopted as PID
/// 1), except `keep`. Only called while the library supervises nothing here.
pub(crate) fn reap_adopted(keep: &[i32]) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(1);
    proc::all_processes()
        .unwrap_or_default()
        .iter()
        .filter(|s| s.ppid == me && !s.is_running() && !keep.contains(&s.pid))
        .filter(|s| reap(s.pid))
        .count()
}

/// Polls `check` every 2 ms until it holds (true) or `within` passes (false,
/// after one last check).
pub(crate) async fn wait_until(within: Duration, mut check: impl FnMut() -> bool) -> bool {
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
pub(crate) async fn wait_freed(p: Ident, within: Duration) -> Res<()> {
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
pub(crate) fn children(parent: i32) -> Vec<Stat> {
    proc::all_processes()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.ppid == parent && s.is_running())
        .collect()
}

pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
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
pub(crate) struct Lines {
    pub(crate) reader: ChildStdout,
    pub(crate) pending: Vec<u8>,
    pub(crate) eof: bool,
}

impl Lines {
    pub(crate) fn new(reader: ChildStdout) -> Res<Self> {
        set_nonblocking(reader.as_raw_fd()).map_err(|e| format!("O_NONBLOCK: {e}"))?;
        Ok(Self {
            reader,
            pending: Vec::new(),
            eof: false,
        })
    }

    pub(crate) fn try_line(&mut self) -> io::Result<Option<String>> {
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

    pub(crate) async fn line(&mut self, within: Duration, what: &str) -> Res<String> {
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
