//! The live trees of this process, so that trees of one host never touch
//! each other whatever mix of backends they use.
//!
//! Every spawn is announced here before its fork ([`spawning`], with the
//! time it began), the tree is entered once the leader's pid is known, and
//! leaves once its leader has been reaped. A scanning tree takes a snapshot
//! ([`Others`]) of every *other* tree *after* its `/proc` walk: a leader the
//! walk saw was forked after its spawn was announced, so the snapshot either
//! names it or holds a spawn in progress that began no later than the
//! leader's start; a subreaper tree leaves every process that young
//! undecided until the spawn is recorded. No lock is held across a fork or
//! an exec, so a slow spawn never holds up another tree's cleanup.
//!
//! What a snapshot holds, and which tree a process belongs to when two
//! rules could claim it:
//! - a tree's own leader is its own (leaders are never adopted);
//! - a cgroup tree's members are the processes in its leaf (the kernel says);
//! - a group tree's members are its process group and the descendants of its
//!   leader, plus those its scans have seen;
//! - a subreaper tree adopts only orphans that none of the above claims.

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    path::Path,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use super::Backend;
use crate::identity::Stat;

/// One live tree, as the other trees see it.
#[derive(Debug)]
struct Entry {
    /// The leader's pid: unique while the tree is registered, since the
    /// leader is our unreaped child until then.
    leader: i32,
    /// The process group the tree signals, with the group backend.
    group: Option<i32>,
    /// The leaf's path as `/proc/PID/cgroup` shows it (the `0::` line), with
    /// the cgroup backend.
    cgroup: Option<String>,
    /// Members the tree's scans have found, by identity.
    members: HashSet<(i32, u64)>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    /// Spawns in progress: when each began, in clock ticks since boot.
    pending: BTreeMap<u64, u64>,
    /// Bumped by every spawn announced and every tree entered.
    generation: u64,
    /// Processes a tree let go ([`Leftovers::Release`](crate::command::Leftovers::Release)),
    /// by identity: nobody's, so never adopted; forgotten once gone.
    released: BTreeSet<(i32, u64)>,
    trees: BTreeMap<u64, Entry>,
    /// Trees that have left, newest last, while their killed members may
    /// still wait unreaped (see [`Ended`]).
    ended: Vec<Arc<Ended>>,
}

/// A tree that has left the registry (its leader reaped), as the others
/// still see it: the members it killed may wait as zombies of this process
/// (a subreaper's, or init's) until a subreaper tree reaps them, and those
/// exits are that tree's, not the reaper's. Forgotten once no zombie of ours
/// old enough to be its member is left, or when [`MAX_ENDED`] newer ones came.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    group: Option<i32>,
    cgroup: Option<String>,
    members: HashSet<(i32, u64)>,
    /// When it left, in clock ticks since boot: its members started before.
    at: u64,
}

/// How many ended trees are remembered at most.
const MAX_ENDED: usize = 32;

static TABLE: Mutex<Table> = Mutex::new(Table {
    next: 0,
    pending: BTreeMap::new(),
    generation: 0,
    released: BTreeSet::new(),
    trees: BTreeMap::new(),
    ended: Vec::new(),
});

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A spawn in progress, announced to every scan: a process that started
/// since it began may be its leader, so no subreaper tree adopts it until
/// the spawn is recorded ([`Spawning::register`]) or dropped (it failed).
#[derive(Debug)]
pub(crate) struct Spawning {
    id: u64,
}

/// Announces a spawn; call it right before the fork.
pub(crate) fn spawning() -> Spawning {
    let mut table = table();
    let id = table.next;
    table.next += 1;
    table.generation += 1;
    table.pending.insert(id, crate::sys::boot_ticks());
    Spawning { id }
}

impl Drop for Spawning {
    fn drop(&mut self) {
        table().pending.remove(&self.id);
    }
}

