//! Nothing outlives its owner: a watchdog process per owner.
//!
//! When the process that owns trees dies without running any cleanup
//! (`SIGKILL`, an abort, the OOM killer), somebody alive must do the killing.
//! The first spawn starts a small helper process (see [`executable`] for
//! which): the program named by
//! [`Settings::watchdog_executable`](crate::settings::Settings::watchdog_executable)
//! or `$CORRAL_WATCHDOG`, or
//! the owner's executable re-entered through [`hook`] (the `corral` command
//! does this). Its standard
//! input is one end of a socket pair whose other end only the owner holds
//! (close-on-exec, so no tree member inherits it): end-of-file there means the
//! owner is gone. The owner tells it, per tree, what it needs to kill without
//! trusting pids: the ledger record (cgroup path, leader identity). On the
//! owner's death the helper kills every tree it was told of and removes their
//! records, then exits. Member sets of scanned trees are sent as changes
//! (added and removed identities, exited members dropped), so an update costs
//! the size of the change, not of the tree.
//!
//! The owner never waits for the helper: a message is written at once with a
//! non-blocking write, and what the socket does not take goes through a
//! bounded queue to a writer thread. A helper that stops reading (`SIGSTOP`,
//! a debugger, a stuck kernel call) fills the queue, after which updates are
//! dropped and, once it reads again, replaced by a reset and the whole
//! current state. A spawn costs a write or an enqueue, whatever the helper
//! does.
//! The helper trusts nothing it reads: each message is validated (record ids
//! are plain file names, pids positive, cgroups corral leaves, lines capped)
//! and a bad one is skipped with a line on standard error.
//!
//! The two keep each other honest: the owner watches the helper's pidfd from
//! a small thread (or from its own async runtime: [`fork_now_for_runtime`]
//! and [`watch_over`]) and, if the helper dies, starts a new one and tells it
//! every live tree again. The helper runs in a process group of its own, so a
//! terminal's Ctrl-C, which may kill the owner, does not reach it.
//!
//! A host that is its own watchdog:
//!
//! ```no_run
//! use corral::watchdog;
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     watchdog::hook(); // never returns when started as the watchdog
//!     watchdog::fork_now()?; // optional, still single-threaded: a tenth of the cost
//!     assert!(watchdog::executable().is_ok());
//!     let runtime = tokio::runtime::Runtime::new()?;
//!     let finished = runtime.block_on(corral::Command::new("make").run())?;
//!     println!("watchdog pid {:?}", watchdog::helper_pid());
//!     if let Some(why) = watchdog::lost() {
//!         eprintln!("owner death was unguarded for a while: {why}");
//!     }
//!     if finished.outcome.success() {
//!         watchdog::shutdown(); // stop it, and go on without trees
//!     } else {
//!         watchdog::shutdown_before_exit(); // the very last step
//!         std::process::exit(1);
//!     }
//!     Ok(())
//! }
//! ```

mod client;
mod helper;
mod program;
mod protocol;
mod state;
mod writer;

