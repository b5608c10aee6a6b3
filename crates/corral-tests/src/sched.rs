//! What the scheduler gave a process: to tell a program that waited too
//! long (its own lateness) from one that was starved of a CPU (the
//! machine's).
//!
//! Over a stretch of wall time a process's threads each either run, wait
//! in the run queue for a CPU, or sleep (on a timer, a descriptor, another
//! process). The first two are the machine's to give: in the emulated guest
//! beside a loaded host a cleanup that needs a second of CPU takes many
//! (`docs/flakes.md` (26)). What is left, the time no thread ran or waited
//! to, is the time the process chose to wait: [`Busy::idle_since`]. A bound
//! on that measures the program, not the machine: a cleanup that sleeps
//! where it should work, or waits past its policy, exceeds it however fast
//! the machine is, and a starved one does not.
//!
//! Read from `/proc/PID/task/*/schedstat` (time on a CPU, time in the run
//! queue, in nanoseconds), also for a zombie not yet reaped, thread by
//! thread: a thread that exits between two readings counts for nothing
//! after the first (what it ran meanwhile is unknown), not as minus its
//! whole life, which made a busy stretch read as idle when a long-lived
//! thread ended in it (`docs/flakes.md` (42)). A machine that holds its
//! (virtual) CPUs back, which no thread's count shows, makes each wait end
//! late: measured apart, [`Held`].

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

/// A process's threads' time on a CPU and waiting for one, summed, read at
/// [`at`](Busy::at).
#[derive(Debug, Clone)]
pub struct Busy {
    /// When it was read.
    pub at: Instant,
    /// The threads' time running or in the run queue, summed.
    pub busy: Duration,
    /// Each thread's (id, time running or in the run queue).
    threads: Vec<(i32, Duration)>,
}

impl Busy {
    /// Process `pid`'s, or `None` once it is gone (reaped).
    pub fn of(pid: i32) -> Option<Self> {
        Self::of_threads(pid, |_| true)
    }

    /// This process's threads but `threads` ([`thread_id`]s): a test's own,
    /// where it polls and waits, and a [`Held`] probe's, the others being
    /// the runtime's workers and blocking threads, where corral's tasks run.
    /// (libtest runs each test on a thread of its own, not the main one.)
    pub fn others_than(threads: &[i32]) -> Self {
        let me = std::process::id() as i32;
        Self::of_threads(me, |tid| !threads.contains(&tid)).expect("/proc/self/task")
    }

    /// The calling thread's.
    pub fn this_thread() -> Self {
        let at = Instant::now();
        let line = std::fs::read_to_string("/proc/thread-self/schedstat")
            .expect("/proc/thread-self/schedstat");
        let busy = busy_of(&line);
        Self {
            at,
            busy,
            threads: vec![(thread_id(), busy)],
        }
    }

    /// Process `pid`'s threads whose ids `wanted` takes.
    fn of_threads(pid: i32, wanted: impl Fn(i32) -> bool) -> Option<Self> {
        let at = Instant::now();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let threads: Vec<(i32, Duration)> = tasks
            .flatten()
            .filter_map(|task| {
                let tid: i32 = task.file_name().to_str()?.parse().ok()?;
                wanted(tid).then_some(())?;
                let line = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
                Some((tid, busy_of(&line)))
            })
            .collect();
        let busy = threads.iter().map(|(_, busy)| *busy).sum();
        Some(Self { at, busy, threads })
    }

    /// The wall time from `earlier` to `self` that none of the threads ran
    /// or waited for a CPU (saturating: threads running side by side count
    /// twice). Counted thread by thread: one that started since counts
    /// whole, one that ended since counts for nothing.
    pub fn idle_since(&self, earlier: &Self) -> Duration {
        let wall = self.at.saturating_duration_since(earlier.at);
        let grown: Duration = self
            .threads
            .iter()
            .map(|(tid, busy)| {
                let before = earlier
                    .threads
                    .iter()
                    .find(|(t, _)| t == tid)
                    .map_or(Duration::ZERO, |(_, b)| *b);
                busy.saturating_sub(before)
            })
            .sum();
        wall.saturating_sub(grown)
    }
}