impl Spawning {
    /// Records the new tree; it stays registered until the returned value is
    /// dropped (after its leader is reaped). `leaf` is its cgroup's
    /// directory, with the cgroup backend.
    pub(crate) fn register(self, leader: i32, backend: Backend, leaf: Option<&Path>) -> Live {
        let cgroup = leaf.and_then(|leaf| leaf_as_seen(leader, leaf));
        let id = self.id;
        let mut table = table();
        table.generation += 1;
        table.pending.remove(&id);
        table.trees.insert(
            id,
            Entry {
                leader,
                group: (backend == Backend::Group).then_some(leader),
                cgroup,
                members: HashSet::new(),
            },
        );
        // The entry and the end of the announcement in one step; `self`'s
        // drop then finds nothing left to withdraw.
        drop(table);
        Live { id }
    }
}

/// A registered tree; leaves the registry when dropped.
#[derive(Debug)]
pub(crate) struct Live {
    id: u64,
}

impl Live {
    /// The tree's key, for [`others`] and [`found`].
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let mut table = table();
        if let Some(entry) = table.trees.remove(&self.id) {
            if table.ended.len() == MAX_ENDED {
                table.ended.remove(0);
            }
            table.ended.push(Arc::new(Ended {
                group: entry.group,
                cgroup: entry.cgroup,
                members: entry.members,
                at: crate::sys::boot_ticks(),
            }));
        }
    }
}

/// Records the members tree `id`'s latest scan found.
pub(crate) fn found(id: u64, members: impl IntoIterator<Item = (i32, u64)>) {
    if let Some(entry) = table().trees.get_mut(&id) {
        entry.members.extend(members);
    }
}

/// The host's own helper processes (the owner-death watchdog), by identity:
/// children of the host that belong to no tree, so no subreaper tree adopts
/// them. Handed in by the layer that starts them.
static EXEMPT: Mutex<BTreeSet<(i32, u64)>> = Mutex::new(BTreeSet::new());

/// Declares `process` a helper of the host, never a tree's member.
pub(crate) fn exempt(process: (i32, u64)) {
    EXEMPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(process);
}

/// Forgets a helper that is gone.
pub(crate) fn unexempt(process: (i32, u64)) {
    EXEMPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&process);
}

/// Whether `process` is one of the host's own helpers.
pub(crate) fn is_exempt(process: (i32, u64)) -> bool {
    EXEMPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&process)
}

/// Whether something of this process may wait for its exited child `pid`
/// and want its status: a spawn in progress (its leader may not be recorded
/// yet), a live tree (its leader, reaped by its supervisor through its
/// pidfd), or a helper of the host.
pub(crate) fn waits_for(pid: i32) -> bool {
    let busy = {
        let table = table();
        !table.pending.is_empty() || table.trees.values().any(|entry| entry.leader == pid)
    };
    busy || EXEMPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .any(|&(helper, _)| helper == pid)
}

/// Records processes a tree let go: no tree adopts them while they run.
pub(crate) fn released(processes: impl IntoIterator<Item = (i32, u64)>) {
    table().released.extend(processes);
}

/// Forgets released processes that `table` (a whole walk) does not hold,
/// and ended trees none of whose members can still wait in it as our zombie.
pub(crate) fn forget_gone(table: &[Stat]) {
    let mut registry = self::table();
    if !registry.released.is_empty() {
        let running: HashSet<(i32, u64)> = table.iter().map(|s| (s.pid, s.start_time)).collect();
        registry.released.retain(|p| running.contains(p));
    }
    if !registry.ended.is_empty() {
        let me = crate::sys::getpid();
        registry.ended.retain(|ended| {
            table
                .iter()
                .any(|s| s.ppid == me && !s.is_running() && s.start_time <= ended.at)
        });
    }
}

/// What every tree but `id` holds now.
pub(crate) fn others(id: Option<u64>) -> Others {
    snapshot(&table(), id)
}

/// Takes a new snapshot into `others` if a spawn was announced or a tree
/// entered since it was taken.
pub(crate) fn renew(others: &mut Others, id: Option<u64>) {
    let table = table();
    if table.generation != others.generation {
        *others = snapshot(&table, id);
    }
}

