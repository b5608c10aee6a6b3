//! The subreaper backend: this process becomes a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so every orphan of the tree, `setsid` and
//! double-forked ones included, re-parents to it instead of to init and stays
//! findable through `/proc` parent links.
//!
//! The role is process-global: one subreaper-backed tree runs per process at a
//! time, and this process must reap the zombies it adopts. The tree is the
//! leader's descendants plus every process this process adopted that started
//! no earlier than the leader (and their descendants), less what another
//! live tree of this process claims (see `registry`).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{
    Leader,
    registry::{CgroupOf, Others},
    scan::descendants,
};
use crate::{
    identity::{self, Stat},
    sys,
};

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether the backend can work here at all.
pub(crate) fn probe() -> Result<(), String> {
    if std::fs::metadata("/proc/self/stat").is_err() {
        return Err("/proc is not mounted: the subreaper backend walks /proc".to_owned());
    }
    Ok(())
}

/// The process-wide subreaper role, held by one tree at a time.
#[derive(Debug)]
pub(crate) struct Claim {
    /// Our children (pid, start time) from before the spawn: never members,
    /// however close their start time is to the leader's.
    preexisting: Vec<(i32, u64)>,
    /// Whether this process was a subreaper before (then it stays one).
    was_subreaper: bool,
}

impl Claim {
    pub(crate) fn acquire() -> Result<Self, String> {
        probe()?;
        if ACTIVE
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(
                "another subreaper-backed tree is running in this process (one at a time)"
                    .to_owned(),
            );
        }
        let was_subreaper = sys::is_child_subreaper().unwrap_or(false);
        if let Err(error) = sys::set_child_subreaper(true) {
            ACTIVE.store(false, Ordering::SeqCst);
            return Err(format!("PR_SET_CHILD_SUBREAPER failed: {error}"));
        }
        let me = sys::getpid();
        let preexisting = identity::all_processes()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.ppid == me)
            .map(|s| (s.pid, s.start_time))
            .collect();
        Ok(Self {
            preexisting,
            was_subreaper,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.was_subreaper {
            ACTIVE.store(false, Ordering::SeqCst);
            return;
        }
        if let Err(error) = sys::set_child_subreaper(false) {
            tracing::warn!(%error, "could not clear the subreaper flag");
        }
        ACTIVE.store(false, Ordering::SeqCst);
    }
}

/// Membership for a subreaper-backed tree.
#[derive(Debug)]
pub(crate) struct Rule {
    me: i32,
    leader: i32,
    leader_start: u64,
    preexisting: Vec<(i32, u64)>,
    claim: Option<Claim>,
}

impl Rule {
    pub(crate) fn new(leader: &Leader, claim: Claim) -> Self {
        Self {
            me: sys::getpid(),
            leader: leader.pid,
            leader_start: leader.start_time,
            preexisting: claim.preexisting.clone(),
            claim: Some(claim),
        }
    }

    /// Whether this process is an orphan that re-parented to us since the
    /// leader started: ours unless another tree of this process claims it.
    fn is_orphan(&self, s: &Stat) -> bool {
        s.ppid == self.me
            && s.pid != self.leader
            && s.start_time >= self.leader_start
            && !self.preexisting.contains(&(s.pid, s.start_time))
            && !crate::watchdog::is_helper(s.pid, s.start_time)
    }

    /// Whether this process is an orphan of the tree that re-parented to us:
    /// an orphan that no other live tree claims (its leader, a process of its
    /// group or its leaf, a member its scans found). Decided from its own
    /// entry alone, so a walk can act on it at sight; `cgroup_of` says which
    /// cgroup a pid is in (see [`Others::claims_with`]).
    pub(crate) fn is_adopted(&self, s: &Stat, others: &Others, cgroup_of: CgroupOf<'_>) -> bool {
        self.is_orphan(s) && !others.claims_with(s, cgroup_of)
    }

