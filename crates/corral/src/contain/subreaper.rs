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
};
use crate::{
    identity::{self, Stat},
    sys,
};

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether a subreaper-backed tree holds the role now.
pub(crate) fn claimed() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

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
        let preexisting = our_children();
        Ok(Self {
            preexisting,
            was_subreaper,
        })
    }
}

/// This process's children, as (pid, start time): from its threads'
/// `children` files, a look at this process alone, where the kernel has
/// them and no thread came or went while they were read (a thread's end
/// moves its children to another thread, which a reading between the two
/// could miss); from a walk of `/proc` otherwise. None at all, without a
/// look, when the kernel says this process has no child (one `waitid`: an
/// embedding host that spawns one tree at a time has none between them).
fn our_children() -> Vec<(i32, u64)> {
    if !sys::has_children() {
        return Vec::new();
    }
    let me = sys::getpid();
    let threads = || {
        std::fs::read_dir("/proc/self/task").map(|tasks| {
            let mut ids: Vec<_> = tasks.flatten().map(|task| task.file_name()).collect();
            ids.sort();
            ids
        })
    };
    let before = threads();
    let children = identity::children(me);
    let after = threads();
    match (children, before, after) {
        (Some(children), Ok(before), Ok(after)) if before == after => children
            .into_iter()
            .filter_map(|pid| identity::read_stat(pid).ok())
            .filter(|s| s.ppid == me)
            .map(|s| (s.pid, s.start_time))
            .collect(),
        _ => identity::all_processes()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.ppid == me)
            .map(|s| (s.pid, s.start_time))
            .collect(),
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
        let mut rule = Self::for_leader(leader.pid, leader.start_time, &claim);
        rule.claim = Some(claim);
        rule
    }

    /// The rule for the leader `pid` that started at `start_time` (our
    /// unreaped child), before it is held as a [`Leader`]; the claim stays
    /// with its owner.
    pub(crate) fn for_leader(pid: i32, start_time: u64, claim: &Claim) -> Self {
        Self {
            me: sys::getpid(),
            leader: pid,
            leader_start: start_time,
            preexisting: claim.preexisting.clone(),
            claim: None,
        }
    }

    /// The leader's pid.
    pub(crate) fn leader(&self) -> i32 {
        self.leader
    }

    /// Whether this process is an orphan that re-parented to us since the
    /// leader started: ours unless another tree of this process claims it.
    fn is_orphan(&self, s: &Stat) -> bool {
        s.ppid == self.me
            && s.pid != self.leader
            && s.start_time >= self.leader_start
            && !self.preexisting.contains(&(s.pid, s.start_time))
            && !super::registry::is_exempt((s.pid, s.start_time))
    }

    /// Whether this process is an orphan of the tree that re-parented to us:
    /// an orphan that no other live tree claims (its leader, a process of its
    /// group or its leaf, a member its scans found). Decided from its own
    /// entry alone, so a walk can act on it at sight; `cgroup_of` says which
    /// cgroup a pid is in (see [`Others::claims_with`]).
    pub(crate) fn is_adopted(&self, s: &Stat, others: &Others, cgroup_of: CgroupOf<'_>) -> bool {
        self.is_orphan(s) && !others.may_be_spawning(s) && !others.claims_with(s, cgroup_of)
    }

    /// How many running orphans no one claims yet but that may be a tree
    /// being spawned right now: not ours to signal, and not proof that the
    /// tree is empty, until the spawn is recorded.
    pub(crate) fn undecided(
        &self,
        table: &[Stat],
        others: &Others,
        cgroup_of: CgroupOf<'_>,
    ) -> usize {
        if others.spawning_since.is_none() {
            return 0;
        }
        table
            .iter()
            .filter(|s| s.is_running() && self.is_orphan(s) && others.may_be_spawning(s))
            .filter(|s| !others.claims_with(s, cgroup_of))
            .count()
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
        let mut members = identity::descendants(table, &roots);
        members.retain(|s| s.pid == self.leader || !others.claims(s));
        members
    }

    /// Reaps orphans that have exited, whoever's they were: a zombie is no
    /// tree's member, and only we can reap it. Never another tree's leader,
    /// whose supervisor wants its status, nor our own (the same). Returns
    /// the reaped that were ours, by identity: not those of a live tree,
    /// nor those a tree that has ended killed and left unreaped (counted as
    /// ours, they would make an empty tree look busy and get it signalled).
    pub(crate) fn reap_adopted(
        &self,
        table: &[Stat],
        others: &Others,
        cgroup_of: CgroupOf<'_>,
    ) -> Vec<(i32, u64)> {
        let mut reaped = Vec::new();
        let zombies = table
            .iter()
            .filter(|s| !s.is_running() && self.is_orphan(s) && !others.is_leader(s))
            .filter(|s| !others.may_be_spawning(s));
        for zombie in zombies {
            let ours =
                !others.claims_with(zombie, cgroup_of) && !others.ended_claims(zombie, cgroup_of);
            match sys::reap(zombie.pid) {
                Ok(true) if ours => reaped.push((zombie.pid, zombie.start_time)),
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
    use crate::identity::tests::stat;

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
        others.leaders = std::sync::Arc::new([110, 120].into());
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

    /// A spawn in progress (announced, its leader not yet recorded): a
    /// direct child of the host that started since is nobody's yet, neither
    /// adopted nor reaped, and keeps the tree from being judged empty; an
    /// older orphan is ours as usual.
    #[test]
    fn orphans_younger_than_a_spawn_in_progress_wait() {
        let table = vec![
            stat(100, 1, 100, 10),   // us
            stat(101, 100, 100, 50), // our leader
            stat(103, 100, 103, 52), // our orphan, from before the spawn began
            stat(110, 100, 100, 60), // maybe the new leader, not yet recorded
            stat(111, 110, 100, 61), // its child
        ];
        let mut others = Others::default();
        others.spawning_since = Some(60);
        let rule = rule(100, 101, 50);
        let mut pids: Vec<i32> = rule
            .members(&table, &others, &|_| None)
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![101, 103]);
        assert_eq!(rule.undecided(&table, &others, &|_| None), 1);
        others.spawning_since = None;
        assert_eq!(rule.undecided(&table, &others, &|_| None), 0);
    }

    /// With real processes: a direct child of the host forked after a spawn
    /// was announced may be that spawn's leader. A subreaper tree's signal
    /// never reaches it, and the tree is not judged empty while it runs,
    /// until the spawn is recorded (then it is another tree's) or withdrawn
    /// (then it is an ordinary orphan, adopted).
    #[test]
    fn a_spawn_in_progress_is_neither_signalled_nor_taken_for_gone() {
        use crate::{
            contain::{
                Backend, registry,
                scan::{Rule as ScanRule, ScannedTree},
            },
            signal::Signal,
        };
        let sleep = || {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("sleep")
        };
        let identity = |child: &std::process::Child| {
            let pid = child.id() as i32;
            (pid, identity::read_stat(pid).expect("stat").start_time)
        };
        // A signal is delivered asynchronously: look a moment later.
        let running = |(pid, start): (i32, u64)| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            identity::read_stat(pid).is_ok_and(|s| s.start_time == start && s.is_running())
        };
        let claim = Claim::acquire().expect("the subreaper role");
        let mut leader = sleep();
        let (leader_pid, leader_start) = identity(&leader);
        let rule = Rule {
            me: sys::getpid(),
            leader: leader_pid,
            leader_start,
            preexisting: claim.preexisting.clone(),
            claim: Some(claim),
        };
        let mut tree = ScannedTree::new(ScanRule::Subreaper(rule), None);
        // Each spawn starts no earlier than the announcement's clock tick.
        let announced = registry::spawning();
        let mut theirs = sleep();
        let their_id = identity(&theirs);
        let mut outcome = Vec::new();
        let _ = tree.signal(Signal::TERM);
        outcome.push(("announced: not signalled", running(their_id)));
        outcome.push((
            "announced: the tree is not empty",
            !tree.is_empty().unwrap_or(true),
        ));
        let live = announced.register(their_id.0, Backend::Group, None);
        let _ = tree.signal(Signal::TERM);
        outcome.push(("recorded: not signalled", running(their_id)));
        drop(live);
        let second = registry::spawning();
        let mut late = sleep();
        let late_id = identity(&late);
        drop(second);
        let _ = tree.signal(Signal::TERM);
        outcome.push(("withdrawn: an orphan of ours, signalled", !running(late_id)));
        for child in [&mut leader, &mut theirs, &mut late] {
            let _ = child.kill();
            let _ = child.wait();
        }
        tree.close();
        for (what, held) in outcome {
            assert!(held, "{what}");
        }
    }

    /// The children a claim holds as preexisting are all of this
    /// process's, whichever thread started them, and those of a thread
    /// that has ended too (the kernel moved them to another thread): each
    /// one missed could be taken for a member of the next tree and killed.
    #[test]
    fn our_children_are_every_threads_children() {
        use std::process::Command;
        let spawn_on_a_thread = |keep_thread: bool| {
            let (sender, receiver) = std::sync::mpsc::channel();
            let (stop, stopped) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                let child = Command::new("sleep").arg("30").spawn().expect("sleep");
                sender.send(child).expect("the child");
                if keep_thread {
                    let _ = stopped.recv();
                }
            });
            let child = receiver.recv().expect("the child");
            let thread = if keep_thread {
                Some(thread)
            } else {
                thread.join().expect("the thread");
                None
            };
            (child, thread, stop)
        };
        let mut here = Command::new("sleep").arg("30").spawn().expect("sleep");
        let (mut on_a_live_thread, live_thread, stop) = spawn_on_a_thread(true);
        let (mut of_an_ended_thread, _, _) = spawn_on_a_thread(false);
        let found = our_children();
        let me = sys::getpid();
        let mut missed = Vec::new();
        for (what, child) in [
            ("started here", &mut here),
            ("started on a live thread", &mut on_a_live_thread),
            ("started on a thread that ended", &mut of_an_ended_thread),
        ] {
            let pid = child.id() as i32;
            let start = identity::read_stat(pid).expect("stat").start_time;
            if !found.contains(&(pid, start)) {
                missed.push(what);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(stop);
        if let Some(thread) = live_thread {
            thread.join().expect("the live thread");
        }
        for (pid, _) in &found {
            if let Ok(stat) = identity::read_stat(*pid) {
                assert_eq!(stat.ppid, me, "{pid} is not our child");
            }
        }
        assert!(
            missed.is_empty(),
            "missed the children {missed:?} in {found:?}"
        );
    }

    /// With real processes: a tree that has ended (here a process group
    /// whose leader is reaped) leaves a member that re-parented to us as a
    /// zombie. A subreaper tree reaps it, but not as an exit of its own:
    /// counted so, it made an empty tree look busy, and the tree was
    /// signalled with nothing left (docs/flakes.md (21)).
    #[test]
    fn a_zombie_an_ended_tree_left_is_reaped_but_not_counted() {
        use std::{
            io::BufRead,
            os::unix::process::CommandExt,
            process::{Command, Stdio},
            time::{Duration, Instant},
        };

        use crate::{backend::Backend, contain::registry};
        let claim = Claim::acquire().expect("the subreaper role");
        let mut leader = Command::new("sleep").arg("30").spawn().expect("sleep");
        let leader_pid = leader.id() as i32;
        let rule = Rule {
            me: sys::getpid(),
            leader: leader_pid,
            leader_start: identity::read_stat(leader_pid).expect("stat").start_time,
            preexisting: claim.preexisting.clone(),
            claim: Some(claim),
        };
        let announced = registry::spawning();
        let mut theirs = Command::new("sh")
            .args(["-c", "(exec sleep 0.2) & echo $!"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let live = announced.register(theirs.id() as i32, Backend::Group, None);
        let mut line = String::new();
        std::io::BufReader::new(theirs.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the orphan's pid");
        let orphan: i32 = line.trim().parse().expect("a pid");
        theirs.wait().expect("their leader reaped");
        drop(live);
        let deadline = Instant::now() + Duration::from_secs(10);
        let zombie = loop {
            let stat = identity::read_stat(orphan).expect("the orphan waits for us");
            if !stat.is_running() {
                break stat;
            }
            assert!(Instant::now() < deadline, "the orphan did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(zombie.ppid, sys::getpid(), "re-parented to us");
        let table = identity::all_processes().expect("/proc");
        let reaped = rule.reap_adopted(&table, &registry::others(None), &registry::cgroup_of);
        let still_there =
            identity::read_stat(orphan).is_ok_and(|s| s.start_time == zombie.start_time);
        let _ = leader.kill();
        let _ = leader.wait();
        drop(rule);
        assert!(!still_there, "the zombie was reaped");
        assert!(
            reaped.is_empty(),
            "counted as the tree's own exits: {reaped:?}"
        );
    }
}
