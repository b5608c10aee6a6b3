//! Members that moved themselves out of their leaf (see the module's
//! documentation in `mod.rs`): found by parent links from the members at
//! each signal step, and ended by identity at the end of a cleanup.

use std::{collections::HashSet, path::Path, time::Duration};

use tokio::time::Instant;

use super::mount::holds;
use crate::{
    contain::halt::{self, Halted},
    identity,
    identity::ProcessInfo,
};

/// Members that had moved themselves out of the leaf, found at the end.
#[derive(Debug, Default)]
pub(crate) struct Departed {
    /// Each one found running outside the leaf and sent `SIGKILL`.
    pub(crate) killed: Vec<ProcessInfo>,
    /// Those of them still running when the bound passed.
    pub(crate) surviving: Vec<ProcessInfo>,
    /// How many did not stop when told to (stuck in the kernel), so what
    /// they forked meanwhile may be missing (see `halt.rs`).
    pub(crate) not_stopped: usize,
}

/// How long a departed member is given to show that it has stopped.
const STOP_BOUND: Duration = Duration::from_millis(500);

/// The running descendants of `members` (by parent links in one walk of
/// `/proc`) that are outside the leaf `leaf`, to remember: they moved
/// themselves out while their parent stayed. One walk per signal step,
/// never while the tree runs.
pub(super) fn departed_children(leaf: &Path, members: &[(i32, u64)]) -> Vec<(i32, u64)> {
    if members.is_empty() {
        return Vec::new();
    }
    // Parent links from the members listed in the leaf: a look at each
    // member's children, not a walk of the host (a cleanup of many trees
    // at once would walk it once per tree).
    let listed: HashSet<i32> = members.iter().map(|&(pid, _)| pid).collect();
    let mut looked: HashSet<i32> = listed.clone();
    let mut frontier: Vec<i32> = listed.iter().copied().collect();
    let mut departed = Vec::new();
    while let Some(parent) = frontier.pop() {
        let Some(children) = identity::children(parent) else {
            return departed_children_by_walk(leaf, members);
        };
        for child in children {
            if !looked.insert(child) {
                continue;
            }
            if let Ok(stat) = identity::read_stat(child)
                && stat.is_running()
                && !holds(leaf, child)
            {
                departed.push((child, stat.start_time));
                frontier.push(child);
            }
        }
    }
    if !departed.is_empty() {
        tracing::warn!(
            count = departed.len(),
            "members found outside the leaf cgroup"
        );
    }
    departed
}

/// [`departed_children`] on a kernel without
/// `/proc/PID/task/TID/children`: one walk of the host.
fn departed_children_by_walk(leaf: &Path, members: &[(i32, u64)]) -> Vec<(i32, u64)> {
    let Ok(table) = identity::all_processes() else {
        return Vec::new();
    };
    let roots: Vec<i32> = members
        .iter()
        .filter(|&&(pid, start)| {
            table
                .iter()
                .any(|stat| stat.pid == pid && stat.start_time == start)
        })
        .map(|&(pid, _)| pid)
        .collect();
    crate::identity::descendants(&table, &roots)
        .into_iter()
        .filter(|stat| !roots.contains(&stat.pid) && stat.is_running())
        .filter(|stat| !holds(leaf, stat.pid))
        .map(|stat| (stat.pid, stat.start_time))
        .collect()
}

/// Ends, by identity, every member of `seen` that still runs outside
/// the leaf `leaf`, and the processes it forked since (still linked to it by
/// their parent pid), and names them: each is stopped before its
/// children are looked for, to a fixed point, and only then killed
/// (`halt.rs`), so a member that forks meanwhile leaves no child behind.
pub(super) fn kill_departed(leaf: &Path, seen: &HashSet<(i32, u64)>) -> Halted {
    // A member killed in the leaf and still exiting has already left
    // every cgroup (`/proc/PID/cgroup` reads `0::/`): dying, not
    // departed.
    let outside = |stat: &identity::Stat| !holds(leaf, stat.pid) && !identity::is_exiting(stat.pid);
    let departed: Vec<(i32, u64)> = seen
        .iter()
        .copied()
        .filter(|&(pid, start_time)| {
            identity::read_stat(pid).is_ok_and(|stat| {
                stat.start_time == start_time && stat.is_running() && outside(&stat)
            })
        })
        .collect();
    if departed.is_empty() {
        return Halted::default();
    }
    let halted = halt::stop_and_kill(&departed, &outside, STOP_BOUND);
    for member in &halted.killed {
        tracing::warn!(
            pid = member.pid,
            "a member had left the leaf cgroup: killed by identity"
        );
    }
    halted
}

/// At the end of a cleanup: ends the members of `seen` that moved
/// themselves out of the leaf `leaf` (`SIGKILL` by identity), and waits
/// up to `bound` for them to be gone.
pub(super) async fn end_departed(
    leaf: &Path,
    seen: &HashSet<(i32, u64)>,
    bound: Duration,
) -> Departed {
    let Halted {
        killed,
        not_stopped,
    } = kill_departed(leaf, seen);
    if killed.is_empty() {
        return Departed::default();
    }
    let running = |p: &ProcessInfo| {
        identity::read_stat(p.pid)
            .is_ok_and(|stat| stat.start_time == p.start_time && stat.is_running())
    };
    // Rare (only after an escape), so a short poll rather than a pidfd
    // per process.
    let until = Instant::now() + bound;
    while killed.iter().any(running) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let surviving = killed.iter().filter(|p| running(p)).cloned().collect();
    Departed {
        killed,
        surviving,
        not_stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::{super::testing::sleeper, *};

    /// A remembered member is ended only while it is the very process that
    /// was listed: a pid now held by another process (another start time,
    /// as after reuse) is left alone. Needs no cgroup: the leaf here does not
    /// exist, so every process counts as outside it.
    #[test]
    fn a_departed_member_is_killed_by_identity_only() {
        use std::os::unix::process::ExitStatusExt;
        let leaf = Path::new("/nonexistent/corral-leaf");
        let mut child = sleeper();
        let pid = child.id() as i32;
        let start = identity::read_stat(pid).expect("stat").start_time;
        let impostor = kill_departed(leaf, &HashSet::from([(pid, start + 1)])).killed;
        let spared = identity::read_stat(pid).is_ok_and(|s| s.is_running());
        let killed = kill_departed(leaf, &HashSet::from([(pid, start)])).killed;
        let status = child.wait().expect("reaped");
        assert!(impostor.is_empty(), "{impostor:?}");
        assert!(spared, "a process with another start time was killed");
        assert_eq!(killed.len(), 1, "{killed:?}");
        assert_eq!((killed[0].pid, killed[0].start_time), (pid, start));
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
