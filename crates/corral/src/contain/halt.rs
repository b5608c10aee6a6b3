//! Ending processes that no kernel mechanism holds, with no window for them
//! to fork away: stop them, look for what they started, stop that, and so on
//! until a look finds nothing new; then kill them all.
//!
//! "Walk `/proc`, then kill what it found" has a window: a process that forks
//! after the walk read its children and before its `SIGKILL` leaves that child
//! running and unnamed (its parent dies, so the child is re-parented and no
//! longer linked to anything corral knows). A stopped process cannot fork,
//! and cannot exit either, which would cut its children's parent links. So
//! each process is stopped (`SIGSTOP`, by identity) and its children are read
//! only once every one of its threads shows the stopped state: a fork that
//! was under way when the signal came has completed by then, and its child
//! is in the list. The children are stopped in turn, to a fixed point: the
//! processes still able to fork are exactly those just found, and each round
//! stops them. Only then does `SIGKILL` go to every one of them.
//!
//! Used where a tree's processes are outside what the kernel can kill at
//! once: members that moved themselves out of their leaf cgroup
//! (`cgroup/departed.rs`), and the leader's tree when a spawn fails after the fork
//! (`supervise`).

use std::{
    collections::HashSet,
    fs, io,
    time::{Duration, Instant},
};

use crate::{
    identity::{self, ProcessInfo, Stat},
    signal::Signal,
};

/// How many rounds of "stop what is new, look again" are made at most: a
/// tree deeper than this (a chain of forks that each child continues) is
/// killed as found, and the rest is named by the caller's next look.
const MAX_ROUNDS: usize = 256;

/// What [`stop_and_kill`] did.
#[derive(Debug, Default)]
pub(crate) struct Halted {
    /// Every process stopped and then sent `SIGKILL`.
    pub(crate) killed: Vec<ProcessInfo>,
    /// Processes that were sent `SIGSTOP` but did not show the stopped
    /// state within the bound (stuck in the kernel): killed all the same,
    /// but what they forked meanwhile may be missing from `killed`.
    pub(crate) not_stopped: usize,
}

/// Stops the processes `roots` (pid and start time, checked before each
/// signal) and every descendant of theirs for which `belongs` holds, to a
/// fixed point, then sends each of them `SIGKILL`. A process is waited for to
/// stop until `bound` has passed, at most.
pub(crate) fn stop_and_kill(
    roots: &[(i32, u64)],
    belongs: &dyn Fn(&Stat) -> bool,
    bound: Duration,
) -> Halted {
    let until = Instant::now() + bound;
    let mut halted = Halted::default();
    let mut stopped: Vec<Stat> = Vec::new();
    let mut looked: HashSet<i32> = HashSet::new();
    let mut frontier: Vec<(i32, u64)> = roots.to_vec();
    for _ in 0..MAX_ROUNDS {
        let mut new = Vec::new();
        for (pid, start_time) in frontier.drain(..) {
            if !looked.insert(pid) {
                continue;
            }
            if let Some(stat) = stop(pid, start_time, belongs) {
                new.push(stat);
            }
        }
        if new.is_empty() {
            break;
        }
        for stat in &new {
            if !wait_stopped(stat.pid, until) {
                halted.not_stopped += 1;
            }
        }
        frontier = children_of(&new);
        stopped.extend(new);
    }
    for stat in stopped {
        let (pid, start_time) = (stat.pid, stat.start_time);
        let same = || Ok(identity::read_stat(pid).is_ok_and(|now| now.start_time == start_time));
        match identity::signal_if(pid, Signal::KILL, same) {
            Ok(identity::Delivery::Sent) => halted.killed.push(identity::describe(&stat)),
            Ok(identity::Delivery::Gone) => {}
            Err(error) => tracing::warn!(pid, %error, "killing a stopped process failed"),
        }
    }
    halted
}

/// Sends `SIGSTOP` to `pid` if it is still the running process that started
/// at `start_time` and `belongs`: its `/proc` entry as read just before.
fn stop(pid: i32, start_time: u64, belongs: &dyn Fn(&Stat) -> bool) -> Option<Stat> {
    let mut seen = None;
    let check = || {
        let stat = match identity::read_stat(pid) {
            Ok(stat) => stat,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(error) => return Err(error),
        };
        let ours = stat.start_time == start_time && stat.is_running() && belongs(&stat);
        seen = ours.then_some(stat);
        Ok(ours)
    };
    match identity::signal_if(pid, Signal::STOP, check) {
        Ok(identity::Delivery::Sent) => seen,
        Ok(identity::Delivery::Gone) => None,
        Err(error) => {
            tracing::warn!(pid, %error, "stopping a process failed");
            None
        }
    }
}

