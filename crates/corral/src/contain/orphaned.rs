//! Membership for a tree whose owner is gone, rebuilt from its record (see
//! `recorded.rs`): pure over a process table, like `group.rs` and
//! `subreaper.rs`, but for the tree's mark (`mark.rs`), read from the
//! processes the table names.

use std::{collections::HashMap, sync::Mutex};

use super::mark;
use crate::{
    backend::Backend,
    identity::{Identity, ProcessTable, Stat},
    sys,
};

/// Membership for a tree rebuilt from its record: the leader and the
/// recorded members whose identity still holds, with their descendants, and
/// for a group tree the leader's group while the leader's identity holds
/// (its pid, hence its group id, is still the tree's). Its group is never
/// signalled as a whole: the leader is not our child, so its id could be
/// reused the moment it exits. With a mark, also every running process that
/// started after the leader and carries the mark (see `mark.rs`), with its
/// descendants: an orphan that no walk of the owner had named.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) backend: Backend,
    pub(crate) leader: Option<Identity>,
    pub(crate) roots: Vec<Identity>,
    /// Boxed: read only when a recorded tree is ended.
    pub(crate) mark: Option<Box<Mark>>,
}

/// The mark a recorded tree's members carry, and whose processes it ends.
#[derive(Debug)]
pub(crate) struct Mark {
    /// The tree's record id.
    id: String,
    /// The user whose processes the mark makes members: the one ending the
    /// tree (an owner's watchdog, `corral reap`, a start-up sweep all run as
    /// the owner's user).
    uid: u32,
    /// What each process read carried, by identity: a process's
    /// environment is read once however many walks see it.
    read: Mutex<HashMap<(i32, u64), bool>>,
}

impl Mark {
    pub(crate) fn new(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            uid: sys::geteuid(),
            read: Mutex::new(HashMap::new()),
        }
    }

    fn carried_by(&self, stat: &Stat) -> bool {
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *read
            .entry((stat.pid, stat.start_time))
            .or_insert_with(|| mark::marked(stat, &self.id, self.uid))
    }
}

impl Rule {
    pub(crate) fn members(&self, table: &ProcessTable) -> Vec<Stat> {
        self.members_by(table, |stat| {
            self.mark.as_ref().is_some_and(|mark| mark.carried_by(stat))
        })
    }

    /// [`Rule::members`], with `marked` saying which processes carry the
    /// mark.
    fn members_by(&self, table: &ProcessTable, marked: impl Fn(&Stat) -> bool) -> Vec<Stat> {
        let holds = |who: &Identity| {
            table
                .get(who.pid)
                .is_some_and(|s| s.start_time == who.start_time)
        };
        let mut roots: Vec<i32> = self
            .roots
            .iter()
            .filter(|who| holds(who))
            .map(|who| who.pid)
            .collect();
        // Started after the leader: the leader's own identity is the bound
        // whether or not it still holds. A record told before the leader was
        // known (its owner died during the spawn) has no such bound: the
        // mark alone names the tree (its id is this tree's only). Never this
        // process (it carries an outer tree's mark only, but a nested
        // corral's ender carries the marks of the trees around it).
        if self.mark.is_some() {
            let since = self.leader.map_or(0, |leader| leader.start_time);
            let me = sys::getpid();
            let marked: Vec<i32> = table
                .iter()
                .filter(|s| s.is_running() && s.start_time >= since && s.pid != me)
                .filter(|s| !roots.contains(&s.pid) && marked(s))
                .map(|s| s.pid)
                .collect();
            roots.extend(marked);
        }
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
            mark: None,
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

    /// A marked process that lost every link to the recorded members is a
    /// member, with its children, if it started after the leader; unmarked
    /// ones, marked ones older than the leader, a marked zombie and the
    /// ender itself (marked: a nested corral's) are not.
    #[test]
    fn a_marked_orphan_is_found_without_a_link() {
        use crate::identity::tests::stat;
        let me = sys::getpid();
        let table = ProcessTable::new(vec![
            stat(201, 1, 201, 60),   // the leader
            stat(202, 1, 202, 70),   // a daemon adopted by init, marked
            stat(203, 202, 202, 71), // its child
            stat(204, 1, 204, 72),   // unmarked, started later
            stat(205, 1, 205, 40),   // marked, but older than the leader
            Stat {
                state: 'Z',
                ..stat(206, 1, 206, 73) // marked, exited
            },
            stat(me, 1, me, 74), // this process, marked
        ]);
        let rule = |mark: Option<Box<Mark>>| Rule {
            backend: Backend::Subreaper,
            leader: Some(Identity {
                pid: 201,
                start_time: 60,
            }),
            roots: vec![Identity {
                pid: 201,
                start_time: 60,
            }],
            mark,
        };
        let pids = |rule: &Rule| {
            let mut pids: Vec<i32> = rule
                .members_by(&table, |s| [202, 205, 206, me].contains(&s.pid))
                .iter()
                .map(|s| s.pid)
                .collect();
            pids.sort_unstable();
            pids
        };
        assert_eq!(
            pids(&rule(Some(Box::new(Mark::new("1-2-3"))))),
            vec![201, 202, 203]
        );
        assert_eq!(pids(&rule(None)), vec![201], "no mark: links only");
    }
}
