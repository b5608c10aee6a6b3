//! The live leaf ([`CgroupTree`]): its members, the signal steps, the
//! kill, the wait for `populated 0`, the release and the removal.

use std::{
    collections::HashSet,
    fs, io,
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
    time::Duration,
};

use tokio::{io::unix::AsyncFd, time::Instant};

use super::{
    departed::{self, Departed},
    frozen::Frozen,
    mount::holds,
    parent::own_dir,
    subtree::{remove_below, subtree_pids},
};
use crate::{
    contain::nested::Nested, error::Error, identity, identity::ProcessInfo, signal::Signal, sys,
};

/// How long a released tree's leaf waits for members that could not move
/// out because they were exiting.
const RELEASE_EXITING: Duration = Duration::from_secs(1);

/// A live leaf cgroup holding a tree.
#[derive(Debug)]
pub(crate) struct CgroupTree {
    path: PathBuf,
    watch: Option<AsyncFd<OwnedFd>>,
    removed: bool,
    /// Every member listed in the leaf so far, as (pid, start time): one that
    /// moved itself out is still ours (see the module's documentation).
    seen: HashSet<(i32, u64)>,
    /// Whether a signal other than `SIGKILL` was sent (a grace began).
    signalled: bool,
    /// How many members signal steps left to a nested supervisor.
    left_to_inner: usize,
    /// What the signal steps found wrong (see [`CgroupTree::take_notes`]).
    notes: Vec<String>,
}

impl CgroupTree {
    /// A tree for an existing leaf (named by a record, and checked by the
    /// caller), without a watch: emptiness is read, not awaited.
    pub(crate) fn adopt(path: PathBuf) -> Self {
        Self {
            path,
            watch: None,
            removed: false,
            seen: HashSet::new(),
            signalled: false,
            left_to_inner: 0,
            notes: Vec::new(),
        }
    }

    /// A tree for a new leaf at `path` that watches its `cgroup.events`;
    /// the leader (pid and start time) was born inside, and is a member from
    /// then on wherever it moves. A watch that cannot be opened drops the
    /// tree, which kills what the leaf holds and removes it.
    pub(super) fn watching(path: PathBuf, leader: (i32, u64)) -> Result<Self, Error> {
        let mut tree = Self::adopt(path);
        tree.seen.insert(leader);
        let events = tree.path.join("cgroup.events");
        let watch = sys::open_events(&events).map_err(|source| Error::Cgroup {
            path: events,
            source,
        })?;
        tree.watch = Some(watch);
        Ok(tree)
    }

