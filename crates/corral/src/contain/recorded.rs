//! A tree rebuilt from what a record says about it (the crash ledger's, or
//! the watchdog's copy), ended by the same tree code a live supervision
//! uses: a cgroup tree is a [`CgroupTree`] again, a scanned one a
//! [`ScannedTree`] with the [`Rule`] below. The owner layer decides *whether*
//! to end a recorded tree; this module only knows how.
//!
//! Nothing in a record is trusted: a leaf is used only if it lies in the
//! cgroup v2 mount, is named like a corral leaf, is opened without following
//! a symlink, sits on a cgroup v2 file system and has the recorded cgroup id;
//! a process is a member only while its identity (pid and start time) holds.

use std::{
    ffi::{OsStr, OsString},
    io,
    os::fd::OwnedFd,
    path::{Component, Path},
    time::{Duration, Instant},
};

use super::{
    Tree,
    cgroup::{CgroupTree, mount},
    orphaned,
    scan::{self, ScannedTree},
};
use crate::{
    backend::Backend,
    identity::{Identity, ProcessInfo},
    sys::dirfd,
};

/// What a record names.
#[derive(Debug, Clone)]
pub(crate) struct Named<'a> {
    pub(crate) backend: Backend,
    pub(crate) leader: Option<Identity>,
    pub(crate) members: &'a [Identity],
    /// The leaf and, once it was made, its cgroup id.
    pub(crate) cgroup: Option<(&'a Path, Option<u64>)>,
    /// The record's id, which the tree's processes carry in their
    /// environment (`mark.rs`).
    pub(crate) id: &'a str,
}

/// The recorded tree as it is now.
// One short-lived value per record read: boxing the tree would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Rebuilt {
    /// Something of it may be left: this tree holds it.
    Tree(Tree),
    /// A leaf recorded before its id was known (the watchdog hears of it
    /// before the `mkdir`): it is only ever removed, never read or killed.
    Unverified(Leaf),
    /// Nothing to act on: the leaf is gone, or another cgroup has its name.
    Gone,
    /// It cannot be judged from here (no cgroup v2 mount, no permission, an
    /// unmounted hierarchy): leave it and keep the record.
    Unknown(String),
}

/// What ending a rebuilt tree did.
#[derive(Debug)]
pub(crate) struct Ended {
    /// The members found before the kill.
    pub(crate) members: Vec<ProcessInfo>,
    /// Members still running after the bound.
    pub(crate) survivors: Vec<ProcessInfo>,
    /// Whether the leaf (with the cgroups below it) was removed, or there
    /// was none.
    pub(crate) removed: bool,
}

/// Rebuilds the tree `named` describes.
pub(crate) fn rebuild(named: &Named<'_>) -> Rebuilt {
    match named.cgroup {
        Some((path, id)) => match Leaf::open(path) {
            Ok(Some(leaf)) => match (id, leaf.id) {
                (Some(recorded), found) if recorded == found => {
                    Rebuilt::Tree(Tree::Cgroup(CgroupTree::adopt(path.to_owned())))
                }
                (Some(recorded), found) => {
                    tracing::warn!(
                        cgroup = %path.display(), recorded, found,
                        "a recorded cgroup is now another cgroup: left alone"
                    );
                    Rebuilt::Gone
                }
                (None, _) => Rebuilt::Unverified(leaf),
            },
            Ok(None) => Rebuilt::Gone,
            Err(reason) => Rebuilt::Unknown(reason),
        },
        None => Rebuilt::Tree(Tree::Scanned(ScannedTree::new(
            scan::Rule::Recorded(orphaned::Rule {
                backend: named.backend,
                leader: named.leader,
                roots: named.leader.iter().chain(named.members).copied().collect(),
                mark: Some(Box::new(orphaned::Mark::new(named.id))),
            }),
            None,
        ))),
    }
}

