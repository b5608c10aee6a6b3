//! Nothing outlives its owner: registering each tree with the crash ledger and
//! the watchdog, and the start-up sweep of a crashed predecessor's trees.
//!
//! - [`ledger`]: crash records, and the sweep of those whose owner died.
//! - [`watchdog`]: a helper process that ends the trees when the owner dies.

pub mod ledger;
pub mod watchdog;

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    sync::{
        Mutex, Once,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::{
    backend::Backend,
    command::Command,
    contain::{self, Leader},
    identity,
    identity::Identity,
    sys,
};

use self::ledger::Record;

static STARTUP_SWEEP_OFF: AtomicBool = AtomicBool::new(false);

/// Turns off the sweep that the first spawn of a process runs over the
/// ledger records left by earlier runs of the same executable whose owner
/// died (also off with `CORRAL_NO_STARTUP_SWEEP=1`): what
/// [`Settings::startup_sweep`](crate::settings::Settings::startup_sweep)
/// applies.
pub(crate) fn disable_startup_sweep() {
    STARTUP_SWEEP_OFF.store(true, Ordering::SeqCst);
}

/// Whether the first spawn runs the start-up sweep: not turned off by
/// [`disable_startup_sweep`] or `CORRAL_NO_STARTUP_SWEEP`.
pub(crate) fn startup_sweep_on() -> bool {
    !STARTUP_SWEEP_OFF.load(Ordering::SeqCst)
        && std::env::var_os("CORRAL_NO_STARTUP_SWEEP").is_none()
}

/// How long the start-up sweep may take; records it has not reached by then
/// are left for `corral reap` (and named in the log).
const STARTUP_SWEEP_BOUND: Duration = Duration::from_secs(5);

/// Once per process: ends the trees that a crashed earlier run of this same
/// executable left in the ledger. It runs on a thread of its own, so a spawn
/// never waits for it (a slow or hostile ledger cannot stall a spawn), and
/// stops after [`STARTUP_SWEEP_BOUND`].
pub(crate) fn startup_sweep() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if !startup_sweep_on() {
            return;
        }
        let Ok(me) = sys::current_exe() else {
            return;
        };
        let dir = ledger::dir();
        let started = sys::spawn_unsignalled(
            std::thread::Builder::new().name("corral-startup-sweep".to_owned()),
            move || sweep_predecessors(&dir, me),
        );
        if let Err(error) = started {
            tracing::warn!(%error, "could not start the start-up sweep");
        }
    });
}

fn sweep_predecessors(dir: &Path, me: &Path) {
    let deadline = Instant::now() + STARTUP_SWEEP_BOUND;
    let ours = |record: &Record| {
        if record.owner_exe.as_deref() != Some(me) {
            return false;
        }
        let in_time = Instant::now() < deadline;
        if !in_time {
            tracing::warn!(id = %record.id, "start-up sweep out of time: left for `corral reap`");
        }
        in_time
    };
    match ledger::sweep(dir, false, ours) {
        Ok(result) => {
            for (record, action) in &result.actions {
                tracing::info!(id = %record.id, ?action, "start-up sweep of a predecessor's tree");
            }
        }
        Err(error) => tracing::warn!(%error, "start-up sweep skipped"),
    }
}

/// This process's identity and executable, read once per process (a forked
/// child reads its own).
fn me() -> (Identity, Option<PathBuf>) {
    static ME: Mutex<Option<(Identity, Option<PathBuf>)>> = Mutex::new(None);
    let pid = sys::getpid();
    let mut cached = ME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match &*cached {
        Some((identity, exe)) if identity.pid == pid => (*identity, exe.clone()),
        _ => {
            let start_time = identity::read_stat(pid).map(|s| s.start_time).unwrap_or(0);
            let me = (
                Identity { pid, start_time },
                sys::current_exe().ok().map(Path::to_owned),
            );
            *cached = Some(me.clone());
            me
        }
    }
}

/// One tree's entries in the ledger and with the watchdog.
#[derive(Debug)]
pub(crate) struct Registration {
    record: Record,
    ledger: bool,
    watchdog: bool,
    pub(crate) notes: Vec<String>,
}