    /// The leader's descendants and the adopted orphans' (with theirs), less
    /// what another tree claims.
    pub(crate) fn members(
        &self,
        table: &[Stat],
        others: &Others,
        cgroup_of: CgroupOf<'_>,
    ) -> Vec<Stat> {
        let mut roots = vec![self.leader];
        roots.extend(
            table
                .iter()
                .filter(|s| self.is_adopted(s, others, cgroup_of))
                .map(|s| s.pid),
        );
        let mut members = descendants(table, &roots);
        members.retain(|s| s.pid == self.leader || !others.claims(s));
        members
    }

    /// Reaps orphans that have exited, whoever's they were: a zombie is no
    /// tree's member, and only we can reap it. Never another tree's leader,
    /// whose supervisor wants its status, nor our own (the same). Returns how
    /// many of the reaped were ours.
    pub(crate) fn reap_adopted(
        &self,
        table: &[Stat],
        others: &Others,
        cgroup_of: CgroupOf<'_>,
    ) -> usize {
        let mut reaped = 0;
        let zombies = table
            .iter()
            .filter(|s| !s.is_running() && self.is_orphan(s) && !others.is_leader(s));
        for zombie in zombies {
            let ours = !others.claims_with(zombie, cgroup_of);
            match sys::reap(zombie.pid) {
                Ok(true) if ours => reaped += 1,
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(pid = zombie.pid, %error, "reaping an adopted zombie failed");
                }
            }
        }
        reaped
    }

    pub(crate) fn release(&mut self) {
        self.claim = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contain::scan::tests::stat;

    fn rule(me: i32, leader: i32, leader_start: u64) -> Rule {
        Rule {
            me,
            leader,
            leader_start,
            preexisting: vec![(97, 50)],
            claim: None,
        }
    }

    #[test]
    fn adopted_orphans_born_after_the_leader_are_members() {
        let table = vec![
            stat(100, 1, 100, 10),   // us
            stat(101, 100, 101, 50), // leader
            stat(102, 101, 101, 51), // leader's child
            stat(103, 100, 103, 52), // setsid orphan, re-parented to us
            stat(104, 103, 103, 53), // its child
            stat(99, 100, 99, 40),   // our older child: a bystander
            stat(98, 99, 99, 41),    // the bystander's child
            stat(97, 100, 97, 50),   // our child from before the spawn, same tick as the leader
            stat(200, 1, 200, 60),   // unrelated
        ];
        let mut pids: Vec<i32> = rule(100, 101, 50)
            .members(&table, &Others::default(), &|_| None)
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![101, 102, 103, 104]);
    }

    /// Two trees in one host: a subreaper tree and a tree on another backend
    /// spawned after it. The other tree's leader and the processes of its
    /// group or leaf are direct children of the host born after our leader,
    /// yet never ours.
    #[test]
    fn other_trees_leaders_groups_and_leaves_are_not_adopted() {
        let table = vec![
            stat(100, 1, 100, 10),   // us
            stat(101, 100, 100, 50), // our leader
            stat(103, 100, 103, 52), // our setsid orphan
            stat(110, 100, 110, 55), // a group tree's leader
            stat(111, 110, 110, 56), // its child
            stat(112, 100, 110, 57), // its orphan, still in its group
            stat(120, 100, 100, 58), // a cgroup tree's leader
            stat(121, 100, 121, 59), // its double-forked orphan, in its leaf
            stat(130, 100, 130, 60), // an orphan a group tree's scan found
            stat(131, 130, 130, 61), // its child
        ];
        let mut others = Others::default();
        others.leaders = [110, 120].into();
        others.groups = [110].into();
        others.members = [(130, 60)].into();
        others.cgroups = vec!["/leaf".to_owned()];
        let leaves = |pid| (pid == 120 || pid == 121).then(|| "/leaf".to_owned());
        let mut pids: Vec<i32> = rule(100, 101, 50)
            .members(&table, &others, &leaves)
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![101, 103]);
    }
}
