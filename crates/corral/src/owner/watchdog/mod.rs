//! Nothing outlives its owner: a watchdog process per owner.
//!
//! When the process that owns trees dies without running any cleanup
//! (`SIGKILL`, an abort, the OOM killer), somebody alive must do the killing.
//! The first spawn starts a small helper process (see [`executable`] for
//! which): the program named by [`set_executable`] or `$CORRAL_WATCHDOG`, or
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
//! a small thread and, if the helper dies, starts a new one and tells it every
//! live tree again. The helper runs in a process group of its own, so a
//! terminal's Ctrl-C, which may kill the owner, does not reach it.

mod helper;

use std::{
    collections::{HashMap, HashSet},
    io::{self, Write},
    os::{
        fd::{AsFd, OwnedFd},
        unix::{net::UnixStream, process::CommandExt},
    },
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc::{Receiver, SyncSender, TryRecvError, TrySendError},
    },
};

use serde::{Deserialize, Serialize};

use crate::{
    identity,
    ledger::{Identity, Record},
    sys,
};

/// The argument that makes a hooked program run as the watchdog.
pub const HOOK_ARG: &str = "__corral-watchdog";

static HOOKED: AtomicBool = AtomicBool::new(false);
static EXECUTABLE: Mutex<Option<PathBuf>> = Mutex::new(None);
static CLIENT: Mutex<Option<Client>> = Mutex::new(None);
/// See [`lost`].
static LOST: Mutex<Option<String>> = Mutex::new(None);

/// Call first thing in `main` of a program that uses corral:
///
/// ```no_run
/// corral::watchdog::hook();
/// // ... the rest of `main`
/// ```
///
/// When the program was started as corral's watchdog (with [`HOOK_ARG`]), this
/// runs the watchdog and never returns. Otherwise it records that this
/// executable can serve as its own watchdog, and returns at once.
pub fn hook() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == HOOK_ARG)
    {
        helper::run();
    }
    HOOKED.store(true, Ordering::SeqCst);
}

/// Uses this program (which must call [`hook`] in its `main`, or be the
/// `corral` command) as the watchdog.
pub fn set_executable(path: impl Into<PathBuf>) {
    *lock(&EXECUTABLE) = Some(path.into());
}

/// The watchdog executable, or why there is none. In this order:
/// [`set_executable`], then `$CORRAL_WATCHDOG` (which must be an absolute
/// path: a relative one would be looked up in whatever directory or `PATH`
/// the helper happens to start with), then this program if it called
/// [`hook`].
///
/// # Errors
/// A one-line reason, naming what to change.
pub fn executable() -> Result<PathBuf, String> {
    if let Some(path) = lock(&EXECUTABLE).clone() {
        return Ok(path);
    }
    if let Some(path) = from_env(std::env::var_os("CORRAL_WATCHDOG")) {
        return path;
    }
    if HOOKED.load(Ordering::SeqCst) {
        return sys::current_exe()
            .map(PathBuf::from)
            .map_err(|e| format!("cannot find this executable: {e}"));
    }
    Err(
        "no watchdog executable: call corral::watchdog::hook() first in main, \
         or set CORRAL_WATCHDOG to the corral binary"
            .to_owned(),
    )
}

/// What to execute for the watchdog `program`: this process's own
/// executable through `/proc/self/exe` when `program` is its path, so that a
/// watchdog started (or restarted) after that path was deleted or replaced
/// (an upgrade in place) is still this program, the one that speaks this
/// owner's protocol; any other program by its path.
fn runnable(program: &std::path::Path) -> PathBuf {
    match sys::current_exe() {
        Ok(me) if me == program => PathBuf::from("/proc/self/exe"),
        _ => program.to_owned(),
    }
}

/// Why owner death is unguarded for the rest of this process, if the
/// watchdog died and could not be started again (for instance because
/// `fork` was refused): trees are then still recorded in the crash ledger,
/// for `corral reap`, but nothing ends them if the owner dies. `None` while a
/// watchdog runs or none was ever needed.
pub fn lost() -> Option<String> {
    lock(&LOST).clone()
}

/// Records why the watchdog is gone for good (see [`lost`]).
fn mark_lost(error: &str) {
    *lock(&LOST) = Some(format!(
        "the watchdog died and could not be started again ({error})"
    ));
}

