//! The crash ledger: a durable record of every live tree, so that a tree whose
//! owner *and* watchdog died (or whose owner crashed before the watchdog
//! knew of it) can still be found and ended later, by `corral reap` or by the
//! owner's successor at start-up.
//!
//! One JSON file per tree in the ledger directory, written atomically
//! (temporary file, then rename) so a reader never sees half a record, and
//! removed when the tree is gone. See [`write()`] for why there is no fsync.
//! Every file is opened through one checked directory descriptor (`ledger/store.rs`):
//! a record is read only if nobody but us could have written it. Even then
//! every process it names is identity-checked (pid with start time and boot
//! id) before any signal, and a cgroup must lie inside the cgroup v2 mount,
//! be one of corral's leaves and still be the cgroup the record was written
//! for (its inode).
//!
//! A record written, listed, swept and gone (in a private directory; a
//! spawn writes and removes its own records):
//!
//! ```
//! use corral::ledger::{self, Owner, Record, SweepAction};
//! let dir = std::env::temp_dir().join(format!("ledger-doc-{}", std::process::id()));
//! corral::settings::Settings::new().ledger_dir(&dir).apply();
//! assert_eq!(ledger::dir(), dir);
//! assert!(ledger::load(&dir)?.0.is_empty(), "a missing directory is an empty ledger");
//! // A tree whose owner (this pid, another start time) is dead.
//! let json = serde_json::json!({
//!     "version": ledger::VERSION, "id": "doc-1", "boot_id": ledger::boot_id(),
//!     "pid_ns": ledger::pid_ns(), "owner": { "pid": std::process::id(), "start_time": 1 },
//!     "backend": "group", "command": "sleep 100", "created_at": 0,
//! });
//! let record = Record::parse(json.to_string().as_bytes()).expect("a valid record");
//! assert!(Record::parse(b"{}").unwrap_err().contains("version"));
//! ledger::write(&record)?;
//! let (entries, skipped) = ledger::list(&dir)?;
//! assert_eq!((entries.len(), skipped.len()), (1, 0));
//! assert_eq!(entries[0].owner, Owner::Dead);
//! // Nothing of its tree is left: the record is dropped, nothing signalled.
//! assert_eq!(ledger::terminate(&record), SweepAction::Dropped);
//! let swept = ledger::sweep(&dir, false, |r| r.id == "doc-1")?;
//! assert_eq!(swept.actions, [(record, SweepAction::Dropped)]);
//! assert!(ledger::load(&dir)?.0.is_empty());
//! ledger::remove("doc-1")?; // already gone: not an error
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), corral::Error>(())
//! ```

pub(crate) mod record;
mod store;
mod sweep;

use std::{
    ffi::OsString,
    fs, io,
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
};

pub use record::{Record, VERSION};
pub use store::RECORD_MAX;
pub use sweep::{Entry, Owner, Sweep, SweepAction, list, sweep, terminate};

use crate::{error::Error, sys};
use store::Store;

static DIR_OVERRIDE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Uses `dir` for the ledger of this process instead of the default: what
/// [`Settings::ledger_dir`](crate::settings::Settings::ledger_dir) applies.
pub(crate) fn set_dir(dir: impl Into<PathBuf>) {
    *DIR_OVERRIDE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(dir.into());
}

/// The ledger directory: the one
/// [`Settings::ledger_dir`](crate::settings::Settings::ledger_dir) set, else `$CORRAL_LEDGER_DIR`, else
/// `$XDG_RUNTIME_DIR/corral`, else `/run/corral` for root, else
/// `$TMPDIR/corral-UID`.
pub fn dir() -> PathBuf {
    if let Some(dir) = DIR_OVERRIDE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
    {
        return dir;
    }
    if let Some(dir) = std::env::var_os("CORRAL_LEDGER_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Path::new(&runtime).join("corral");
    }
    let uid = sys::geteuid();
    if uid == 0 {
        return PathBuf::from("/run/corral");
    }
    std::env::temp_dir().join(format!("corral-{uid}"))
}

/// This process's PID namespace, as `/proc/self/ns/pid` names it.
pub fn pid_ns() -> Option<String> {
    static NS: OnceLock<Option<String>> = OnceLock::new();
    NS.get_or_init(|| {
        fs::read_link("/proc/self/ns/pid")
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    })
    .clone()
}

