//! Containment made ready before the spawn ([`Prepared`]) and the live tree
//! ([`Tree`]): one enum over the backends, so the driver and the ledger see
//! one tree whatever holds it.

use std::{os::fd::AsFd, path::PathBuf, time::Duration};

use tokio::time::Instant;

use super::{
    cgroup::{self, Departed},
    group, halt,
    leader::Leader,
    registry::{self, Live},
    scan, subreaper,
};
use crate::{backend::Backend, error::Error, identity::ProcessInfo, signal::Signal, sys};

/// Containment made ready before the spawn.
#[derive(Debug)]
pub(crate) enum Prepared {
    Cgroup(cgroup::Leaf),
    Subreaper(subreaper::Claim),
    Group,
}

impl Prepared {
    pub(crate) fn backend(&self) -> Backend {
        match self {
            Prepared::Cgroup(_) => Backend::Cgroup,
            Prepared::Subreaper(_) => Backend::Subreaper,
            Prepared::Group => Backend::Group,
        }
    }

    /// The leaf cgroup's directory handle, for spawning straight into it.
    pub(crate) fn cgroup_dir(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            Prepared::Cgroup(leaf) => Some(leaf.dir().as_fd()),
            _ => None,
        }
    }

    /// The leaf cgroup and its id, with the cgroup backend.
    pub(crate) fn cgroup(&self) -> Option<(PathBuf, u64)> {
        match self {
            Prepared::Cgroup(leaf) => Some((leaf.path().to_owned(), leaf.id())),
            _ => None,
        }
    }

    /// Whether the leader gets a cgroup namespace rooted at its leaf: on a
    /// cgroup2 mount with `nsdelegate`, where the kernel then keeps it and
    /// its descendants inside (root too), and only when this process may
    /// create one (root).
    pub(crate) fn cgroup_namespace(&self) -> bool {
        matches!(self, Prepared::Cgroup(_)) && cgroup::delegates_namespaces() && sys::geteuid() == 0
    }

    /// With the cgroup backend, the first `cgroup.procs` of the leaf or an
    /// ancestor that the user `uid` (group `gid`) may write: through it the
    /// command could leave its leaf.
    pub(crate) fn leaf_writable_by(&self, uid: u32, gid: Option<u32>) -> Option<PathBuf> {
        match self {
            Prepared::Cgroup(leaf) => cgroup::writable_by(leaf.path(), uid, gid),
            _ => None,
        }
    }

    /// What the child must do before exec.
    pub(crate) fn child_setup(&self) -> sys::ChildSetup<'_> {
        match self {
            Prepared::Cgroup(leaf) => sys::ChildSetup {
                cgroup_procs: Some(leaf.procs().as_fd()),
                ..Default::default()
            },
            Prepared::Subreaper(_) => sys::ChildSetup::default(),
            Prepared::Group => sys::ChildSetup {
                new_group: true,
                ..Default::default()
            },
        }
    }

    /// The live tree, once the leader runs; `live` is its entry in the
    /// registry of this process's trees (see [`spawning`]).
    pub(crate) fn start(self, leader: &Leader, live: &Live) -> Result<Tree, Error> {
        let live = Some(live.id());
        Ok(match self {
            Prepared::Cgroup(leaf) => Tree::Cgroup(leaf.watch((leader.pid, leader.start_time))?),
            Prepared::Subreaper(claim) => Tree::Scanned(
                scan::ScannedTree::new(
                    scan::Rule::Subreaper(subreaper::Rule::new(leader, claim)),
                    live,
                )
                .with_leader(leader.pid, leader.start_time),
            ),
            Prepared::Group => Tree::Scanned(
                scan::ScannedTree::new(scan::Rule::Group(group::Rule::new(leader)), live)
                    .with_leader(leader.pid, leader.start_time),
            ),
        })
    }
}

