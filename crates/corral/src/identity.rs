//! Who a process is: its pid together with its start time, read from `/proc`.
//!
//! A bare pid can be reused by the kernel as soon as the process is reaped, so
//! corral never signals a number. Before each signal it opens a pidfd (which
//! refers to one process for ever) and checks that the process behind it still
//! has the start time corral saw when it judged the process a member; only then
//! does it signal, through the pidfd.
//!
//! A host meets identities in what corral hands back: the leader's
//! ([`Child::identity`](crate::Child::identity)), the processes of a report
//! ([`ProcessInfo`]) and the ledger's records.
//!
//! ```no_run
//! # async fn demo() -> Result<(), corral::Error> {
//! use corral::{Command, identity::Identity};
//! let mut child = Command::new("sleep").arg("1").spawn()?;
//! let Identity { pid, start_time } = child.identity();
//! println!("leader {pid}, started {start_time} clock ticks after boot");
//! child.wait().await?;
//! # Ok(()) }
//! ```

use std::{collections::HashMap, fs, io};

use serde::{Deserialize, Serialize};

use crate::{signal::Signal, sys};

mod stat;

use stat::read_small;
pub(crate) use stat::{Stat, parse_stat, read_small_text};

/// A process, named by identity: pid plus start time (clock ticks after boot).
///
/// ```
/// use corral::identity::Identity;
/// let first = Identity { pid: 4242, start_time: 1_000 };
/// // The pid again, after the first process was reaped: another process.
/// let reused = Identity { pid: 4242, start_time: 2_500 };
/// assert_ne!(first, reused);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    /// Process id.
    pub pid: i32,
    /// Start time, `/proc/PID/stat` field 22.
    pub start_time: u64,
}

/// A process, as corral identifies it.
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use corral::{Command, ProcessInfo};
/// let finished = Command::new("sh").args(["-c", "sleep 100 & exit 0"]).run().await?;
/// for ProcessInfo { pid, start_time, command } in &finished.report.survivors {
///     println!("{pid} (started at tick {start_time}) still runs: {command}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessInfo {
    /// Process id.
    pub pid: i32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22):
    /// together with the pid, who the process is.
    pub start_time: u64,
    /// Its command line (arguments joined by spaces), or `[name]` if it has
    /// none.
    pub command: String,
}

/// Reads `/proc/PID/stat`. `NotFound` when the process is gone.
pub(crate) fn read_stat(pid: i32) -> io::Result<Stat> {
    let text = read_small(&format!("/proc/{pid}/stat")).map_err(|error| {
        // A process that is reaped between the open and the read makes the
        // read fail with ESRCH: gone all the same.
        if sys::is_gone(&error) {
            io::Error::new(io::ErrorKind::NotFound, error)
        } else {
            error
        }
    })?;
    parse_stat(&String::from_utf8_lossy(&text)).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unparsable /proc/{pid}/stat"),
        )
    })
}

/// Whether the process `pid` has begun to exit (`PF_EXITING` in the flags of
/// `/proc/PID/stat`): it runs on for a moment, no longer in any cgroup
/// (`/proc/PID/cgroup` then reads `0::/`), before it becomes a zombie. False
/// if it is gone or cannot be read.
pub(crate) fn is_exiting(pid: i32) -> bool {
    /// `PF_EXITING`, from the kernel's `include/linux/sched.h`.
    const PF_EXITING: u64 = 0x4;
    read_small(&format!("/proc/{pid}/stat"))
        .is_ok_and(|text| flags_of(&String::from_utf8_lossy(&text)) & PF_EXITING != 0)
}

/// Where a process corral named is in its life, for the final report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// A thread of it runs (or it cannot be read: it counts as running).
    Running,
    /// Every thread has begun to exit (`PF_EXITING`) or is done (a zombie):
    /// it was killed or has exited, runs no code of its own again, and only
    /// the kernel's release of what it held is left.
    Dying,
    /// Gone: reaped, its pid free or another process's.
    Gone,
}

