//! The driver: spawns the leader into its containment, waits for what ends the
//! call (the leader's exit, the time limit, cancellation, drop), applies the
//! termination policy, and assembles the result.
//!
//! The leader is held by a pidfd and is not reaped until the cleanup is over,
//! so neither its pid nor its process group id can be reused while corral may
//! still signal them.

mod drive;

use std::{
    os::fd::{AsFd, OwnedFd},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::{
    net::unix::pipe,
    sync::{mpsc, oneshot},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::{
    backend::Backend,
    capture::{Captured, Reader},
    child::{Child, ChildOutput},
    command::Command,
    command::Leftovers,
    command::Stdio,
    contain::{self, AppliedLimits, Leader, Tree},
    error::Error,
    exit::Exit,
    identity::{self, Identity},
    launch::{self, Launched},
    outcome::CleanupReport,
    outcome::Finished,
    outcome::Outcome,
    outcome::SignalSent,
    outcome::Trigger,
    owner::{self, Registration},
    plan::{self, Plan},
    signal::Signal,
    sys,
    terminate::deadline_after,
};

/// When a tree found by scanning `/proc` is first re-scanned while it runs,
/// and how often after that.
const REFRESH_FIRST: Duration = Duration::from_millis(100);
const REFRESH_EVERY: Duration = Duration::from_millis(250);

/// The shortest and longest wait between two reads of a CPU-time budget:
/// the shortest bounds the overrun (at most this much per CPU), the longest
/// keeps a tree that idles for long from being read too rarely once busy.
const BUDGET_CHECK_MIN: Duration = Duration::from_millis(10);
const BUDGET_CHECK_MAX: Duration = Duration::from_secs(1);

impl Command {
    /// Starts the command as an owned tree. The tree is supervised by a task
    /// of the current tokio runtime from now on, whether or not the
    /// [`Child`] is awaited; the `Command` is left as it was, so it can be
    /// spawned again.
    ///
    /// Must be called within a tokio runtime (any flavour, with its I/O and
    /// time drivers enabled). It blocks the calling thread for the spawn
    /// itself, as `tokio::process::Command::spawn` does: checks of the
    /// working directory, credentials and limits, the leaf cgroup's
    /// `mkdir` and limit writes, `clone3`, and the crash ledger's record
    /// (a file written and renamed in the ledger directory). It does not
    /// wait for the command.
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a tokio runtime, [`Error::InvalidStdio`]
    /// or [`Error::InvalidLimits`] for settings that cannot be, and
    /// [`Error::Spawn`] if the program cannot be started,
    /// [`Error::BackendUnavailable`] if a forced backend cannot be used,
    /// [`Error::Cgroup`] if the cgroup cannot be prepared. In each case
    /// nothing is left running.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), corral::Error> {
    /// let mut child = corral::Command::new("sleep").arg("1").spawn()?;
    /// let finished = child.wait().await?;
    /// assert!(finished.outcome.success());
    /// # Ok(()) }
    /// ```
    pub fn spawn(&mut self) -> Result<Child, Error> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::NoRuntime);
        }
        spawn(self.clone())
    }

    /// Spawns and waits for the whole call, cleanup included: the
    /// counterpart of `tokio::process::Command::output`.
    ///
    /// # Cancel safety
    /// Dropping the future ends the tree (as dropping a [`Child`] does).
    ///
    /// # Errors
    /// As [`Command::spawn`] and [`Child::wait`].
    pub async fn run(&mut self) -> Result<Finished, Error> {
        self.spawn()?.wait().await
    }
}

/// Spawns `command` and starts its supervisor task; then, the first time,
/// the start-up sweep's thread (after the spawn, so that starting it
/// overlaps the command's own start on another CPU instead of delaying it;
/// the spawn never waits for the sweep either way).
pub(crate) fn spawn(command: Command) -> Result<Child, Error> {
    let spawned = spawn_tree(command);
    owner::startup_sweep();
    // A corral nested in a tree is one running the watchdog executable
    // (`contain/nested.rs`); told after the spawn, off the leader's path.
    contain::recognise_nested(owner::watchdog::executable().ok().as_deref());
    spawned
}

