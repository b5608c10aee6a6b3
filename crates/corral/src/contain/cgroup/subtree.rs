//! The cgroups a member made below a leaf (one allowed to write its leaf
//! may create child cgroups and move into them): their processes, and their
//! removal.

use std::{io, os::fd::OwnedFd};

use crate::sys;

/// How deep below a leaf the cgroups a member made are followed.
const MAX_DEPTH: usize = 32;

/// The cgroups directly below the cgroup `dir` (a member allowed to write
/// its leaf may create child cgroups and move into them).
fn children(dir: &OwnedFd) -> Vec<(std::ffi::OsString, OwnedFd)> {
    sys::dirfd::names(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            Some((
                name.clone(),
                sys::dirfd::open_dir_at(Some(dir), &name).ok()?,
            ))
        })
        .collect()
}

/// Every process in the cgroup `dir` and in the cgroups below it.
pub(super) fn subtree_pids(dir: &OwnedFd) -> io::Result<Vec<i32>> {
    fn walk(dir: &OwnedFd, depth: usize, pids: &mut Vec<i32>) -> io::Result<()> {
        let procs = sys::dirfd::open_file_at(dir, std::ffi::OsStr::new("cgroup.procs"))?;
        let text = sys::dirfd::read_capped(&procs, 8 << 20)?;
        pids.extend(
            String::from_utf8_lossy(&text)
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok()),
        );
        if depth < MAX_DEPTH {
            for (_, child) in children(dir) {
                // A child removed meanwhile is no loss.
                let _ = walk(&child, depth + 1, pids);
            }
        }
        Ok(())
    }
    let mut pids = Vec::new();
    walk(dir, 0, &mut pids)?;
    Ok(pids)
}

/// Removes every (empty) cgroup below `dir`, deepest first.
pub(super) fn remove_below(dir: &OwnedFd, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    for (name, child) in children(dir) {
        remove_below(&child, depth + 1);
        if let Err(error) = sys::dirfd::rmdir_at(dir, &name) {
            tracing::debug!(?name, %error, "a cgroup below a leaf left behind");
        }
    }
}