/// `$CORRAL_WATCHDOG`, if set: an absolute path, or why it is refused.
fn from_env(value: Option<std::ffi::OsString>) -> Option<Result<PathBuf, String>> {
    let path = PathBuf::from(value.filter(|p| !p.is_empty())?);
    Some(if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "CORRAL_WATCHDOG={} is not an absolute path: set it to the full path \
             of the corral binary (e.g. \"$(command -v corral)\") or unset it",
            path.display()
        ))
    })
}

/// The watchdog's pid, if one is running.
pub fn helper_pid() -> Option<i32> {
    lock(&CLIENT).as_ref().map(|c| c.helper.0)
}

/// Stops the watchdog after the owner's work is done (it would stop by itself
/// when this process exits): closes the socket and reaps the helper.
pub fn shutdown() {
    let client = lock(&CLIENT).take();
    if let Some(client) = client {
        // The writer sends what is queued, then drops the last handle on the
        // socket: the helper sees end-of-file and exits.
        let Client {
            stream,
            queue,
            writer,
            pidfd,
            helper,
            ..
        } = client;
        drop(queue);
        drop(stream);
        // A writer that never started holds the socket too.
        drop(writer);
        sys::reap_within(pidfd.as_fd(), std::time::Duration::from_secs(1));
        crate::contain::unexempt(helper);
    }
}

/// Stops the watchdog of a process that exits right after, without waiting
/// for it (the `corral` command's last step): closes this side of the socket,
/// so the helper sees end-of-file, ends whatever tree it still knows of
/// (none, after a clean finish) and exits by itself; this process's own exit
/// hands it to init (or the nearest subreaper), which reaps it. While
/// messages are still queued for the helper this is [`shutdown`], which lets
/// the writer thread deliver them first. Call it last: until this process
/// exits, the helper stays an unreaped zombie.
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
            let client = Client::adopt(ours, pid, Shared::default())?;
            *lock(&CLIENT) = Some(client);
            Ok(())
        }
    }
}

/// One message to the helper, a JSON line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Message {
    /// Kill this tree if the owner dies; remove its record from `ledger`.
    /// Sending again with the same id replaces the entry.
    Watch {
        record: Box<Record>,
        ledger: PathBuf,
    },
    /// The members of a scanned tree changed: only what changed is sent, and
    /// members that exited are dropped, so an update stays as small as the
    /// change whatever the size of the tree.
    Members {
        id: String,
        #[serde(default)]
        added: Vec<Identity>,
        #[serde(default)]
        removed: Vec<Identity>,
    },
    /// The tree is gone: forget it.
    Forget { id: String },
    /// Forget every tree: the whole state follows (after the owner had to
    /// drop messages, see [`QUEUE_MESSAGES`]).
    Reset,
}

/// What the owner keeps per tree: enough to tell a new helper everything.
#[derive(Debug, Clone)]
struct Watched {
    record: Record,
    ledger: PathBuf,
}

/// Messages the owner queues for the helper at most; past this (or past
/// [`QUEUE_BYTES`]) the helper is not reading (stopped, or stuck), and the
/// owner drops messages instead of waiting: a spawn never blocks on the
/// watchdog. Once the helper reads again, the writer thread sends a
/// [`Message::Reset`] and the whole current state, so nothing is lost but
/// the intermediate steps.
const QUEUE_MESSAGES: usize = 1024;
/// Bytes queued for the helper at most (see [`QUEUE_MESSAGES`]).
const QUEUE_BYTES: usize = 4 << 20;