impl Registration {
    /// Before containment is prepared: the record has no backend yet.
    pub(crate) fn new(command: &Command) -> Self {
        static SEQUENCE: AtomicU64 = AtomicU64::new(0);
        let (owner, owner_exe) = me();
        let mut notes = Vec::new();
        let record = Record {
            version: ledger::record::VERSION,
            id: format!(
                "{}-{}-{}",
                owner.pid,
                owner.start_time,
                SEQUENCE.fetch_add(1, Ordering::Relaxed)
            ),
            owner,
            owner_exe,
            boot_id: ledger::boot_id(),
            pid_ns: ledger::pid_ns(),
            backend: Backend::Group,
            leader: None,
            members: Vec::new(),
            cgroup: None,
            cgroup_id: None,
            command: command.display(),
            created_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let mut watchdog = command.watchdog;
        if let (true, Err(reason)) = (watchdog, watchdog::executable()) {
            notes.push(format!("owner-death guard off: {reason}"));
            watchdog = false;
        }
        Self {
            record,
            ledger: command.ledger,
            watchdog,
            notes,
        }
    }

    /// The tree's mark for its command's environment (`contain/mark.rs`):
    /// what finds a member orphaned since the owner's last walk once the
    /// owner is dead.
    pub(crate) fn mark(&self) -> (OsString, OsString) {
        (
            contain::MARK_VARIABLE.into(),
            contain::mark_value(&self.record.id),
        )
    }

    /// A cgroup leaf is about to be created at `path`: the watchdog learns of
    /// it before the `mkdir`, so an owner dying at any point from here on has
    /// the leaf (and the tree in it) removed.
    pub(crate) fn cgroup_reserved(&mut self, path: &Path) {
        self.record.backend = Backend::Cgroup;
        self.record.cgroup = Some(path.to_owned());
        self.tell_watchdog();
    }

    /// Containment is prepared: the backend and the leaf actually used,
    /// with its cgroup id. The watchdog hears of the tree before the spawn,
    /// whatever the backend: an owner dying from here on, before the leader
    /// is recorded, has the tree killed (a cgroup tree by its leaf, a
    /// scanned one by its mark, which the leader carries from its first
    /// instruction: `contain/mark.rs`). Told only after the spawn, a scanned
    /// tree whose owner died in between ran on (docs/flakes.md (38)).
    pub(crate) fn prepared(&mut self, backend: Backend, cgroup: Option<(PathBuf, u64)>) {
        self.record.backend = backend;
        (self.record.cgroup, self.record.cgroup_id) = cgroup.unzip();
        self.tell_watchdog();
    }

    /// After the spawn: the leader's identity completes the record.
    pub(crate) fn spawned(&mut self, leader: &Leader) {
        self.record.leader = Some(Identity {
            pid: leader.pid,
            start_time: leader.start_time,
        });
        self.tell_watchdog();
        if self.ledger
            && let Err(error) = ledger::write(&self.record)
        {
            self.notes.push(format!("crash ledger off: {error}"));
            self.ledger = false;
        }
    }

    /// The running members of a scanned tree, for the watchdog, which is
    /// told only what changed (not written to the ledger file: that would
    /// cost a write per change).
    pub(crate) fn members(&mut self, members: Vec<Identity>) {
        if self.watchdog {
            watchdog::members(&self.record.id, &members);
        }
        self.record.members = members;
    }

    fn tell_watchdog(&mut self) {
        if !self.watchdog {
            return;
        }
        if let Err(reason) = watchdog::watch(&self.record) {
            self.notes.push(format!("owner-death guard off: {reason}"));
            self.watchdog = false;
        }
    }

    /// The tree is over. With `keep` (survivors, or a leaf left behind) the
    /// ledger record stays, so that `corral ps` shows it and `corral reap`
    /// or a later sweep can retry.
    pub(crate) fn finished(&mut self, keep: bool) {
        if self.watchdog {
            watchdog::forget(&self.record.id);
            self.watchdog = false;
        }
        if self.ledger
            && !keep
            && let Err(error) = ledger::remove(&self.record.id)
        {
            tracing::warn!(id = %self.record.id, %error, "could not remove the ledger record");
        }
        // Either way the record is no longer ours to remove: with survivors
        // it is left for `corral ps` and `corral reap` (dropping this
        // registration later must not remove it).
        self.ledger = false;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.finished(false);
    }
}