/// Waits until every thread of `pid` shows the stopped state (or the
/// process is gone), polling, until `until`: whether it did.
fn wait_stopped(pid: i32, until: Instant) -> bool {
    let mut pause = Duration::from_micros(50);
    loop {
        if all_threads_stopped(pid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Whether no thread of the process `stat` describes can run on, so none
/// can fork: read from `stat` alone where it has one thread, else from each
/// thread's (see [`all_threads_stopped`]). The kernel reads a process's state
/// before its thread count: a single thread seen stopped, then seen to be the
/// only one, had no sibling that could fork (a stopped thread creates none,
/// and a sibling that exited in between forked, if at all, before it did:
/// its child is in the process's children by then).
pub(crate) fn stopped_whole(stat: &Stat) -> bool {
    if stat.threads == 1 {
        matches!(stat.state, 'T' | 't' | 'Z' | 'X' | 'x')
    } else {
        all_threads_stopped(stat.pid)
    }
}

/// Whether no thread of `pid` can run on, so none can fork: each is
/// stopped, traced-stopped, exiting or dead (a process gone is too).
/// `SIGSTOP` reaches each thread in turn.
pub(crate) fn all_threads_stopped(pid: i32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.flatten().all(|task| {
        fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|text| identity::parse_stat(&text))
            .is_none_or(|stat| matches!(stat.state, 'T' | 't' | 'Z' | 'X' | 'x'))
    })
}

/// The children of the stopped processes `parents`, as (pid, start time):
/// by each one's own children lists, or one walk of `/proc` where the
/// kernel has none.
fn children_of(parents: &[Stat]) -> Vec<(i32, u64)> {
    let mut pids = Vec::new();
    for parent in parents {
        match identity::children(parent.pid) {
            Some(children) => pids.extend(children),
            None => {
                let table = identity::all_processes().unwrap_or_default();
                let ppids: HashSet<i32> = parents.iter().map(|p| p.pid).collect();
                return table
                    .iter()
                    .filter(|stat| ppids.contains(&stat.ppid))
                    .map(|stat| (stat.pid, stat.start_time))
                    .collect();
            }
        }
    }
    pids.into_iter()
        .filter_map(|pid| identity::read_stat(pid).ok())
        .map(|stat| (stat.pid, stat.start_time))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::{
        os::unix::process::CommandExt,
        process::{Command, Stdio},
    };

    use super::*;

    /// A process that forks as fast as it can, each child forking on too, is
    /// stopped whole before it is killed: nothing it started outlives the
    /// call. (A walk-then-kill misses the children forked between the two.)
    #[test]
    fn a_forking_chain_is_stopped_whole_then_killed() {
        // Each process forks a child that does the same, then waits: a
        // chain that grows for as long as it runs.
        let mut root = Command::new("sh")
            .args(["-c", "f() { sleep 0.001; f & wait; }; f"])
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("sh");
        let pid = i32::try_from(root.id()).expect("pid");
        std::thread::sleep(Duration::from_millis(200));
        let start_time = identity::read_stat(pid).expect("stat").start_time;
        let halted = stop_and_kill(&[(pid, start_time)], &|_| true, Duration::from_secs(5));
        root.wait().expect("reaped");
        assert_eq!(halted.not_stopped, 0);
        assert!(halted.killed.len() > 3, "{:?}", halted.killed);
        // Nothing of the chain is left: every process of it is in the
        // root's process group, and none of that group runs once the
        // kills have landed (`SIGKILL` takes a moment to end a process).
        let running = || {
            identity::all_processes()
                .expect("walk")
                .into_iter()
                .filter(|stat| stat.pgid == pid && stat.is_running())
                .collect::<Vec<Stat>>()
        };
        let until = Instant::now() + Duration::from_secs(5);
        while !running().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let left = running();
        assert!(left.is_empty(), "{left:?}");
    }

    /// A single-threaded process is judged stopped from its `stat` alone:
    /// stopped once `SIGSTOP` has landed, not while it sleeps.
    #[test]
    fn a_single_threaded_process_is_judged_from_its_stat() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = i32::try_from(sleeper.id()).expect("pid");
        let stat = identity::read_stat(pid).expect("stat");
        assert_eq!(stat.threads, 1);
        assert!(!stopped_whole(&stat), "{stat:?}");
        let start_time = stat.start_time;
        let same = || Ok(identity::read_stat(pid).is_ok_and(|s| s.start_time == start_time));
        identity::signal_if(pid, Signal::STOP, same).expect("SIGSTOP");
        // Readiness, not a sleep: the stopped state shows in `stat`.
        assert!(wait_stopped(pid, Instant::now() + Duration::from_secs(30)));
        let stat = identity::read_stat(pid).expect("stat");
        assert!(stopped_whole(&stat), "{stat:?}");
        sleeper.kill().expect("kill");
        sleeper.wait().expect("reaped");
    }

    /// A root that is not ours (another start time) is left alone.
    #[test]
    fn a_process_of_another_start_time_is_neither_stopped_nor_killed() {
        let mut other = Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = i32::try_from(other.id()).expect("pid");
        let start_time = identity::read_stat(pid).expect("stat").start_time;
        let halted = stop_and_kill(&[(pid, start_time + 1)], &|_| true, Duration::from_secs(1));
        assert!(halted.killed.is_empty());
        let stat = identity::read_stat(pid).expect("stat");
        assert_ne!(stat.state, 'T', "stopped");
        other.kill().expect("kill");
        other.wait().expect("reaped");
    }
}
