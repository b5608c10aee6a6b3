//! The test process itself: its subreaper role, its zombies, its
//! descriptors and its CPU time.

use std::{os::fd::AsFd, time::Duration};

use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions, pidfd_open, waitid};

use crate::proc::{Proc, stat};

/// Makes the calling (test) process a child subreaper
/// (`PR_SET_CHILD_SUBREAPER`), so that orphaned descendants are re-parented
/// to it instead of pid 1 and can be reaped with [`reap_zombies`].
/// Process-wide and irreversible for the test binary; it changes what
/// `getppid()` returns to orphans, so only use it where that does not matter.
pub fn become_subreaper() {
    // SAFETY: `prctl(PR_SET_CHILD_SUBREAPER, 1)` takes no pointers.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(rc, 0, "prctl(PR_SET_CHILD_SUBREAPER) failed");
}

/// Reaps those of `procs` that are zombie children of this process (e.g.
/// orphans re-parented to it by [`become_subreaper`]), by pidfd after an
/// identity check. Others are left alone. Do not pass a process whose exit
/// status someone else (a `std::process::Child`, corral) still wants to
/// collect: wait for those first.
pub fn reap_zombies(procs: &[Proc]) {
    for p in procs {
        let Some(pid) = Pid::from_raw(p.pid) else {
            continue;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            continue;
        };
        let same = stat(p.pid).is_some_and(|s| s.start_time == p.start_time && s.state == 'Z');
        if same {
            // ECHILD if it is not our child: nothing to do then.
            let _ = waitid(
                WaitId::PidFd(pidfd.as_fd()),
                WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
            );
        }
    }
}

/// Number of entries in `/proc/self/fd`. This includes the descriptor used
/// to list the directory, and counts the whole test process, so compare two
/// counts only while no other test runs concurrently.
pub fn open_fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("listing /proc/self/fd")
        .count()
}

/// The CPU time (user and system) this process has used so far.
pub fn cpu_time() -> Duration {
    let text = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let (_, rest) = text.rsplit_once(')').expect("a stat line");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .map(|&i| fields[i].parse::<u64>().expect("utime and stime"))
        .sum();
    Duration::from_secs_f64(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}