/// The owner's side of the socket. A message is written at once without
/// blocking (`send` with `MSG_DONTWAIT`) while nothing is queued: then
/// it is in the kernel before the spawn goes on, and an owner killed right
/// after still has it delivered. What does not fit (the helper is not
/// reading) goes to a bounded queue that a dedicated writer thread drains
/// with blocking writes: a helper that stops reading (e.g. `SIGSTOP`ped)
/// costs memory up to the bound, then a resync, never a frozen spawn. What
/// is queued when the owner dies is lost with it (a stopped helper could not
/// have acted on it before being resumed anyway).
struct Client {
    stream: Arc<UnixStream>,
    queue: SyncSender<Vec<u8>>,
    /// Bytes queued or being written by the writer thread: while not zero,
    /// messages are queued behind them instead of written at once.
    queued: Arc<AtomicUsize>,
    /// Messages were dropped: the writer must send the whole state once the
    /// queue drains. While set, new messages are not queued (the state it
    /// sends will include them).
    resync: Arc<AtomicBool>,
    /// The writer thread, until the first message that has to be queued
    /// starts it: while the socket takes every message at once (the usual
    /// case) no thread is started for it.
    writer: Mutex<Option<Writer>>,
    /// The helper, our child, for reaping it.
    pidfd: OwnedFd,
    /// (pid, start time).
    helper: (i32, u64),
    /// Every live tree, shared with the writer thread for a resync. A change
    /// and its message are made under this lock, and the writer takes the
    /// whole state under it: every message queued later applies on top.
    watched: Shared,
}

type Shared = Arc<Mutex<HashMap<String, Watched>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
/// told what changed (see [`Message::Members`]).
pub(crate) fn members(id: &str, members: &[Identity]) {
    if let Some(client) = lock(&CLIENT).as_ref() {
        let _ = client.members(id, members);
    }
}

/// The tree is gone: the watchdog no longer needs to know of it.
pub(crate) fn forget(id: &str) {
    if let Some(client) = lock(&CLIENT).as_ref() {
        let _ = client.forget(id);
    }
}

/// `message` as a JSON line.
fn line_of(message: &Message) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The whole state as lines: [`Message::Reset`], then every tree.
fn snapshot(watched: &HashMap<String, Watched>) -> Vec<u8> {
    let mut lines = line_of(&Message::Reset);
    for entry in watched.values() {
        lines.extend(line_of(&Message::Watch {
            record: Box::new(entry.record.clone()),
            ledger: entry.ledger.clone(),
        }));
    }
    lines
}

/// What changed from `old` to `new`: (added, removed).
fn delta(old: &[Identity], new: &[Identity]) -> (Vec<Identity>, Vec<Identity>) {
    let before: HashSet<&Identity> = old.iter().collect();
    let after: HashSet<&Identity> = new.iter().collect();
    let added = new.iter().filter(|m| !before.contains(m)).copied();
    let removed = old.iter().filter(|m| !after.contains(m)).copied();
    (added.collect(), removed.collect())
}

impl Client {
    /// Starts a helper whose socket already holds as much of `preload` as
    /// its buffer takes; that length comes back beside the client.
    fn start(watched: Shared, preload: &[u8]) -> Result<(Self, usize), String> {
        let program = executable()?;
        let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let mut preloaded = 0;
        while preloaded < preload.len() {
            match sys::send_now(ours.as_fd(), preload.get(preloaded..).unwrap_or_default()) {
                Ok(0) | Err(_) => break,
                Ok(written) => preloaded += written,
            }
        }
        let mut command = std::process::Command::new(runnable(&program));
        command
            .arg0(&program)
            .arg(HOOK_ARG)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the watchdog {}: {e}", program.display()))?;
        tracing::debug!(pid = child.id(), program = %program.display(), "watchdog started");
        // From here on the helper is reaped through its pidfd; without one
        // (an old kernel) it is not kept, and not left a zombie either.
        Self::adopt(ours, child.id() as i32, watched)
            .map(|client| (client, preloaded))
            .inspect_err(|_| {
                let _ = child.kill();
                let _ = child.wait();
            })
    }

    /// Takes charge of a freshly started helper (our unreaped child, so its
    /// pidfd is certainly it) and starts the threads that write to it and
    /// watch it.
    fn adopt(stream: UnixStream, pid: i32, watched: Shared) -> Result<Self, String> {
        let start_time = identity::read_stat(pid).map(|s| s.start_time).unwrap_or(0);
        let pidfd = sys::pidfd_open(pid).map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        let monitored = pidfd
            .try_clone()
            .map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        let client = Self::connect(stream, pidfd, (pid, start_time), watched)?;
        std::thread::Builder::new()
            .name("corral-watchdog-monitor".to_owned())
            .spawn(move || monitor(monitored, (pid, start_time)))
            .map_err(|e| format!("cannot start the watchdog monitor thread: {e}"))?;
        Ok(client)
    }