/// Carries out the spawn of a command [`plan::validate`] accepted:
/// reserves what a cleanup needs, prepares the containment, launches the
/// leader, and starts the supervisor. Any step that fails from the launch on
/// undoes the spawn (`Undo`).
fn spawn_tree(command: Command) -> Result<Child, Error> {
    let Plan {
        mut command,
        foreground,
    } = plan::validate(command)?;
    // What a cleanup needs is reserved before anything exists: out of
    // descriptors, the spawn is refused here, never halfway with a tree
    // running (see `RESERVED_DESCRIPTORS`).
    let mut reserve = sys::Reserve::take(RESERVED_DESCRIPTORS).map_err(|source| Error::Os {
        what: "reserving the descriptors a cleanup needs (nothing was started; raise the \
               open-file limit, `ulimit -n`, or close descriptors)",
        source,
    })?;
    let mut registration = Registration::new(&command);
    let (variable, mark) = registration.mark();
    command.env.push((variable, Some(mark)));
    let prepared = contain::prepare(command.backend, foreground, &command.limits, &mut |path| {
        registration.cgroup_reserved(path)
    })?;
    let backend = prepared.backend();
    let limits = if command.limits.is_empty() {
        None
    } else {
        let (mut applied, note) = contain::apply_limits(&prepared, &command.limits)?;
        registration.notes.extend(note);
        for (limit, value) in plan::process_limits(&command.limits) {
            if let Some(value) = value {
                applied.applied(format!("{}={value}", limit.name()));
            }
        }
        Some(applied)
    };
    registration.prepared(backend, prepared.cgroup());
    if let Some(uid) = command.uid
        && let Some(procs) = prepared.leaf_writable_by(uid, command.gid)
    {
        registration.notes.push(format!(
            "user {uid} may write {}: the command can move itself out of its leaf cgroup \
             (a member corral listed is still ended by identity); create leaves where that \
             user has no write access",
            procs.display()
        ));
    }
    // Announced before the fork, recorded once the pid is known: another
    // tree of this process never takes the new leader for its own.
    let spawning = contain::spawning();
    let launched = launch::launch(&command, &prepared)
        .map_err(|source| launch::spawn_error(&command, source))?;
    let leaf = prepared.cgroup().map(|(path, _)| path);
    let live = spawning.register(launched.pid, backend, leaf.as_deref());
    let started = Instant::now();
    let pid = launched.pid;
    let Launched {
        pidfd,
        stdin: stdin_fd,
        stdout: stdout_fd,
        stderr: stderr_fd,
        ..
    } = launched;
    // From here on, any error undoes the spawn: the guard kills the tree (or,
    // before it is started, whatever the leader started), and the leader, and
    // reaps the leader. Half of the reserve is for the steps below, the rest
    // for the cleanup: the guard's, or the supervisor's.
    reserve.release(RESERVED_DESCRIPTORS / 2);
    let mut undo = Undo::arm(&pidfd, pid, &live, prepared, reserve)?;
    let leader = crate::fault::after_launch().and_then(|()| open_leader(pid, pidfd))?;
    undo.start(&leader, &live)?;
    registration.spawned(&leader);
    let identity = Identity {
        pid,
        start_time: leader.start_time,
    };
    let limit = command.capture_limit;
    let (stdout_reader, stdout) = reader_for(stdout_fd, command.stdout, limit)?;
    let (stderr_reader, stderr) = reader_for(stderr_fd, command.stderr, limit)?;
    let stdin = stdin_fd
        .map(|fd| {
            pipe::Sender::from_owned_fd(fd).map_err(|source| Error::Os {
                what: "registering the input pipe",
                source,
            })
        })
        .transpose()?;
    let (tree, reserve) = undo.disarm();
    let cgroup = tree.cgroup_path();
    tracing::debug!(pid, %backend, program = %command.program(), "spawned");
    let stdout_tap = stdout_reader.as_ref().map(Reader::tap);
    let stderr_tap = stderr_reader.as_ref().map(Reader::tap);

    let stop = CancellationToken::new();
    let time_up = CancellationToken::new();
    let first_signal = Arc::new(std::sync::OnceLock::new());
    let (signals, forward) = mpsc::unbounded_channel();
    let dropped = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = oneshot::channel();
    let supervision = Supervision {
        tree,
        reserve: Some(reserve),
        limits,
        live: Some(live),
        leader,
        registration,
        backend,
        command,
        started,
        stop: stop.clone(),
        time_up: time_up.clone(),
        first_signal: Arc::clone(&first_signal),
        forward,
        dropped: Arc::clone(&dropped),
        stdout: stdout_reader,
        stderr: stderr_reader,
        finished: false,
    };
    tokio::spawn(async move {
        let finished = supervision.run().await;
        let _ = sender.send(finished);
    });
    Ok(Child {
        identity,
        backend,
        cgroup,
        stdin,
        stdout,
        stderr,
        stdout_tap,
        stderr_tap,
        stop,
        time_up,
        first_signal,
        signals,
        dropped,
        result: Some(receiver),
    })
}

