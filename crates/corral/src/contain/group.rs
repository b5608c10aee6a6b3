//! The process-group backend: the leader starts a new process group; the tree
//! is that group plus the leader's descendants that are still connected to it
//! by parent links.
//!
//! The group is signalled with `killpg` only while the leader is our unreaped
//! child: its zombie holds the pid, so no new group can take that id. The
//! holes are real and documented: a child that calls `setsid` and whose
//! parent has exited, or a double-forked daemon, is found by neither rule.
//!
//! Another tree of this process is never a member: the group is the
//! leader's own (a new group at the spawn, its id held by the unreaped
//! leader), and the scan leaves out every other live tree's leader. Only a
//! process that joins the group itself (`setpgid`, possible within one
//! session) is reached by the group-wide signal.

use std::io;

use super::{Leader, registry::Others};
use crate::identity::ProcessTable;
use crate::{identity::Stat, signal::Signal, sys};

/// Membership for a process-group tree.
#[derive(Debug)]
pub(crate) struct Rule {
    leader: i32,
}

impl Rule {
    pub(crate) fn new(leader: &Leader) -> Self {
        Self { leader: leader.pid }
    }

    /// The leader's descendants and its group, less another live tree's
    /// leader (none of which can be there unless a process of ours joined
    /// their ranks; a leader is never ours to judge).
    /// The leader's pid (the group's id).
    pub(crate) fn leader(&self) -> i32 {
        self.leader
    }

    pub(crate) fn members(&self, table: &ProcessTable, others: &Others) -> Vec<Stat> {
        let mut members = table.descendants(&[self.leader]);
        let mut listed: std::collections::HashSet<i32> = members.iter().map(|m| m.pid).collect();
        for stat in table.group(self.leader) {
            if listed.insert(stat.pid) {
                members.push(stat.clone());
            }
        }
        members.retain(|s| s.pid == self.leader || !others.is_leader(s));
        members
    }

    /// `killpg(leader, signal)`. Safe against reuse because the supervisor
    /// reaps the leader only after the cleanup.
    pub(crate) fn signal_group(&self, signal: Signal) -> io::Result<()> {
        match sys::kill_group(self.leader, signal) {
            Err(error) if !sys::is_gone(&error) => Err(error),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::tests::stat;

    #[test]
    fn group_members_and_connected_escapees() {
        let table = vec![
            stat(101, 100, 101, 50), // leader, own group
            stat(102, 101, 101, 51), // in the group
            stat(103, 101, 103, 52), // setsid child, parent alive: connected
            stat(104, 1, 101, 53),   // orphan still in the group
            stat(105, 1, 105, 54),   // setsid orphan: the documented hole
            stat(106, 100, 106, 55), // a sibling: not ours
        ];
        let mut pids: Vec<i32> = Rule { leader: 101 }
            .members(&ProcessTable::new(table), &Others::default())
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![101, 102, 103, 104]);
    }

    /// `ScannedTree::refresh` (on a group tree) hands the member set on only
    /// when it grew: the first scan finds the leader, an unchanged second
    /// scan reports nothing (the supervisor re-registers the members with the
    /// ledger and the watchdog each time it reports them).
    #[test]
    fn refresh_reports_the_members_only_when_the_set_grows() {
        use crate::contain::scan::{Rule as ScanRule, ScannedTree};
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        let start_time = crate::identity::read_stat(pid).expect("stat").start_time;
        let mut tree = ScannedTree::new(ScanRule::Group(Rule { leader: pid }), None);
        // A shared walk from after the tree was set up (an older one tells
        // it nothing).
        let walked = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(super::super::walker::after(std::time::Instant::now()));
        walked.expect("walk");
        let first = tree.refresh();
        let second = tree.refresh();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            first,
            Some(vec![crate::identity::Identity { pid, start_time }]),
            "the first scan finds the leader"
        );
        assert_eq!(second, None, "nothing new, nothing reported");
    }
}