/// The current boot's id (`/proc/sys/kernel/random/boot_id`): processes and
/// cgroups named in a record from another boot are long gone.
pub fn boot_id() -> String {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        crate::identity::read_small_text("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
    .clone()
}

fn file_name(id: &str) -> OsString {
    OsString::from(format!("{id}.json"))
}

/// Publishes `record` atomically: written to a new file with an
/// unpredictable name, then renamed over the final name, so a reader sees
/// the whole record or none of it (see `ledger/store.rs` for the checks on the way).
///
/// There is deliberately no fsync. A record names processes of the current
/// boot; the only failure fsync guards against (a kernel crash or power loss
/// dropping the page cache) also ends every process the record names, and a
/// process crash loses nothing already written. On a disk-backed `/run` the
/// two fsyncs cost more than the rest of a spawn (BENCHMARKS.md).
///
/// # Errors
/// [`Error::LedgerRefused`] if the directory is not trusted or cannot be
/// created or written.
pub fn write(record: &Record) -> Result<(), Error> {
    let dir = dir();
    let written = Store::open(&dir, true)?
        .map(|store| {
            let bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
            store.publish(&file_name(&record.id), &bytes)
        })
        .unwrap_or_else(|| Err(io::ErrorKind::NotFound.into()));
    written.map_err(|error| Error::LedgerRefused {
        path: dir,
        reason: format!("cannot write a record: {error}"),
    })
}

/// Removes the record with this id; a missing record is not an error.
///
/// # Errors
/// If the directory is not trusted, or the file exists but cannot be
/// removed.
pub fn remove(id: &str) -> Result<(), Error> {
    remove_in(&dir(), id)
}

pub(crate) fn remove_in(dir: &Path, id: &str) -> Result<(), Error> {
    let Some(store) = Store::open(dir, false)? else {
        return Ok(());
    };
    store
        .remove(&file_name(id))
        .map_err(|error| Error::LedgerRefused {
            path: dir.to_owned(),
            reason: format!("cannot remove the record {id}: {error}"),
        })
}

/// A ledger file that could not be used, with the reason.
///
/// ```no_run
/// let (_, unreadable) = corral::ledger::load(&corral::ledger::dir())?;
/// for file in unreadable {
///     eprintln!("skipped {}: {}", file.path.display(), file.reason);
/// }
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
}

/// Every record in `dir`, and the files that were skipped (torn, corrupt, of
/// another version, a symlink, not a regular file of ours, too large). A
/// missing directory is an empty ledger.
///
/// # Errors
/// [`Error::LedgerRefused`] if the directory is not trusted: then nothing in
/// it was read.
pub fn load(dir: &Path) -> Result<(Vec<Record>, Vec<Unreadable>), Error> {
    match Store::open(dir, false)? {
        Some(store) => read_all(&store),
        None => Ok((Vec::new(), Vec::new())),
    }
}

/// Every record in an open ledger directory, and the files skipped.
fn read_all(store: &Store) -> Result<(Vec<Record>, Vec<Unreadable>), Error> {
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    let names = store.record_names().map_err(|error| Error::LedgerRefused {
        path: store.path().to_owned(),
        reason: format!("cannot list it: {error}"),
    })?;
    for name in names {
        let path = store.path().join(&name);
        let parsed = store.read(&name).and_then(|bytes| Record::parse(&bytes));
        match parsed {
            Ok(record) if file_name(&record.id) == name => records.push(record),
            Ok(record) => skipped.push(Unreadable {
                path,
                reason: format!("its id {:?} does not match the file name", record.id),
            }),
            Err(reason) => skipped.push(Unreadable { path, reason }),
        }
    }
    records.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok((records, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("corral-ledger-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn write_load_remove_round_trip() {
        let dir = temp_dir("roundtrip");
        set_dir(&dir);
        let record = Record::sample("t1");
        write(&record).expect("written");
        let (records, skipped) = load(&dir).expect("load");
        assert_eq!(records, vec![record]);
        assert!(skipped.is_empty());
        remove("t1").expect("removed");
        remove("t1").expect("removing twice is fine");
        assert!(load(&dir).expect("load").0.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn torn_and_corrupt_files_are_skipped_with_a_reason() {
        let dir = temp_dir("corrupt");
        fs::create_dir_all(&dir).expect("dir");
        let good = Record::sample("good");
        fs::write(
            dir.join("good.json"),
            serde_json::to_vec(&good).expect("json"),
        )
        .expect("write");
        let full = serde_json::to_vec(&Record::sample("torn")).expect("json");
        fs::write(dir.join("torn.json"), &full[..full.len() / 2]).expect("write");
        fs::write(dir.join("garbage.json"), b"\x00\xffnot json").expect("write");
        fs::write(
            dir.join("renamed.json"),
            serde_json::to_vec(&Record::sample("other")).expect("json"),
        )
        .expect("write");
        fs::write(dir.join(".inflight.tmp"), b"{").expect("write");
        let (records, skipped) = load(&dir).expect("load");
        assert_eq!(records, vec![good]);
        let mut names: Vec<String> = skipped
            .iter()
            .map(|u| {
                u.path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        assert_eq!(names, ["garbage.json", "renamed.json", "torn.json"]);
        assert!(skipped.iter().all(|u| !u.reason.is_empty()));
        let _ = fs::remove_dir_all(&dir);
    }
}