    /// Gives up the leaf without touching it (dropping the tree then neither
    /// kills nor removes anything).
    pub(crate) fn forget(&mut self) {
        self.removed = true;
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The processes in the leaf and in any cgroup a member made below it,
    /// as `/proc` numbers them. `cgroup.procs` lists them as this process's
    /// PID namespace does; where `/proc` belongs to another one (`unshare
    /// --pid` without a new `/proc`), each is opened by its listed number
    /// and renumbered from its pidfd (one gone meanwhile is left out).
    fn pids(&self) -> io::Result<Vec<i32>> {
        let listed = self.listed()?;
        let renumber = !sys::proc_is_own_namespace();
        if !renumber {
            return Ok(listed);
        }
        Ok(listed
            .into_iter()
            .filter_map(|pid| {
                let pidfd = sys::pidfd_open(pid).ok()?;
                sys::proc_pid_of(pidfd.as_fd()).ok().flatten()
            })
            .collect())
    }

    /// The processes in the leaf and below it as `cgroup.procs` lists them
    /// (numbered in this process's PID namespace: what `cgroup.procs`
    /// takes back).
    fn listed(&self) -> io::Result<Vec<i32>> {
        subtree_pids(&sys::dirfd::open_dir_at(None, self.path.as_os_str())?)
    }

    /// Whether the process `pid` is in this leaf (read after its pidfd was
    /// opened, so a recycled pid is caught).
    fn holds(&self, pid: i32) -> bool {
        holds(&self.path, pid)
    }

    /// Sends `signal` to every member. The leaf is frozen for the look that
    /// decides who the members are (see [`Frozen`]): a member that forks
    /// meanwhile cannot leave a child unlisted, nor a child that moves out
    /// of the leaf unremembered, and the step does not compete for the CPU
    /// with a tree that does (a fork bomb).
    pub(crate) fn signal(&mut self, signal: Signal) -> io::Result<Option<usize>> {
        if signal == Signal::KILL {
            // A throttled member reaches the freezer only when the limit
            // lets it run: lifted first, the freeze takes its usual moment,
            // not the final bound's time (a tree held to 1% of a CPU took
            // half of a 1 s bound in the emulated guest, and a member was
            // still exiting at its end).
            self.unthrottle();
        }
        let frozen = self.freeze();
        if signal == Signal::KILL {
            // Look (again, after a grace) for members and children of
            // members that moved out of the leaf: the kill reaches only what
            // is in it, and a frozen leaf makes the look one pass.
            self.note_members()?;
            // `cgroup.kill` ends frozen members too (a fatal signal leaves
            // the freezer); the thaw at `frozen`'s drop is for what the
            // kernel has not reached yet.
            self.kill()?;
            self.check_held(frozen.as_ref());
            return Ok(None);
        }
        self.signalled = true;
        let inside = self.note_members()?;
        let delivered = self.signal_members(&inside, signal);
        self.check_held(frozen.as_ref());
        // Thawed (at `frozen`'s drop): the signal is handled once the
        // members run again.
        Ok(Some(delivered))
    }

    /// Passes `signal` on to every member (`Control::signal`) while the tree
    /// runs: no freeze, which would stall the whole tree for a signal that
    /// ends nothing (a terminal's `SIGWINCH`, say).
    pub(crate) fn pass_on(&mut self, signal: Signal) -> io::Result<usize> {
        let inside = self.note_members()?;
        Ok(self.signal_members(&inside, signal))
    }

    /// The leaf frozen for a signal step, unless it holds this process (a
    /// member that may write `cgroup.procs` can move its supervisor in:
    /// frozen, it would never thaw the leaf): then none, and a note.
    fn freeze(&mut self) -> Option<Frozen> {
        let own = std::process::id();
        if self.holds(own.cast_signed()) {
            // Moved back out to the leaf's parent, or neither frozen nor,
            // at `SIGKILL`, killed with its tree (`cgroup.kill` would end
            // this process before it could end what left the leaf).
            let parent = self.path.parent().map(|p| p.join("cgroup.procs"));
            if parent.is_some_and(|procs| fs::write(procs, own.to_string()).is_ok()) {
                self.note_once(
                    "a member had moved this corral process into its own leaf cgroup: \
                     it was moved back out before the leaf was frozen and killed",
                );
            } else {
                self.note_once(
                    "a member had moved this corral process into its own leaf cgroup, and it \
                     could not move back out: the leaf was not frozen for the signal steps, so \
                     what members forked meanwhile may be unnamed",
                );
                return None;
            }
        }
        Some(Frozen::freeze(&self.path))
    }

    /// Notes a freeze undone during the step.
    fn check_held(&mut self, frozen: Option<&Frozen>) {
        if frozen.is_some_and(Frozen::undone) {
            self.note_once(
                "the leaf's freeze was undone during a signal step (a process that may write \
                 its cgroup.freeze): what members forked meanwhile may be unnamed",
            );
        }
    }

    fn note_once(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_owned());
        }
    }

    /// What the signal steps found wrong, for the report (taken once).
    pub(crate) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Sends `signal` by identity to each of `inside` still in the leaf,
    /// except the members below a nested supervisor, which that supervisor
    /// signals by its own policy (`nested.rs`); returns how many it reached.
    fn signal_members(&mut self, inside: &[(i32, u64)], signal: Signal) -> usize {
        let members: HashSet<i32> = inside.iter().map(|&(pid, _)| pid).collect();
        // `SIGSTOP` reaches every member, as `SIGKILL` does.
        let mut nested = (signal != Signal::STOP).then(Nested::new);
        let mut delivered = 0;
        for &(pid, start_time) in inside {
            // The leaf is frozen: the parent read now is the one at the look.
            if let Some(nested) = &mut nested
                && let Ok(stat) = identity::read_stat(pid)
                && stat.start_time == start_time
                && nested.leaves_to_inner(pid, stat.ppid, |p| members.contains(&p))
            {
                continue;
            }
            let belongs = || {
                Ok(identity::read_stat(pid)
                    .is_ok_and(|stat| stat.start_time == start_time && stat.is_running())
                    && self.holds(pid))
            };
            match identity::signal_if(pid, signal, belongs) {
                Ok(identity::Delivery::Sent) => delivered += 1,
                Ok(identity::Delivery::Gone) => {}
                Err(error) => tracing::warn!(pid, %signal, %error, "signal failed"),
            }
        }
        self.left_to_inner += nested.map_or(0, |n| n.delegated);
        delivered
    }

    /// How many members a signal step left to a nested supervisor so far.
    pub(crate) fn left_to_inner(&self) -> usize {
        self.left_to_inner
    }

    /// Lists the members in the leaf now and remembers them, with their
    /// descendants that moved out of it (before any member dies of a signal,
    /// which would cut its children's parent links).
    fn note_members(&mut self) -> io::Result<Vec<(i32, u64)>> {
        // The start time is read before the leaf is checked, so if the pid
        // was recycled in between, the identity remembered is a process that
        // is gone, never a bystander.
        let mut inside = Vec::new();
        for pid in self.pids()? {
            if let Ok(stat) = identity::read_stat(pid)
                && stat.is_running()
                && self.holds(pid)
            {
                inside.push((pid, stat.start_time));
            }
        }
        self.seen.extend(inside.iter().copied());
        let departed = departed::departed_children(&self.path, &inside);
        self.seen.extend(departed);
        Ok(inside)
    }

    /// At the end of a cleanup: ends the remembered members that moved
    /// themselves out of the leaf (`SIGKILL` by identity), and waits up to
    /// `bound` for them to be gone.
    pub(crate) async fn end_departed(&mut self, bound: Duration) -> Departed {
        departed::end_departed(&self.path, &self.seen, bound).await
    }

    /// `cgroup.kill`, then the CPU bandwidth limit lifted: a killed process
    /// runs nothing of its own again, only its exit, which a tight `cpu.max`
    /// would stretch over many periods (two throttled spinners outlived a
    /// 1 s final bound in the emulated guest).
    fn kill(&self) -> io::Result<()> {
        fs::write(self.path.join("cgroup.kill"), b"1")?;
        self.kill_behind_exited_first_threads();
        self.unthrottle();
        Ok(())
    }

    /// `SIGKILL` through a pidfd (to the process, not one thread) to each
    /// member whose first thread has exited while another runs on (it reads
    /// `Z`, with more than one thread): `cgroup.kill` leaves such a process
    /// running (seen on Linux 6.18, `matrix *::leader_thread_exits::*`).
    fn kill_behind_exited_first_threads(&self) {
        for pid in self.pids().unwrap_or_default() {
            let Ok(stat) = identity::read_stat(pid) else {
                continue;
            };
            if stat.state != 'Z' || !stat.is_running() {
                continue;
            }
            let start_time = stat.start_time;
            let belongs = || {
                Ok(identity::read_stat(pid)
                    .is_ok_and(|s| s.start_time == start_time && s.is_running())
                    && self.holds(pid))
            };
            if let Err(error) = identity::signal_if(pid, Signal::KILL, belongs) {
                tracing::warn!(pid, %error, "SIGKILL to a member whose first thread exited failed");
            }
        }
    }

    /// Writes `max` to the leaf's `cpu.max` if it holds a limit (the file is
    /// there only with the `cpu` controller enabled for the leaf).
    fn unthrottle(&self) {
        let cpu_max = self.path.join("cpu.max");
        let limited = fs::read_to_string(&cpu_max).is_ok_and(|value| !value.starts_with("max"));
        if limited && let Err(error) = fs::write(&cpu_max, b"max") {
            tracing::warn!(path = %cpu_max.display(), %error, "lifting cpu.max after the kill failed");
        }
    }

    pub(crate) fn is_empty(&self) -> io::Result<bool> {
        let events = match &self.watch {
            Some(watch) => sys::read_from_start(watch.get_ref().as_fd())?,
            None => fs::read_to_string(self.path.join("cgroup.events"))?,
        };
        Ok(events.lines().any(|l| l.trim() == "populated 0"))
    }

    /// Waits for `populated 0`, woken by the kernel's change notification on
    /// `cgroup.events` (never by polling), or for the deadline.
    pub(crate) async fn wait_empty(&mut self, deadline: Instant) -> io::Result<bool> {
        loop {
            // Reading re-arms the notification, so read before waiting.
            if self.is_empty()? {
                return Ok(true);
            }
            let Some(watch) = &self.watch else {
                return Ok(false);
            };
            tokio::select! {
                ready = watch.ready(tokio::io::Interest::PRIORITY) => ready?.clear_ready(),
                () = tokio::time::sleep_until(deadline) => return self.is_empty(),
            }
        }
    }

    pub(crate) fn members(&mut self) -> Vec<ProcessInfo> {
        let members: Vec<ProcessInfo> = self
            .pids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|pid| identity::read_stat(pid).ok())
            .filter(identity::Stat::is_running)
            .map(|stat| identity::describe(&stat))
            .collect();
        // Read before the leaf check, as in `signal`.
        let inside: Vec<(i32, u64)> = members
            .iter()
            .filter(|m| self.holds(m.pid))
            .map(|m| (m.pid, m.start_time))
            .collect();
        self.seen.extend(inside);
        members
    }

    /// `cgroup.kill`, and `SIGKILL` by identity to remembered members that
    /// left the leaf (synchronous, without waiting).
    pub(crate) fn kill_now(&self) {
        if let Err(error) = self.kill() {
            tracing::warn!(path = %self.path.display(), %error, "cgroup.kill failed");
        }
        departed::kill_departed(&self.path, &self.seen);
    }

    /// Moves every member to this process's own cgroup (where they would be
    /// had corral not started them: the leaves' parent, unless
    /// [`PARENT_VARIABLE`](super::PARENT_VARIABLE) names another, which may hand controllers down
    /// and then cannot hold processes), then removes the leaf. A member
    /// forked during the move is caught by the next round. If they cannot be
    /// moved, they keep the leaf (reported as left): released processes are
    /// never killed, not even when the tree is dropped. A member that could
    /// not move because it is exiting (`ESRCH`: still listed until its exit
    /// is done) leaves the leaf within moments: that is waited for, up to
    /// [`RELEASE_EXITING`], before the leaf is removed (without the wait
    /// the leaf was kept, and left empty behind, docs/flakes.md (34)).
    pub(crate) async fn release(&mut self) -> bool {
        // Released on purpose: no longer ours to end.
        self.seen.clear();
        let Ok(own) = own_dir() else {
            self.forget();
            return false;
        };
        let procs = own.join("cgroup.procs");
        let mut only_exiting = true;
        for _ in 0..10 {
            if self.is_empty().unwrap_or(false) {
                break;
            }
            only_exiting = true;
            for pid in self.listed().unwrap_or_default() {
                if let Err(error) = fs::write(&procs, pid.to_string()) {
                    only_exiting &= sys::is_gone(&error);
                    tracing::debug!(pid, %error, "moving a released process failed");
                }
            }
        }
        if only_exiting && !self.is_empty().unwrap_or(false) {
            let _ = self.wait_empty(Instant::now() + RELEASE_EXITING).await;
        }
        let removed = self.close();
        if !removed {
            self.forget();
        }
        removed
    }

    /// Removes the leaf; false if members survive and it cannot be removed.
    pub(crate) fn close(&mut self) -> bool {
        if self.removed {
            return true;
        }
        self.watch = None;
        // A leaf with no cgroup below it (the usual case) goes in one
        // `rmdir`; only a refused one is searched for cgroups a member made
        // below it (which must go first), then removed again.
        let mut removed = fs::remove_dir(&self.path);
        if removed
            .as_ref()
            .is_err_and(|e| e.kind() != io::ErrorKind::NotFound)
        {
            if let Ok(dir) = sys::dirfd::open_dir_at(None, self.path.as_os_str()) {
                remove_below(&dir, 0);
            }
            removed = fs::remove_dir(&self.path);
        }
        match removed {
            Ok(()) => {
                self.removed = true;
                true
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                self.removed = true;
                true
            }
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cgroup left behind");
                false
            }
        }
    }
}

