//! The owner's side of the socket ([`Client`]): the helper started (or
//! restarted, telling it every live tree), and messages sent without ever
//! blocking the owner.

use std::{
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::{net::UnixStream, process::CommandExt},
    },
    path::PathBuf,
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc::{SyncSender, TrySendError},
    },
};

use super::{
    program::{HOOK_ARG, executable, runnable},
    protocol::{Message, delta, line_of},
    state::{Shared, Watched, lock, snapshot},
    writer::Writer,
};
use crate::{identity, identity::Identity, ledger::Record, sys};

pub(super) static CLIENT: Mutex<Option<Client>> = Mutex::new(None);
/// See [`lost`](super::lost).
pub(super) static LOST: Mutex<Option<String>> = Mutex::new(None);

/// Records why the watchdog is gone for good (see [`lost`](super::lost)).
pub(super) fn mark_lost(error: &str) {
    *lock(&LOST) = Some(format!(
        "the watchdog died and could not be started again ({error})"
    ));
}

/// Messages the owner queues for the helper at most; past this (or past
/// [`QUEUE_BYTES`]) the helper is not reading (stopped, or stuck), and the
/// owner drops messages instead of waiting: a spawn never blocks on the
/// watchdog. Once the helper reads again, the writer thread sends a
/// [`Message::Reset`] and the whole current state, so nothing is lost but
/// the intermediate steps.
pub(super) const QUEUE_MESSAGES: usize = 1024;
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
pub(super) struct Client {
    pub(super) stream: Arc<UnixStream>,
    pub(super) queue: SyncSender<Vec<u8>>,
    /// Bytes queued or being written by the writer thread: while not zero,
    /// messages are queued behind them instead of written at once.
    pub(super) queued: Arc<AtomicUsize>,
    /// Messages were dropped: the writer must send the whole state once the
    /// queue drains. While set, new messages are not queued (the state it
    /// sends will include them).
    resync: Arc<AtomicBool>,
    /// The writer thread, until the first message that has to be queued
    /// starts it: while the socket takes every message at once (the usual
    /// case) no thread is started for it.
    pub(super) writer: Mutex<Option<Writer>>,
    /// The helper, our child, for reaping it.
    pub(super) pidfd: OwnedFd,
    /// (pid, start time).
    pub(super) helper: (i32, u64),
    /// Every live tree, shared with the writer thread for a resync. A change
    /// and its message are made under this lock, and the writer takes the
    /// whole state under it: every message queued later applies on top.
    pub(super) watched: Shared,
}

impl Client {
    /// Starts a helper whose socket already holds as much of `preload` as
    /// its buffer takes; that length comes back beside the client.
    pub(super) fn start(watched: Shared, preload: &[u8]) -> Result<(Self, usize), String> {
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
        // Started from the monitor thread (every signal blocked) or the
        // owner's (its held signals): it blocks none from its first
        // instruction.
        sys::exec_unblocked(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start the watchdog {}: {e}", program.display()))?;
        tracing::debug!(pid = child.id(), program = %program.display(), "watchdog started");
        // From here on the helper is reaped through its pidfd; without one
        // (an old kernel) it is not kept, and not left a zombie either.
        Self::adopt(ours, child.id() as i32, watched, Monitor::Thread)
            .map(|client| (client, preloaded))
            .inspect_err(|_| {
                let _ = child.kill();
                let _ = child.wait();
            })
    }

    /// Takes charge of a freshly started helper (our unreaped child, so its
    /// pidfd is certainly it): the writer thread starts with the first
    /// message the socket does not take, and `monitor` says who replaces the
    /// helper if it dies.
    pub(super) fn adopt(
        stream: UnixStream,
        pid: i32,
        watched: Shared,
        monitor: Monitor,
    ) -> Result<Self, String> {
        let start_time = identity::read_stat(pid).map(|s| s.start_time).unwrap_or(0);
        let pidfd = sys::pidfd_open(pid).map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        let monitored = pidfd
            .try_clone()
            .map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        let client = Self::connect(stream, pidfd, (pid, start_time), watched)?;
        match monitor {
            Monitor::Thread => start_monitor(monitored, (pid, start_time))?,
            Monitor::Caller => {
                *lock(&CALLER_WATCHED) = Some(Watching {
                    pidfd: Arc::new(monitored),
                    helper: (pid, start_time),
                });
            }
        }
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
        sys::spawn_unsignalled(
            std::thread::Builder::new().name("corral-watchdog-writer".to_owned()),
            move || writer.run(),
        )
        .map(drop)
    }

    /// Replaces a dead helper, telling the new one every live tree.
    pub(super) fn restart(old: Option<Client>) -> Result<Self, String> {
        let watched = match old {
            Some(old) => {
                stop_caller_watching(old.helper);
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

    pub(super) fn watch(&self, record: &Record, ledger: PathBuf) -> io::Result<()> {
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

    pub(super) fn members(&self, id: &str, members: &[Identity]) -> io::Result<()> {
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

    pub(super) fn forget(&self, id: &str) -> io::Result<()> {
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

/// Who replaces a helper that dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Monitor {
    /// A thread of its own, blocked on the helper's pidfd.
    Thread,
    /// The caller's async runtime, through [`watch_over`](super::watch_over):
    /// the helper is left in [`CALLER_WATCHED`] for it.
    Caller,
}

/// The helper whose death the caller's runtime watches for (see
/// [`Monitor::Caller`]).
#[derive(Debug, Clone)]
pub(super) struct Watching {
    pub(super) pidfd: Arc<OwnedFd>,
    pub(super) helper: (i32, u64),
}

/// See [`Watching`]; cleared once its helper is gone or let go.
pub(super) static CALLER_WATCHED: Mutex<Option<Watching>> = Mutex::new(None);

/// The caller's runtime no longer watches `helper` (let go, or replaced):
/// [`watch_over`](super::watch_over) then stays pending, and its pidfd is
/// closed.
pub(super) fn stop_caller_watching(helper: (i32, u64)) {
    let mut watching = lock(&CALLER_WATCHED);
    if watching.as_ref().is_some_and(|w| w.helper == helper) {
        *watching = None;
    }
}

/// Starts the thread that replaces the helper `(pid, start time)` when its
/// `pidfd` says it died. It blocks every signal: a supervisor that holds its
/// own (`host::hold_signals`) may start after it.
pub(super) fn start_monitor(pidfd: OwnedFd, helper: (i32, u64)) -> Result<(), String> {
    sys::spawn_unsignalled(
        std::thread::Builder::new().name("corral-watchdog-monitor".to_owned()),
        move || {
            if sys::wait_readable(pidfd.as_fd()).is_ok() {
                replace_if_current(helper);
            }
        },
    )
    .map(drop)
    .map_err(|e| format!("cannot start the watchdog monitor thread: {e}"))
}

/// The helper `helper` died: if it is still the current one, starts a new
/// one and tells it every live tree.
pub(super) fn replace_if_current(helper: (i32, u64)) {
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
        collections::HashSet,
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
}
