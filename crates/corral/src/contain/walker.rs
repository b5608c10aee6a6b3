//! One `/proc` walk shared by every scanned tree of a host.
//!
//! A walk reads every process on the machine, so a walk per tree per poll
//! costs trees × processes: with hundreds of trees it burns whole cores and
//! delays every cleanup (measured: 1,000 group trees came back 153 s after
//! their deadline). Two ways to share one:
//! - [`recent`]: a walk no older than a bound (the 250 ms re-scans of running
//!   trees, which only keep track of members);
//! - [`after`]: a walk that *started* after a moment the caller names, which
//!   is what a decision needs ("the tree is empty" must not rest on a walk
//!   taken before its last member was seen to die). Callers that ask at about
//!   the same time wait for one walk together: the first becomes the walker,
//!   yields once so that every task ready in this turn can ask too, then
//!   walks for all of them.

use std::{
    io,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use crate::identity::{self, ProcessTable};

/// A finished walk.
#[derive(Debug)]
struct Walk {
    serial: u64,
    started: Instant,
    took: Duration,
    table: Arc<ProcessTable>,
    /// The time trees spent judging this walk in their re-scans, so far.
    judged: Duration,
    /// The same for the walk before (this one's is still growing).
    judged_before: Duration,
}

impl Walk {
    /// What one round of re-scans costs: the walk, and every tree judging
    /// it.
    fn cost(&self) -> Duration {
        self.took + self.judged.max(self.judged_before)
    }
}

/// Re-scans of running trees spend at most 1/`BUDGET` of a core on walks
/// and on judging them: on a host with many processes a walk takes longer,
/// and with many trees judging one does, so a shared one is used for longer
/// (every 200 ms with a few hundred processes and trees; with 3,000
/// processes, or 1,000 trees, about every second or two).
const BUDGET: u32 = 60;

/// However costly a round, a shared walk is renewed at least this often, so
/// that a `setsid` child of a running tree is learnt of within this bound
/// (plus one walk) on any host; beyond it the budget gives way.
const LONGEST: Duration = Duration::from_secs(5);

/// How long a walk may be reused by re-scans asking for `max_age`.
fn reuse_for(walk: &Walk, max_age: Duration) -> Duration {
    max_age.max((walk.cost() * BUDGET).min(LONGEST))
}

static LATEST: Mutex<Option<Walk>> = Mutex::new(None);
/// Whether a task is walking for [`after`] (the others wait for it).
static WALKING: AtomicBool = AtomicBool::new(false);
static WALKED: Notify = Notify::const_new();

fn latest() -> MutexGuard<'static, Option<Walk>> {
    LATEST.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Walks now and keeps the result for the others.
fn walk() -> io::Result<Arc<ProcessTable>> {
    let started = Instant::now();
    let table = Arc::new(ProcessTable::new(identity::all_processes()?));
    let took = started.elapsed();
    let mut latest = latest();
    if latest.as_ref().is_none_or(|w| w.started < started) {
        let serial = latest.as_ref().map_or(1, |w| w.serial + 1);
        let judged_before = latest.as_ref().map_or(Duration::ZERO, |w| w.judged);
        *latest = Some(Walk {
            serial,
            started,
            took,
            table: Arc::clone(&table),
            judged: Duration::ZERO,
            judged_before,
        });
    }
    Ok(table)
}

/// How long a walk is reused by [`recent`] with `max_age`: when a new one
/// can be there.
pub(crate) fn cadence(max_age: Duration) -> Duration {
    latest().as_ref().map_or(max_age, |w| reuse_for(w, max_age))
}

/// Counts `spent` (a tree judging walk `serial` in a re-scan) against the
/// budget.
pub(crate) fn judged(serial: u64, spent: Duration) {
    if let Some(walk) = latest().as_mut().filter(|w| w.serial == serial) {
        walk.judged += spent;
    }
}

/// The latest walk if it started at most `max_age` ago (or, where a walk and
/// the re-scans judging it take long, [`BUDGET`] times as long as they
/// took), else a new one.
/// With the walk's serial number (a tree that judged it already can skip it)
/// and when it started (a walk from before a tree's spawn tells it nothing).
pub(crate) fn recent(max_age: Duration) -> io::Result<(u64, Instant, Arc<ProcessTable>)> {
    if let Some(walk) = latest()
        .as_ref()
        .filter(|w| w.started.elapsed() <= reuse_for(w, max_age))
    {
        return Ok((walk.serial, walk.started, Arc::clone(&walk.table)));
    }
    let table = walk()?;
    let (serial, started) = latest()
        .as_ref()
        .map_or((0, Instant::now()), |w| (w.serial, w.started));
    Ok((serial, started, table))
}

/// A walk that started at or after `since`, shared with every caller that
/// asks for one at about the same time.
///
/// # Cancel safety
/// Cancel safe: a cancelled walker releases the role (the next caller walks).
pub(crate) async fn after(since: Instant) -> io::Result<Arc<ProcessTable>> {
    loop {
        if let Some(walk) = latest().as_ref().filter(|w| w.started >= since) {
            return Ok(Arc::clone(&walk.table));
        }
        let notified = WALKED.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if WALKING
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let _role = Role;
            // Let every task ready now ask too: they will all wait for this
            // walk, which starts after each of them asked.
            tokio::task::yield_now().await;
            return walk();
        }
        notified.await;
    }
}

