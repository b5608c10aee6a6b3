//! The subreaper backend: this process becomes a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so every orphan of the tree, `setsid` and
//! double-forked ones included, re-parents to it instead of to init and stays
//! findable through `/proc` parent links.
//!
//! The role is process-global: one subreaper-backed tree runs per process at a
//! time, and this process must reap the zombies it adopts. The tree is the
//! leader's descendants plus every process this process adopted that started
//! no earlier than the leader (and their descendants).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Leader, scan::descendants};
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

    fn adopted<'t>(&self, table: &'t [Stat]) -> impl Iterator<Item = &'t Stat> {
        table.iter().filter(move |s| self.is_adopted(s))
    }

    /// Whether this process is an orphan of the tree that re-parented to us.
    /// Decided from its own entry alone, so a walk can act on it at sight.
    pub(crate) fn is_adopted(&self, s: &Stat) -> bool {
        s.ppid == self.me
            && s.pid != self.leader
            && s.start_time >= self.leader_start
            && !self.preexisting.contains(&(s.pid, s.start_time))
            && !crate::watchdog::is_helper(s.pid, s.start_time)
    }

    pub(crate) fn members(&self, table: &[Stat]) -> Vec<Stat> {
        let mut roots = vec![self.leader];
        roots.extend(self.adopted(table).map(|s| s.pid));
        descendants(table, &roots)
    }

    /// Reaps adopted members that have exited (the leader is reaped by the
    /// supervisor, which wants its status); returns how many.
    pub(crate) fn reap_adopted(&self, table: &[Stat]) -> usize {
        let mut reaped = 0;
        for zombie in self.adopted(table).filter(|s| !s.is_running()) {
            match sys::reap(zombie.pid) {
                Ok(true) => reaped += 1,
                Ok(false) => {}
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
            .members(&table)
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![101, 102, 103, 104]);
    }
}