    /// The owner's side of `stream`; its writer thread starts with the first
    /// message the socket does not take at once.
    fn connect(
        stream: UnixStream,
        pidfd: OwnedFd,
        helper: (i32, u64),
        watched: Shared,
    ) -> Result<Self, String> {
        let (queue, receiver) = std::sync::mpsc::sync_channel(QUEUE_MESSAGES);
        let queued = Arc::new(AtomicUsize::new(0));
        let resync = Arc::new(AtomicBool::new(false));
        let stream = Arc::new(stream);
        let writer = Writer {
            stream: Arc::clone(&stream),
            queue: receiver,
            queued: Arc::clone(&queued),
            resync: Arc::clone(&resync),
            watched: Arc::clone(&watched),
        };
        // No subreaper tree of this process may take the helper for an
        // orphan of its own.
        crate::contain::exempt(helper);
        Ok(Self {
            stream,
            queue,
            queued,
            resync,
            writer: Mutex::new(Some(writer)),
            pidfd,
            helper,
            watched,
        })
    }

    /// Starts the writer thread if it has not started yet.
    fn start_writer(&self) -> io::Result<()> {
        let Some(writer) = lock(&self.writer).take() else {
            return Ok(());
        };
        std::thread::Builder::new()
            .name("corral-watchdog-writer".to_owned())
            .spawn(move || writer.run())
            .map(drop)
    }

    /// Replaces a dead helper, telling the new one every live tree.
    fn restart(old: Option<Client>) -> Result<Self, String> {
        let watched = match old {
            Some(old) => {
                sys::reap_within(old.pidfd.as_fd(), std::time::Duration::from_secs(1));
                crate::contain::unexempt(old.helper);
                old.watched
            }
            None => Shared::default(),
        };
        // The whole state goes into the socket before the new helper
        // exists: if we die the moment it does, it still reads every tree
        // (what the socket's buffer took), then end-of-file. The lock keeps
        // the state as sent until the rest, if any, follows in order.
        let shared = Arc::clone(&watched);
        let state = lock(&shared);
        let lines = snapshot(&state);
        let (client, preloaded) = Self::start(watched, &lines)?;
        if crate::fault::active("slow-watchdog-restart") {
            // The owner dies before it could tell the new helper anything.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        if let Some(rest) = lines.get(preloaded..).filter(|rest| !rest.is_empty()) {
            client
                .send(rest.to_vec())
                .map_err(|e| format!("the new watchdog is not listening: {e}"))?;
        }
        tracing::warn!(
            pid = client.helper.0,
            trees = state.len(),
            "watchdog died; started a new one"
        );
        drop(state);
        Ok(client)
    }

    fn watch(&self, record: &Record, ledger: PathBuf) -> io::Result<()> {
        let entry = Watched {
            record: record.clone(),
            ledger,
        };
        let line = line_of(&Message::Watch {
            record: Box::new(entry.record.clone()),
            ledger: entry.ledger.clone(),
        });
        let mut watched = lock(&self.watched);
        watched.insert(record.id.clone(), entry);
        self.send(line)
    }

    fn members(&self, id: &str, members: &[Identity]) -> io::Result<()> {
        let mut watched = lock(&self.watched);
        let Some(entry) = watched.get_mut(id) else {
            return Ok(());
        };
        let (added, removed) = delta(&entry.record.members, members);
        if added.is_empty() && removed.is_empty() {
            return Ok(());
        }
        entry.record.members = members.to_vec();
        self.send(line_of(&Message::Members {
            id: id.to_owned(),
            added,
            removed,
        }))
    }

    fn forget(&self, id: &str) -> io::Result<()> {
        let mut watched = lock(&self.watched);
        watched.remove(id);
        self.send(line_of(&Message::Forget { id: id.to_owned() }))
    }

