//! This process's attributes: ids, executable, subreaper and parent-death
//! settings, resource limits, process group, and `fork`.

use std::io;

use super::pidfd::rustix_signal;
use crate::signal::Signal;

/// This process's id.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getpid.2.html>
pub(crate) fn getpid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
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

/// `prctl(PR_SET_CHILD_SUBREAPER, on)`: orphans below us re-parent to us.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/PR_SET_CHILD_SUBREAPER.2const.html>
pub(crate) fn set_child_subreaper(on: bool) -> io::Result<()> {
    let me = on.then(rustix::process::getpid);
    Ok(rustix::process::set_child_subreaper(me)?)
}

/// Whether this process has a child at all, of any thread, running or not,
/// reaped or not: `waitid(P_ALL, WEXITED | WNOHANG | WNOWAIT | __WALL)`,
/// which fails with `ECHILD` only when there is none (`__WALL`: children
/// whose exit signal is not `SIGCHLD` too; `WNOWAIT`: a zombie stays one,
/// for whoever waits for it). Any other answer, an error included, says
/// yes.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn has_children() -> bool {
    // SAFETY: `info` is a valid, writable `siginfo_t`; the call neither
    // reaps nor keeps a pointer.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let options = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL;
    // SAFETY: as above.
    let result = unsafe { libc::waitid(libc::P_ALL, 0, &raw mut info, options) };
    !(result == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// `prctl(PR_GET_CHILD_SUBREAPER)`: whether this process is a subreaper.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/PR_GET_CHILD_SUBREAPER.2const.html>
pub(crate) fn is_child_subreaper() -> io::Result<bool> {
    Ok(rustix::process::child_subreaper()?.is_some())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A process without children is told so; one with a child, even a
    /// zombie, is told it has one, and the zombie is left for its waiter.
    #[test]
    fn has_children_sees_a_zombie_and_leaves_it() {
        // SAFETY: the child makes one system call and `_exit`s: nothing that
        // takes a lock another thread of this test process may hold.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            // A fresh process has no child.
            let code = if has_children() { 1 } else { 0 };
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(code) };
        }
        // Its exit is seen without reaping it.
        // SAFETY: an all-zero `siginfo_t` is a valid value of it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid `siginfo_t`.
        let waited = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &raw mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(waited, 0, "waitid: {}", io::Error::last_os_error());
        let with_zombie = has_children();
        let mut status = 0;
        // SAFETY: reaps our own child.
        let reaped = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert!(with_zombie, "a zombie child was not counted");
        assert_eq!(reaped, pid, "the zombie was reaped by the check");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "a process with no child was told it had one"
        );
    }
}