impl Drop for CgroupTree {
    /// Reached without `close` only when the supervisor was dropped mid-way
    /// (runtime shutdown): kill synchronously, wait a short bound for the
    /// kernel to finish, remove the leaf.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.kill_now();
        let until = std::time::Instant::now() + Duration::from_millis(200);
        while !self.is_empty().unwrap_or(true) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::{
        super::testing::{leaf, sleeper},
        *,
    };

    /// A tree over `path`, as the supervisor holds one before `close`.
    fn open_tree(path: &Path) -> CgroupTree {
        CgroupTree::adopt(path.to_owned())
    }

    /// `holds` is the check made after a member's pidfd was opened: a process
    /// outside the leaf (a recycled pid) is not a member. Needs a usable
    /// cgroup v2 hierarchy (root or a delegated subtree).
    #[test]
    fn holds_only_processes_inside_the_leaf() {
        let Some(leaf) = leaf() else {
            return;
        };
        let tree = open_tree(leaf.path());
        let mut child = sleeper();
        let pid = child.id() as i32;
        let outside = tree.holds(pid);
        let moved = fs::write(tree.path.join("cgroup.procs"), pid.to_string());
        let inside = tree.holds(pid);
        let _ = child.kill();
        let _ = child.wait();
        drop(tree);
        drop(leaf);
        moved.expect("moved into the leaf");
        assert!(!outside, "a process outside the leaf counted as a member");
        assert!(inside, "a process inside the leaf not counted as a member");
    }

