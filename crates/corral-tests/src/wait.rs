//! Synchronising on a condition and a deadline, not on bare sleeps.

use std::time::{Duration, Instant};

/// How often the predicates are polled.
const POLL: Duration = Duration::from_millis(5);

/// Polls `predicate` every 5 ms until it holds (→ `true`) or `deadline` has
/// passed (→ `false`, after one last check). Blocks the thread: use
/// [`wait_until_async`] inside a runtime.
pub fn wait_until(deadline: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if predicate() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// [`wait_until`] for async code: sleeps on the runtime's timer between
/// polls.
pub async fn wait_until_async(deadline: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while !predicate() {
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// Waits until `p` has exited (a zombie, or reaped) or `within` has passed
/// (→ `false`), on its pidfd: the calling thread sleeps until then and wakes
/// once, so the time it takes to see the exit is its wake-up alone (see
/// [`sched`](crate::sched)). Blocks the thread. Reaps nothing.
pub fn exited_within(p: &crate::Proc, within: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let Some(pid) = rustix::process::Pid::from_raw(p.pid) else {
        return true;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return true; // gone
    };
    if crate::stat(p.pid).is_none_or(|s| s.start_time != p.start_time) {
        return true; // gone before the pidfd was opened: it names another
    }
    let end = Instant::now() + within;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut fd = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid `pollfd`, the count says one.
        match unsafe { libc::poll(&mut fd, 1, ms) } {
            0 if left.is_zero() => return false,
            n if n > 0 => return true,
            _ => {} // woken early, or EINTR: the deadline decides
        }
    }
}
