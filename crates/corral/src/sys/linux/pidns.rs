//! Pid numbers across PID namespaces: `/proc` may belong to another
//! namespace than this process's (`unshare --pid` without a new `/proc`).

use std::{
    io,
    os::fd::{AsRawFd, BorrowedFd},
};

use super::process::getpid;

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
