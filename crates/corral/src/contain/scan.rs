//! Trees found by walking `/proc`: the subreaper and process-group backends.
//!
//! Membership is a pure rule over a snapshot of the process table (so it is
//! unit-tested on made-up tables); signals go to members by identity (pidfd
//! plus start time), and emptiness is polled, since no kernel notification
//! exists for "no process matches this rule".

use std::{
    collections::{HashMap, HashSet},
    io,
    os::fd::{AsFd, OwnedFd},
    sync::{
        OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

use super::{
    group,
    nested::Nested,
    orphaned,
    registry::{self, Others},
    subreaper, walker,
};
use crate::{
    identity::ProcessInfo,
    identity::{self, Delivery, Held, ProcessTable, Stat},
    signal::Signal,
    sys,
};

/// How often emptiness is re-checked while waiting: starts fast, backs off.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(20);
/// How often a kill walks `/proc` again while members it found are dying.
const KILL_WALK_EVERY: Duration = Duration::from_millis(50);
/// How old a shared walk a re-scan of a running tree may use.
const REFRESH_SHARE: Duration = Duration::from_millis(200);
/// How long a kill spends at most stopping the tree to a fixed point (see
/// [`ScannedTree::freeze`]) before it kills what it has stopped anyway: a
/// member stuck in the kernel, or a `vfork` parent whose child was stopped
/// before its `exec`, never shows the stopped state.
const FREEZE_FOR: Duration = Duration::from_millis(250);

/// How many times at most [`ScannedTree::chase_hoppers`] reads this
/// process's children again in one pass while it keeps finding members.
const CHASE_ROUNDS: usize = 64;
/// How long one chase takes at most: it runs between two awaits of the kill
/// loop, and a tree that keeps forking faster than it is reaped (thousands
/// of zombies of ours to read) must not hold the runtime past the final
/// bound; the kill loop chases again on its next pass.
const CHASE_FOR: Duration = Duration::from_millis(10);
/// How many members at most one child of ours and what it forked give the
/// chase in one reading (a hopper's line is short; a tree below one child
/// is the walk's).
const CHASE_DEPTH_MEMBERS: usize = 8;

/// Processes by identity: (pid, start time).
type Identities = HashSet<(i32, u64)>;

/// Members held by a checked pidfd (see [`identity::hold_verified`]).
type Pidfds = HashMap<(i32, u64), Kept>;

/// How long [`ScannedTree::kill_now`] waits for a member it stopped to show
/// it has.
const KILL_NOW_STOP_BOUND: Duration = Duration::from_millis(250);

/// How many pidfds the trees of this process keep at once while they are
/// killed: a quarter of the descriptors it may open (the rest is the
/// program's), whatever the number of trees dying together. Members beyond
/// it are checked and signalled as before, with a pidfd closed at once.
fn hold_cap() -> usize {
    static CAP: OnceLock<usize> = OnceLock::new();
    *CAP.get_or_init(|| {
        sys::open_files_limit().map_or(usize::MAX, |limit| {
            usize::try_from(limit / 4).unwrap_or(usize::MAX)
        })
    })
}

/// How many pidfds are kept now, by every tree of this process.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// A pidfd kept by a tree, counted against [`hold_cap`] while it lives.
#[derive(Debug)]
struct Kept(OwnedFd);

impl Kept {
    /// Keeps `pidfd` if the cap allows, else hands it back.
    fn new(pidfd: OwnedFd) -> Result<Self, OwnedFd> {
        if KEPT.fetch_add(1, Ordering::SeqCst) < hold_cap() {
            Ok(Self(pidfd))
        } else {
            KEPT.fetch_sub(1, Ordering::SeqCst);
            Err(pidfd)
        }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        KEPT.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AsFd for Kept {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// How many more pidfds may be kept now.
fn hold_room() -> usize {
    hold_cap().saturating_sub(KEPT.load(Ordering::SeqCst))
}

/// How a member is reached by a signal.
enum Route {
    /// Through the pidfd the tree holds for it.
    Held,
    /// Through a pidfd just opened and checked.
    Fresh(OwnedFd),
    /// No pidfd could be kept (none in this kernel, or no descriptor left):
    /// checked and signalled in one step, as [`identity::signal_verified`]
    /// does.
    Unheld,
}

/// Which processes belong to the tree.
#[derive(Debug)]
pub(crate) enum Rule {
    Subreaper(subreaper::Rule),
    Group(group::Rule),
    /// A tree rebuilt from its record, whose owner is gone.
    Recorded(orphaned::Rule),
}

impl Rule {
    fn members(&self, table: &ProcessTable, others: &Others) -> Vec<Stat> {
        match self {
            Rule::Subreaper(rule) => rule.members(table, others, &registry::cgroup_of),
            Rule::Group(rule) => rule.members(table, others),
            Rule::Recorded(rule) => rule.members(table),
        }
    }

    /// Whether a process once found stays out of the tree: another tree now
    /// claims it. A subreaper's adoption yields to every other claim; a
    /// group's holds against all but another tree's leader.
    fn disowns(&self, stat: &Stat, others: &Others) -> bool {
        match self {
            Rule::Subreaper(_) => others.claims(stat),
            Rule::Group(rule) => stat.pid != rule.leader() && others.is_leader(stat),
            Rule::Recorded(_) => false,
        }
    }

    /// Signals the members the kernel can reach without naming them (a
    /// process group); returns whether that part applied.
    fn signal_wholesale(&self, signal: Signal) -> io::Result<()> {
        match self {
            Rule::Subreaper(_) | Rule::Recorded(_) => Ok(()),
            Rule::Group(rule) => rule.signal_group(signal),
        }
    }

    /// The process group a group-wide signal reaches, if any.
    fn group_id(&self) -> Option<i32> {
        match self {
            Rule::Group(rule) => Some(rule.leader()),
            Rule::Subreaper(_) | Rule::Recorded(_) => None,
        }
    }

    /// Whether one `/proc` entry is a member without looking at the rest of
    /// the table: a subreaper's adopted orphans. Such a member is signalled
    /// the moment the walk reads it.
    fn member_at_sight(&self, stat: &Stat, others: &Others) -> bool {
        match self {
            Rule::Subreaper(rule) => {
                stat.is_running() && rule.is_adopted(stat, others, &registry::cgroup_of)
            }
            Rule::Group(_) | Rule::Recorded(_) => false,
        }
    }

    /// Whether one `/proc` entry is a member by what the walk has read so
    /// far: a subreaper tree's leader, a member once found, or a child of a
    /// process judged one earlier in the walk (`/proc` lists pids in order,
    /// and a child's pid mostly follows its parent's), unless another tree
    /// claims it. Every such process is a member by [`Rule::members`] too;
    /// the rest are judged after the walk. Such a member is signalled the
    /// moment the walk reads it, so its death overlaps the rest of the walk.
    fn linked_at_sight(
        &self,
        stat: &Stat,
        seen: &HashSet<i32>,
        known: &Identities,
        others: &Others,
    ) -> bool {
        match self {
            Rule::Subreaper(rule) => {
                stat.is_running()
                    && (stat.pid == rule.leader()
                        || seen.contains(&stat.ppid)
                        || known.contains(&(stat.pid, stat.start_time)))
                    && !others.claims(stat)
            }
            Rule::Group(_) | Rule::Recorded(_) => false,
        }
    }

    /// Processes that may be members but cannot be told yet (a subreaper's
    /// orphans as young as a spawn in progress).
    fn undecided(&self, table: &[Stat], others: &Others) -> usize {
        match self {
            Rule::Subreaper(rule) => rule.undecided(table, others, &registry::cgroup_of),
            Rule::Group(_) | Rule::Recorded(_) => 0,
        }
    }

    /// Housekeeping between scans (a subreaper reaps adopted zombies);
    /// returns the members found to have exited since the last scan, by
    /// identity.
    fn tidy(&self, table: &[Stat], others: &Others) -> Vec<(i32, u64)> {
        match self {
            Rule::Subreaper(rule) => rule.reap_adopted(table, others, &registry::cgroup_of),
            Rule::Group(_) | Rule::Recorded(_) => Vec::new(),
        }
    }

    fn close(&mut self) {
        if let Rule::Subreaper(rule) = self {
            rule.release();
        }
    }
}

/// A tree whose members are found by scanning `/proc`.
#[derive(Debug)]
pub(crate) struct ScannedTree {
    rule: Rule,
    /// The tree's key in the registry of this process's live trees.
    live: Option<u64>,
    /// Every process once judged a member, by identity. It stays a member
    /// (with its descendants) after its parent exits and the rule alone would
    /// lose it, e.g. a `setsid` child once the group leader has died.
    known: Identities,
    /// Members the last scan found exited (adopted zombies). A process that
    /// forks and exits over and over ("hops") can be missed by every walk,
    /// but each hop leaves such a zombie: while they keep coming, the tree is
    /// not empty.
    exited: usize,
    /// Whether, since the tree was first signalled, a member exited that no
    /// walk had seen running: the trail of a process that forks and exits
    /// faster than a walk can name it, so one may have escaped unnamed,
    /// even if the tree then empties (the hopper ending by itself).
    hopped: bool,
    /// Whether the tree was signalled.
    signalled: bool,
    /// How many members signal steps left to a nested supervisor
    /// (`nested.rs`).
    left_to_inner: usize,
    /// The running members the last scan found.
    last: Vec<(i32, u64)>,
    /// Processes the last scan could not judge yet (see `Rule::undecided`).
    undecided: usize,
    /// Members sent `SIGKILL` by identity: never sent it again.
    killed: Identities,
    /// Members sent `SIGSTOP` by identity by a kill's freeze: never sent it
    /// again, and sent `SIGKILL` however the freeze ends. Boxed, as `held`.
    stopped: Box<Identities>,
    /// The serial number of the shared walk the last re-scan judged.
    absorbed: Option<u64>,
    /// Members held by a checked pidfd while the tree is killed: signalled
    /// and waited for through it (its exit makes it readable), and, with a
    /// subreaper, reaped through it, without a `/proc` read per pass. Boxed:
    /// a running tree, the common case, holds none.
    held: Box<Pidfds>,
    /// The leader, by identity.
    leader: Option<(i32, u64)>,
    /// Whether the walk that found the tree empty also reaped its zombies
    /// (a subreaper's), so that closing need not walk again.
    tidied: bool,
    /// Whether the last walk, a re-scan of this tree's own that started
    /// after every member the walk before found (the leader among them) was
    /// seen gone, found it empty (judged as `is_empty` judges): the next
    /// emptiness check takes that answer instead of walking again, as its
    /// own walk would start the same way. The cleanup's re-scan (for the
    /// watchdog) comes right before that check: after the leader's exit, a
    /// subreaper's spawn + wait walks once, not three times. Any other walk
    /// clears it.
    found_empty: bool,
    /// Whether the last kill pass reached its fixed point (see
    /// [`freeze`](Self::freeze)) and sent `SIGKILL` by identity to every
    /// member it found: then none can fork any more (the kernel fails a fork
    /// with `SIGKILL` pending), and the kill waits for their exits on their
    /// pidfds, walking again only once they are all gone (the verdict).
    killed_whole: bool,
    /// When the tree was set up (after its leader's fork).
    created: std::time::Instant,
}

impl ScannedTree {
    pub(crate) fn new(rule: Rule, live: Option<u64>) -> Self {
        Self {
            rule,
            live,
            known: HashSet::new(),
            killed: HashSet::new(),
            stopped: Box::default(),
            exited: 0,
            hopped: false,
            signalled: false,
            left_to_inner: 0,
            last: Vec::new(),
            undecided: 0,
            absorbed: None,
            held: Box::default(),
            leader: None,
            tidied: false,
            found_empty: false,
            killed_whole: false,
            created: std::time::Instant::now(),
        }
    }

    /// Names the leader: a member from the start, so that the first look at
    /// a running tree is a read of the leader's `stat`, not a walk.
    pub(crate) fn with_leader(mut self, pid: i32, start_time: u64) -> Self {
        self.leader = Some((pid, start_time));
        self.last.push((pid, start_time));
        self
    }

    fn scan(&mut self) -> io::Result<Vec<Stat>> {
        self.scan_signalling(None).map(|(members, _)| members)
    }

    /// Scans; with a signal, sends it to each member judged one at sight
    /// while the walk goes on, and returns the identities it reached. A
    /// process that forks and exits over and over ("hops") is gone by the end
    /// of a walk, but each of its steps re-parents to the subreaper and is
    /// caught this way.
    fn scan_signalling(&mut self, signal: Option<Signal>) -> io::Result<(Vec<Stat>, Identities)> {
        self.signalled |= signal.is_some();
        self.found_empty = false;
        match self.scan_signalling_holding(signal, true) {
            // Out of descriptors, the walk itself needs the ones the held
            // pidfds take (they only save work): let them go, walk again
            // without holding.
            Err(error) if sys::is_out_of_descriptors(&error) => {
                self.held.clear();
                self.scan_signalling_holding(signal, false)
            }
            scanned => scanned,
        }
    }

    /// [`scan_signalling`](Self::scan_signalling); with `hold`, keeping
    /// pidfds of what the walk reads (within the cap).
    fn scan_signalling_holding(
        &mut self,
        signal: Option<Signal>,
        hold: bool,
    ) -> io::Result<(Vec<Stat>, Identities)> {
        let mut reached = HashSet::new();
        // Only a step that lets members act on it leaves any to a nested
        // supervisor: `SIGKILL` (and a kill's `SIGSTOP`) reach every member.
        let mut nested = signal
            .filter(|&s| s != Signal::KILL && s != Signal::STOP)
            .map(|_| Nested::new());
        let left = &mut self.left_to_inner;
        let (rule, live, known) = (&self.rule, self.live, &self.known);
        let (killed, stopped, held) = (&mut self.killed, &mut *self.stopped, &mut self.held);
        // The pids judged members so far in this walk (see
        // `Rule::linked_at_sight`).
        let mut seen = HashSet::new();
        let mut others = registry::others(live);
        // A kill's walk holds what it reads by pidfd (within the cap): the
        // members among them need no second `stat` read to be signalled.
        let mut candidates: HashMap<(i32, u64), OwnedFd> = HashMap::new();
        let holding = hold && matches!(signal, Some(Signal::KILL | Signal::STOP));
        let room = std::cell::Cell::new(hold_room());
        // A pid held already needs no new pidfd: if the walk reads the held
        // process there, the held one reaches it (and if another process
        // has that pid now, one is opened and checked then).
        let held_pids: HashSet<i32> = held.keys().map(|&(pid, _)| pid).collect();
        let table = identity::walk_processes_holding(
            |pid| holding && room.get() > 0 && !held_pids.contains(&pid),
            |stat, pidfd| {
                let Some(signal) = signal else { return };
                let identity = (stat.pid, stat.start_time);
                let linked = rule.linked_at_sight(stat, &seen, known, &others);
                if linked {
                    seen.insert(stat.pid);
                }
                if already_sent(killed, stopped, identity, signal)
                    || !(linked || rule.member_at_sight(stat, &others))
                {
                    if let Some(pidfd) = pidfd
                        && !held.contains_key(&identity)
                    {
                        candidates.insert(identity, pidfd);
                        room.set(room.get().saturating_sub(1));
                    }
                    return;
                }
                // A tree spawned since the snapshot may own it: look again.
                registry::renew(&mut others, live);
                if !rule.linked_at_sight(stat, &seen, known, &others) {
                    seen.remove(&stat.pid);
                }
                if seen.contains(&stat.pid) || rule.member_at_sight(stat, &others) {
                    seen.insert(stat.pid);
                    if let Some(nested) = &mut nested
                        && nested.leaves_to_inner(stat.pid, stat.ppid, |p| seen.contains(&p))
                    {
                        *left += 1;
                        reached.insert(identity);
                        return;
                    }
                    let route = match pidfd {
                        Some(pidfd) if !held.contains_key(&identity) => Some(Route::Fresh(pidfd)),
                        _ => route_to(held, identity),
                    };
                    if send(held, (killed, stopped), identity, route, signal) {
                        reached.insert(identity);
                    }
                }
            },
        )?;
        if matches!(self.rule, Rule::Subreaper(_)) {
            registry::forget_gone(&table);
        }
        let members = self.absorb(&ProcessTable::new(table));
        for member in &members {
            let identity = (member.pid, member.start_time);
            if let Some(pidfd) = candidates.remove(&identity)
                && let Ok(kept) = Kept::new(pidfd)
            {
                self.held.insert(identity, kept);
            }
        }
        Ok((members, reached))
    }

    /// Judges membership on a walk: the running members, remembered (as
    /// `last` and in `known`) for the next judgement.
    fn absorb(&mut self, table: &ProcessTable) -> Vec<Stat> {
        let live = self.live;
        // Taken after the walk: every leader the walk saw is in it, or its
        // spawn is, still in progress (see `registry`). A group or recorded
        // tree needs only the other trees' leaders (a cached set).
        let others = match self.rule {
            Rule::Subreaper(_) => registry::others(live),
            Rule::Group(_) | Rule::Recorded(_) => registry::leaders(),
        };
        let reaped = self.rule.tidy(table, &others);
        self.exited = reaped.len();
        if self.signalled && reaped.iter().any(|who| !self.known.contains(who)) {
            self.hopped = true;
        }
        self.undecided = self.rule.undecided(table, &others);
        let mut members = self.rule.members(table, &others);
        let still_known: Vec<i32> = self
            .known
            .iter()
            .filter_map(|&(pid, start_time)| table.get(pid).filter(|s| s.start_time == start_time))
            .filter(|s| !self.rule.disowns(s, &others))
            .map(|s| s.pid)
            .collect();
        // A set, not a search of the list per process: a tree of 1,000
        // members would cost a million comparisons per walk.
        let mut listed: HashSet<i32> = members.iter().map(|m| m.pid).collect();
        for stat in table.descendants(&still_known) {
            if listed.insert(stat.pid) {
                members.push(stat);
            }
        }
        members.retain(|s| s.is_running() && !self.rule.disowns(s, &others));
        self.last = members.iter().map(|m| (m.pid, m.start_time)).collect();
        self.known.extend(self.last.iter().copied());
        if let Some(live) = live {
            registry::found(live, self.last.iter().copied());
        }
        members
    }

    /// Whether this tree judges on walks shared with the host's other trees
    /// (`walker.rs`). A subreaper tree walks on its own: it signals its
    /// adopted orphans the moment its walk reads them (there is one such
    /// tree per process, so nothing to share).
    fn shares_walks(&self) -> bool {
        !matches!(self.rule, Rule::Subreaper(_))
    }

    /// A scan on a walk that started after this call: shared with every tree
    /// that asks at about the same time.
    async fn scan_shared(&mut self) -> io::Result<Vec<Stat>> {
        if !self.shares_walks() {
            return self.scan();
        }
        let table = walker::after(std::time::Instant::now()).await?;
        Ok(self.absorb(&table))
    }

    /// Scans; returns the running members if they changed since the last
    /// scan (members that exited are dropped, new ones added).
    pub(crate) fn refresh(&mut self) -> Option<Vec<crate::identity::Identity>> {
        let before: Identities = self.last.iter().copied().collect();
        let scanned = if self.shares_walks() {
            walker::recent(REFRESH_SHARE).map(|(serial, started, table)| {
                // A walk this tree has judged already tells it nothing new,
                // nor does one from before its spawn (its leader is not in
                // it: judging it would forget the leader).
                if self.absorbed != Some(serial) && started >= self.created {
                    let judging = std::time::Instant::now();
                    self.absorb(&table);
                    self.absorbed = Some(serial);
                    walker::judged(serial, judging.elapsed());
                }
            })
        } else {
            // Its own walk: its verdict is as good as the next check's would
            // be (see `found_empty`) only if it started after every member
            // the last walk found, the leader among them, was seen gone. A
            // leader that forks and exits while the walk runs (a time limit
            // does not wait for its exit) reads as a zombie, no member, and
            // its child may come after the walk's listing.
            let all_gone = !self.a_member_still_runs();
            self.scan()
                .map(|members| self.found_empty = all_gone && self.judged_empty(&members))
        };
        if let Err(error) = scanned {
            tracing::debug!(%error, "re-scan failed");
        }
        let changed =
            before.len() != self.last.len() || self.last.iter().any(|m| !before.contains(m));
        changed.then(|| {
            self.last
                .iter()
                .map(|&(pid, start_time)| crate::identity::Identity { pid, start_time })
                .collect()
        })
    }

    /// How often a re-scan can find a new shared walk (a subreaper tree walks
    /// on its own, at once).
    pub(crate) fn refresh_cadence(&self) -> Duration {
        if self.shares_walks() {
            walker::cadence(REFRESH_SHARE)
        } else {
            Duration::ZERO
        }
    }

    /// Sends `signal` to every member: first the scan (so that a leader dying
    /// of the signal cannot disconnect its children before they are seen),
    /// then the group-wide signal where there is one, then each member by
    /// identity. A member that cannot be signalled does not stop the others.
    ///
    /// A step other than `SIGKILL` leaves the members below a nested
    /// supervisor to it (`nested.rs`).
    pub(crate) fn signal(&mut self, signal: Signal) -> io::Result<usize> {
        let before = self.left_to_inner;
        // `reached` holds the members left to a nested supervisor too: not
        // signalled again below, and not counted as delivered.
        let (members, reached) = self.scan_signalling(Some(signal))?;
        let left = self.left_to_inner - before;
        let members: Vec<Stat> = members
            .into_iter()
            .filter(|m| !reached.contains(&(m.pid, m.start_time)))
            .collect();
        Ok(reached.len() - left + self.signal_members(&members, signal)?)
    }

    /// How many members signal steps left to a nested supervisor so far.
    pub(crate) fn left_to_inner(&self) -> usize {
        self.left_to_inner
    }

    /// Signals `members` (found by a walk just before): the whole process
    /// group at once where there is one, then by identity each member the
    /// group signal did not reach. `SIGKILL` is final: a member killed by
    /// identity once is not sent it again on the next pass (a dying tree of
    /// 1,000 processes would otherwise cost 1,000 pidfds per pass), and a
    /// member still in the group when it was killed whole needs no pidfd of
    /// its own. A member killed by identity keeps its pidfd (within
    /// [`hold_cap`]): the kill then waits for its exit on it. Returns how
    /// many members were reached.
    fn signal_members(&mut self, members: &[Stat], signal: Signal) -> io::Result<usize> {
        let group = self.rule.group_id();
        let mut delivered = 0;
        // The checks first (a pidfd opened, then the start time read), while
        // nothing dies yet; then the signals in a burst. Checked one by one
        // after the group's `SIGKILL`, 333 members took 10-50 ms here: the
        // checks competed for the CPU with hundreds of dying processes.
        let mut routes = Vec::new();
        for member in members {
            let identity = (member.pid, member.start_time);
            if Some(member.pgid) == group {
                // Reached by the group signal, unless it left the group since
                // the walk: then the next pass (a cleanup goes on until the
                // walk finds nobody) signals it by identity.
                delivered += 1;
                continue;
            }
            if already_sent(&self.killed, &self.stopped, identity, signal) {
                continue;
            }
            // Within the cap, counting the pidfds opened for this burst.
            let route = if self.held.contains_key(&identity) || routes.len() < hold_room() {
                route_to(&mut self.held, identity)
            } else {
                Some(Route::Unheld)
            };
            routes.push((identity, route));
        }
        self.rule.signal_wholesale(signal)?;
        for (identity, route) in routes {
            let sent = (&mut self.killed, &mut *self.stopped);
            if send(&mut self.held, sent, identity, route, signal) {
                delivered += 1;
            }
        }
        Ok(delivered)
    }

    /// [`signal`](Self::signal), judged on a walk shared with the host's other
    /// trees (see `walker.rs`).
    /// `SIGKILL` goes to a tree stopped first (see [`freeze`](Self::freeze)).
    pub(crate) async fn signal_shared(&mut self, signal: Signal) -> io::Result<usize> {
        self.signalled = true;
        if signal == Signal::KILL {
            let until = Instant::now() + FREEZE_FOR;
            return Ok(self.freeze_and_kill(until).await?.2);
        }
        if !self.shares_walks() {
            return self.signal(signal);
        }
        let members = self.scan_shared().await?;
        let members = if signal == Signal::STOP {
            members
        } else {
            self.leave_to_inner(members)
        };
        self.signal_members(&members, signal)
    }

    /// `members` without those below a nested supervisor (`nested.rs`), for
    /// a step other than `SIGKILL`; counted in
    /// [`left_to_inner`](Self::left_to_inner).
    fn leave_to_inner(&mut self, members: Vec<Stat>) -> Vec<Stat> {
        let pids: HashSet<i32> = members.iter().map(|m| m.pid).collect();
        let mut nested = Nested::new();
        let kept = members
            .into_iter()
            .filter(|m| !nested.leaves_to_inner(m.pid, m.ppid, |p| pids.contains(&p)))
            .collect();
        self.left_to_inner += nested.delegated;
        kept
    }

    /// [`is_empty`](Self::is_empty), judged on a walk that started after
    /// the last members were seen gone, shared with the host's other trees.
    pub(crate) async fn is_empty_shared(&mut self) -> io::Result<bool> {
        if std::mem::take(&mut self.found_empty) {
            self.tidied = true;
            return Ok(true);
        }
        if self.a_member_still_runs() {
            return Ok(false);
        }
        let members = self.scan_shared().await?;
        Ok(self.verdict(&members))
    }

    /// Whether the walk found no member, and no member exited since the
    /// previous walk (the trail a hopping process leaves). While a member
    /// the last walk found still runs, the answer is no without a walk:
    /// waiting out a grace costs a `stat` read per poll, not a walk of every
    /// process on the host.
    pub(crate) fn is_empty(&mut self) -> io::Result<bool> {
        if std::mem::take(&mut self.found_empty) {
            self.tidied = true;
            return Ok(true);
        }
        if self.a_member_still_runs() {
            return Ok(false);
        }
        let members = self.scan()?;
        Ok(self.verdict(&members))
    }

    /// [`judged_empty`](Self::judged_empty) of the walk just made; a walk
    /// that found the tree empty reaped its zombies as it went (a
    /// subreaper's `tidy`, in `absorb`), so closing need not walk again.
    fn verdict(&mut self, members: &[Stat]) -> bool {
        let empty = self.judged_empty(members);
        self.tidied |= empty;
        empty
    }

    /// Empty: the walk found no member, no member was seen exiting since the
    /// previous walk (the trail a hopping process leaves), and nothing is
    /// left undecided.
    fn judged_empty(&self, members: &[Stat]) -> bool {
        members.is_empty() && !self.members_exiting() && self.undecided == 0
    }

    /// Whether a member the last walk found still runs. Members seen gone
    /// are dropped from that list as they are found, so waiting for a dying
    /// tree of N processes reads each one's `stat` about once, not N times
    /// per poll.
    fn a_member_still_runs(&mut self) -> bool {
        self.running_member().is_some()
    }

    /// A member the last walk found that still runs (a held one is asked
    /// through its pidfd, the others by their `stat`); the ones seen gone
    /// are dropped from the list on the way, and a subreaper's adopted
    /// zombies among them reaped as they are seen (`reap_exited`).
    fn running_member(&mut self) -> Option<(i32, u64)> {
        while let Some(&member) = self.last.last() {
            let running = match self.held.get(&member) {
                Some(pidfd) => !sys::pidfd_exited(pidfd.as_fd()),
                None => identity::read_stat(member.0)
                    .is_ok_and(|s| s.start_time == member.1 && s.is_running()),
            };
            if running {
                return Some(member);
            }
            self.reap_exited(member);
            self.last.pop();
        }
        None
    }

    /// Reaps `member`, seen exited, through its held pidfd if it is a
    /// subreaper's adopted zombie by now (never the leader, whose status the
    /// supervisor takes), and lets the pidfd go. While a killed tree dies,
    /// each member is reaped as its exit is seen, beside the exits still
    /// under way, rather than all of them at once in the verdict's
    /// `reap_held` (1,000 reaps there: 30-45 ms, BENCHMARKS.md section 10).
    /// One whose parent (a member) has not died yet is not our child: it is
    /// kept, for `reap_held` once it is adopted.
    fn reap_exited(&mut self, member: (i32, u64)) {
        if !matches!(self.rule, Rule::Subreaper(_)) || Some(member) == self.leader {
            return;
        }
        if let Some(pidfd) = self.held.get(&member)
            && sys::reap_pidfd(pidfd.as_fd()).unwrap_or(false)
        {
            self.held.remove(&member);
        }
    }

    /// Waits until `member` exits or `until` passes: on its pidfd (held, or
    /// opened and checked now and kept), so the wait ends the moment it
    /// dies; where no pidfd can be had, a short sleep.
    async fn wait_exit(&mut self, member: (i32, u64), until: Instant) {
        let fresh = if self.held.contains_key(&member) {
            None
        } else {
            match hold(&mut self.held, member) {
                Ok(Held::Pidfd(pidfd)) => match Kept::new(pidfd) {
                    Ok(kept) => {
                        self.held.insert(member, kept);
                        None
                    }
                    Err(pidfd) => Some(pidfd),
                },
                Ok(Held::Gone) => return,
                Err(error) => {
                    tracing::debug!(pid = member.0, %error, "no pidfd to wait on");
                    tokio::time::sleep_until(until.min(Instant::now() + POLL_MAX)).await;
                    return;
                }
            }
        };
        let pidfd = match (&fresh, self.held.get(&member)) {
            (Some(pidfd), _) => pidfd.as_fd(),
            (None, Some(kept)) => kept.as_fd(),
            (None, None) => return,
        };
        if let Err(error) = sys::pidfd_wait_until(pidfd.as_fd(), until).await {
            tracing::debug!(pid = member.0, %error, "waiting on a pidfd failed");
            tokio::time::sleep_until(until.min(Instant::now() + POLL_MAX)).await;
        }
    }

    /// Reaps, through their pidfds, the killed members that are adopted
    /// zombies by now (a subreaper's), so that the next walk neither reads
    /// nor reaps them, nor counts them as members exiting unnamed. Never the
    /// leader, whose status the supervisor takes.
    fn reap_held(&mut self) {
        if !matches!(self.rule, Rule::Subreaper(_)) {
            return;
        }
        let leader = self.leader;
        self.held.retain(|identity, pidfd| {
            Some(*identity) == leader || !sys::reap_pidfd(pidfd.as_fd()).unwrap_or(false)
        });
    }

    pub(crate) async fn wait_empty(
        &mut self,
        deadline: Instant,
        kill_late: bool,
    ) -> io::Result<bool> {
        let mut pause = POLL_MIN;
        let mut walked = Instant::now();
        loop {
            if kill_late {
                // While a member the last walk found is still dying, a new
                // walk would mostly find the same processes: wait for them
                // on their pidfds (woken by each exit, not polling), but walk
                // at least every `KILL_WALK_EVERY`, so that a process forked
                // before its parent's SIGKILL (unseen by that walk) is killed
                // on sight even while a member is stuck dying. A walk that
                // finds nobody (it started after the last member was seen
                // gone) is the verdict.
                let mut running = self.running_member();
                if running.is_none() || (!self.killed_whole && walked.elapsed() >= KILL_WALK_EVERY)
                {
                    walked = Instant::now();
                    if self.kill_pass(deadline).await? {
                        return Ok(true);
                    }
                    running = self.running_member();
                }
                if let Some(member) = running {
                    if Instant::now() >= deadline {
                        return self.is_empty_shared().await;
                    }
                    self.wait_exit(member, deadline.min(walked + KILL_WALK_EVERY))
                        .await;
                    continue;
                }
            } else if self.is_empty_shared().await? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return self.is_empty_shared().await;
            }
            tokio::time::sleep_until(deadline.min(now + pause)).await;
            // While members keep exiting (a hopping process), look again soon.
            pause = if self.members_exiting() {
                POLL_MIN
            } else {
                (pause * 2).min(POLL_MAX)
            };
        }
    }

    /// One pass of a kill: the tree stopped to a fixed point (until
    /// `deadline` at the latest), then `SIGKILL` to all of it; true if the
    /// fixed point was a walk that found the tree empty.
    async fn kill_pass(&mut self, deadline: Instant) -> io::Result<bool> {
        let until = deadline.min(Instant::now() + FREEZE_FOR);
        let (members, settled, _) = self.freeze_and_kill(until).await?;
        if settled && members.is_empty() {
            self.tidied = true;
            return Ok(true);
        }
        Ok(false)
    }

    /// Stops the tree to a fixed point, for a kill of a group or recorded
    /// tree (a subreaper's needs none: [`kill_at_sight`](Self::kill_at_sight)):
    /// `SIGSTOP` to every member by identity (a group's whole group at once,
    /// which the kernel makes atomic with `fork`), a
    /// wait until every thread of each shows the stopped state, then a new
    /// walk; until a walk that started after every member it finds was seen
    /// stopped finds no other member, none exiting and none undecided. A
    /// stopped process can neither fork nor exit (which would cut its
    /// children's parent links), and a fork under way when `SIGSTOP` came has
    /// completed once its thread shows stopped; so that walk found the whole
    /// tree, and nothing forks between it and the `SIGKILL` that follows.
    /// "Walk, then kill" without it has that window: a member forking after
    /// the walk read it and before its `SIGKILL` leaves a child no walk has
    /// seen, and a process that forks and exits over and over ("hops") can
    /// stay a step ahead of every walk.
    ///
    /// Returns the members the last walk found, and whether it was the fixed
    /// point (false once `until` passed first: a member stuck in the kernel,
    /// or one that keeps appearing).
    async fn freeze(&mut self, until: Instant) -> io::Result<(Vec<Stat>, bool)> {
        // Members seen stopped (or gone) before the current walk started.
        let mut still: Identities = HashSet::new();
        loop {
            let members = self.stop_walk().await?;
            // A member sent `SIGKILL` cannot fork either (the kernel fails a
            // fork with a fatal signal pending): only its exit is waited for.
            let new: Vec<(i32, u64)> = members
                .iter()
                .map(|m| (m.pid, m.start_time))
                .filter(|m| !still.contains(m) && !self.killed.contains(m))
                .collect();
            if new.is_empty() && !self.members_exiting() && self.undecided == 0 {
                return Ok((members, true));
            }
            for member in new {
                if !wait_stopped(member, until).await {
                    break;
                }
                still.insert(member);
            }
            if Instant::now() >= until {
                // Out of time: one more walk, so that what the members seen
                // stopped forked before they stopped is killed too.
                return Ok((self.stop_walk().await?, false));
            }
        }
    }

    /// One walk of a freeze: `SIGSTOP` to the group whole, then to each
    /// member by identity that was not sent it yet; returns the members.
    async fn stop_walk(&mut self) -> io::Result<Vec<Stat>> {
        if let Err(error) = self.rule.signal_wholesale(Signal::STOP) {
            tracing::debug!(%error, "stopping the group failed");
        }
        let members = self.scan_shared().await?;
        self.signal_members(&members, Signal::STOP)?;
        Ok(members)
    }

    /// [`freeze`](Self::freeze), then `SIGKILL` to every member the last
    /// walk found and to every process the freeze stopped (never left
    /// stopped, however the freeze ended). Returns the members, whether the
    /// freeze reached its fixed point, and how many were sent `SIGKILL`.
    /// A freeze that fails (a walk that cannot be read) still kills what it
    /// stopped before the error is returned.
    async fn freeze_and_kill(&mut self, until: Instant) -> io::Result<(Vec<Stat>, bool, usize)> {
        self.killed_whole = false;
        if matches!(self.rule, Rule::Subreaper(_)) {
            return self.kill_at_sight();
        }
        let frozen = self.freeze(until).await;
        let killed = match &frozen {
            Ok((members, _)) => self.signal_members(members, Signal::KILL),
            // The group (stopped whole) is killed whole.
            Err(_) => self.signal_members(&[], Signal::KILL),
        };
        let delivered = self.kill_stopped();
        let (members, settled) = frozen?;
        self.killed_whole = settled
            && members
                .iter()
                .all(|m| self.killed.contains(&(m.pid, m.start_time)));
        Ok((members, settled, killed? + delivered))
    }

    /// A subreaper's kill pass: `SIGKILL` by identity to each member the
    /// moment the walk reads it, with no freeze first. The freeze closes a
    /// window the subreaper does not have: a child a member forks after the
    /// walk read it and before its `SIGKILL` is re-parented to this process
    /// when that member dies (it is the subreaper), so it stays a member
    /// (adopted, started after the leader) and the next walk finds it; and
    /// that walk comes, since a pass is the verdict only if it started
    /// after every member the walks before it found was seen gone, and
    /// found nobody, nothing exiting and nothing undecided. A group's
    /// members re-parent to a process outside the tree and a recorded
    /// tree's to whatever reaps them: those are stopped first.
    /// Returns what [`freeze_and_kill`](Self::freeze_and_kill) returns.
    fn kill_at_sight(&mut self) -> io::Result<(Vec<Stat>, bool, usize)> {
        self.reap_held();
        let all_gone = !self.a_member_still_runs();
        let (chased, reaped) = self.chase_hoppers();
        let scanned = self.scan_signalling(Some(Signal::KILL));
        let (chased_after, reaped_after) = self.chase_hoppers();
        let chased = chased + chased_after;
        // A hop's zombie the chase reaped is a member that exited since the
        // walk before, as one the walk reaped would be: not an empty tree.
        self.exited += reaped + reaped_after;
        // Never left stopped: what an earlier step stopped is killed too.
        let stopped = self.kill_stopped();
        let (members, reached) = scanned?;
        let killed = self.signal_members(&members, Signal::KILL)?;
        let settled = all_gone && self.judged_empty(&members);
        Ok((members, settled, reached.len() + killed + stopped + chased))
    }

    /// Once a member exited that no walk saw running (the trail of a
    /// process that forks and exits over and over, `hopped`): `SIGKILL` to
    /// this process's own children that are members and to their children,
    /// read again until a reading finds none running. A walk lists `/proc`
    /// once and reads each entry after: a hop is gone by then and its child
    /// was not listed. But each hop's child is re-parented to this process
    /// (the subreaper) the moment its parent exits, so the live end of every
    /// chain is always a child of ours, or a child of one: two levels of
    /// `children` files, read in a few microseconds, where a hop (a fork)
    /// takes far longer. A child of ours found exited is reaped (it handed
    /// what it forked to us as it exited: the next reading lists that) and
    /// the reading goes on. Children of ours are named by pids their
    /// unreaped exits pin; their children are checked by start time before
    /// the signal, as every member is. Returns how many were sent `SIGKILL`
    /// and how many exited members were reaped.
    fn chase_hoppers(&mut self) -> (usize, usize) {
        let Rule::Subreaper(rule) = &self.rule else {
            return (0, 0);
        };
        if !self.hopped {
            return (0, 0);
        }
        let me = sys::getpid();
        let until = std::time::Instant::now() + CHASE_FOR;
        let mut others = registry::others(self.live);
        let (mut delivered, mut reaped) = (0, 0);
        'rounds: for _ in 0..CHASE_ROUNDS {
            let Some(children) = identity::children(me) else {
                break;
            };
            let mut found = 0;
            for child in children {
                if std::time::Instant::now() >= until {
                    break 'rounds;
                }
                let Ok(stat) = identity::read_stat(child) else {
                    continue;
                };
                if !stat.is_running() {
                    let gone = rule.reap_adopted(&[stat], &others, &registry::cgroup_of);
                    found += gone.len();
                    reaped += gone.len();
                    continue;
                }
                if !rule.is_adopted(&stat, &others, &registry::cgroup_of) {
                    continue;
                }
                // A tree spawned since the snapshot may own it: look again.
                registry::renew(&mut others, self.live);
                if !rule.is_adopted(&stat, &others, &registry::cgroup_of) {
                    continue;
                }
                // The child, then what it forked, then what those forked.
                let mut line = vec![(stat.pid, stat.start_time)];
                let mut next = 0;
                while next < line.len() && line.len() < CHASE_DEPTH_MEMBERS {
                    let (parent, parent_start) = line[next];
                    next += 1;
                    let below: Vec<(i32, u64)> = identity::children(parent)
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|pid| identity::read_stat(pid).ok())
                        .filter(|s| s.ppid == parent && s.is_running() && !others.claims(s))
                        .map(|s| (s.pid, s.start_time))
                        .collect();
                    // A parent is a child of ours (its pid pinned until we
                    // reap it) or one found below one; the latter is still
                    // the same process after its children's `stat` named it
                    // their parent, or they are not taken: its pid reused,
                    // they would be another process's.
                    let same = next == 1
                        || identity::read_stat(parent)
                            .is_ok_and(|s| s.start_time == parent_start && s.is_running());
                    if same {
                        line.extend(below);
                    }
                }
                for identity in line {
                    self.known.insert(identity);
                    found += 1;
                    if self.killed.contains(&identity) {
                        continue;
                    }
                    let route = route_to(&mut self.held, identity);
                    let sent = (&mut self.killed, &mut *self.stopped);
                    if send(&mut self.held, sent, identity, route, Signal::KILL) {
                        delivered += 1;
                    }
                }
            }
            if found == 0 {
                break;
            }
        }
        (delivered, reaped)
    }

    /// `SIGKILL` to every process a freeze stopped and no kill reached yet;
    /// how many.
    fn kill_stopped(&mut self) -> usize {
        let left: Vec<(i32, u64)> = self
            .stopped
            .iter()
            .filter(|identity| !self.killed.contains(identity))
            .copied()
            .collect();
        let mut delivered = 0;
        for identity in left {
            let route = route_to(&mut self.held, identity);
            let sent = (&mut self.killed, &mut *self.stopped);
            if send(&mut self.held, sent, identity, route, Signal::KILL) {
                delivered += 1;
            }
        }
        delivered
    }

    /// How many processes the last scan could not judge (see
    /// `Rule::undecided`).
    pub(crate) fn undecided(&self) -> usize {
        self.undecided
    }

    /// Whether the last scan found members exiting: the sign of a process
    /// that forks and exits faster than a walk can name it.
    pub(crate) fn members_exiting(&self) -> bool {
        self.exited > 0
    }

    /// Whether, since the first signal, a member exited that no walk had
    /// seen running (see `hopped`).
    pub(crate) fn members_hopped(&self) -> bool {
        self.hopped
    }

    /// The running members, for the report. Where no scan can be made (out
    /// of descriptors, `/proc` unreadable), the members of the last scan
    /// that made it, as they were then: never an empty list for want of a
    /// look.
    pub(crate) fn members(&mut self) -> Vec<ProcessInfo> {
        match self.scan() {
            Ok(members) => members.iter().map(identity::describe).collect(),
            Err(error) => {
                tracing::warn!(%error, "listing the members failed: naming the last ones known");
                self.last
                    .iter()
                    .map(|&(pid, start_time)| ProcessInfo {
                        pid,
                        start_time,
                        command: format!("(not read: {error})"),
                    })
                    .collect()
            }
        }
    }

    /// `SIGKILL` to the tree without a runtime (a drop, and `end_now`:
    /// `corral reap`, the start-up sweep, the watchdog): the members a walk
    /// finds are stopped first, with what they started, to a fixed point,
    /// and only then killed (`halt.rs`), so one that forks between the walk
    /// and its kill leaves no child behind; then a killing walk as before,
    /// for what the group holds unseen.
    pub(crate) fn kill_now(&mut self) {
        if let Ok(members) = self.scan() {
            let roots: Vec<(i32, u64)> = members.iter().map(|m| (m.pid, m.start_time)).collect();
            let halted = super::halt::stop_and_kill(&roots, &|_| true, KILL_NOW_STOP_BOUND);
            self.killed
                .extend(halted.killed.iter().map(|p| (p.pid, p.start_time)));
        }
        if let Err(error) = self.signal(Signal::KILL) {
            tracing::warn!(%error, "synchronous kill failed");
        }
        self.kill_stopped();
    }

    /// `SIGKILL` to what the kernel reaches without naming it (the process
    /// group), for the end of a cleanup.
    pub(crate) fn kill_unseen(&mut self) {
        if let Err(error) = self.rule.signal_wholesale(Signal::KILL) {
            tracing::warn!(%error, "final group kill failed");
        }
    }

    pub(crate) fn close(&mut self) {
        self.held.clear();
        if matches!(self.rule, Rule::Subreaper(_))
            && !self.tidied
            && let Ok(table) = identity::all_processes()
        {
            let _ = self.rule.tidy(&table, &registry::others(self.live));
        }
        self.rule.close();
    }
}

/// Waits until every thread of the member `identity` shows the stopped
/// state (`T`, or `t` under a tracer), or it is gone or a zombie, polling
/// until `until`: whether it did.
async fn wait_stopped((pid, start_time): (i32, u64), until: Instant) -> bool {
    let mut pause = POLL_MIN;
    loop {
        match identity::read_stat(pid) {
            Ok(stat) if stat.start_time == start_time && stat.is_running() => {
                // One `stat` read for a single-threaded member (most are),
                // not a listing of its threads and a read of each.
                if super::halt::stopped_whole(&stat) {
                    return true;
                }
            }
            Ok(_) => return true,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return true,
            Err(_) => {}
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        tokio::time::sleep_until(until.min(now + pause)).await;
        pause = (pause * 2).min(POLL_MAX / 4);
    }
}

/// [`identity::hold_verified`]; out of descriptors, the tree lets go of the
/// pidfds it holds (they only save work) and tries once more.
fn hold(held: &mut Pidfds, (pid, start_time): (i32, u64)) -> io::Result<Held> {
    match identity::hold_verified(pid, start_time) {
        Err(error) if sys::is_out_of_descriptors(&error) && !held.is_empty() => {
            held.clear();
            identity::hold_verified(pid, start_time)
        }
        other => other,
    }
}

/// How `identity` can be signalled: through a pidfd already held, one just
/// opened and checked, or (none to be had) a check and a signal in one step.
/// `None` if the process is gone.
fn route_to(held: &mut Pidfds, identity: (i32, u64)) -> Option<Route> {
    if held.contains_key(&identity) {
        return Some(Route::Held);
    }
    match hold(held, identity) {
        Ok(Held::Pidfd(pidfd)) => Some(Route::Fresh(pidfd)),
        Ok(Held::Gone) => None,
        Err(error) => {
            tracing::debug!(pid = identity.0, %error, "no pidfd kept");
            Some(Route::Unheld)
        }
    }
}

/// Whether `identity` was sent `signal` by identity already and need not be
/// again: `SIGKILL` is final (and makes a `SIGSTOP` pointless), and a
/// `SIGSTOP` stays until the kill.
fn already_sent(
    killed: &Identities,
    stopped: &Identities,
    identity: (i32, u64),
    signal: Signal,
) -> bool {
    killed.contains(&identity) && matches!(signal, Signal::KILL | Signal::STOP)
        || (signal == Signal::STOP && stopped.contains(&identity))
}

/// Sends `signal` to a member along `route`; true if it was delivered. A
/// member sent `SIGKILL` or `SIGSTOP` is remembered (`sent`: the killed and
/// the stopped; never sent it again) and its pidfd kept, within
/// [`hold_cap`], to wait for its exit or to kill it.
fn send(
    held: &mut Pidfds,
    (killed, stopped): (&mut Identities, &mut Identities),
    identity: (i32, u64),
    route: Option<Route>,
    signal: Signal,
) -> bool {
    let delivery = match &route {
        None => return false,
        Some(Route::Held) => match held.get(&identity) {
            Some(pidfd) => identity::signal_held(pidfd.as_fd(), signal),
            None => identity::signal_verified(identity.0, identity.1, signal),
        },
        Some(Route::Fresh(pidfd)) => identity::signal_held(pidfd.as_fd(), signal),
        Some(Route::Unheld) => identity::signal_verified(identity.0, identity.1, signal),
    };
    match delivery {
        Ok(Delivery::Sent) => {
            let sent = match signal {
                Signal::KILL => Some(killed),
                Signal::STOP => Some(stopped),
                _ => None,
            };
            if let Some(sent) = sent {
                sent.insert(identity);
                if let Some(Route::Fresh(pidfd)) = route
                    && let Ok(kept) = Kept::new(pidfd)
                {
                    held.insert(identity, kept);
                }
            }
            true
        }
        Ok(Delivery::Gone) => false,
        Err(error) => {
            tracing::warn!(pid = identity.0, %signal, %error, "signal failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However many trees die at once, the pidfds they keep stay within a
    /// quarter of the descriptors this process may open: the rest is the
    /// program's, and a signal by identity still needs one of its own.
    #[test]
    fn kept_pidfds_stay_within_a_quarter_of_the_descriptor_limit() {
        // Before the cap is first read (nextest runs each test in a process
        // of its own).
        sys::limit_open_files(64).expect("setrlimit");
        let cap = hold_cap();
        assert_eq!(cap, 16, "the cap was read before the limit was lowered");
        let me = sys::pidfd_open(sys::getpid()).expect("pidfd");
        let kept: Vec<Kept> = (0..32)
            .filter_map(|_| Kept::new(me.try_clone().expect("dup")).ok())
            .collect();
        assert_eq!(kept.len(), cap);
        assert_eq!(hold_room(), 0);
        drop(kept);
        assert_eq!(hold_room(), cap);
    }
}