fn snapshot(table: &Table, id: Option<u64>) -> Others {
    let mut others = Others {
        generation: table.generation,
        spawning_since: table.pending.values().min().copied(),
        ended: table.ended.clone(),
        ..Others::default()
    };
    others.members.extend(table.released.iter().copied());
    let mut leaders = HashSet::new();
    for (_, entry) in table.trees.iter().filter(|(k, _)| Some(**k) != id) {
        leaders.insert(entry.leader);
        others.groups.extend(entry.group);
        others.cgroups.extend(entry.cgroup.clone());
        others.members.extend(entry.members.iter().copied());
    }
    others.leaders = Arc::new(leaders);
    others
}

/// Every live tree's leader, this one's included, cached until a spawn is
/// announced or a tree enters or leaves: what a process-group tree needs of
/// the others (their leaders are never its members), at no cost per scan.
pub(crate) fn leaders() -> Others {
    /// The leaders as of (generation, number of trees).
    type Cached = Option<((u64, usize), Arc<HashSet<i32>>)>;
    static CACHE: Mutex<Cached> = Mutex::new(None);
    let table = table();
    let key = (table.generation, table.trees.len());
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let leaders = match &*cache {
        Some((cached, leaders)) if *cached == key => Arc::clone(leaders),
        _ => {
            let leaders: Arc<HashSet<i32>> =
                Arc::new(table.trees.values().map(|entry| entry.leader).collect());
            *cache = Some((key, Arc::clone(&leaders)));
            leaders
        }
    };
    Others {
        generation: table.generation,
        leaders,
        ..Others::default()
    }
}

/// What the other live trees of this process hold, at one moment: a plain
/// value, so the membership rules that take it stay pure.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Others {
    /// The registry's generation when the snapshot was taken.
    generation: u64,
    /// When the oldest spawn in progress began (clock ticks since boot):
    /// a process that started since may be its leader, not yet recorded.
    pub(crate) spawning_since: Option<u64>,
    /// Their leaders' pids.
    pub(crate) leaders: Arc<HashSet<i32>>,
    /// The process groups of the group-backed ones.
    pub(crate) groups: HashSet<i32>,
    /// The members their scans found, and the processes trees let go, by
    /// identity.
    pub(crate) members: HashSet<(i32, u64)>,
    /// The leaves of the cgroup-backed ones, as `/proc/PID/cgroup` shows them.
    pub(crate) cgroups: Vec<String>,
    /// The trees that have left, whose killed members may still wait
    /// unreaped.
    ended: Vec<Arc<Ended>>,
}

impl Others {
    /// Whether `s` started since a spawn in progress began, so may be its
    /// leader (or the leader's child), not yet recorded: nobody's to judge
    /// until the next snapshot. A tick of margin for the rounding of both
    /// clocks.
    pub(crate) fn may_be_spawning(&self, s: &Stat) -> bool {
        self.spawning_since
            .is_some_and(|since| s.start_time + 1 >= since)
    }

    /// Whether `s` is another tree's leader.
    pub(crate) fn is_leader(&self, s: &Stat) -> bool {
        self.leaders.contains(&s.pid)
    }

    /// Whether another tree claims `s` by what its entry alone shows: its
    /// leader, its process group, or a member its scans found.
    pub(crate) fn claims(&self, s: &Stat) -> bool {
        self.is_leader(s) || self.group_claims(s)
    }

    /// Whether a group-backed tree claims `s`: it is in its process group,
    /// or its scans found it (a `setsid` child seen while still connected).
    fn group_claims(&self, s: &Stat) -> bool {
        self.groups.contains(&s.pgid) || self.members.contains(&(s.pid, s.start_time))
    }

    /// Like [`Others::claims`], and also a process inside another tree's
    /// leaf cgroup; `cgroup_of` says where a pid is (asked only when a
    /// cgroup tree runs and nothing else claims `s`).
    pub(crate) fn claims_with(&self, s: &Stat, cgroup_of: CgroupOf<'_>) -> bool {
        if self.claims(s) {
            return true;
        }
        if self.cgroups.is_empty() {
            return false;
        }
        cgroup_of(s.pid).is_some_and(|path| self.cgroups.iter().any(|leaf| within(&path, leaf)))
    }