impl Prepared {
    /// Ends what the leader `leader` (pid and start time; our unreaped
    /// child) started before its tree could be started (a spawn that failed
    /// after the fork), so that nothing of it runs on: the leaf's members
    /// (`cgroup.kill`), the leader's group while its id is provably ours (last),
    /// the orphans re-parented to us that no other tree of this process claims
    /// (`live`: this tree's entry in the registry), and the leader with
    /// everything linked to it by parent pid, stopped first so that nothing
    /// forks away (`halt.rs`). Waits up to `bound` for the leaf to empty, so
    /// that dropping it removes it. The leader itself is left to the caller
    /// to reap.
    pub(crate) fn kill_unstarted(&self, leader: (i32, u64), live: u64, bound: Duration) {
        let (pid, start_time) = leader;
        let mut roots = vec![leader];
        match self {
            Prepared::Cgroup(leaf) => leaf.kill(),
            // The group is killed after the rest: killed first, its members
            // would orphan children that left it (`setsid`), unlinking them.
            Prepared::Group => {}
            Prepared::Subreaper(claim) => {
                let rule = subreaper::Rule::for_leader(pid, start_time, claim);
                let table = crate::identity::all_processes().unwrap_or_default();
                let others = registry::others(Some(live));
                roots.extend(
                    rule.members(&table, &others, &registry::cgroup_of)
                        .iter()
                        .map(|stat| (stat.pid, stat.start_time)),
                );
            }
        }
        halt::stop_and_kill(&roots, &|_| true, bound);
        match self {
            Prepared::Cgroup(leaf) => leaf.wait_empty(bound),
            Prepared::Group => {
                if let Err(error) = sys::kill_group(pid, Signal::KILL) {
                    tracing::warn!(pgid = pid, %error, "killing the leader's group failed");
                }
            }
            Prepared::Subreaper(_) => {}
        }
    }
}

/// A live tree.
#[derive(Debug)]
pub(crate) enum Tree {
    Cgroup(cgroup::CgroupTree),
    Scanned(scan::ScannedTree),
}

impl Tree {
    pub(crate) fn cgroup_path(&self) -> Option<PathBuf> {
        match self {
            Tree::Cgroup(tree) => Some(tree.path().to_owned()),
            Tree::Scanned(_) => None,
        }
    }

    /// Passes `signal` on to the running tree (`Control::signal`): as
    /// [`signal_shared`](Self::signal_shared), without freezing a leaf.
    pub(crate) async fn pass_on(&mut self, signal: Signal) -> std::io::Result<Option<usize>> {
        match self {
            Tree::Cgroup(tree) => tree.pass_on(signal).map(Some),
            Tree::Scanned(tree) => tree.signal_shared(signal).await.map(Some),
        }
    }

    /// What the signal steps found wrong, for the report's notes.
    pub(crate) fn take_notes(&mut self) -> Vec<String> {
        match self {
            Tree::Cgroup(tree) => tree.take_notes(),
            Tree::Scanned(_) => Vec::new(),
        }
    }

    /// How many members signal steps left to a nested supervisor, which
    /// signals them by its own policy (`nested.rs`).
    pub(crate) fn left_to_inner(&self) -> usize {
        match self {
            Tree::Cgroup(tree) => tree.left_to_inner(),
            Tree::Scanned(tree) => tree.left_to_inner(),
        }
    }

    /// Re-scans a tree found through `/proc`; returns the running members if
    /// they changed. `None` for a cgroup, which needs no scan.
    pub(crate) fn refresh(&mut self) -> Option<Vec<crate::identity::Identity>> {
        match self {
            Tree::Cgroup(_) => None,
            Tree::Scanned(tree) => tree.refresh(),
        }
    }

    /// How often a re-scan can find a new shared walk (zero for a cgroup,
    /// which is never re-scanned).
    pub(crate) fn refresh_cadence(&self) -> std::time::Duration {
        match self {
            Tree::Cgroup(_) => std::time::Duration::ZERO,
            Tree::Scanned(tree) => tree.refresh_cadence(),
        }
    }

    /// Sends `signal` to every running member. Returns how many were
    /// signalled, or `None` where the kernel does it without naming them. A
    /// scanned tree judges on a `/proc` walk shared with the host's other
    /// trees.
    pub(crate) async fn signal_shared(&mut self, signal: Signal) -> std::io::Result<Option<usize>> {
        match self {
            Tree::Cgroup(tree) => tree.signal(signal),
            Tree::Scanned(tree) => tree.signal_shared(signal).await.map(Some),
        }
    }

    /// [`is_empty`](Self::is_empty) for a supervision, on a shared walk.
    pub(crate) async fn is_empty_shared(&mut self) -> std::io::Result<bool> {
        match self {
            Tree::Cgroup(tree) => tree.is_empty(),
            Tree::Scanned(tree) => tree.is_empty_shared().await,
        }
    }

