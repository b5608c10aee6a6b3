//! The cgroup v2 backend: one leaf cgroup per invocation.
//!
//! The leaf is created under the cgroup this process is in (the root, or a
//! delegated subtree), with a name that never repeats (`corral-PID-RANDOM`).
//! The leader is *born* in it (`clone3` with `CLONE_INTO_CGROUP`; on a kernel
//! without `clone3`, a write of `0` to the leaf's `cgroup.procs` before
//! `exec`), so no descendant is ever outside it. `cgroup.kill` kills every
//! member atomically, including ones forked during the kill and those in
//! cgroups a member made below the leaf; `cgroup.events` says `populated 0`
//! once all have exited, announced by `poll(POLLPRI)` on the file itself
//! (not inotify, whose teardown waits for an SRCU grace period). Zombies do
//! not count as populated.
//!
//! A member that may write another cgroup's `cgroup.procs` (root, or the
//! owner of a delegated subtree) can move itself out of the leaf, and then
//! neither `cgroup.kill` nor `populated 0` sees it. So the tree remembers
//! every member it lists (pid and start time, read while the pid is in the
//! leaf), and at the end of a cleanup ends, by identity, each one that still
//! runs outside the leaf, with what it forked since that is still linked to
//! it by parent pid ([`CgroupTree::end_departed`]). Members are listed
//! at each signal step, `SIGKILL` included, with a look at the members'
//! children for those outside the leaf (a child that left while its parent
//! stayed), while the leaf is frozen (`cgroup.freeze`), so nothing in it
//! forks or moves a child out between the look and the signal; and for the
//! report. Nothing is
//! read while the tree runs, so a process that left before the first signal
//! and whose parent is gone too is not known, nor is an orphan
//! of a departed member (re-parented, so unlinked). Run the command as
//! another user ([`Command::user`](crate::command::Command::user)) and it cannot leave
//! at all.

//!
//! The files, bottom-up: `mount.rs` reads the v2 mount and where a process
//! is in it; `subtree.rs` walks the cgroups a member made below a leaf;
//! `parent.rs` chooses the cgroup leaves go in and checks who owns it;
//! `frozen.rs` freezes a leaf for a signal step; `departed.rs` finds and
//! ends the members that moved out; `tree.rs` is the live leaf
//! ([`CgroupTree`]); `leaf.rs` creates a leaf before the spawn ([`Leaf`]).

mod departed;
mod frozen;
mod leaf;
mod mount;
mod parent;
mod subtree;
mod tree;

pub(crate) use departed::Departed;
pub(crate) use leaf::{Leaf, LeafError, probe};
pub(crate) use mount::{delegates_namespaces, mount, mountinfo};
pub use parent::PARENT_VARIABLE;
pub(crate) use parent::{foreign_owner, not_a_domain, writable_by};
pub(crate) use tree::CgroupTree;

#[cfg(test)]
mod testing {
    use super::Leaf;

    /// A fresh leaf, or `None` (said as skipped) where none can be created.
    pub(super) fn leaf() -> Option<Leaf> {
        let leaf = Leaf::create(&mut |_| {}).ok();
        if leaf.is_none() {
            println!("SKIPPED: no cgroup leaf can be created here");
        }
        leaf
    }

    pub(super) fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep")
    }
}