    /// `close` removes the leaf once it is empty, says so when members keep
    /// it busy, and counts a leaf someone else removed as removed.
    #[test]
    fn close_removes_an_empty_leaf_and_reports_a_busy_one() {
        let Some(leaf) = leaf() else {
            return;
        };
        let path = leaf.path().to_owned();
        let mut tree = open_tree(&path);
        let mut child = sleeper();
        let moved = fs::write(path.join("cgroup.procs"), child.id().to_string());
        let busy = tree.close();
        let _ = child.kill();
        let _ = child.wait();
        let until = std::time::Instant::now() + Duration::from_secs(2);
        let mut closed = tree.close();
        while !closed && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            closed = tree.close();
        }
        let mut again = open_tree(&path);
        let gone = again.close();
        drop((again, tree, leaf));
        moved.expect("moved into the leaf");
        assert!(!busy, "a leaf with a member reported as removed");
        assert!(closed, "an empty leaf not removed");
        assert!(!path.exists());
        assert!(gone, "a leaf removed by someone else is removed");
    }

    /// A tree dropped without `close` (its supervisor was dropped mid-way)
    /// kills its members, waits for the kernel to empty the leaf, and
    /// removes it.
    #[test]
    fn dropping_an_open_tree_kills_the_members_and_removes_the_leaf() {
        use std::os::unix::process::ExitStatusExt;
        let Some(leaf) = leaf() else {
            return;
        };
        let path = leaf.path().to_owned();
        let mut child = sleeper();
        let moved = fs::write(path.join("cgroup.procs"), child.id().to_string());
        drop(open_tree(&path));
        let removed = !path.exists();
        let until = std::time::Instant::now() + Duration::from_secs(2);
        let mut status = child.try_wait().expect("try_wait");
        while status.is_none() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            status = child.try_wait().expect("try_wait");
        }
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(leaf);
        moved.expect("moved into the leaf");
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(libc::SIGKILL),
            "the member was not killed"
        );
        assert!(removed, "the leaf {} was left behind", path.display());
    }
}
