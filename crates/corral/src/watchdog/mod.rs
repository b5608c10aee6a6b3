//! Nothing outlives its owner: a watchdog process per owner.
//!
//! When the process that owns trees dies without running any cleanup
//! (`SIGKILL`, an abort, the OOM killer), somebody alive must do the killing.
//! The first spawn starts a small helper process: the owner's executable
//! re-entered through [`hook`] (the `corral` command does this), or the
//! program named by `$CORRAL_WATCHDOG` or [`set_executable`]. Its standard
//! input is one end of a socket pair whose other end only the owner holds
//! (close-on-exec, so no tree member inherits it): end-of-file there means the
//! owner is gone. The owner tells it, per tree, what it needs to kill without
//! trusting pids: the ledger record (cgroup path, leader identity). On the
//! owner's death the helper kills every tree it was told of and removes their
//! records, then exits.
//!
//! The two keep each other honest: the owner watches the helper's pidfd from
//! a small thread and, if the helper dies, starts a new one and tells it every
//! live tree again. The helper runs in a process group of its own, so a
//! terminal's Ctrl-C, which may kill the owner, does not reach it.

mod helper;

use std::{
    collections::HashMap,
    io::{self, Write},
    os::{
        fd::{AsFd, OwnedFd},
        unix::{net::UnixStream, process::CommandExt},
    },
    path::PathBuf,
    process::Stdio,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
};

use serde::{Deserialize, Serialize};

use crate::{identity, ledger::Record, sys};

/// The argument that makes a hooked program run as the watchdog.
pub const HOOK_ARG: &str = "__corral-watchdog";

static HOOKED: AtomicBool = AtomicBool::new(false);
static EXECUTABLE: Mutex<Option<PathBuf>> = Mutex::new(None);
static CLIENT: Mutex<Option<Client>> = Mutex::new(None);

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
        return std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"));
    }
    Err(
        "no watchdog executable: call corral::watchdog::hook() first in main, \
         or set CORRAL_WATCHDOG to the corral binary"
            .to_owned(),
    )
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

/// Whether this process is our watchdog (so it is never mistaken for a tree
/// member adopted by a subreaper).
pub(crate) fn is_helper(pid: i32, start_time: u64) -> bool {
    lock(&CLIENT)
        .as_ref()
        .is_some_and(|c| c.helper == (pid, start_time))
}

/// Stops the watchdog after the owner's work is done (it would stop by itself
/// when this process exits): closes the socket and reaps the helper.
pub fn shutdown() {
    let client = lock(&CLIENT).take();
    if let Some(client) = client {
        drop(client.stream);
        sys::reap_within(client.pidfd.as_fd(), std::time::Duration::from_secs(1));
    }
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
            let client = Client::adopt(ours, pid)?;
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
    Watch {
        record: Box<Record>,
        ledger: PathBuf,
    },
    /// The tree is gone: forget it.
    Forget { id: String },
}

struct Client {
    stream: UnixStream,
    /// The helper, our child, for reaping it.
    pidfd: OwnedFd,
    /// (pid, start time).
    helper: (i32, u64),
    watched: HashMap<String, Message>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Has the watchdog kill this tree if the owner dies (starting the watchdog
/// if needed). Sending again with the same id replaces the entry.
pub(crate) fn watch(record: &Record) -> Result<(), String> {
    let message = Message::Watch {
        record: Box::new(record.clone()),
        ledger: crate::ledger::dir(),
    };
    let mut guard = lock(&CLIENT);
    if guard.is_none() {
        *guard = Some(Client::start()?);
    }
    let client = guard.as_mut().ok_or("no watchdog")?;
    if client.send(&message).is_err() {
        // The helper died: the monitor restarts it, but do not wait for it.
        client.watched.insert(record.id.clone(), message);
        *guard = Some(Client::restart(guard.take())?);
        return Ok(());
    }
    client.watched.insert(record.id.clone(), message);
    Ok(())
}

/// The tree is gone: the watchdog no longer needs to know of it.
pub(crate) fn forget(id: &str) {
    let mut guard = lock(&CLIENT);
    if let Some(client) = guard.as_mut() {
        client.watched.remove(id);
        let _ = client.send(&Message::Forget { id: id.to_owned() });
    }
}

impl Client {
    fn start() -> Result<Self, String> {
        let program = executable()?;
        let (ours, theirs) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        let mut command = std::process::Command::new(&program);
        command
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
        Self::adopt(ours, child.id() as i32).inspect_err(|_| {
            let _ = child.kill();
            let _ = child.wait();
        })
    }

    /// Takes charge of a freshly started helper (our unreaped child, so its
    /// pidfd is certainly it) and starts the thread that watches it.
    fn adopt(stream: UnixStream, pid: i32) -> Result<Self, String> {
        let start_time = identity::read_stat(pid).map(|s| s.start_time).unwrap_or(0);
        let pidfd = sys::pidfd_open(pid).map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        let watched = pidfd
            .try_clone()
            .map_err(|e| format!("pidfd for the watchdog: {e}"))?;
        std::thread::Builder::new()
            .name("corral-watchdog-monitor".to_owned())
            .spawn(move || monitor(watched, (pid, start_time)))
            .map_err(|e| format!("cannot start the watchdog monitor thread: {e}"))?;
        Ok(Self {
            stream,
            pidfd,
            helper: (pid, start_time),
            watched: HashMap::new(),
        })
    }

    /// Replaces a dead helper, telling the new one every live tree.
    fn restart(old: Option<Client>) -> Result<Self, String> {
        let watched = match old {
            Some(old) => {
                sys::reap_within(old.pidfd.as_fd(), std::time::Duration::from_secs(1));
                old.watched
            }
            None => HashMap::new(),
        };
        let mut client = Self::start()?;
        for message in watched.values() {
            client
                .send(message)
                .map_err(|e| format!("the new watchdog is not listening: {e}"))?;
        }
        client.watched = watched;
        tracing::warn!(
            pid = client.helper.0,
            trees = client.watched.len(),
            "watchdog died; started a new one"
        );
        Ok(client)
    }

    fn send(&mut self, message: &Message) -> io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.stream.write_all(&line)
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
                tracing::error!(%error, "the watchdog died and cannot be restarted: owner death is unguarded")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
