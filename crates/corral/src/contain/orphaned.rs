//! Membership for a tree whose owner is gone, rebuilt from its record (see
//! `recorded.rs`): pure over a process table, like `group.rs` and
//! `subreaper.rs`.

use crate::{
    backend::Backend,
    identity::{Identity, ProcessTable, Stat},
};

/// Membership for a tree rebuilt from its record: the leader and the
/// recorded members whose identity still holds, with their descendants, and
/// for a group tree the leader's group while the leader's identity holds
/// (its pid, hence its group id, is still the tree's). Its group is never
/// signalled as a whole: the leader is not our child, so its id could be
/// reused the moment it exits.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) backend: Backend,
    pub(crate) leader: Option<Identity>,
    pub(crate) roots: Vec<Identity>,
}

impl Rule {
    pub(crate) fn members(&self, table: &ProcessTable) -> Vec<Stat> {
        let holds = |who: &Identity| {
            table
                .get(who.pid)
                .is_some_and(|s| s.start_time == who.start_time)
        };
        let roots: Vec<i32> = self
            .roots
            .iter()
            .filter(|who| holds(who))
            .map(|who| who.pid)
            .collect();
        let mut found = table.descendants(&roots);
        if let (Backend::Group, Some(leader)) = (self.backend, self.leader.filter(holds)) {
            for stat in table
                .group(leader.pid)
                .filter(|s| s.start_time >= leader.start_time)
            {
                if !found.iter().any(|m| m.pid == stat.pid) {
                    found.push(stat.clone());
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded group tree's members include its group's processes that
    /// are not the leader's descendants (nor recorded), while the leader's
    /// identity holds; other groups' processes are not members; nothing is
    /// a member once the leader's identity fails.
    #[test]
    fn a_recorded_group_tree_is_found_by_identity() {
        use crate::identity::tests::stat;
        let table = vec![
            stat(101, 1, 101, 50),   // leader, own group
            stat(102, 101, 101, 51), // its child
            stat(103, 1, 101, 52),   // an orphan still in the group
            stat(104, 1, 104, 53),   // another group
            stat(105, 1, 105, 54),   // a recorded member that left the group
            stat(106, 105, 105, 55), // its child
        ];
        let rule = |leader_start: u64| Rule {
            backend: Backend::Group,
            leader: Some(Identity {
                pid: 101,
                start_time: leader_start,
            }),
            roots: vec![
                Identity {
                    pid: 101,
                    start_time: leader_start,
                },
                Identity {
                    pid: 105,
                    start_time: 54,
                },
            ],
        };
        let pids = |rule: Rule| {
            let mut pids: Vec<i32> = rule
                .members(&ProcessTable::new(table.clone()))
                .iter()
                .map(|s| s.pid)
                .collect();
            pids.sort_unstable();
            pids
        };
        assert_eq!(pids(rule(50)), vec![101, 102, 103, 105, 106]);
        assert_eq!(pids(rule(49)), vec![105, 106], "a reused leader pid");
    }
}