/// The walker's role, given back (and the waiters woken) however the walk
/// ends.
struct Role;

impl Drop for Role {
    fn drop(&mut self) {
        WALKING.store(false, Ordering::SeqCst);
        WALKED.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many trees asking together share one walk, and every walk they get
    /// started after they asked.
    #[tokio::test(flavor = "current_thread")]
    async fn callers_asking_together_share_one_walk_started_after_they_asked() {
        let since = Instant::now();
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                tokio::spawn(async {
                    after(Instant::now())
                        .await
                        .map(|t| Arc::as_ptr(&t) as usize)
                })
            })
            .collect();
        let mut tables = std::collections::HashSet::new();
        for task in tasks {
            tables.insert(task.await.expect("task").expect("walk"));
        }
        let started = latest().as_ref().map(|w| w.started).expect("a walk");
        assert!(started >= since);
        assert_eq!(tables.len(), 1, "50 callers, {} walks", tables.len());
    }

    /// However long a round of re-scans takes (a huge host, thousands of
    /// trees, a loaded machine), a shared walk is reused for at most
    /// `LONGEST`: the window in which a running tree can miss a `setsid`
    /// child stays bounded.
    #[test]
    fn a_costly_round_is_reused_for_at_most_the_longest_bound() {
        *latest() = Some(Walk {
            serial: 1,
            started: Instant::now(),
            took: Duration::from_secs(1),
            table: Arc::new(ProcessTable::default()),
            judged: Duration::from_secs(1),
            judged_before: Duration::ZERO,
        });
        assert_eq!(cadence(Duration::from_millis(200)), LONGEST);
        assert_eq!(cadence(Duration::from_secs(9)), Duration::from_secs(9));
        latest().as_mut().expect("walk").took = Duration::from_micros(100);
        latest().as_mut().expect("walk").judged = Duration::from_micros(100);
        assert_eq!(
            cadence(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
    }

    /// A walk older than the moment asked for is never handed out.
    #[tokio::test(flavor = "current_thread")]
    async fn a_walk_from_before_the_question_is_not_reused() {
        let first = after(Instant::now()).await.expect("walk");
        let asked = Instant::now();
        let second = after(asked).await.expect("walk");
        assert!(!Arc::ptr_eq(&first, &second));
        let started = latest().as_ref().map(|w| w.started).expect("a walk");
        assert!(started >= asked);
        let (_, _, reused) = recent(Duration::from_secs(60)).expect("walk");
        assert!(Arc::ptr_eq(&second, &reused), "a recent walk is reused");
    }
}