impl Tree {
    /// Ends the tree without a runtime: `SIGKILL` (by `cgroup.kill`, or to
    /// each member by identity) until it is empty or `bound` passes, then
    /// removes its leaf. For trees whose owner is gone.
    pub(crate) fn end_now(&mut self, bound: Duration) -> Ended {
        let members = self.members();
        let deadline = Instant::now() + bound;
        while !self.is_empty().unwrap_or(false) && Instant::now() < deadline {
            self.kill_now();
            std::thread::sleep(Duration::from_millis(5));
        }
        let removed = self.close();
        Ended {
            members,
            survivors: self.members(),
            removed,
        }
    }
}

/// A recorded leaf, opened without following a symlink.
#[derive(Debug)]
pub(crate) struct Leaf {
    parent: OwnedFd,
    name: OsString,
    dir: OwnedFd,
    id: u64,
}

impl Leaf {
    /// `Ok(None)`: gone, or not a corral leaf inside the mount (nothing of
    /// ours). `Err`: it cannot be judged from here.
    fn open(path: &Path) -> Result<Option<Self>, String> {
        let Some(mount) = mount() else {
            return Err("no cgroup v2 mount here".to_owned());
        };
        let (Some(parent_path), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(None);
        };
        if !is_corral_leaf(path) || !path.starts_with(mount) {
            return Ok(None);
        }
        let judged = |error: io::Error| {
            if error.kind() == io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(format!("{}: {error}", path.display()))
            }
        };
        let parent = match dirfd::open_dir_at(None, parent_path.as_os_str()) {
            Ok(parent) => parent,
            Err(error) => return judged(error),
        };
        let dir = match dirfd::open_dir_at(Some(&parent), name) {
            Ok(dir) => dir,
            Err(error) => return judged(error),
        };
        match dirfd::is_cgroup2(&dir) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "{} is not on a cgroup v2 file system (unmounted?)",
                    path.display()
                ));
            }
            Err(error) => return judged(error),
        }
        let id = match dirfd::meta(&dir) {
            Ok(meta) => meta.ino,
            Err(error) => return judged(error),
        };
        Ok(Some(Self {
            parent,
            name: name.to_owned(),
            dir,
            id,
        }))
    }

    /// Removes the leaf if it is still the one opened (same inode) and
    /// empty (the kernel refuses otherwise). False if it is still there.
    pub(crate) fn remove_if_empty(&self) -> bool {
        let same = dirfd::open_dir_at(Some(&self.parent), &self.name)
            .and_then(|again| Ok((dirfd::meta(&again)?.ino, dirfd::meta(&self.dir)?.ino)))
            .is_ok_and(|(now, then)| now == then);
        !same || dirfd::rmdir_at(&self.parent, OsStr::new(&self.name)).is_ok()
    }
}

/// Whether `path` is an absolute, normal path whose last component is one of
/// corral's leaf names (`corral-...`), with no `..` anywhere: a record cannot
/// steer `cgroup.kill` at any other cgroup.
pub(crate) fn is_corral_leaf(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("corral-") && !n.starts_with("corral-probe"))
}

/// The members of a rebuilt tree as a sweep reports them, without ending it.
pub(crate) fn running_members(named: &Named<'_>) -> Result<Vec<ProcessInfo>, String> {
    match rebuild(named) {
        Rebuilt::Tree(mut tree) => {
            let members = tree.members();
            tree.forget();
            Ok(members)
        }
        Rebuilt::Unverified(_) | Rebuilt::Gone => Ok(Vec::new()),
        Rebuilt::Unknown(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_paths() {
        assert!(is_corral_leaf(Path::new("/sys/fs/cgroup/corral-12-0")));
        assert!(!is_corral_leaf(Path::new("/sys/fs/cgroup/corral-probe-12")));
        assert!(!is_corral_leaf(Path::new("/sys/fs/cgroup")));
        assert!(!is_corral_leaf(Path::new("/a/../corral-1")));
    }
}