/// How many descriptors a tree holds in reserve for its cleanup: a cleanup
/// opens at most a few at a time (`cgroup.kill`, a `/proc` file and its
/// directory, a pidfd), and the spawn's last steps as many again.
const RESERVED_DESCRIPTORS: usize = 8;

/// Undoes a half-done spawn when dropped armed: kills the tree (once
/// started; before that, what the leader started, through the prepared
/// containment: [`Prepared::kill_unstarted`](contain::Prepared::kill_unstarted))
/// and the leader, and reaps the leader. Holds its own pidfd of the leader,
/// so the leader stays ours whatever the spawn did with the other, and the
/// descriptors the cleanup needs.
struct Undo {
    pidfd: Option<OwnedFd>,
    /// The leader's pid: our unreaped child until this guard reaps it, so
    /// the number (and its process group's) stays the leader's.
    pid: i32,
    /// The tree's entry in the registry of this process's trees.
    live: u64,
    prepared: Option<contain::Prepared>,
    tree: Option<Tree>,
    reserve: sys::Reserve,
}

impl Undo {
    fn arm(
        pidfd: &OwnedFd,
        pid: i32,
        live: &contain::Live,
        prepared: contain::Prepared,
        reserve: sys::Reserve,
    ) -> Result<Self, Error> {
        match pidfd.try_clone() {
            Ok(own) => Ok(Self {
                pidfd: Some(own),
                pid,
                live: live.id(),
                prepared: Some(prepared),
                tree: None,
                reserve,
            }),
            Err(source) => {
                prepared.kill_unstarted(leader_identity(pid), live.id(), UNDO_BOUND);
                sys::kill_and_reap(pidfd.as_fd());
                Err(Error::Os {
                    what: "duplicating the leader's pidfd",
                    source,
                })
            }
        }
    }

    /// Starts the tree of the prepared containment, now that the leader is
    /// held.
    fn start(&mut self, leader: &Leader, live: &contain::Live) -> Result<(), Error> {
        let prepared = self.prepared.take().expect("started once");
        self.tree = Some(prepared.start(leader, live)?);
        Ok(())
    }

    /// The spawn is complete: the tree and the cleanup's reserve, for its
    /// supervisor.
    fn disarm(mut self) -> (Tree, sys::Reserve) {
        self.pidfd = None;
        let tree = self
            .tree
            .take()
            .expect("the tree was started before the spawn completed");
        (tree, std::mem::take(&mut self.reserve))
    }
}

/// The leader's identity, read while it is our unreaped child (so its pid
/// is its own); a start time of 0 where `/proc` cannot be read, which
/// still names it (no process started before the leader's parent).
fn leader_identity(pid: i32) -> (i32, u64) {
    (
        pid,
        identity::read_stat(pid).map_or(0, |stat| stat.start_time),
    )
}

/// How long a half-done spawn's cleanup waits for its processes to stop and
/// for the leaf to empty.
const UNDO_BOUND: Duration = Duration::from_millis(500);

impl Drop for Undo {
    fn drop(&mut self) {
        let Some(pidfd) = self.pidfd.take() else {
            return;
        };
        // The cleanup may need every descriptor held back for it.
        std::mem::take(&mut self.reserve);
        if let Some(tree) = &mut self.tree {
            tree.kill_now();
        } else if let Some(prepared) = &self.prepared {
            prepared.kill_unstarted(leader_identity(self.pid), self.live, UNDO_BOUND);
        }
        sys::kill_and_reap(pidfd.as_fd());
        if let Some(tree) = &mut self.tree {
            tree.close();
        }
    }
}

