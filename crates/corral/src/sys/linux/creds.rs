//! What the child changes about itself between fork and exec: its resource
//! limits, its own cgroup namespace, then its user and groups. Raw system calls only: the child of a
//! raw `clone3` has one thread while glibc's copy of memory may remember
//! several, and glibc's `setuid` would then try to signal threads that do not
//! exist (its "setxid" broadcast); a raw syscall changes the calling thread,
//! which is the whole process here. (Where the child shares our memory, a
//! `CLONE_VM` child, glibc's `setuid` would signal *our* threads and change
//! the supervisor's own credentials; such a child never changes credentials
//! anyway: see `clone3.rs`.)
//!
//! # References
//! - <https://man7.org/linux/man-pages/man2/setgroups.2.html>
//! - <https://man7.org/linux/man-pages/man2/setuid.2.html>
//! - <https://man7.org/linux/man-pages/man7/cgroup_namespaces.7.html>
//! - <https://man7.org/linux/man-pages/man2/prlimit.2.html>

use std::ptr;

/// The changes, decided by the parent before the fork.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// `unshare(CLONE_NEWCGROUP)` once the child is in its leaf, so the leaf
    /// is the root of its cgroup namespace: on a mount with `nsdelegate` the
    /// kernel then refuses to move it, or anything it forks, out of the leaf
    /// (even for root). Best effort: a refusal does not fail the spawn.
    pub(crate) cgroup_namespace: bool,
    /// `setgroups(0, NULL)`: drop every supplementary group (needs
    /// `CAP_SETGID`, so only when the parent is root).
    pub(crate) clear_groups: bool,
    /// `setgid(gid)`.
    pub(crate) gid: Option<u32>,
    /// `setuid(uid)`, last: after it the other calls would be refused.
    pub(crate) uid: Option<u32>,
    /// Per-process resource limits to set (soft and hard alike), first:
    /// `(RLIMIT_*, value)`; inherited by everything the command starts.
    pub(crate) rlimits: [Option<(u32, u64)>; 3],
}

impl Credentials {
    /// Whether there is anything to do.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the child takes on another user or group.
    pub(crate) fn changes_user(&self) -> bool {
        self.uid.is_some() || self.gid.is_some()
    }

    /// Applies the changes in order: resource limits, namespace, groups,
    /// group, user. On failure returns the errno.
    ///
    /// # Safety
    /// Only in a freshly forked child before `exec` (it changes the whole
    /// process's identity); async-signal-safe: raw system calls, no
    /// allocation.
    ///
    /// # References
    /// - <https://man7.org/linux/man-pages/man2/unshare.2.html>
    /// - <https://man7.org/linux/man-pages/man2/setgroups.2.html>
    /// - <https://man7.org/linux/man-pages/man2/setgid.2.html>
    /// - <https://man7.org/linux/man-pages/man2/setuid.2.html>
    pub(crate) unsafe fn apply(&self) -> Result<(), i32> {
        // SAFETY (whole block): plain system calls with integer arguments and
        // a null list; errno is thread-local.
        unsafe {
            let failed = || Err(*libc::__errno_location());
            for &(resource, value) in self.rlimits.iter().flatten() {
                let limit = libc::rlimit64 {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::syscall(
                    libc::SYS_prlimit64,
                    0,
                    resource,
                    &raw const limit,
                    ptr::null_mut::<libc::rlimit64>(),
                ) != 0
                {
                    return failed();
                }
            }
            if self.cgroup_namespace {
                let _ = libc::syscall(libc::SYS_unshare, libc::CLONE_NEWCGROUP);
            }
            if self.clear_groups
                && libc::syscall(libc::SYS_setgroups, 0, ptr::null::<libc::gid_t>()) != 0
            {
                return failed();
            }
            if let Some(gid) = self.gid
                && libc::syscall(libc::SYS_setgid, gid) != 0
            {
                return failed();
            }
            if let Some(uid) = self.uid
                && libc::syscall(libc::SYS_setuid, uid) != 0
            {
                return failed();
            }
        }
        Ok(())
    }
}