    /// Sends `line` to the helper without ever blocking: written at once if
    /// nothing is queued and the socket takes it, else queued for the writer
    /// thread; if the queue is full, dropped, and the writer resyncs (the
    /// state is in `watched`). An error means the helper's socket broke.
    /// Call with the `watched` lock held, the change already made.
    fn send(&self, mut line: Vec<u8>) -> io::Result<()> {
        if self.resync.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.queued.load(Ordering::SeqCst) == 0 {
            // The writer thread is idle (and stays so: only a sender, under
            // the `watched` lock, gives it work): this write cannot mix
            // with one of its own.
            match self.write_now(&line) {
                Ok(written) if written == line.len() => return Ok(()),
                // The rest of a line must follow it, whatever the bound:
                // the queue is empty, so it fits.
                Ok(written) => return self.enqueue(line.split_off(written)),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(error),
            }
        }
        if self.queued.load(Ordering::SeqCst) + line.len() > QUEUE_BYTES {
            return self.overflow();
        }
        match self.enqueue(line) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.overflow(),
            other => other,
        }
    }

    /// One write that does not wait: how much of `line` the socket took.
    fn write_now(&self, line: &[u8]) -> io::Result<usize> {
        sys::send_now(self.stream.as_fd(), line)
    }

    fn enqueue(&self, line: Vec<u8>) -> io::Result<()> {
        self.start_writer()?;
        let len = line.len();
        self.queued.fetch_add(len, Ordering::SeqCst);
        self.queue.try_send(line).map_err(|error| {
            self.queued.fetch_sub(len, Ordering::SeqCst);
            match error {
                TrySendError::Full(_) => io::ErrorKind::WouldBlock.into(),
                TrySendError::Disconnected(_) => io::ErrorKind::BrokenPipe.into(),
            }
        })
    }

    fn overflow(&self) -> io::Result<()> {
        tracing::warn!(
            pid = self.helper.0,
            "the watchdog is not reading (stopped?): dropping updates until it does, then resending all"
        );
        self.resync.store(true, Ordering::SeqCst);
        self.start_writer()?;
        // Wakes the writer if it is idle (everything was written at once
        // until the socket filled up); a full queue wakes it by itself.
        let _ = self.queue.try_send(Vec::new());
        Ok(())
    }
}

/// The thread that owns the socket and does the (blocking) writes.
struct Writer {
    stream: Arc<UnixStream>,
    queue: Receiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    resync: Arc<AtomicBool>,
    watched: Shared,
}

impl Writer {
    /// Writes what is queued until the owner drops its side (shutdown, or a
    /// replaced helper) or the socket breaks; when the queue is empty and
    /// messages were dropped, writes the whole state instead.
    fn run(self) {
        loop {
            let line = match self.queue.try_recv() {
                Ok(line) => line,
                // Also when the owner shuts down: the helper's last state
                // must be the true one.
                Err(_) if self.resync.load(Ordering::SeqCst) => {
                    let watched = lock(&self.watched);
                    // Under the lock: every later change is queued after
                    // this state and applies on top of it.
                    self.resync.store(false, Ordering::SeqCst);
                    let lines = snapshot(&watched);
                    self.queued.fetch_add(lines.len(), Ordering::SeqCst);
                    lines
                }
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) => match self.queue.recv() {
                    Ok(line) => line,
                    Err(_) => return,
                },
            };
            let written = (&*self.stream).write_all(&line);
            // Counted until written: senders do not write past it meanwhile.
            self.queued.fetch_sub(line.len(), Ordering::SeqCst);
            if written.is_err() {
                return;
            }
        }
    }
}