/// An output stream as the command asked for it: captured by a reader, or
/// handed to the caller as a pipe.
fn reader_for(
    stream: Option<OwnedFd>,
    mode: Stdio,
    limit: usize,
) -> Result<(Option<Reader>, Option<ChildOutput>), Error> {
    let Some(fd) = stream else {
        return Ok((None, None));
    };
    let receiver = pipe::Receiver::from_owned_fd(fd).map_err(|source| Error::Os {
        what: "registering an output pipe",
        source,
    })?;
    Ok(match mode {
        Stdio::Capture => (Some(Reader::start(receiver, limit)), None),
        _ => (None, Some(receiver)),
    })
}

/// Wraps the leader's pidfd for async waiting and reads its start time.
fn open_leader(pid: i32, pidfd: OwnedFd) -> Result<Leader, Error> {
    // `/proc` may number it otherwise (another PID namespace's `/proc`).
    let proc_pid = if sys::proc_is_own_namespace() {
        pid
    } else {
        sys::proc_pid_of(pidfd.as_fd())
            .ok()
            .flatten()
            .unwrap_or(pid)
    };
    if crate::fault::active("leader-reaped-first") {
        // Held until something else reaped the leader (up to 10 s).
        let until = Instant::now() + Duration::from_secs(10);
        let reaped = || {
            sys::pidfd_exited(pidfd.as_fd())
                && !std::path::Path::new(&format!("/proc/{proc_pid}")).exists()
        };
        while !reaped() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let start_time = match identity::read_stat(proc_pid) {
        Ok(stat) => stat.start_time,
        // Exited and already reaped by something else of the host (a
        // `waitpid(-1)` in another thread): its pid may be another
        // process's by now, so it is named by a start time no process of
        // ours has (as `leader_identity` does: nothing is ever signalled by
        // it, and every member still is one); its exit is seen as
        // `wait_exit` sees it, and what it left is ended as ever.
        Err(error)
            if (error.kind() == std::io::ErrorKind::NotFound || sys::is_gone(&error))
                && sys::pidfd_exited(pidfd.as_fd()) =>
        {
            0
        }
        Err(source) => {
            return Err(Error::Os {
                what: "reading the leader's /proc entry",
                source,
            });
        }
    };
    let pidfd = sys::async_fd_or_back(pidfd).map_err(|(source, _)| Error::Os {
        what: "registering the leader's pidfd",
        source,
    })?;
    Ok(Leader {
        pid,
        start_time,
        pidfd,
    })
}

/// The state of one supervised tree, owned by its task.
struct Supervision {
    tree: Tree,
    /// Descriptors held back for the cleanup, given back when it starts.
    reserve: Option<sys::Reserve>,
    /// The limits in force on the tree, if it has any.
    limits: Option<AppliedLimits>,
    /// The tree's entry in the registry of this process's trees: dropped
    /// after the leader is reaped (with `self`, or explicitly in `run`), so
    /// no other tree ever adopts or reaps it.
    live: Option<contain::Live>,
    leader: Leader,
    registration: Registration,
    backend: Backend,
    command: Command,
    started: Instant,
    stop: CancellationToken,
    /// [`Control::time_up`](crate::child::Control::time_up).
    time_up: CancellationToken,
    /// [`Control::end_with`](crate::child::Control::end_with)'s signal.
    first_signal: Arc<std::sync::OnceLock<Option<Signal>>>,
    /// Signals to pass on to the tree while it runs, and during the
    /// cleanup between the policy's steps ([`Control::signal`](crate::child::Control::signal)).
    forward: mpsc::UnboundedReceiver<Signal>,
    dropped: Arc<AtomicBool>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
    /// Whether `run` completed its cleanup (otherwise `Drop` kills).
    finished: bool,
}

impl Supervision {
    async fn run(mut self) -> Finished {
        let trigger = self.wait_for_trigger().await;
        // The cleanup may need every descriptor held back for it.
        self.reserve = None;
        // The policy's first signal is decided now: a later `end_with`
        // passes its signal on instead.
        let first_signal = *self.first_signal.get_or_init(|| None);
        let triggered = Instant::now();
        tracing::debug!(pid = self.leader.pid, ?trigger, "cleanup starts");
        let mut report = CleanupReport {
            backend: self.backend,
            trigger,
            signals: Vec::new(),
            escalated: false,
            survivors: Vec::new(),
            moved_out: Vec::new(),
            released: Vec::new(),
            cgroup: self.tree.cgroup_path(),
            cgroup_not_removed: false,
            run_time: triggered - self.started,
            cleanup_time: Duration::ZERO,
            notes: std::mem::take(&mut self.registration.notes),
            limits: None,
        };
        let release = match (trigger, self.command.leftovers) {
            (Trigger::LeaderExited, Leftovers::Release { drain }) => Some(drain),
            _ => None,
        };
        if release.is_some() {
            // Released: nothing is passed on any more.
            self.forward.close();
            report.released = self.tree.members();
            // Nobody's now: another tree of this process never adopts them.
            contain::released(report.released.iter().map(|p| (p.pid, p.start_time)));
            report.cgroup_not_removed = !self.tree.release().await;
            if report.cgroup_not_removed {
                report.notes.push(
                    "the released processes could not be moved out of their leaf cgroup, so \
                     it stays theirs (with its limits); remove it once they have exited"
                        .to_owned(),
                );
            }
        } else {
            self.terminate(first_signal, &mut report).await;
            self.forward.close();
            self.tree.kill_unseen();
            self.end_departed(&mut report).await;
        }
        // Read from the leaf before it goes; the leader is not reaped yet,
        // but its exit status can be read.
        let leader_exit = sys::exit_status(self.leader.pidfd.get_ref().as_fd(), false)
            .ok()
            .flatten();
        let ended_by = self.limits.as_mut().and_then(|limits| {
            let (counted, limit) = limits.finish(trigger == Trigger::LimitExceeded, leader_exit);
            report.limits = Some(counted);
            limit.filter(|_| matches!(trigger, Trigger::LeaderExited | Trigger::LimitExceeded))
        });
        if release.is_none() {
            report.cgroup_not_removed = !self.tree.close();
        }
        report.cleanup_time = triggered.elapsed();
        let leader = self.reap_leader(&mut report);
        self.live = None;
        self.registration
            .finished(keeps_record(&report, release.is_some()));
        self.finished = true;

        // Terminated: the drain reads to end-of-file at once (every writer is
        // gone). Released: the released processes get `drain` to finish.
        let drain_until = deadline_after(Instant::now(), release.unwrap_or(Duration::ZERO));
        let limit = self.command.capture_limit;
        let stdout = finish_reader(self.stdout.take(), drain_until, limit).await;
        let stderr = finish_reader(self.stderr.take(), drain_until, limit).await;
        let outcome = match (trigger, leader) {
            _ if let Some(limit) = ended_by => Outcome::LimitExceeded { limit },
            (Trigger::TimedOut, _) => Outcome::TimedOut,
            (Trigger::Cancelled | Trigger::Dropped, _) => Outcome::Cancelled,
            (_, Some(Exit::Code(code))) => Outcome::Exited { code },
            (_, Some(Exit::Signal(signal))) => Outcome::Signaled { signal },
            (_, None) => Outcome::Exited { code: -1 },
        };
        tracing::debug!(
            pid = self.leader.pid,
            ?outcome,
            survivors = report.survivors.len(),
            "finished"
        );
        Finished {
            outcome,
            leader,
            stdout,
            stderr,
            report,
        }
    }

    /// Waits for the leader's exit, the time limit, or a cancellation.
    ///
    /// Meanwhile a tree found by scanning `/proc` is re-scanned now and then,
    /// so that members which later lose their link to the leader (a `setsid`
    /// child whose parent exits) stay known, also to the watchdog.
    async fn wait_for_trigger(&mut self) -> Trigger {
        // A limit too large for an instant (`Duration::MAX`) is no limit.
        let deadline = self
            .command
            .timeout
            .and_then(|limit| self.started.checked_add(limit));
        let user_token = self.command.cancel.clone();
        let timeout = async move {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        let user_cancel = async move {
            match user_token {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let exited = wait_exit(&self.leader);
        tokio::pin!(timeout, user_cancel, exited);
        let refresh = tokio::time::sleep_until(self.started + REFRESH_FIRST);
        tokio::pin!(refresh);
        let scanned = self.tree.cgroup_path().is_none();
        let mut passed_on = 0;
        // The CPU-time budget is checked when it could be spent at the
        // earliest, every CPU busy: never before, and never much after.
        let mut budgeted = self.limits.as_ref().is_some_and(AppliedLimits::has_budget);
        // Every CPU online, not just this process's share: the tree may
        // widen its own affinity.
        let cpus = contain::online_cpus();
        let budget_check = tokio::time::sleep_until(self.started);
        tokio::pin!(budget_check);
        loop {
            tokio::select! {
                biased;
                () = self.stop.cancelled() => {
                    return if self.dropped.load(Ordering::SeqCst) { Trigger::Dropped } else { Trigger::Cancelled };
                }
                () = &mut user_cancel => return Trigger::Cancelled,
                () = &mut timeout => return Trigger::TimedOut,
                () = self.time_up.cancelled() => return Trigger::TimedOut,
                Some(signal) = self.forward.recv() => {
                    passed_on += 1;
                    let notes = (passed_on <= PASSED_ON_NOTES).then_some(&mut self.registration.notes);
                    pass_on(&mut self.tree, signal, self.started, notes).await;
                }
                () = &mut exited => return Trigger::LeaderExited,
                () = &mut budget_check, if budgeted => {
                    let limits = self.limits.as_mut().expect("budgeted trees have limits");
                    match limits.budget_left(cpus) {
                        Ok(None) => return Trigger::LimitExceeded,
                        Ok(Some(left)) => {
                            let wait = left.clamp(BUDGET_CHECK_MIN, BUDGET_CHECK_MAX);
                            budget_check.as_mut().reset(Instant::now() + wait);
                        }
                        Err(note) => {
                            self.registration.notes.push(note);
                            budgeted = false;
                        }
                    }
                }
                () = &mut refresh, if scanned => {
                    if let Some(members) = self.tree.refresh() {
                        self.registration.members(members);
                    }
                    // No sooner than a new shared walk can be there (see
                    // `contain/walker.rs`): on a host with thousands of
                    // processes, that is less often.
                    let every = REFRESH_EVERY.max(self.tree.refresh_cadence());
                    refresh.as_mut().reset(Instant::now() + every);
                }
            }
        }
    }

    /// Applies the policy, with `first_signal` instead of its own, until the
    /// tree is empty or the final bound passes; what is sent to the tree
    /// meanwhile ([`Control::signal`](crate::child::Control::signal)) is
    /// passed on between the steps.
    async fn terminate(&mut self, first_signal: Option<Signal>, report: &mut CleanupReport) {
        // A scanned tree's watchdog knows the members the re-scans told it
        // of: told once more as the cleanup starts, it can end what the tree
        // holds now if this process is killed in the middle of the cleanup
        // (an MCP host's SIGTERM, then SIGKILL milliseconds later:
        // `docs/flakes.md` (19)).
        if let Some(members) = self.tree.refresh() {
            self.registration.members(members);
        }
        let on_signal = &self.command.on_signal;
        let mut policy = self.command.policy;
        if let Some(signal) = first_signal {
            policy.signal = Some(signal);
        }
        drive::terminate(
            &mut self.tree,
            wait_exit(&self.leader),
            policy,
            self.started,
            report,
            on_signal,
            &mut self.forward,
        )
        .await;
        report.notes.extend(self.tree.take_notes());
        let left = self.tree.left_to_inner();
        if left > 0 {
            report.notes.push(format!(
                "{left} time(s) a member below a process running the corral binary (a nested \
                 supervisor) was left to it at a signal step, for its own policy to apply; this \
                 tree's grace and SIGKILL still covered them"
            ));
        }
    }

    /// Ends the members that moved themselves out of the leaf cgroup, and
    /// reports them (also as survivors, if `SIGKILL` did not end them within
    /// the final bound).
    async fn end_departed(&mut self, report: &mut CleanupReport) {
        let at = self.started.elapsed();
        let departed = self
            .tree
            .end_departed(self.command.policy.final_bound)
            .await;
        if departed.killed.is_empty() {
            return;
        }
        report.signals.push(SignalSent {
            at,
            signal: crate::signal::Signal::KILL,
            delivered: Some(departed.killed.len()),
        });
        report.escalated = true;
        report.notes.push(format!(
            "{} member(s) had moved themselves out of the leaf cgroup; each was killed by \
             identity (see moved_out). Run the command as another user (--user) so it \
             cannot leave",
            departed.killed.len()
        ));
        if departed.not_stopped > 0 {
            report.notes.push(format!(
                "{} of them did not stop when told to (stuck in the kernel): what they \
                 forked meanwhile may have escaped unnamed",
                departed.not_stopped
            ));
        }
        report.moved_out = departed.killed;
        report.survivors.extend(departed.surviving);
    }

    /// Reaps the leader if it has exited, returning how it ended.
    fn reap_leader(&mut self, report: &mut CleanupReport) -> Option<Exit> {
        match sys::exit_status(self.leader.pidfd.get_ref().as_fd(), true) {
            Ok(exit) => exit,
            Err(error) if sys::is_no_child(&error) => {
                report.notes.push(
                    "the leader's exit status was taken by something else in this process (a \
                     waitpid(-1), or a SIGCHLD handler that reaps every child): it is unknown \
                     here, and the outcome's exit code is -1"
                        .to_owned(),
                );
                None
            }
            Err(error) => {
                report
                    .notes
                    .push(format!("reaping the leader failed: {error}"));
                None
            }
        }
    }
}

impl Drop for Supervision {
    /// Reached before `run` finished only if the task was dropped (runtime
    /// shutdown): kill synchronously, reap the leader if it is already gone.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.reserve = None;
        self.tree.kill_now();
        let until = std::time::Instant::now() + Duration::from_millis(200);
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = sys::exit_status(self.leader.pidfd.get_ref().as_fd(), true) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.tree.close();
    }
}

/// How many signals passed on to a tree the report notes (a flood of them
/// must not grow it without bound).
const PASSED_ON_NOTES: usize = 16;

/// Sends `signal` to the running tree, and notes it for the report, if
/// `notes` are given.
async fn pass_on(
    tree: &mut Tree,
    signal: Signal,
    started: Instant,
    notes: Option<&mut Vec<String>>,
) {
    let at = started.elapsed().as_secs_f64();
    match tree.pass_on(signal).await {
        Ok(delivered) => {
            tracing::debug!(%signal, ?delivered, "signal passed on");
            let whom = match delivered {
                Some(1) => "1 process".to_owned(),
                Some(n) => format!("{n} processes"),
                None => "the whole cgroup".to_owned(),
            };
            if let Some(notes) = notes {
                notes.push(format!("passed {signal} on to {whom} at {at:.3}s"));
            }
        }
        Err(error) => {
            tracing::warn!(%signal, %error, "passing a signal on failed");
            if let Some(notes) = notes {
                notes.push(format!("passing {signal} on failed at {at:.3}s: {error}"));
            }
        }
    }
}

/// Resolves when the leader has exited (it stays unreaped).
async fn wait_exit(leader: &Leader) {
    loop {
        let Ok(mut guard) = leader.pidfd.readable().await else {
            return std::future::pending().await;
        };
        match sys::exit_status(guard.get_inner().as_fd(), false) {
            Ok(Some(_)) => return,
            Ok(None) => guard.clear_ready(),
            // Readable, yet no child to wait for: something else in this
            // process reaped it (a `waitpid(-1)`), so it has exited; its
            // status is lost (see `reap_leader`).
            Err(error) if sys::is_no_child(&error) => return,
            Err(error) => {
                tracing::warn!(%error, "waiting for the leader failed");
                return std::future::pending().await;
            }
        }
    }
}

async fn finish_reader(reader: Option<Reader>, deadline: Instant, limit: usize) -> Captured {
    match reader {
        Some(reader) => reader.finish(deadline, limit).await,
        None => Captured::default(),
    }
}

/// Whether a finished tree's ledger record stays: with survivors (for
/// `corral ps` and `corral reap`), and with a leaf left behind by a tree
/// that was ended (members still exiting at the final bound are no
/// survivors, but their leaf outlives the call: the record is what lets a
/// later sweep or `corral reap` remove it). A leaf kept by released
/// processes is theirs, and their record would have them killed.
fn keeps_record(report: &CleanupReport, released: bool) -> bool {
    !report.survivors.is_empty() || (report.cgroup_not_removed && !released)
}