    /// Whether the exited process `s` (a zombie of ours) was a member of a
    /// tree that has left: in its process group, found by its scans, or in
    /// its leaf (removed by now, which `/proc/PID/cgroup` marks
    /// `(deleted)`), and older than its end. Reaping it is no exit of the
    /// reaper's tree.
    pub(crate) fn ended_claims(&self, s: &Stat, cgroup_of: CgroupOf<'_>) -> bool {
        if s.is_running() {
            return false;
        }
        let mut path: Option<Option<String>> = None;
        self.ended.iter().any(|ended| {
            s.start_time <= ended.at
                && (ended.group == Some(s.pgid)
                    || ended.members.contains(&(s.pid, s.start_time))
                    || ended.cgroup.as_deref().is_some_and(|leaf| {
                        path.get_or_insert_with(|| cgroup_of(s.pid))
                            .as_deref()
                            .is_some_and(|path| within(path.trim_end_matches(" (deleted)"), leaf))
                    }))
        })
    }
}

/// Whether the cgroup `path` is `leaf` or below it.
fn within(path: &str, leaf: &str) -> bool {
    path == leaf
        || path
            .strip_prefix(leaf)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The leaf as `/proc/PID/cgroup` names it, read from the leader's entry
/// (it runs in the leaf), and checked against the leaf's directory: a line
/// that named some other cgroup would have other trees leave alone every
/// process in it.
fn leaf_as_seen(leader: i32, leaf: &Path) -> Option<String> {
    // `leader` numbers the leader in our PID namespace; a `/proc` of another
    // namespace names someone else by it. No tree is scanned there (see
    // `contain::scannable`), so none needs to tell.
    if !crate::sys::proc_is_own_namespace() {
        return None;
    }
    let seen = cgroup_of(leader)?;
    let relative = seen.trim_start_matches('/');
    if !relative.is_empty() && leaf.ends_with(relative) {
        return Some(seen);
    }
    tracing::warn!(
        leader,
        leaf = %leaf.display(),
        seen,
        "the leader is not in its leaf: other trees cannot tell its processes"
    );
    None
}

/// Where a pid is: its cgroup v2 path, as [`cgroup_of`] reads it.
pub(crate) type CgroupOf<'a> = &'a dyn Fn(i32) -> Option<String>;

/// The cgroup v2 path of `pid` (the `0::` line of `/proc/PID/cgroup`).
pub(crate) fn cgroup_of(pid: i32) -> Option<String> {
    let text = crate::identity::read_small_text(&format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::tests::stat;

    fn made_up() -> Others {
        Others {
            generation: 0,
            spawning_since: None,
            leaders: Arc::new([300, 400].into()),
            groups: [400].into(),
            members: [(501, 70)].into(),
            cgroups: vec!["/corral/leaf-1".to_owned()],
            ended: Vec::new(),
        }
    }

    #[test]
    fn other_trees_claim_their_leaders_groups_members_and_leaves() {
        let others = made_up();
        let leaves = |pid| match pid {
            600 => Some("/corral/leaf-1".to_owned()),
            601 => Some("/corral/leaf-1/inner".to_owned()),
            602 => Some("/corral/leaf-10".to_owned()),
            _ => Some("/user.slice".to_owned()),
        };
        let claimed = |s: &Stat| others.claims_with(s, &leaves);
        assert!(claimed(&stat(300, 100, 100, 60)), "a leader");
        assert!(claimed(&stat(401, 100, 400, 61)), "in a group");
        assert!(
            claimed(&stat(501, 100, 501, 70)),
            "a member found by a scan"
        );
        assert!(!claimed(&stat(501, 100, 501, 71)), "its pid reused");
        assert!(claimed(&stat(600, 100, 600, 72)), "in a leaf");
        assert!(claimed(&stat(601, 100, 601, 72)), "below a leaf");
        assert!(
            !claimed(&stat(602, 100, 602, 72)),
            "a leaf with a longer name"
        );
        assert!(!claimed(&stat(603, 100, 603, 72)), "nobody's");
    }

    #[test]
    fn a_tree_does_not_see_itself_and_leaves_when_dropped() {
        let a = spawning().register(5_000_001, Backend::Subreaper, None);
        let b = spawning().register(5_000_002, Backend::Group, None);
        found(b.id(), [(5_000_003, 5)]);
        let seen_by_a = others(Some(a.id()));
        assert!(seen_by_a.leaders.contains(&5_000_002));
        assert!(!seen_by_a.leaders.contains(&5_000_001));
        assert!(seen_by_a.groups.contains(&5_000_002));
        assert!(seen_by_a.members.contains(&(5_000_003, 5)));
        drop(b);
        assert!(!others(Some(a.id())).leaders.contains(&5_000_002));
        assert!(others(None).leaders.contains(&5_000_001));
        drop(a);
    }

    #[test]
    fn an_ended_tree_still_claims_the_zombies_it_left_until_they_are_reaped() {
        let zombie = |pid, pgid, start_time| Stat {
            state: 'Z',
            ..stat(pid, crate::sys::getpid(), pgid, start_time)
        };
        let group = spawning().register(5_000_021, Backend::Group, None);
        found(group.id(), [(5_000_023, 3)]);
        let cgroup = spawning().register(5_000_024, Backend::Cgroup, None);
        table()
            .trees
            .get_mut(&cgroup.id())
            .expect("registered")
            .cgroup = Some("/corral/leaf-9".to_owned());
        let leaves = |pid| match pid {
            5_000_025 => Some("/corral/leaf-9 (deleted)".to_owned()),
            5_000_026 => Some("/corral/leaf-90 (deleted)".to_owned()),
            _ => Some("/user.slice".to_owned()),
        };
        let in_group = zombie(5_000_022, 5_000_021, 2);
        let found_member = zombie(5_000_023, 5_000_023, 3);
        let in_leaf = zombie(5_000_025, 5_000_025, 4);
        assert!(
            !others(None).ended_claims(&in_group, &leaves),
            "a live tree's zombies are claimed as its own, not as an ended tree's"
        );
        drop(group);
        drop(cgroup);
        let seen = others(None);
        assert!(seen.ended_claims(&in_group, &leaves), "in its group");
        assert!(
            seen.ended_claims(&found_member, &leaves),
            "found by its scans"
        );
        assert!(seen.ended_claims(&in_leaf, &leaves), "in its removed leaf");
        assert!(
            !seen.ended_claims(&zombie(5_000_026, 5_000_026, 4), &leaves),
            "a leaf with a longer name"
        );
        assert!(
            !seen.ended_claims(&stat(5_000_022, 1, 5_000_021, 2), &leaves),
            "running: not a zombie it left"
        );
        let younger = crate::sys::boot_ticks() + 1_000;
        assert!(
            !seen.ended_claims(&zombie(5_000_027, 5_000_021, younger), &leaves),
            "started after the tree ended"
        );
        forget_gone(std::slice::from_ref(&in_group));
        assert!(others(None).ended_claims(&in_group, &leaves), "one is left");
        forget_gone(&[]);
        assert!(
            !others(None).ended_claims(&in_group, &leaves),
            "none left: forgotten"
        );
    }

    #[test]
    fn no_more_than_max_ended_trees_are_remembered() {
        for leader in 5_000_100..5_000_100 + 2 * MAX_ENDED as i32 {
            drop(spawning().register(leader, Backend::Group, None));
        }
        assert_eq!(table().ended.len(), MAX_ENDED);
        assert_eq!(
            table().ended.last().and_then(|ended| ended.group),
            Some(5_000_099 + 2 * MAX_ENDED as i32),
            "the newest are kept"
        );
    }

    #[test]
    fn released_processes_are_claimed_until_a_walk_misses_them() {
        released([(5_000_011, 7), (5_000_012, 8)]);
        let members = others(None).members;
        assert!(members.contains(&(5_000_011, 7)) && members.contains(&(5_000_012, 8)));
        forget_gone(&[stat(5_000_011, 1, 5_000_011, 7)]);
        let members = others(None).members;
        assert!(members.contains(&(5_000_011, 7)), "still running");
        assert!(!members.contains(&(5_000_012, 8)), "gone: forgotten");
        forget_gone(&[]);
    }
}