/// How far the process `pid` that started at `start_time` has come to its
/// end. A process whose first thread exits while another runs on is
/// running (its `/proc/PID/stat` reads `Z`, with `PF_EXITING` set).
pub(crate) fn ending(pid: i32, start_time: u64) -> Ending {
    const PF_EXITING: u64 = 0x4;
    // Some(true): exiting or done; Some(false): running; None: gone.
    let dying = |path: &str| match read_small(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let done = parse_stat(&text).is_some_and(|stat| !stat.is_running());
            Some(done || flags_of(&text) & PF_EXITING != 0)
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound || sys::is_gone(&error) => None,
        Err(_) => Some(false),
    };
    match read_stat(pid) {
        Ok(stat) if stat.start_time != start_time => return Ending::Gone,
        Ok(_) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ending::Gone,
        Err(_) => return Ending::Running,
    }
    match dying(&format!("/proc/{pid}/stat")) {
        None => return Ending::Gone,
        Some(false) => return Ending::Running,
        Some(true) => {}
    }
    let Ok(threads) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Ending::Running;
    };
    // A thread gone since the listing has ended too.
    let all_dying = threads.flatten().all(|thread| {
        let tid = thread.file_name();
        dying(&format!("/proc/{pid}/task/{}/stat", tid.to_string_lossy())) != Some(false)
    });
    if all_dying {
        Ending::Dying
    } else {
        Ending::Running
    }
}

/// The flags (field 9) of a `/proc/PID/stat` line; 0 if unparsable.
fn flags_of(text: &str) -> u64 {
    // Fields from 3 on, after the command name: state ppid pgrp session
    // tty_nr tpgid flags.
    text.rfind(')')
        .and_then(|close| text.get(close + 1..))
        .and_then(|rest| rest.split_ascii_whitespace().nth(6))
        .and_then(|flags| flags.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Every process currently listed in `/proc`. Entries that vanish or cannot be
/// parsed mid-walk are skipped.
pub(crate) fn all_processes() -> io::Result<Vec<Stat>> {
    walk_processes(|_| {})
}

/// [`all_processes`], calling `visit` on each entry the moment it is read,
/// before the walk goes on (see `ScannedTree::signal`).
pub(crate) fn walk_processes(mut visit: impl FnMut(&Stat)) -> io::Result<Vec<Stat>> {
    walk_processes_holding(|_| false, |stat, _| visit(stat))
}

/// [`walk_processes`], holding processes by pidfd where `hold(pid)` says so:
/// each pidfd is opened *before* the process's `stat` is read and is handed
/// to `visit` only if it has not exited after the read. Then it refers to
/// the very process the entry describes (a pid is not reused while its
/// process is unreaped), with no second read of its `stat` (see
/// [`hold_verified`]).
pub(crate) fn walk_processes_holding(
    mut hold: impl FnMut(i32) -> bool,
    mut visit: impl FnMut(&Stat, Option<std::os::fd::OwnedFd>),
) -> io::Result<Vec<Stat>> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let pidfd = if hold(pid) {
            sys::pidfd_open(pid).ok()
        } else {
            None
        };
        match read_stat(pid) {
            Ok(stat) => {
                let pidfd = pidfd.filter(|fd| !sys::pidfd_exited(std::os::fd::AsFd::as_fd(fd)));
                visit(&stat, pidfd);
                found.push(stat);
            }
            // Out of descriptors, every entry from here on would be skipped
            // too: a table without them would call a running tree empty.
            Err(error) if sys::is_out_of_descriptors(&error) => return Err(error),
            // Gone meanwhile, or unparsable.
            Err(_) => {}
        }
    }
    Ok(found)
}

/// The command line of a process, arguments joined by spaces; `[comm]` when it
/// has none (a kernel thread or a zombie).
pub(crate) fn command_line(stat: &Stat) -> String {
    let raw = fs::read(format!("/proc/{}/cmdline", stat.pid)).unwrap_or_default();
    let joined = raw
        .split(|&b| b == 0)
        .filter(|part| !part.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ");
    if joined.is_empty() {
        format!("[{}]", stat.comm)
    } else {
        joined
    }
}

/// The report entry for a process.
pub(crate) fn describe(stat: &Stat) -> ProcessInfo {
    ProcessInfo {
        pid: stat.pid,
        start_time: stat.start_time,
        command: command_line(stat),
    }
}

/// What happened to a signal sent by identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The process is the one we saw and was signalled.
    Sent,
    /// The process is gone, or the pid now belongs to another process: nothing
    /// was signalled.
    Gone,
}

