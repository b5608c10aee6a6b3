//! What an error's code means, where callers branch on it.

use std::io;

/// Whether an error means the process no longer exists.
pub(crate) fn is_gone(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ESRCH)
}

/// Whether an error of a wait means the process is no child of ours to wait
/// for (`ECHILD`): for our own child, something else reaped it.
pub(crate) fn is_no_child(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ECHILD)
}

/// Whether an error means the kernel lacks the call (e.g. pidfds before 5.3).
pub(crate) fn is_unsupported(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOSYS)
}

/// Whether an error means this process has no descriptor left (`EMFILE`,
/// `ENFILE`).
pub(crate) fn is_out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether a spawn error means the file is not an executable format.
pub(crate) fn is_not_executable(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOEXEC)
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