/// Waits for the helper to die; if it is still the current one, replaces it.
fn monitor(pidfd: OwnedFd, helper: (i32, u64)) {
    if sys::wait_readable(pidfd.as_fd()).is_err() {
        return;
    }
    let mut guard = lock(&CLIENT);
    if guard.as_ref().is_some_and(|c| c.helper == helper) {
        match Client::restart(guard.take()) {
            Ok(client) => *guard = Some(client),
            Err(error) => {
                tracing::error!(%error, "the watchdog died and cannot be restarted: owner death is unguarded");
                mark_lost(&error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead, BufReader},
        time::{Duration, Instant},
    };

    use super::*;

    /// An owner's side whose helper is this test: it reads (or not) the
    /// other end of the socket.
    fn client() -> (Client, UnixStream) {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let pidfd = sys::pidfd_open(sys::getpid()).expect("pidfd");
        let client = Client::connect(ours, pidfd, (0, 0), Shared::default()).expect("client");
        (client, theirs)
    }

    fn lines(stream: UnixStream) -> Vec<String> {
        BufReader::new(stream)
            .lines()
            .map(|l| l.expect("line"))
            .collect()
    }

    fn ids(range: std::ops::RangeInclusive<i32>) -> Vec<Identity> {
        range.map(|pid| Identity { pid, start_time: 1 }).collect()
    }

    /// A tree of a thousand members that gains one and loses one costs an
    /// update of two identities, not of a thousand; an unchanged set costs
    /// nothing.
    #[test]
    fn member_updates_carry_only_the_change() {
        let (client, helper) = client();
        client
            .watch(&Record::sample("tree-1"), "/run/corral".into())
            .expect("watch");
        client.members("tree-1", &ids(1..=1000)).expect("members");
        client.members("tree-1", &ids(2..=1001)).expect("members");
        client.members("tree-1", &ids(2..=1001)).expect("members");
        client.forget("tree-1").expect("forget");
        drop(client);
        let lines = lines(helper);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        assert!(
            lines[1].len() > 1000 * 20,
            "the first update names them all"
        );
        assert!(lines[2].len() < 200, "{}", lines[2]);
        let update: Message = serde_json::from_str(&lines[2]).expect("json");
        let Message::Members { added, removed, .. } = update else {
            panic!("{}", lines[2]);
        };
        assert_eq!((added, removed), (ids(1001..=1001), ids(1..=1)));
    }

    /// A helper that does not read (stopped) never blocks the owner: past
    /// the queue's bound updates are dropped; once it reads again it gets a
    /// reset and the whole current state.
    #[test]
    fn a_helper_that_does_not_read_never_blocks_the_owner() {
        let (client, helper) = client();
        let (done, finished) = std::sync::mpsc::channel();
        let owner = std::thread::spawn(move || {
            let mut record = Record::sample("tree-0");
            record.command = "x".repeat(64 << 10);
            // Far more than the socket's buffer and the queue's bound.
            for n in 0..200 {
                record.id = format!("tree-{n}");
                client.watch(&record, "/run/corral".into()).expect("watch");
                if n % 2 == 1 {
                    client.forget(&record.id).expect("forget");
                }
            }
            let _ = done.send(());
            client
        });
        let blocked = finished.recv_timeout(Duration::from_secs(10)).is_err();
        let (read, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(helper).lines() {
                let _ = read.send(line.expect("line"));
            }
        });
        let client = owner.join().expect("owner thread");
        assert!(!blocked, "the owner blocked on the helper");
        assert!(client.resync.load(Ordering::SeqCst), "updates were dropped");
        // The helper reads again: a reset comes while the owner still runs,
        // then the state.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while !seen.iter().any(|l: &String| l == "\"reset\"") {
            let left = deadline.saturating_duration_since(Instant::now());
            match received.recv_timeout(left) {
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        let live = seen.iter().any(|l| l == "\"reset\"");
        drop(client);
        seen.extend(received.iter());
        assert!(live, "no resync while the owner runs");
        let mut state: HashSet<String> = HashSet::new();
        let mut reset = false;
        for line in seen {
            match serde_json::from_str::<Message>(&line).expect("json") {
                Message::Reset => {
                    reset = true;
                    state.clear();
                }
                Message::Watch { record, .. } => {
                    state.insert(record.id);
                }
                Message::Forget { id } => {
                    state.remove(&id);
                }
                Message::Members { .. } => {}
            }
        }
        assert!(reset, "no resync after the helper read again");
        let expected: HashSet<String> = (0..200).step_by(2).map(|n| format!("tree-{n}")).collect();
        assert_eq!(state, expected);
    }

    #[test]
    fn corral_watchdog_must_be_absolute() {
        assert_eq!(from_env(None), None);
        assert_eq!(from_env(Some("".into())), None);
        assert_eq!(
            from_env(Some("/usr/bin/corral".into())),
            Some(Ok(PathBuf::from("/usr/bin/corral")))
        );
        for relative in ["corral", "./corral", "bin/corral"] {
            let refused = from_env(Some(relative.into())).expect("set");
            let reason = refused.expect_err(relative);
            assert!(reason.contains("CORRAL_WATCHDOG") && reason.contains("absolute"));
        }
    }
}