/// Sends `signal` to the process with this pid *only if* it still has
/// `start_time` and is running.
pub(crate) fn signal_verified(pid: i32, start_time: u64, signal: Signal) -> io::Result<Delivery> {
    signal_if(pid, signal, || match read_stat(pid) {
        Ok(stat) => Ok(stat.start_time == start_time && stat.is_running()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    })
}

/// A process held by a pidfd that was checked to be the one corral saw.
#[derive(Debug)]
pub(crate) enum Held {
    /// The pidfd, opened *before* the start time was checked: it refers to
    /// the process corral judged a member, for as long as it is kept, so
    /// signals through it need no further check.
    Pidfd(std::os::fd::OwnedFd),
    /// The process is gone, or the pid now belongs to another process.
    Gone,
}

/// Opens a pidfd for `pid` and checks that the process has `start_time` and
/// is running: [`signal_verified`]'s check, with the pidfd kept for later
/// signals and for waiting on the process's exit. An error where the kernel
/// has no pidfds (the caller then signals with [`signal_verified`]) or no
/// descriptor is left.
pub(crate) fn hold_verified(pid: i32, start_time: u64) -> io::Result<Held> {
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if sys::is_gone(&e) => return Ok(Held::Gone),
        Err(e) => return Err(e),
    };
    match read_stat(pid) {
        Ok(stat) if stat.start_time == start_time && stat.is_running() => Ok(Held::Pidfd(pidfd)),
        Ok(_) => Ok(Held::Gone),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Held::Gone),
        Err(e) => Err(e),
    }
}

/// Sends `signal` through a pidfd from [`hold_verified`].
pub(crate) fn signal_held(
    pidfd: std::os::fd::BorrowedFd<'_>,
    signal: Signal,
) -> io::Result<Delivery> {
    match sys::pidfd_signal(pidfd, signal) {
        Ok(()) => Ok(Delivery::Sent),
        Err(e) if sys::is_gone(&e) => Ok(Delivery::Gone),
        Err(e) => Err(e),
    }
}

/// Sends `signal` to the process with this pid only if `belongs` (evaluated
/// *after* a pidfd was opened for it) says it is the process corral judged a
/// member. With pidfds the check and the signal refer to the same process;
/// without them (kernels before 5.3) a recycled pid can slip in between the
/// check and `kill`, which [`capabilities`](crate::capabilities) reports.
pub(crate) fn signal_if(
    pid: i32,
    signal: Signal,
    belongs: impl FnOnce() -> io::Result<bool>,
) -> io::Result<Delivery> {
    // `pid` is a `/proc` number. Where `/proc` belongs to another PID
    // namespace than ours, `pidfd_open` takes our namespace's number for the
    // same process, and the pidfd must show `pid` again in `/proc`'s.
    let own = sys::proc_is_own_namespace();
    let open_as = if own {
        pid
    } else {
        match sys::pid_in_own_namespace(pid)? {
            Some(ours) => ours,
            None => return Ok(Delivery::Gone),
        }
    };
    let pidfd = match sys::pidfd_open(open_as) {
        Ok(fd) => Some(fd),
        Err(e) if sys::is_gone(&e) => return Ok(Delivery::Gone),
        Err(e) if sys::is_unsupported(&e) && own => None,
        Err(e) => return Err(e),
    };
    if !own
        && pidfd.as_ref().is_none_or(|fd| {
            sys::proc_pid_of(std::os::fd::AsFd::as_fd(fd))
                .ok()
                .flatten()
                != Some(pid)
        })
    {
        return Ok(Delivery::Gone);
    }
    if !belongs()? {
        return Ok(Delivery::Gone);
    }
    let result = match &pidfd {
        Some(fd) => sys::pidfd_signal(fd, signal),
        None => sys::kill(pid, signal),
    };
    match result {
        Ok(()) => Ok(Delivery::Sent),
        Err(e) if sys::is_gone(&e) => Ok(Delivery::Gone),
        Err(e) => Err(e),
    }
}

/// The children of `pid` (of every one of its threads), from
/// `/proc/PID/task/TID/children`: a look at one process instead of a walk of
/// the host. `None` where the kernel lacks these files
/// (`CONFIG_PROC_CHILDREN`); an empty list if the process is gone.
pub(crate) fn children(pid: i32) -> Option<Vec<i32>> {
    let tasks = match fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(tasks) => tasks,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Some(Vec::new()),
        Err(_) => return None,
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        match fs::read_to_string(task.path().join("children")) {
            Ok(text) => children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            ),
            Err(error) if error.kind() == io::ErrorKind::NotFound && task.path().exists() => {
                return None;
            }
            Err(_) => {}
        }
    }
    Some(children)
}