use std::{
    os::{
        fd::{AsFd, OwnedFd},
        unix::net::UnixStream,
    },
    sync::{
        Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
};

use client::{CALLER_WATCHED, CLIENT, Client, LOST, Monitor, Watching, mark_lost};
pub(crate) use program::set_executable;
pub use program::{HOOK_ARG, executable, hook};
use state::{Shared, lock};

use crate::{identity::Identity, ledger::Record, sys};

/// Why owner death is unguarded for the rest of this process, if the
/// watchdog died and could not be started again (for instance because
/// `fork` was refused): trees are then still recorded in the crash ledger,
/// for `corral reap`, but nothing ends them if the owner dies. `None` while a
/// watchdog runs or none was ever needed.
pub fn lost() -> Option<String> {
    lock(&LOST).clone()
}

/// The watchdog's pid, if one is running.
pub fn helper_pid() -> Option<i32> {
    lock(&CLIENT).as_ref().map(|c| c.helper.0)
}

/// A helper whose socket this process closed: what is left to reap it.
struct HungUp {
    pidfd: OwnedFd,
    helper: (i32, u64),
}

impl HungUp {
    /// Closes this side of `client`'s socket: the writer sends what is
    /// queued, then drops the last handle on it, and the helper sees
    /// end-of-file and exits.
    fn of(client: Client) -> Self {
        let Client {
            stream,
            queue,
            writer,
            pidfd,
            helper,
            ..
        } = client;
        // Let go: no runtime replaces it once it exits (cleared before the
        // socket closes, which may end it at once).
        client::stop_caller_watching(helper);
        drop(queue);
        drop(stream);
        // A writer that never started holds the socket too.
        drop(writer);
        Self { pidfd, helper }
    }

    /// Reaps the helper (within 1 s) and ends its exemption from this
    /// process's subreaper trees.
    fn reap(self) {
        sys::reap_within(self.pidfd.as_fd(), std::time::Duration::from_secs(1));
        crate::contain::unexempt(self.helper);
    }
}

/// A watchdog let go by [`release`], for [`shutdown`] to reap.
static RELEASED: Mutex<Option<HungUp>> = Mutex::new(None);

/// Lets the watchdog go as soon as no tree is left for it to guard, for a
/// program that starts no tree after: closes this side of the socket and
/// kills the helper (it knows no tree; a stopped one goes too), which exits while this process
/// finishes its own work (writes its report, say), and leaves only the
/// reaping to [`shutdown`], which then seldom has to wait. A no-op while a
/// tree is still watched: the watchdog then stays until [`shutdown`]. A
/// spawn after it starts a new watchdog.
///
/// ```no_run
/// # async fn example() -> Result<(), corral::Error> {
/// let finished = corral::Command::new("make").arg("test").run().await?;
/// // No other tree starts: the watchdog may go while the report is written.
/// corral::watchdog::release();
/// println!("{:?}", finished.outcome);
/// corral::watchdog::shutdown(); // reaps it, before this program exits
/// # Ok(())
/// # }
/// ```
pub fn release() {
    let_go_if_idle(lock(&CLIENT));
}

/// Set by [`release_when_idle`] until the watchdog is let go.
static RELEASE_WHEN_IDLE: AtomicBool = AtomicBool::new(false);

/// [`release`] the moment no tree is watched any more (now, if none is):
/// for a program whose trees are all started, so that the watchdog exits
/// while the owner still cleans up after the last one (its ledger record,
/// its report) instead of after. Until then every tree stays guarded, one
/// spawned meanwhile included; the watchdog is let go when the last of
/// them ends, once (a spawn after that starts a new watchdog, which is not
/// let go early).
///
/// ```no_run
/// # async fn example() -> Result<(), corral::Error> {
/// let mut child = corral::Command::new("make").spawn()?;
/// corral::watchdog::release_when_idle(); // no other tree starts
/// let finished = child.wait().await?; // the watchdog goes as it ends
/// println!("{:?}", finished.outcome);
/// corral::watchdog::shutdown(); // reaps it, seldom waiting
/// # Ok(())
/// # }
/// ```
pub fn release_when_idle() {
    RELEASE_WHEN_IDLE.store(true, Ordering::SeqCst);
    release();
}

/// Lets the watchdog `guard` holds go if it watches no tree.
fn let_go_if_idle(mut guard: MutexGuard<'_, Option<Client>>) {
    if guard
        .as_ref()
        .is_none_or(|client| !lock(&client.watched).is_empty())
    {
        return;
    }
    let Some(client) = guard.take() else {
        return;
    };
    drop(guard);
    RELEASE_WHEN_IDLE.store(false, Ordering::SeqCst);
    let hung_up = HungUp::of(client);
    // It guards nothing: killed, it exits at once, without waking to read
    // the end of its socket first, and even if it is stopped.
    let _ = sys::pidfd_signal(&hung_up.pidfd, crate::Signal::KILL);
    let before = lock(&RELEASED).replace(hung_up);
    // One let go before (release, a spawn, release again) is reaped now:
    // none is left a zombie.
    if let Some(before) = before {
        before.reap();
    }
}

/// Stops the watchdog after the owner's work is done (it would stop by itself
/// when this process exits): closes the socket and reaps the helper (one let
/// go by [`release`] too).
pub fn shutdown() {
    let released = lock(&RELEASED).take();
    let client = lock(&CLIENT).take();
    for hung_up in released.into_iter().chain(client.map(HungUp::of)) {
        hung_up.reap();
    }
}

/// Stops the watchdog of a process that exits right after, without waiting
/// for it: closes this side of the socket,
/// so the helper sees end-of-file, ends whatever tree it still knows of
/// (none, after a clean finish) and exits by itself; this process's own exit
/// hands it to init (or the nearest subreaper), which reaps it. While
/// messages are still queued for the helper this is [`shutdown`], which lets
/// the writer thread deliver them first. Call it last: until this process
/// exits, the helper stays an unreaped zombie. The helper may still be
/// running (in this process's cgroup) when this process's exit is seen;
/// the `corral` command calls [`shutdown`] for that reason.
pub fn shutdown_before_exit() {
    let mut guard = lock(&CLIENT);
    if guard
        .as_ref()
        .is_some_and(|c| c.queued.load(Ordering::SeqCst) > 0)
    {
        drop(guard);
        return shutdown();
    }
    // Nothing is queued, and nothing else sends any more: dropping the last
    // handle on the socket is all the helper needs.
    drop(guard.take());
}

/// Starts the watchdog now by forking this process instead of executing a
/// helper program: about a tenth of the cost, for a short-lived program that
/// supervises one command (the `corral` command calls it right after parsing
/// its arguments). Must be called while this process has a single thread,
/// before any async runtime or thread starts; later spawns use this
/// watchdog. A no-op if a watchdog already runs.
///
/// # Errors
/// If other threads already run (forking would copy locks held by them), or
/// the fork fails. Spawns then start a watchdog the usual way.
pub fn fork_now() -> Result<(), String> {
    fork(Monitor::Thread)
}

/// [`fork_now`] for a program that watches the watchdog from its own Tokio
/// runtime with [`watch_over`] instead of a thread of corral's: a
/// short-lived supervisor saves the thread's start (about a tenth of a
/// millisecond, and every later page copied after the fork flushing the
/// other CPU's TLB). The program must then poll [`watch_over`] while its
/// trees run (beside them in a `select!`): a watchdog that dies while nothing
/// polls it is replaced only at the owner's next spawn (whose message to it
/// fails), so a tree that outlives it is unguarded until then. The runtime
/// must have its I/O driver on (`enable_io`, as [`Child::wait`](crate::Child::wait)
/// needs too): [`watch_over`] panics in one without.
/// A watchdog started again after one died is watched by a thread, as
/// [`fork_now`]'s.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let mut child = corral::Command::new("make").spawn()?;
/// let finished = tokio::select! {
///     finished = child.wait() => finished?,
///     () = corral::watchdog::watch_over() => child.wait().await?,
/// };
/// # let _ = finished;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As [`fork_now`].
pub fn fork_now_for_runtime() -> Result<(), String> {
    fork(Monitor::Caller)
}

/// Watches the watchdog that [`fork_now_for_runtime`] started, from the
/// caller's Tokio runtime (the reactor waits on its pidfd: no thread, no
/// polling): if it dies while this future is polled, a new one is started
/// and told every live tree (blocking this task for the millisecond that
/// takes), and the future resolves; [`lost`] says if that failed. It never
/// resolves while the watchdog lives, nor when there is none to watch this
/// way (none was forked for a runtime, or it was let go or replaced), so a
/// `select!` branch on it never spins. Outside a Tokio runtime it hands the
/// watching to a thread, as [`fork_now`] does, and resolves.
///
/// # Panics
/// In a Tokio runtime built without its I/O driver (`enable_io`).
///
/// ```no_run
/// # async fn example(mut child: corral::Child) -> Result<(), corral::Error> {
/// // Beside the tree, polled once to its end (then the branch is off).
/// let mut wait = std::pin::pin!(child.wait());
/// let mut watch_over = std::pin::pin!(corral::watchdog::watch_over());
/// let mut watching = true;
/// let finished = loop {
///     tokio::select! {
///         finished = &mut wait => break finished?,
///         () = &mut watch_over, if watching => watching = false,
///     }
/// };
/// # let _ = finished;
/// # Ok(())
/// # }
/// ```
pub async fn watch_over() {
    let Some(watching) = lock(&CALLER_WATCHED).clone() else {
        return std::future::pending().await;
    };
    if tokio::runtime::Handle::try_current().is_err() {
        hand_to_thread(&watching);
        return;
    }
    match sys::pidfd_wait(watching.pidfd.as_fd()).await {
        Ok(()) => {}
        Err(error) => {
            tracing::warn!(%error, "cannot watch the watchdog from the runtime: a thread does");
            hand_to_thread(&watching);
            return;
        }
    }
    let current = {
        let mut guard = lock(&CALLER_WATCHED);
        let current = guard.as_ref().is_some_and(|w| w.helper == watching.helper);
        if current {
            *guard = None;
        }
        current
    };
    if !current {
        // Let go, or replaced already: no longer this future's to watch.
        return std::future::pending().await;
    }
    client::replace_if_current(watching.helper);
}

/// Gives the watching of `watching` to a thread (if no one else took it
/// meanwhile).
fn hand_to_thread(watching: &Watching) {
    let mut guard = lock(&CALLER_WATCHED);
    if guard.as_ref().is_none_or(|w| w.helper != watching.helper) {
        return;
    }
    *guard = None;
    drop(guard);
    let started = watching
        .pidfd
        .try_clone()
        .map_err(|e| format!("pidfd for the watchdog: {e}"))
        .and_then(|pidfd| client::start_monitor(pidfd, watching.helper));
    if let Err(error) = started {
        tracing::warn!(%error, "the watchdog is not watched: one that dies is replaced at the next spawn");
    }
}

fn fork(monitor: Monitor) -> Result<(), String> {
    if lock(&CLIENT).is_some() {
        return Ok(());
    }
    if !sys::single_threaded() {
        return Err(
            "other threads are running: call corral::watchdog::fork_now() first in main".to_owned(),
        );
    }
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
    match sys::fork().map_err(|e| format!("fork: {e}"))? {
        sys::Forked::Child => {
            drop(ours);
            helper::run_forked(theirs)
        }
        sys::Forked::Parent(pid) => {
            drop(theirs);
            let client = Client::adopt(ours, pid, Shared::default(), monitor)?;
            *lock(&CLIENT) = Some(client);
            Ok(())
        }
    }
}

/// Has the watchdog kill this tree if the owner dies (starting the watchdog
/// if needed). Sending again with the same id replaces the entry.
pub(crate) fn watch(record: &Record) -> Result<(), String> {
    let mut guard = lock(&CLIENT);
    if guard.is_none() {
        *guard = Some(Client::start(Shared::default(), &[])?.0);
    }
    let client = guard.as_ref().ok_or("no watchdog")?;
    if client.watch(record, crate::owner::ledger::dir()).is_err() {
        // The helper died: the monitor restarts it, but do not wait for it.
        let restarted = Client::restart(guard.take()).inspect_err(|error| mark_lost(error))?;
        *guard = Some(restarted);
    }
    Ok(())
}

/// The running members of a scanned tree are now `members`: the watchdog is
/// told what changed (see [`Message::Members`](protocol::Message::Members)).
pub(crate) fn members(id: &str, members: &[Identity]) {
    if let Some(client) = lock(&CLIENT).as_ref() {
        let _ = client.members(id, members);
    }
}

/// The tree is gone: the watchdog no longer needs to know of it.
pub(crate) fn forget(id: &str) {
    let guard = lock(&CLIENT);
    if let Some(client) = guard.as_ref() {
        let _ = client.forget(id);
    }
    if RELEASE_WHEN_IDLE.load(Ordering::SeqCst) {
        let_go_if_idle(guard);
    }
}
