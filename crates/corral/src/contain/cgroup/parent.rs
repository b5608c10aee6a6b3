//! The cgroup new leaves go in (this process's own, or the one
//! [`PARENT_VARIABLE`] names), and who besides root and this user owns it
//! or the cgroups above it: that user could move a member out of its leaf.

use std::{
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use super::mount::{find_v2_mount, mount, mountinfo, own_cgroup, own_path, visible_v2_mount};
use crate::sys;

/// The environment variable that names the cgroup leaves go in, instead of
/// this process's own: a delegated cgroup without processes, where corral may
/// enable the controllers that resource limits need (see `docs/limits.md`).
pub const PARENT_VARIABLE: &str = "CORRAL_CGROUP_PARENT";

/// The directory new leaves go in, or why there is none (read once).
pub(crate) fn parent_dir() -> Result<PathBuf, String> {
    static PARENT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let mount = find_v2_mount(mountinfo()?)
                .filter(|_| !crate::fault::active("no-cgroup2"))
                .ok_or("no cgroup v2 hierarchy is mounted (cgroup2 not in /proc/self/mountinfo)")?;
            let own = own_dir()?;
            if let Some(chosen) = std::env::var_os(PARENT_VARIABLE).filter(|v| !v.is_empty()) {
                return chosen_parent(&mount, &own, Path::new(&chosen), sys::geteuid());
            }
            Ok(own)
        })
        .clone()
}

/// The first of `cgroup` and the cgroups above it (up to `mount`), or their
/// `cgroup.procs`, that belongs to neither root nor `euid`, with its owner:
/// that user could move a process of the tree out of its leaf.
pub(crate) fn foreign_owner(
    cgroup: &Path,
    mount: &Path,
    euid: u32,
) -> Result<Option<(PathBuf, u32)>, String> {
    for dir in cgroup.ancestors().take_while(|d| d.starts_with(mount)) {
        for file in [dir.to_owned(), dir.join("cgroup.procs")] {
            let owner = fs::metadata(&file)
                .map_err(|e| format!("{} ({e})", file.display()))?
                .uid();
            if owner != euid && owner != 0 {
                return Ok(Some((file, owner)));
            }
        }
    }
    Ok(None)
}

/// This process's own cgroup directory, or why there is none (read once).
pub(super) fn own_dir() -> Result<PathBuf, String> {
    static OWN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    OWN.get_or_init(|| {
        let mount = visible_v2_mount(mountinfo()?)
            .ok_or("no cgroup v2 hierarchy is mounted (cgroup2 not in /proc/self/mountinfo)")?;
        let own = crate::identity::read_small_text("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = own_cgroup(&own)
            .ok_or("this process has no cgroup v2 path (no 0:: line in /proc/self/cgroup)")?;
        own_path(&mount, own)
    })
    .clone()
}

/// Checks the cgroup [`PARENT_VARIABLE`] names: a directory of the v2
/// hierarchy, given as a file-system path, or, where no such path exists, as
/// a cgroup path as `/proc/PID/cgroup` shows it; a relative path is taken
/// from this process's own cgroup `own` (`..`: its parent, the unit's cgroup
/// under systemd's `DelegateSubgroup=`). After symlinks and `..`, it must be
/// inside the mount and owned by this user or by root: root never puts a
/// tree in a cgroup another user could have made.
pub(crate) fn chosen_parent(
    mount: &Path,
    own: &Path,
    chosen: &Path,
    euid: u32,
) -> Result<PathBuf, String> {
    let bad = |why: String| format!("{PARENT_VARIABLE}={}: {why}", chosen.display());
    let path = if chosen.is_relative() {
        own.join(chosen)
    } else if chosen.starts_with(mount) || fs::symlink_metadata(chosen).is_ok() {
        chosen.to_owned()
    } else {
        mount.join(chosen.strip_prefix("/").unwrap_or(chosen))
    };
    let real = fs::canonicalize(&path).map_err(|e| bad(format!("{} ({e})", path.display())))?;
    if !real.starts_with(mount) || !real.join("cgroup.procs").exists() {
        return Err(bad(format!(
            "{} is not a cgroup of the v2 hierarchy mounted at {}",
            real.display(),
            mount.display()
        )));
    }
    // It and every cgroup above it: the owner of an ancestor may write the
    // common ancestor's `cgroup.procs`, and so move the tree out of its leaf
    // (and its limits), set limits above it, or replace the chosen cgroup.
    if let Some((file, owner)) = foreign_owner(&real, mount, euid).map_err(bad)? {
        return Err(bad(format!(
            "{} belongs to user {owner}, who could move the tree out of its leaf; corral \
             makes leaves only in a cgroup that, with every cgroup above it, only root or \
             this user ({euid}) owns",
            file.display()
        )));
    }
    Ok(real)
}

/// The first of `leaf`'s `cgroup.procs` and its ancestors' (up to the mount)
/// that the user `uid` in group `gid` may write, going by owner and mode: a
/// process of that user could move itself through it, out of the leaf.
pub(crate) fn writable_by(leaf: &Path, uid: u32, gid: Option<u32>) -> Option<PathBuf> {
    let mount = mount()?;
    let mut dir = Some(leaf);
    while let Some(current) = dir.filter(|d| d.starts_with(mount)) {
        let procs = current.join("cgroup.procs");
        if let Ok(meta) = fs::metadata(&procs) {
            let mode = meta.mode();
            let writable = (meta.uid() == uid && mode & 0o200 != 0)
                || (gid == Some(meta.gid()) && mode & 0o020 != 0)
                || mode & 0o002 != 0;
            if writable {
                return Some(procs);
            }
        }
        dir = current.parent();
    }
    None
}

/// Why leaves under `parent`, whose `cgroup.type` is `kind` (not `domain`),
/// cannot hold processes.
pub(crate) fn not_a_domain(parent: &Path, kind: &str) -> String {
    format!(
        "{} is a \"{kind}\" cgroup, not a plain domain, so the kernel refuses processes in its \
         domain children, corral's leaves (EOPNOTSUPP; a cgroup that holds processes and \
         hands a threaded controller such as pids or cpu to its children becomes such a \
         thread root); set {PARENT_VARIABLE} to a cgroup without processes (see \
         docs/limits.md)",
        parent.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::{super::testing::leaf, *};

    /// A leaf made by root is writable by root only: another user cannot
    /// move a process through its `cgroup.procs` or its ancestors'.
    #[test]
    fn a_leaf_made_by_root_is_not_writable_by_another_user() {
        let Some(leaf) = leaf() else {
            return;
        };
        let nobody = writable_by(leaf.path(), 65534, Some(65534));
        let me = sys::geteuid();
        let owner = writable_by(leaf.path(), me, None);
        drop(leaf);
        if me == 0 {
            assert_eq!(nobody, None);
        }
        assert!(owner.is_some(), "the creator can write its own leaf");
    }
}