/// One walk of `/proc`, indexed by pid, parent and process group, so that a
/// tree's members are found in time proportional to the tree, not to the
/// host (a walk is shared by every scanned tree of a host: `contain/walker.rs`).
#[derive(Debug, Default)]
pub(crate) struct ProcessTable {
    stats: Vec<Stat>,
    by_pid: HashMap<i32, usize>,
    children: HashMap<i32, Vec<usize>>,
    groups: HashMap<i32, Vec<usize>>,
}

impl ProcessTable {
    pub(crate) fn new(stats: Vec<Stat>) -> Self {
        let mut table = Self {
            by_pid: HashMap::with_capacity(stats.len()),
            ..Self::default()
        };
        for (n, stat) in stats.iter().enumerate() {
            table.by_pid.insert(stat.pid, n);
            table.children.entry(stat.ppid).or_default().push(n);
            table.groups.entry(stat.pgid).or_default().push(n);
        }
        table.stats = stats;
        table
    }

    /// The entry of `pid`, if the walk saw it.
    pub(crate) fn get(&self, pid: i32) -> Option<&Stat> {
        self.by_pid.get(&pid).map(|&n| &self.stats[n])
    }

    /// The processes in process group `pgid`.
    pub(crate) fn group(&self, pgid: i32) -> impl Iterator<Item = &Stat> {
        self.groups
            .get(&pgid)
            .into_iter()
            .flatten()
            .map(|&n| &self.stats[n])
    }

    /// [`descendants`] through the parent index.
    pub(crate) fn descendants(&self, roots: &[i32]) -> Vec<Stat> {
        let mut members: Vec<Stat> = roots.iter().filter_map(|&r| self.get(r)).cloned().collect();
        let mut seen: std::collections::HashSet<i32> = roots.iter().copied().collect();
        let mut frontier: Vec<i32> = roots.to_vec();
        while let Some(parent) = frontier.pop() {
            for &n in self.children.get(&parent).into_iter().flatten() {
                let child = &self.stats[n];
                if seen.insert(child.pid) {
                    members.push(child.clone());
                    frontier.push(child.pid);
                }
            }
        }
        members
    }
}

impl std::ops::Deref for ProcessTable {
    type Target = [Stat];

    fn deref(&self) -> &[Stat] {
        &self.stats
    }
}

