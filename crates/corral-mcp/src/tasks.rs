//! The crate's own tasks (and runs), counted while they live. Every task
//! the client runtime and the command server spawn goes through [`spawn`]; the count drops when the task's
//! future finishes *or is dropped* (aborted, or its runtime shut down), so a
//! test can assert "no task of the runtime is left" without sleeping.

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use tokio::{sync::Notify, task::JoinHandle};

/// Live tasks of every connection in this process.
static ALL: AtomicUsize = AtomicUsize::new(0);

/// A count of live tasks (one per manager; the process-wide total is
/// [`live_tasks`]).
///
/// ```
/// use corral_mcp::client::{Manager, live_tasks};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manager = Manager::new();
/// let count = manager.task_count();
/// manager.shutdown().await;
/// // Every task of the manager's connections is gone.
/// count.idle().await;
/// assert_eq!(count.live(), 0);
/// assert!(live_tasks() >= count.live());
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct TaskCount(Arc<Count>);

#[derive(Debug, Default)]
pub(crate) struct Count {
    live: AtomicUsize,
    /// Woken when `live` drops to zero.
    idle: Notify,
}

impl TaskCount {
    /// Tasks alive now.
    pub fn live(&self) -> usize {
        self.0.live.load(Ordering::SeqCst)
    }

    /// Waits until no task is alive.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.live() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Tasks of the client runtime alive now in this process, over every
/// manager and connection.
pub fn live_tasks() -> usize {
    ALL.load(Ordering::SeqCst)
}

impl TaskCount {
    /// Counts one more piece of work that is not a task of its own (a
    /// foreground run inside a call) until the returned guard is dropped.
    pub(crate) fn enter(&self) -> Alive {
        self.0.live.fetch_add(1, Ordering::SeqCst);
        ALL.fetch_add(1, Ordering::SeqCst);
        Alive(self.0.clone())
    }
}

/// One live task: decrements both counts when dropped. A task that must
/// publish its end only after it stopped counting drops its `Alive` first
/// (see [`spawn_releasing`]).
#[derive(Debug)]
pub(crate) struct Alive(Arc<Count>);

impl Drop for Alive {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
        ALL.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Spawns `future` on the current runtime, counted in `count`.
pub(crate) fn spawn<F>(count: &TaskCount, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_releasing(count, |alive| async move {
        let _alive = alive;
        future.await
    })
}

/// Spawns the future `make` builds around its own [`Alive`]: the task
/// stops counting when it drops it (at the latest when the future is done
/// or dropped).
pub(crate) fn spawn_releasing<F>(
    count: &TaskCount,
    make: impl FnOnce(Alive) -> F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    count.0.live.fetch_add(1, Ordering::SeqCst);
    ALL.fetch_add(1, Ordering::SeqCst);
    tokio::spawn(make(Alive(count.0.clone())))
}