/// The calling thread's id, as `/proc/self/task` names it.
pub fn thread_id() -> i32 {
    // SAFETY: `gettid` takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// A `schedstat` line's time on a CPU and in the run queue.
fn busy_of(line: &str) -> Duration {
    let nanos = line
        .split_whitespace()
        .take(2)
        .filter_map(|n| n.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The wall time from the earlier readings to the later ones that neither
/// of two processes (or threads) ran or waited for a CPU: `before` and
/// `after` each read of both at about the same time.
pub fn idle_of_both(before: (&Busy, &Busy), after: (&Busy, &Busy)) -> Duration {
    let wall = after.0.at.max(after.1.at) - before.0.at.min(before.1.at);
    let busy =
        after.0.busy.saturating_sub(before.0.busy) + after.1.busy.saturating_sub(before.1.busy);
    wall.saturating_sub(busy)
}

/// How often a [`Held`] probe wakes.
const TICK: Duration = Duration::from_millis(10);

/// A thread that sleeps `TICK` (10 ms) at a time and notes how late it woke, less
/// the time it waited in the run queue: how long the machine held a timer
/// back, which no thread's `schedstat` counts. In the emulated guest (TCG)
/// beside a loaded host, the host not running the guest's CPUs stops its
/// timers while its clock runs on: a 300 ms grace ended after 812 ms in
/// which no thread of the test ran or waited to (`docs/flakes.md` (26)).
/// Each of a program's waits may end that late; the time between its waits
/// is not made longer (a sleep of 2 s takes 2 s of the clock however the
/// machine holds it meanwhile), so what a bound allows for is the worst
/// hold, per wait, not their sum. Stopped and joined on drop.
#[derive(Debug)]
pub struct Held {
    /// Each wake-up, and how late it was.
    late: Arc<Mutex<Vec<(Instant, Duration)>>>,
    stop: Arc<AtomicBool>,
    thread: i32,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    /// Starts the probe.
    pub fn start() -> Self {
        let late = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, receiver) = std::sync::mpsc::channel();
        let handle = {
            let (late, stop) = (Arc::clone(&late), Arc::clone(&stop));
            std::thread::spawn(move || {
                let _ = sender.send(thread_id());
                let mut waited_before = run_delay();
                while !stop.load(Ordering::Relaxed) {
                    let slept = Instant::now();
                    std::thread::sleep(TICK);
                    let woke = slept.elapsed();
                    let waited_now = run_delay();
                    let waited = waited_now.saturating_sub(waited_before);
                    waited_before = waited_now;
                    let by = woke.saturating_sub(TICK).saturating_sub(waited);
                    late.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((Instant::now(), by));
                }
            })
        };
        let thread = receiver.recv().expect("the probe's thread id");
        Self {
            late,
            stop,
            thread,
            handle: Some(handle),
        }
    }

    /// The probe's thread, to leave out of a [`Busy`] reading.
    pub fn thread(&self) -> i32 {
        self.thread
    }

    /// The longest the machine held a timer back between `from` and `to`
    /// (and the next wake-up after `to`, which saw a hold that began
    /// before it).
    pub fn worst(&self, from: Instant, to: Instant) -> Duration {
        let late = self.late.lock().unwrap_or_else(PoisonError::into_inner);
        let after = late
            .iter()
            .position(|&(at, _)| at > to)
            .map_or(late.len(), |i| i + 1);
        late[..after]
            .iter()
            .filter(|&&(at, _)| at >= from)
            .map(|&(_, by)| by)
            .max()
            .unwrap_or_default()
    }
}
impl Drop for Held {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// The calling thread's time in the run queue so far.
fn run_delay() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(for_how_long: Duration) {
        let until = Instant::now() + for_how_long;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Spins until the calling thread has run (or waited for a CPU) for
    /// `how_long`: what the scheduler counted, not the wall time, which
    /// a machine that holds its CPUs back makes longer.
    fn spin_for_busy(how_long: Duration) {
        let start = Busy::this_thread().busy;
        while Busy::this_thread().busy.saturating_sub(start) < how_long {
            spin(Duration::from_millis(1));
        }
    }

    /// A thread that ended between two readings, after a long busy life,
    /// does not make the others' work in between read as idle (it used to
    /// take its whole life off their time: docs/flakes.md (42)).
    ///
    /// Each step waits for the one before by a message, never for a count
    /// to reach a number: the first version waited for the long-lived
    /// thread's count to reach the 400 ms it spun by the clock, which a
    /// machine that held its CPU back (steal, which no count shows) never
    /// reached, and hung (docs/flakes.md (43)).
    #[test]
    fn a_thread_that_ends_between_readings_leaves_the_others_work_counted() {
        let me = thread_id();
        let (spun, long_spun) = std::sync::mpsc::channel::<()>();
        let (ended, end) = std::sync::mpsc::channel::<()>();
        let long_lived = std::thread::spawn(move || {
            spin_for_busy(Duration::from_millis(400));
            let _ = spun.send(());
            let _ = end.recv();
        });
        let (worked, work) = std::sync::mpsc::channel::<()>();
        let (finished, worker_finished) = std::sync::mpsc::channel::<()>();
        let (done, finish) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let _ = work.recv();
            spin_for_busy(Duration::from_millis(200));
            let _ = finished.send(());
            let _ = finish.recv();
        });
        // The long-lived thread's 400 ms, read while it lives.
        long_spun.recv().expect("the long-lived thread spun");
        let before = Busy::others_than(&[me]);
        assert!(before.busy >= Duration::from_millis(400), "{before:?}");
        drop(ended);
        long_lived.join().expect("the long-lived thread");
        // The worker, alive at both readings, works 200 ms in the stretch.
        drop(worked);
        worker_finished.recv().expect("the worker spun");
        let after = Busy::others_than(&[me]);
        drop(done);
        worker.join().expect("the worker");
        let wall = after.at - before.at;
        let idle = after.idle_since(&before);
        // The worker's 200 ms fell inside the stretch, so at most the rest
        // of it was idle (allowing 100 ms for the scheduler's clock and the
        // monotonic one to differ); taking the ended thread's 400 ms off
        // made all of it idle.
        assert!(
            idle + Duration::from_millis(100) <= wall,
            "{idle:?} of {wall:?} read as idle while a thread worked through 200 ms of it"
        );
    }
}