/// Every process whose parent chain leads to one of `roots` (roots included).
pub(crate) fn descendants(table: &[Stat], roots: &[i32]) -> Vec<Stat> {
    let mut members: Vec<Stat> = Vec::new();
    let mut frontier: Vec<i32> = roots.to_vec();
    let mut seen: std::collections::HashSet<i32> = roots.iter().copied().collect();
    for stat in table.iter().filter(|s| roots.contains(&s.pid)) {
        members.push(stat.clone());
    }
    while let Some(parent) = frontier.pop() {
        for child in table.iter().filter(|s| s.ppid == parent) {
            if seen.insert(child.pid) {
                members.push(child.clone());
                frontier.push(child.pid);
            }
        }
    }
    members
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The flags are field 9, counted past a command name that may hold
    /// spaces and parentheses; a running process is not exiting.
    #[test]
    fn flags_are_read_past_the_command_name() {
        let line = "42 (a) b (c) S 1 42 42 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0";
        assert_eq!(flags_of(line), 4_194_564);
        assert_eq!(
            flags_of(line) & 0x4,
            0x4,
            "PF_EXITING set in this made-up line"
        );
        assert_eq!(flags_of("garbage"), 0);
        assert!(!is_exiting(std::process::id() as i32));
    }

    /// Dying whole means every thread: a zombie is; a running process is
    /// not; nor is one whose first thread exited while another runs on,
    /// although its `/proc/PID/stat` reads `Z` with `PF_EXITING` set.
    #[test]
    fn dying_means_every_thread_is_exiting_or_done() {
        let state = |pid: u32| read_stat(pid as i32).map(|s| (s.state, s.start_time));
        let until_zombie = |pid: u32| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                match state(pid) {
                    Ok(('Z', start)) => return start,
                    _ if std::time::Instant::now() > until => panic!("{pid} never a zombie"),
                    _ => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        };
        let me = std::process::id();
        let (_, my_start) = state(me).expect("our own stat");
        assert_eq!(ending(me as i32, my_start), Ending::Running, "we run");

        let mut zombie = std::process::Command::new("true").spawn().expect("true");
        let (pid, start) = (zombie.id() as i32, until_zombie(zombie.id()));
        assert_eq!(ending(pid, start), Ending::Dying, "a zombie is done");
        assert_eq!(ending(pid, start + 1), Ending::Gone, "another process");
        zombie.wait().expect("reaped");
        assert_eq!(ending(pid, start), Ending::Gone, "reaped");

        // The main thread leaves (`pthread_exit`), a second thread sleeps on.
        let script = "import ctypes, threading, time\n\
                      threading.Thread(target=time.sleep, args=(60,)).start()\n\
                      ctypes.CDLL(None).pthread_exit(None)\n";
        let mut python = std::process::Command::new("python3")
            .args(["-c", script])
            .spawn()
            .expect("python3 (the repository's scripts need it too)");
        let start = until_zombie(python.id());
        let ended = ending(python.id() as i32, start);
        python.kill().expect("killed");
        python.wait().expect("reaped");
        assert_eq!(ended, Ending::Running, "a thread of it runs on");
    }

    /// A made-up `/proc` entry, for rules tested on made-up tables.
    pub(crate) fn stat(pid: i32, ppid: i32, pgid: i32, start_time: u64) -> Stat {
        Stat {
            pid,
            comm: format!("p{pid}"),
            state: 'S',
            ppid,
            pgid,
            sid: pgid,
            threads: 1,
            start_time,
        }
    }

    #[test]
    fn the_indexed_table_finds_what_the_plain_walk_finds() {
        let table = vec![
            stat(1, 0, 1, 1),
            stat(10, 1, 10, 5),
            stat(11, 10, 10, 6),
            stat(12, 11, 12, 7),
            stat(20, 1, 20, 8),
            stat(21, 20, 10, 9),
            stat(30, 31, 30, 9),
            stat(31, 30, 30, 9),
        ];
        let indexed = ProcessTable::new(table.clone());
        let pids = |mut v: Vec<Stat>| {
            v.sort_by_key(|s| s.pid);
            v.into_iter().map(|s| s.pid).collect::<Vec<_>>()
        };
        for roots in [&[10][..], &[30], &[1], &[20, 12], &[99]] {
            assert_eq!(
                pids(indexed.descendants(roots)),
                pids(descendants(&table, roots)),
                "{roots:?}"
            );
        }
        let mut group: Vec<i32> = indexed.group(10).map(|s| s.pid).collect();
        group.sort_unstable();
        assert_eq!(group, vec![10, 11, 21]);
        assert_eq!(indexed.get(21).map(|s| s.ppid), Some(20));
        assert!(indexed.get(99).is_none());
    }

    #[test]
    fn descendants_follow_parent_links_and_ignore_cycles() {
        let table = vec![
            stat(1, 0, 1, 1),
            stat(10, 1, 10, 5),
            stat(11, 10, 10, 6),
            stat(12, 11, 12, 7),
            stat(20, 1, 20, 8),
            // A cycle cannot happen in a live table, but a torn snapshot must not loop.
            stat(30, 31, 30, 9),
            stat(31, 30, 30, 9),
        ];
        let mut pids: Vec<i32> = descendants(&table, &[10]).iter().map(|s| s.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![10, 11, 12]);
        let mut cycle: Vec<i32> = descendants(&table, &[30]).iter().map(|s| s.pid).collect();
        cycle.sort_unstable();
        assert_eq!(cycle, vec![30, 31]);
    }

    /// Walks of `/proc` race processes that come and go by the hundred:
    /// entries that vanish mid-walk are skipped, never an error or a panic,
    /// and a vanished process reads as `NotFound`.
    #[test]
    fn proc_entries_vanishing_mid_walk_are_skipped() {
        use std::{
            process::{Command, Stdio},
            sync::{
                Arc,
                atomic::{AtomicBool, Ordering},
            },
            time::{Duration, Instant},
        };
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..2)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut spawned = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let child = Command::new("sh")
                            .args(["-c", "true & true & true & wait"])
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .spawn();
                        if let Ok(mut child) = child {
                            let _ = child.wait();
                            spawned += 4;
                        }
                    }
                    spawned
                })
            })
            .collect();
        let me = std::process::id() as i32;
        let deadline = Instant::now() + Duration::from_secs(2);
        let (mut walks, mut seen, mut vanished) = (0u32, 0usize, 0usize);
        while Instant::now() < deadline {
            let table = all_processes().expect("a walk never fails");
            walks += 1;
            seen += table.len();
            assert!(table.iter().any(|s| s.pid == me), "we are in the walk");
            for stat in table.iter().filter(|s| s.ppid != 0) {
                match read_stat(stat.pid) {
                    Ok(again) => assert_eq!(again.pid, stat.pid),
                    Err(error) if error.kind() == io::ErrorKind::NotFound => vanished += 1,
                    Err(error) => panic!("reading a vanishing /proc/{}/stat: {error:?}", stat.pid),
                }
                let _ = describe(stat);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let spawned: u32 = churn.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        println!(
            "{walks} walks, {seen} entries, {vanished} vanished before a re-read, {spawned} processes came and went"
        );
        assert!(spawned > 100, "the churn ran: {spawned}");
    }

    #[test]
    fn reads_our_own_stat() {
        let me = read_stat(std::process::id() as i32).expect("own stat");
        assert!(me.is_running());
        assert!(me.start_time > 0);
        assert!(command_line(&me).len() > 1);
    }

    /// The guard against signalling a recycled pid: a process whose start
    /// time is not the one corral saw is never signalled.
    #[test]
    fn never_signals_a_process_with_another_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        let real = read_stat(pid).expect("stat").start_time;
        let impostor = signal_verified(pid, real + 1, Signal::KILL).expect("checked");
        assert_eq!(impostor, Delivery::Gone);
        assert!(
            read_stat(pid).expect("still there").is_running(),
            "a stranger was killed"
        );
        assert_eq!(
            signal_verified(pid, real, Signal::KILL).expect("sent"),
            Delivery::Sent
        );
        let status = child.wait().expect("reaped");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        // Gone for good: reaped, nothing to signal.
        assert_eq!(
            signal_verified(pid, real, Signal::KILL).expect("checked"),
            Delivery::Gone
        );
    }

    /// A pidfd is kept for a member only after the start time corral saw
    /// was checked: a process with another start time is never held (and
    /// so never signalled through a kept pidfd).
    #[test]
    fn never_holds_a_process_with_another_start_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        let real = read_stat(pid).expect("stat").start_time;
        let impostor = hold_verified(pid, real + 1).expect("checked");
        let held = hold_verified(pid, real).expect("checked");
        let _ = child.kill();
        let _ = child.wait();
        assert!(matches!(impostor, Held::Gone), "{impostor:?}");
        assert!(matches!(held, Held::Pidfd(_)), "{held:?}");
    }

    /// A walk that holds what it reads hands over a pidfd only for a process
    /// still running after its `stat` was read: a pidfd whose process has
    /// exited may belong to a pid already reused by the entry just read.
    #[test]
    fn a_holding_walk_hands_over_pidfds_of_running_processes_only() {
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let mut exited = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let (running_pid, exited_pid) = (running.id() as i32, exited.id() as i32);
        // Unreaped, `true` stays a zombie: its pidfd opens, and is readable.
        let pidfd = sys::pidfd_open(exited_pid).expect("pidfd");
        sys::wait_readable(std::os::fd::AsFd::as_fd(&pidfd)).expect("exit");
        let mut handed = HashMap::new();
        walk_processes_holding(
            |_| true,
            |stat, pidfd| {
                if stat.pid == running_pid || stat.pid == exited_pid {
                    handed.insert(stat.pid, pidfd.is_some());
                }
            },
        )
        .expect("walk");
        let _ = running.kill();
        let _ = running.wait();
        let _ = exited.wait();
        assert_eq!(handed.get(&running_pid), Some(&true), "the running one");
        assert_eq!(handed.get(&exited_pid), Some(&false), "the zombie");
    }

    /// A holding walk opens a pidfd only for the pids `hold` asks for (a
    /// tree's kill walk skips the members it holds already).
    #[test]
    fn a_holding_walk_opens_pidfds_only_where_asked() {
        let mut asked = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let (asked_pid, other_pid) = (asked.id() as i32, other.id() as i32);
        let mut handed = HashMap::new();
        walk_processes_holding(
            |pid| pid == asked_pid,
            |stat, pidfd| {
                if stat.pid == asked_pid || stat.pid == other_pid {
                    handed.insert(stat.pid, pidfd.is_some());
                }
            },
        )
        .expect("walk");
        for child in [&mut asked, &mut other] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(handed.get(&asked_pid), Some(&true), "the one asked for");
        assert_eq!(handed.get(&other_pid), Some(&false), "the other");
    }
}