    /// Whether no member is running (zombies do not count).
    pub(crate) fn is_empty(&mut self) -> std::io::Result<bool> {
        match self {
            Tree::Cgroup(tree) => tree.is_empty(),
            Tree::Scanned(tree) => tree.is_empty(),
        }
    }

    /// Waits until the tree is empty (true) or `deadline` passes (false).
    /// With `kill_late`, members that appear while waiting are killed on sight.
    pub(crate) async fn wait_empty(
        &mut self,
        deadline: Instant,
        kill_late: bool,
    ) -> std::io::Result<bool> {
        match self {
            Tree::Cgroup(tree) => tree.wait_empty(deadline).await,
            Tree::Scanned(tree) => tree.wait_empty(deadline, kill_late).await,
        }
    }

    /// The running members, for the report.
    pub(crate) fn members(&mut self) -> Vec<ProcessInfo> {
        match self {
            Tree::Cgroup(tree) => tree.members(),
            Tree::Scanned(tree) => tree.members(),
        }
    }

    /// `SIGKILL` to every member, synchronously: for `Drop`, when no runtime
    /// is left to run a graceful termination.
    pub(crate) fn kill_now(&mut self) {
        match self {
            Tree::Cgroup(tree) => tree.kill_now(),
            Tree::Scanned(tree) => tree.kill_now(),
        }
    }

    /// At the end of a termination, `SIGKILL` to what the kernel reaches
    /// without naming it: a process group may hold a process that forked and
    /// exited faster than any scan could see it. Only while the leader is
    /// unreaped (its pid is the group's id). A cgroup was killed whole.
    pub(crate) fn kill_unseen(&mut self) {
        if let Tree::Scanned(tree) = self {
            tree.kill_unseen();
        }
    }

    /// At the end of a termination: ends, by identity, the members that moved
    /// themselves out of the leaf cgroup, waiting up to `bound` for them.
    /// Only a cgroup can be left this way (a scanned tree follows members
    /// wherever they go).
    pub(crate) async fn end_departed(&mut self, bound: std::time::Duration) -> Departed {
        match self {
            Tree::Cgroup(tree) => tree.end_departed(bound).await,
            Tree::Scanned(_) => Departed::default(),
        }
    }

    /// Whether members were seen exiting that no scan could name (only a
    /// scanned tree can tell; see `ScannedTree::is_empty`).
    pub(crate) fn members_exiting(&self) -> bool {
        match self {
            Tree::Cgroup(_) => false,
            Tree::Scanned(tree) => tree.members_exiting(),
        }
    }

    /// Whether, since the first signal, a member exited that no walk had
    /// seen running (only a scanned tree can tell; see
    /// `ScannedTree::members_hopped`).
    pub(crate) fn members_hopped(&self) -> bool {
        match self {
            Tree::Cgroup(_) => false,
            Tree::Scanned(tree) => tree.members_hopped(),
        }
    }

    /// How many processes the last scan could not tell from the leader of a
    /// tree being spawned by this process at the same time (a subreaper's
    /// orphans as young as that spawn): left alone until it is recorded.
    pub(crate) fn undecided(&self) -> usize {
        match self {
            Tree::Cgroup(_) => 0,
            Tree::Scanned(tree) => tree.undecided(),
        }
    }

    /// Lets the members go on running outside corral's ownership
    /// ([`Leftovers::Release`](crate::command::Leftovers::Release)): a cgroup's members
    /// move to its parent and the leaf is removed. Returns false if the leaf
    /// could not be removed.
    pub(crate) async fn release(&mut self) -> bool {
        match self {
            Tree::Cgroup(tree) => tree.release().await,
            Tree::Scanned(tree) => {
                tree.close();
                true
            }
        }
    }

    /// Gives the tree up without touching it: dropping it then neither kills
    /// nor removes anything (a tree rebuilt only to list its members).
    pub(crate) fn forget(&mut self) {
        if let Tree::Cgroup(tree) = self {
            tree.forget();
        }
    }

    /// Releases what the containment holds (removes the cgroup, gives up the
    /// subreaper role). Returns false if the cgroup could not be removed
    /// because members survive.
    pub(crate) fn close(&mut self) -> bool {
        match self {
            Tree::Cgroup(tree) => tree.close(),
            Tree::Scanned(tree) => {
                tree.close();
                true
            }
        }
    }
}
