//! The cgroup v2 backend: one leaf cgroup per invocation.
//!
//! The leaf is created under the cgroup this process is in (the root, or a
//! delegated subtree), with a name that never repeats (`corral-PID-RANDOM`).
//! The leader is *born* in it (`clone3` with `CLONE_INTO_CGROUP`; on a kernel
//! without `clone3`, a write of `0` to the leaf's `cgroup.procs` before
//! `exec`), so no descendant is ever outside it. `cgroup.kill` kills every
//! member atomically, including ones forked during the kill and those in
//! cgroups a member made below the leaf; `cgroup.events` says `populated 0`
//! once all have exited, announced by `poll(POLLPRI)` on the file itself
//! (not inotify, whose teardown waits for an SRCU grace period). Zombies do
//! not count as populated.
//!
//! A member that may write another cgroup's `cgroup.procs` (root, or the
//! owner of a delegated subtree) can move itself out of the leaf, and then
//! neither `cgroup.kill` nor `populated 0` sees it. So the tree remembers
//! every member it lists (pid and start time, read while the pid is in the
//! leaf), and at the end of a cleanup ends, by identity, each one that still
//! runs outside the leaf, with what it forked since that is still linked to
//! it by parent pid ([`CgroupTree::end_departed`]). Members are listed
//! at each signal step, `SIGKILL` included, with a look at the members'
//! children for those outside the leaf (a child that left while its parent
//! stayed), while the leaf is frozen (`cgroup.freeze`), so nothing in it
//! forks or moves a child out between the look and the signal; and for the
//! report. Nothing is
//! read while the tree runs, so a process that left before the first signal
//! and whose parent is gone too is not known, nor is an orphan
//! of a departed member (re-parented, so unlinked). Run the command as
//! another user ([`Command::user`](crate::command::Command::user)) and it cannot leave
//! at all.

use std::{
    collections::HashSet,
    fs, io,
    os::{
        fd::{AsFd, BorrowedFd, OwnedFd},
        unix::fs::MetadataExt,
    },
    path::{Path, PathBuf},
    sync::OnceLock,
    time::Duration,
};

use tokio::{io::unix::AsyncFd, time::Instant};

use super::{
    halt::{self, Halted},
    nested::Nested,
};
use crate::{error::Error, identity, identity::ProcessInfo, signal::Signal, sys};

/// A cgroup v2 mount as `/proc/self/mountinfo` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct V2Mount {
    /// Where it is mounted.
    pub(crate) point: PathBuf,
    /// The cgroup shown at the mount point, as this process's cgroup
    /// namespace names it (`/..` for one outside the namespace).
    pub(crate) root: PathBuf,
    /// The super options (the comma-separated list after the source).
    options: String,
}

/// The cgroup v2 mount this process sees, in `/proc/self/mountinfo` text:
/// the first one that no later mount hides (one on its mount point or above
/// it). A container that mounts cgroup2 over `/sys/fs/cgroup` still lists
/// the mounts it inherited below it (a user namespace cannot unmount them),
/// whose mount points now lead into the new mount.
pub(crate) fn visible_v2_mount(mountinfo: &str) -> Option<V2Mount> {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
    let mounts: Vec<(PathBuf, Option<V2Mount>)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut left = left.split_whitespace().skip(3);
            let (root, point) = (unescape(left.next()?), unescape(left.next()?));
            let mut right = right.split_whitespace();
            let v2 = (right.next()? == "cgroup2").then(|| V2Mount {
                point: point.clone(),
                root,
                options: right.nth(1).unwrap_or_default().to_owned(),
            });
            Some((point, v2))
        })
        .collect();
    mounts.iter().enumerate().find_map(|(i, (point, v2))| {
        let hidden = mounts[i + 1..]
            .iter()
            .any(|(later, _)| point.starts_with(later));
        v2.clone().filter(|_| !hidden)
    })
}

/// Finds the cgroup v2 mount point in `/proc/self/mountinfo` text (see
/// [`visible_v2_mount`]).
pub(crate) fn find_v2_mount(mountinfo: &str) -> Option<PathBuf> {
    visible_v2_mount(mountinfo).map(|mount| mount.point)
}

/// Whether the cgroup v2 mount that [`find_v2_mount`] picks has the
/// `nsdelegate` super option: then a cgroup namespace's root is a
/// delegation boundary, and the kernel refuses to move a process in the
/// namespace to a cgroup outside it.
pub(crate) fn has_nsdelegate(mountinfo: &str) -> bool {
    visible_v2_mount(mountinfo)
        .is_some_and(|mount| mount.options.split(',').any(|o| o == "nsdelegate"))
}

/// The directory of the cgroup `own` (as `/proc/self/cgroup` names it) in
/// `mount`, or why the mount does not show it: mounted outside this
/// process's cgroup namespace (its root reads `/..`), or a part of the
/// hierarchy bound elsewhere that does not hold it.
pub(crate) fn own_path(mount: &V2Mount, own: &str) -> Result<PathBuf, String> {
    let relative = Path::new(own).strip_prefix(&mount.root).map_err(|_| {
        format!(
            "the cgroup v2 mount at {} shows the cgroup {}, which does not hold this \
             process's cgroup {own} (a mount made outside this cgroup namespace): mount \
             cgroup2 inside the namespace (mount -t cgroup2 none {})",
            mount.point.display(),
            mount.root.display(),
            mount.point.display()
        )
    })?;
    Ok(mount.point.join(relative))
}

/// Whether this machine's cgroup v2 mount has `nsdelegate` (read once).
pub(crate) fn delegates_namespaces() -> bool {
    static NSDELEGATE: OnceLock<bool> = OnceLock::new();
    *NSDELEGATE
        .get_or_init(|| crate::fault::active("nsdelegate") || mountinfo().is_ok_and(has_nsdelegate))
}

/// The first of `leaf`'s `cgroup.procs` and its ancestors' (up to the mount)
/// that the user `uid` in group `gid` may write, going by owner and mode: a
/// process of that user could move itself through it, out of the leaf.
pub(crate) fn writable_by(leaf: &Path, uid: u32, gid: Option<u32>) -> Option<PathBuf> {
    let mount = mount()?;
    let mut dir = Some(leaf);
    while let Some(current) = dir.filter(|d| d.starts_with(mount)) {
        let procs = current.join("cgroup.procs");
        if let Ok(meta) = fs::metadata(&procs) {
            let mode = meta.mode();
            let writable = (meta.uid() == uid && mode & 0o200 != 0)
                || (gid == Some(meta.gid()) && mode & 0o020 != 0)
                || mode & 0o002 != 0;
            if writable {
                return Some(procs);
            }
        }
        dir = current.parent();
    }
    None
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// Finds this process's cgroup v2 path (the `0::` line) in `/proc/self/cgroup`.
pub(crate) fn own_cgroup(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .filter(|path| path.starts_with('/'))
}

/// The environment variable that names the cgroup leaves go in, instead of
/// this process's own: a delegated cgroup without processes, where corral may
/// enable the controllers that resource limits need (see `docs/limits.md`).
pub const PARENT_VARIABLE: &str = "CORRAL_CGROUP_PARENT";

/// The directory new leaves go in, or why there is none (read once).
pub(crate) fn parent_dir() -> Result<PathBuf, String> {
    static PARENT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let mount = find_v2_mount(mountinfo()?)
                .filter(|_| !crate::fault::active("no-cgroup2"))
                .ok_or("no cgroup v2 hierarchy is mounted (cgroup2 not in /proc/self/mountinfo)")?;
            let own = own_dir()?;
            if let Some(chosen) = std::env::var_os(PARENT_VARIABLE).filter(|v| !v.is_empty()) {
                return chosen_parent(&mount, &own, Path::new(&chosen), sys::geteuid());
            }
            Ok(own)
        })
        .clone()
}

/// The first of `cgroup` and the cgroups above it (up to `mount`), or their
/// `cgroup.procs`, that belongs to neither root nor `euid`, with its owner:
/// that user could move a process of the tree out of its leaf.
pub(crate) fn foreign_owner(
    cgroup: &Path,
    mount: &Path,
    euid: u32,
) -> Result<Option<(PathBuf, u32)>, String> {
    for dir in cgroup.ancestors().take_while(|d| d.starts_with(mount)) {
        for file in [dir.to_owned(), dir.join("cgroup.procs")] {
            let owner = fs::metadata(&file)
                .map_err(|e| format!("{} ({e})", file.display()))?
                .uid();
            if owner != euid && owner != 0 {
                return Ok(Some((file, owner)));
            }
        }
    }
    Ok(None)
}

/// This process's own cgroup directory, or why there is none (read once).
fn own_dir() -> Result<PathBuf, String> {
    static OWN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    OWN.get_or_init(|| {
        let mount = visible_v2_mount(mountinfo()?)
            .ok_or("no cgroup v2 hierarchy is mounted (cgroup2 not in /proc/self/mountinfo)")?;
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = own_cgroup(&own)
            .ok_or("this process has no cgroup v2 path (no 0:: line in /proc/self/cgroup)")?;
        own_path(&mount, own)
    })
    .clone()
}

/// Checks the cgroup [`PARENT_VARIABLE`] names: a directory of the v2
/// hierarchy, given as a file-system path, or, where no such path exists, as
/// a cgroup path as `/proc/PID/cgroup` shows it; a relative path is taken
/// from this process's own cgroup `own` (`..`: its parent, the unit's cgroup
/// under systemd's `DelegateSubgroup=`). After symlinks and `..`, it must be
/// inside the mount and owned by this user or by root: root never puts a
/// tree in a cgroup another user could have made.
pub(crate) fn chosen_parent(
    mount: &Path,
    own: &Path,
    chosen: &Path,
    euid: u32,
) -> Result<PathBuf, String> {
    let bad = |why: String| format!("{PARENT_VARIABLE}={}: {why}", chosen.display());
    let path = if chosen.is_relative() {
        own.join(chosen)
    } else if chosen.starts_with(mount) || fs::symlink_metadata(chosen).is_ok() {
        chosen.to_owned()
    } else {
        mount.join(chosen.strip_prefix("/").unwrap_or(chosen))
    };
    let real = fs::canonicalize(&path).map_err(|e| bad(format!("{} ({e})", path.display())))?;
    if !real.starts_with(mount) || !real.join("cgroup.procs").exists() {
        return Err(bad(format!(
            "{} is not a cgroup of the v2 hierarchy mounted at {}",
            real.display(),
            mount.display()
        )));
    }
    // It and every cgroup above it: the owner of an ancestor may write the
    // common ancestor's `cgroup.procs`, and so move the tree out of its leaf
    // (and its limits), set limits above it, or replace the chosen cgroup.
    if let Some((file, owner)) = foreign_owner(&real, mount, euid).map_err(bad)? {
        return Err(bad(format!(
            "{} belongs to user {owner}, who could move the tree out of its leaf; corral \
             makes leaves only in a cgroup that, with every cgroup above it, only root or \
             this user ({euid}) owns",
            file.display()
        )));
    }
    Ok(real)
}

/// Adds the likely cause to a refused `mkdir` of a leaf where the kernel's
/// words do not name it: in cgroupfs, `EAGAIN` means a limit of an ancestor.
fn explain_mkdir_error(error: io::Error) -> io::Error {
    if error.kind() != io::ErrorKind::WouldBlock {
        return error;
    }
    io::Error::new(
        error.kind(),
        format!(
            "cannot create a leaf cgroup ({error}): an ancestor's cgroup.max.descendants \
             or cgroup.max.depth is reached; raise it, or choose another backend"
        ),
    )
}

/// Creates a new, empty directory `PREFIX-PID-RANDOM` under `parent`. The pid
/// alone is not unique (other PID namespaces share the hierarchy; a stale
/// leaf may carry a recycled pid), nor is a counter (a successor with the
/// same pid counts the same way), so 64 random bits make the name one that
/// never repeats; a taken name (never seen in practice) draws again.
///
/// `reserve` hears each name before its `mkdir`: the owner tells its watchdog,
/// so a directory created just before the owner dies is still removed.
fn create_unique(
    parent: &Path,
    prefix: &str,
    reserve: &mut dyn FnMut(&Path),
) -> io::Result<PathBuf> {
    let pid = sys::getpid();
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..64 {
        let n = sys::dirfd::random_u64()?;
        let path = parent.join(format!("{prefix}-{pid}-{n:016x}"));
        reserve(&path);
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last = error,
            Err(error) => return Err(error),
        }
    }
    Err(last)
}

fn refused(parent: &Path, error: &io::Error) -> String {
    let fix = if error.kind() == io::ErrorKind::ReadOnlyFilesystem {
        // Root in a container does not help: the mount itself is read-only.
        "the cgroup hierarchy is mounted read-only here, as in a container by default; give \
         the container a writable cgroup of its own (rootless Podman, a systemd unit with \
         Delegate=yes; see docs/containers.md)"
    } else {
        "run as root or in a delegated subtree (systemd Delegate=yes)"
    };
    format!(
        "cannot create a cgroup under {} ({error}); {fix}",
        parent.display()
    )
}

/// Why leaves under `parent`, whose `cgroup.type` is `kind` (not `domain`),
/// cannot hold processes.
pub(crate) fn not_a_domain(parent: &Path, kind: &str) -> String {
    format!(
        "{} is a \"{kind}\" cgroup, not a plain domain, so the kernel refuses processes in its \
         domain children, corral's leaves (EOPNOTSUPP; a cgroup that holds processes and \
         hands a threaded controller such as pids or cpu to its children becomes such a \
         thread root); set {PARENT_VARIABLE} to a cgroup without processes (see \
         docs/limits.md)",
        parent.display(),
    )
}

const NO_KILL: &str = "cgroup.kill is missing (needs Linux 5.14 or later)";

/// Checks that leaves can be created, carry `cgroup.kill` (Linux 5.14+) and
/// can be removed, for [`capabilities`](crate::capabilities): makes a leaf,
/// runs `inspect` on it (the parent, the leaf, its directory handle) while it
/// exists, and removes it, whatever `inspect` found. Spawning does not need
/// it: creating the leaf is the probe.
pub(crate) fn probe<T>(
    inspect: impl FnOnce(&Path, &Path, BorrowedFd<'_>) -> Result<T, String>,
) -> Result<(PathBuf, T), String> {
    let parent = parent_dir()?;
    let leaf =
        create_unique(&parent, "corral-probe", &mut |_| {}).map_err(|e| refused(&parent, &e))?;
    let found = if leaf.join("cgroup.kill").exists() {
        sys::open_dir(&leaf)
            .map_err(|e| format!("cannot open {}: {e}", leaf.display()))
            .and_then(|dir| inspect(&parent, &leaf, dir.as_fd()))
    } else {
        Err(NO_KILL.to_owned())
    };
    remove_probe(&leaf);
    // As a leaf's parent reads (the root's path has no trailing slash), so
    // that reasons read the same here and in a run.
    found.map(|found| (parent.components().collect(), found))
}

/// Removes a probe's leaf. A process `inspect` started there may still be
/// counted in it for a moment after it was reaped: `rmdir` is tried again
/// while the kernel says busy, for at most a second.
fn remove_probe(leaf: &Path) {
    let until = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        match fs::remove_dir(leaf) {
            Err(error)
                if error.kind() == io::ErrorKind::ResourceBusy
                    && std::time::Instant::now() < until =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(path = %leaf.display(), %error, "probe cgroup left behind");
                return;
            }
            _ => return,
        }
    }
}

pub(crate) enum LeafError {
    /// The backend cannot be used here (with the reason).
    Unavailable(String),
    /// It can, but this creation failed.
    Failed(Error),
}

/// A leaf cgroup created for one invocation, before the spawn.
#[derive(Debug)]
pub(crate) struct Leaf {
    path: PathBuf,
    procs: OwnedFd,
    dir: OwnedFd,
    /// The cgroup id (the directory's inode), recorded in the ledger.
    id: u64,
    /// Whether dropping the leaf removes the directory (until a tree owns it).
    owned: bool,
}

impl Leaf {
    /// Creates a leaf under [`parent_dir`]. Where [`PARENT_VARIABLE`] names
    /// the parent, a parent that cannot be used is an error, never a quiet
    /// fallback to another backend: the caller asked for that cgroup.
    pub(crate) fn create(reserve: &mut dyn FnMut(&Path)) -> Result<Self, LeafError> {
        let chosen = std::env::var_os(PARENT_VARIABLE).is_some_and(|v| !v.is_empty());
        Self::create_in_parent(reserve).map_err(|error| match error {
            LeafError::Unavailable(reason) if chosen => {
                LeafError::Failed(Error::BackendUnavailable {
                    backend: crate::backend::Backend::Cgroup,
                    reason,
                })
            }
            error => error,
        })
    }

    fn create_in_parent(reserve: &mut dyn FnMut(&Path)) -> Result<Self, LeafError> {
        let parent = parent_dir().map_err(LeafError::Unavailable)?;
        let path = match create_unique(&parent, "corral", reserve) {
            Ok(path) => path,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                return Err(LeafError::Unavailable(refused(&parent, &error)));
            }
            Err(source) => {
                return Err(LeafError::Failed(Error::Cgroup {
                    source: explain_mkdir_error(source),
                    path: parent,
                }));
            }
        };
        if !path.join("cgroup.kill").exists() {
            let _ = fs::remove_dir(&path);
            return Err(LeafError::Unavailable(NO_KILL.to_owned()));
        }
        // Below a thread root the leaf is `domain invalid`: no leader could
        // start in it.
        let kind = fs::read_to_string(path.join("cgroup.type")).unwrap_or_default();
        if kind.trim() != "domain" {
            let _ = fs::remove_dir(&path);
            let parent_kind = fs::read_to_string(parent.join("cgroup.type")).unwrap_or_default();
            return Err(LeafError::Unavailable(not_a_domain(
                &parent,
                parent_kind.trim(),
            )));
        }
        let failed = |path: &Path, source| {
            LeafError::Failed(Error::Cgroup {
                path: path.to_owned(),
                source,
            })
        };
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(path.join("cgroup.procs"))
            .map(OwnedFd::from);
        let dir = sys::open_dir(&path);
        let opened = procs.and_then(|procs| {
            let dir = dir?;
            let id = sys::dirfd::meta(&dir)?.ino;
            Ok((procs, dir, id))
        });
        match opened {
            Ok((procs, dir, id)) => Ok(Self {
                path,
                procs,
                dir,
                id,
                owned: true,
            }),
            Err(e) => {
                let _ = fs::remove_dir(&path);
                Err(failed(&path, e))
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup id: the inode of the leaf's directory.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The leaf's directory, for `clone3(CLONE_INTO_CGROUP)`.
    pub(crate) fn dir(&self) -> &OwnedFd {
        &self.dir
    }

    /// `cgroup.procs`, open for writing (close-on-exec, as std opens files).
    pub(crate) fn procs(&self) -> &OwnedFd {
        &self.procs
    }

    /// `cgroup.kill`: for a spawn that failed after the leader was born in
    /// the leaf.
    pub(crate) fn kill(&self) {
        if let Err(error) = fs::write(self.path.join("cgroup.kill"), b"1") {
            tracing::warn!(path = %self.path.display(), %error, "cgroup.kill failed");
        }
    }

    /// Waits, polling, until the leaf is empty or `bound` has passed.
    pub(crate) fn wait_empty(&self, bound: Duration) {
        let until = std::time::Instant::now() + bound;
        while std::time::Instant::now() < until {
            let events = fs::read_to_string(self.path.join("cgroup.events")).unwrap_or_default();
            if events.lines().any(|line| line.trim() == "populated 0") {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Starts watching `cgroup.events`; the leader (pid and start time) was
    /// born inside, and is a member from then on wherever it moves: it may
    /// have left before any list of the leaf could name it.
    pub(crate) fn watch(mut self, leader: (i32, u64)) -> Result<CgroupTree, Error> {
        // From here on the tree owns the directory (and removes it).
        self.owned = false;
        let mut tree = CgroupTree {
            path: self.path.clone(),
            watch: None,
            removed: false,
            seen: HashSet::from([leader]),
            signalled: false,
            left_to_inner: 0,
            notes: Vec::new(),
        };
        let events = self.path.join("cgroup.events");
        let watch = sys::open_events(&events).map_err(|source| Error::Cgroup {
            path: events,
            source,
        })?;
        tree.watch = Some(watch);
        Ok(tree)
    }
}

impl Drop for Leaf {
    /// A leaf whose spawn failed is empty: remove it.
    fn drop(&mut self) {
        if self.owned {
            let _ = fs::remove_dir(&self.path);
        }
    }
}

/// A live leaf cgroup holding a tree.
#[derive(Debug)]
pub(crate) struct CgroupTree {
    path: PathBuf,
    watch: Option<AsyncFd<OwnedFd>>,
    removed: bool,
    /// Every member listed in the leaf so far, as (pid, start time): one that
    /// moved itself out is still ours (see the module's documentation).
    seen: HashSet<(i32, u64)>,
    /// Whether a signal other than `SIGKILL` was sent (a grace began).
    signalled: bool,
    /// How many members signal steps left to a nested supervisor.
    left_to_inner: usize,
    /// What the signal steps found wrong (see [`CgroupTree::take_notes`]).
    notes: Vec<String>,
}

/// Members that had moved themselves out of the leaf, found at the end.
#[derive(Debug, Default)]
pub(crate) struct Departed {
    /// Each one found running outside the leaf and sent `SIGKILL`.
    pub(crate) killed: Vec<ProcessInfo>,
    /// Those of them still running when the bound passed.
    pub(crate) surviving: Vec<ProcessInfo>,
    /// How many did not stop when told to (stuck in the kernel), so what
    /// they forked meanwhile may be missing (see `halt.rs`).
    pub(crate) not_stopped: usize,
}

/// How long a departed member is given to show that it has stopped.
const STOP_BOUND: Duration = Duration::from_millis(500);

/// How long a leaf is given to report itself frozen (`frozen 1` in
/// `cgroup.events`): a member in an uninterruptible sleep delays it.
const FREEZE_BOUND: Duration = Duration::from_millis(100);

/// The leaf frozen (`cgroup.freeze`) for the length of a signal step, thawed
/// on drop. While it is frozen no member runs: none forks, none exits (which
/// would cut its children's parent links), none moves a child out of the
/// leaf, so one look at the leaf and the members' children is the whole
/// tree until the signal is sent. A kernel without `cgroup.freeze`
/// (before 5.2), a write refused, or a member that does not freeze within
/// [`FREEZE_BOUND`] leaves the step as it was without the freeze: signals
/// still go by identity, and the members still running are what may fork
/// meanwhile.
struct Frozen {
    path: PathBuf,
    written: bool,
}

impl Frozen {
    fn freeze(path: &Path) -> Self {
        let path = path.to_owned();
        // Frozen by someone else already: left as it is, never thawed here.
        if fs::read_to_string(path.join("cgroup.freeze")).is_ok_and(|v| v.trim() == "1") {
            return Self {
                path,
                written: false,
            };
        }
        if let Err(error) = fs::write(path.join("cgroup.freeze"), b"1") {
            tracing::debug!(path = %path.display(), %error, "cgroup.freeze refused");
            return Self {
                path,
                written: false,
            };
        }
        let frozen = || {
            fs::read_to_string(path.join("cgroup.events"))
                .is_ok_and(|events| events.lines().any(|line| line.trim() == "frozen 1"))
        };
        let until = std::time::Instant::now() + FREEZE_BOUND;
        while !frozen() {
            if std::time::Instant::now() >= until {
                tracing::warn!(path = %path.display(), "the leaf did not freeze in time");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Self {
            path,
            written: true,
        }
    }
}

impl Frozen {
    /// Whether a freeze this step wrote was undone before its end (a
    /// process that may write the leaf's `cgroup.freeze`: root, or the same
    /// user in a delegated subtree).
    fn undone(&self) -> bool {
        self.written
            && fs::read_to_string(self.path.join("cgroup.freeze")).is_ok_and(|v| v.trim() == "0")
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if self.written
            && let Err(error) = fs::write(self.path.join("cgroup.freeze"), b"0")
        {
            tracing::warn!(path = %self.path.display(), %error, "thawing the leaf failed");
        }
    }
}

impl CgroupTree {
    /// A tree for an existing leaf (named by a record, and checked by the
    /// caller), without a watch: emptiness is read, not awaited.
    pub(crate) fn adopt(path: PathBuf) -> Self {
        Self {
            path,
            watch: None,
            removed: false,
            seen: HashSet::new(),
            signalled: false,
            left_to_inner: 0,
            notes: Vec::new(),
        }
    }

    /// Gives up the leaf without touching it (dropping the tree then neither
    /// kills nor removes anything).
    pub(crate) fn forget(&mut self) {
        self.removed = true;
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The processes in the leaf and in any cgroup a member made below it,
    /// as `/proc` numbers them. `cgroup.procs` lists them as this process's
    /// PID namespace does; where `/proc` belongs to another one (`unshare
    /// --pid` without a new `/proc`), each is opened by its listed number
    /// and renumbered from its pidfd (one gone meanwhile is left out).
    fn pids(&self) -> io::Result<Vec<i32>> {
        let listed = self.listed()?;
        let renumber = !sys::proc_is_own_namespace();
        if !renumber {
            return Ok(listed);
        }
        Ok(listed
            .into_iter()
            .filter_map(|pid| {
                let pidfd = sys::pidfd_open(pid).ok()?;
                sys::proc_pid_of(pidfd.as_fd()).ok().flatten()
            })
            .collect())
    }

    /// The processes in the leaf and below it as `cgroup.procs` lists them
    /// (numbered in this process's PID namespace: what `cgroup.procs`
    /// takes back).
    fn listed(&self) -> io::Result<Vec<i32>> {
        subtree_pids(&sys::dirfd::open_dir_at(None, self.path.as_os_str())?)
    }

    /// Whether the process `pid` is in this leaf (read after its pidfd was
    /// opened, so a recycled pid is caught).
    fn holds(&self, pid: i32) -> bool {
        let Some(relative) = own_relative(&self.path) else {
            return false;
        };
        fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|text| {
                own_cgroup(&text).map(|p| p == relative || p.starts_with(&format!("{relative}/")))
            })
            .unwrap_or(false)
    }

    /// Sends `signal` to every member. The leaf is frozen for the look that
    /// decides who the members are (see [`Frozen`]): a member that forks
    /// meanwhile cannot leave a child unlisted, nor a child that moves out
    /// of the leaf unremembered, and the step does not compete for the CPU
    /// with a tree that does (a fork bomb).
    pub(crate) fn signal(&mut self, signal: Signal) -> io::Result<Option<usize>> {
        if signal == Signal::KILL {
            // A throttled member reaches the freezer only when the limit
            // lets it run: lifted first, the freeze takes its usual moment,
            // not the final bound's time (a tree held to 1% of a CPU took
            // half of a 1 s bound in the emulated guest, and a member was
            // still exiting at its end).
            self.unthrottle();
        }
        let frozen = self.freeze();
        if signal == Signal::KILL {
            // Look (again, after a grace) for members and children of
            // members that moved out of the leaf: the kill reaches only what
            // is in it, and a frozen leaf makes the look one pass.
            self.note_members()?;
            // `cgroup.kill` ends frozen members too (a fatal signal leaves
            // the freezer); the thaw at `frozen`'s drop is for what the
            // kernel has not reached yet.
            self.kill()?;
            self.check_held(frozen.as_ref());
            return Ok(None);
        }
        self.signalled = true;
        let inside = self.note_members()?;
        let delivered = self.signal_members(&inside, signal);
        self.check_held(frozen.as_ref());
        // Thawed (at `frozen`'s drop): the signal is handled once the
        // members run again.
        Ok(Some(delivered))
    }

    /// Passes `signal` on to every member (`Control::signal`) while the tree
    /// runs: no freeze, which would stall the whole tree for a signal that
    /// ends nothing (a terminal's `SIGWINCH`, say).
    pub(crate) fn pass_on(&mut self, signal: Signal) -> io::Result<usize> {
        let inside = self.note_members()?;
        Ok(self.signal_members(&inside, signal))
    }

    /// The leaf frozen for a signal step, unless it holds this process (a
    /// member that may write `cgroup.procs` can move its supervisor in:
    /// frozen, it would never thaw the leaf): then none, and a note.
    fn freeze(&mut self) -> Option<Frozen> {
        let own = std::process::id();
        if self.holds(own.cast_signed()) {
            // Moved back out to the leaf's parent, or neither frozen nor,
            // at `SIGKILL`, killed with its tree (`cgroup.kill` would end
            // this process before it could end what left the leaf).
            let parent = self.path.parent().map(|p| p.join("cgroup.procs"));
            if parent.is_some_and(|procs| fs::write(procs, own.to_string()).is_ok()) {
                self.note_once(
                    "a member had moved this corral process into its own leaf cgroup: \
                     it was moved back out before the leaf was frozen and killed",
                );
            } else {
                self.note_once(
                    "a member had moved this corral process into its own leaf cgroup, and it \
                     could not move back out: the leaf was not frozen for the signal steps, so \
                     what members forked meanwhile may be unnamed",
                );
                return None;
            }
        }
        Some(Frozen::freeze(&self.path))
    }

    /// Notes a freeze undone during the step.
    fn check_held(&mut self, frozen: Option<&Frozen>) {
        if frozen.is_some_and(Frozen::undone) {
            self.note_once(
                "the leaf's freeze was undone during a signal step (a process that may write \
                 its cgroup.freeze): what members forked meanwhile may be unnamed",
            );
        }
    }

    fn note_once(&mut self, note: &str) {
        if !self.notes.iter().any(|n| n == note) {
            self.notes.push(note.to_owned());
        }
    }

    /// What the signal steps found wrong, for the report (taken once).
    pub(crate) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Sends `signal` by identity to each of `inside` still in the leaf,
    /// except the members below a nested supervisor, which that supervisor
    /// signals by its own policy (`nested.rs`); returns how many it reached.
    fn signal_members(&mut self, inside: &[(i32, u64)], signal: Signal) -> usize {
        let members: HashSet<i32> = inside.iter().map(|&(pid, _)| pid).collect();
        // `SIGSTOP` reaches every member, as `SIGKILL` does.
        let mut nested = (signal != Signal::STOP).then(Nested::new);
        let mut delivered = 0;
        for &(pid, start_time) in inside {
            // The leaf is frozen: the parent read now is the one at the look.
            if let Some(nested) = &mut nested
                && let Ok(stat) = identity::read_stat(pid)
                && stat.start_time == start_time
                && nested.leaves_to_inner(pid, stat.ppid, |p| members.contains(&p))
            {
                continue;
            }
            let belongs = || {
                Ok(identity::read_stat(pid)
                    .is_ok_and(|stat| stat.start_time == start_time && stat.is_running())
                    && self.holds(pid))
            };
            match identity::signal_if(pid, signal, belongs) {
                Ok(identity::Delivery::Sent) => delivered += 1,
                Ok(identity::Delivery::Gone) => {}
                Err(error) => tracing::warn!(pid, %signal, %error, "signal failed"),
            }
        }
        self.left_to_inner += nested.map_or(0, |n| n.delegated);
        delivered
    }

    /// How many members a signal step left to a nested supervisor so far.
    pub(crate) fn left_to_inner(&self) -> usize {
        self.left_to_inner
    }

    /// Lists the members in the leaf now and remembers them, with their
    /// descendants that moved out of it (before any member dies of a signal,
    /// which would cut its children's parent links).
    fn note_members(&mut self) -> io::Result<Vec<(i32, u64)>> {
        // The start time is read before the leaf is checked, so if the pid
        // was recycled in between, the identity remembered is a process that
        // is gone, never a bystander.
        let mut inside = Vec::new();
        for pid in self.pids()? {
            if let Ok(stat) = identity::read_stat(pid)
                && stat.is_running()
                && self.holds(pid)
            {
                inside.push((pid, stat.start_time));
            }
        }
        self.seen.extend(inside.iter().copied());
        self.remember_departed_children(&inside);
        Ok(inside)
    }

    /// Remembers the running descendants of `members` (by parent links in one
    /// walk of `/proc`) that are outside the leaf: they moved themselves out
    /// while their parent stayed. One walk per signal step, never while the
    /// tree runs.
    fn remember_departed_children(&mut self, members: &[(i32, u64)]) {
        if members.is_empty() {
            return;
        }
        // Parent links from the members listed in the leaf: a look at each
        // member's children, not a walk of the host (a cleanup of many trees
        // at once would walk it once per tree).
        let listed: HashSet<i32> = members.iter().map(|&(pid, _)| pid).collect();
        let mut looked: HashSet<i32> = listed.clone();
        let mut frontier: Vec<i32> = listed.iter().copied().collect();
        let mut departed = Vec::new();
        while let Some(parent) = frontier.pop() {
            let Some(children) = identity::children(parent) else {
                return self.remember_departed_children_by_walk(members);
            };
            for child in children {
                if !looked.insert(child) {
                    continue;
                }
                if let Ok(stat) = identity::read_stat(child)
                    && stat.is_running()
                    && !self.holds(child)
                {
                    departed.push((child, stat.start_time));
                    frontier.push(child);
                }
            }
        }
        if !departed.is_empty() {
            tracing::warn!(
                count = departed.len(),
                "members found outside the leaf cgroup"
            );
        }
        self.seen.extend(departed);
    }

    /// [`remember_departed_children`](Self::remember_departed_children) on
    /// a kernel without `/proc/PID/task/TID/children`: one walk of the host.
    fn remember_departed_children_by_walk(&mut self, members: &[(i32, u64)]) {
        let Ok(table) = identity::all_processes() else {
            return;
        };
        let roots: Vec<i32> = members
            .iter()
            .filter(|&&(pid, start)| {
                table
                    .iter()
                    .any(|stat| stat.pid == pid && stat.start_time == start)
            })
            .map(|&(pid, _)| pid)
            .collect();
        let departed: Vec<(i32, u64)> = crate::identity::descendants(&table, &roots)
            .into_iter()
            .filter(|stat| !roots.contains(&stat.pid) && stat.is_running())
            .filter(|stat| !self.holds(stat.pid))
            .map(|stat| (stat.pid, stat.start_time))
            .collect();
        self.seen.extend(departed);
    }

    /// Ends, by identity, every remembered member that still runs outside
    /// the leaf, and the processes it forked since (still linked to it by
    /// their parent pid), and names them: each is stopped before its
    /// children are looked for, to a fixed point, and only then killed
    /// (`halt.rs`), so a member that forks meanwhile leaves no child behind.
    fn kill_departed(&self) -> Halted {
        // A member killed in the leaf and still exiting has already left
        // every cgroup (`/proc/PID/cgroup` reads `0::/`): dying, not
        // departed.
        let outside =
            |stat: &identity::Stat| !self.holds(stat.pid) && !identity::is_exiting(stat.pid);
        let departed: Vec<(i32, u64)> = self
            .seen
            .iter()
            .copied()
            .filter(|&(pid, start_time)| {
                identity::read_stat(pid).is_ok_and(|stat| {
                    stat.start_time == start_time && stat.is_running() && outside(&stat)
                })
            })
            .collect();
        if departed.is_empty() {
            return Halted::default();
        }
        let halted = halt::stop_and_kill(&departed, &outside, STOP_BOUND);
        for member in &halted.killed {
            tracing::warn!(
                pid = member.pid,
                "a member had left the leaf cgroup: killed by identity"
            );
        }
        halted
    }

    /// At the end of a cleanup: ends the remembered members that moved
    /// themselves out of the leaf (`SIGKILL` by identity), and waits up to
    /// `bound` for them to be gone.
    pub(crate) async fn end_departed(&mut self, bound: Duration) -> Departed {
        let Halted {
            killed,
            not_stopped,
        } = self.kill_departed();
        if killed.is_empty() {
            return Departed::default();
        }
        let running = |p: &ProcessInfo| {
            identity::read_stat(p.pid)
                .is_ok_and(|stat| stat.start_time == p.start_time && stat.is_running())
        };
        // Rare (only after an escape), so a short poll rather than a pidfd
        // per process.
        let until = Instant::now() + bound;
        while killed.iter().any(running) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let surviving = killed.iter().filter(|p| running(p)).cloned().collect();
        Departed {
            killed,
            surviving,
            not_stopped,
        }
    }

    /// `cgroup.kill`, then the CPU bandwidth limit lifted: a killed process
    /// runs nothing of its own again, only its exit, which a tight `cpu.max`
    /// would stretch over many periods (two throttled spinners outlived a
    /// 1 s final bound in the emulated guest).
    fn kill(&self) -> io::Result<()> {
        fs::write(self.path.join("cgroup.kill"), b"1")?;
        self.kill_behind_exited_first_threads();
        self.unthrottle();
        Ok(())
    }

    /// `SIGKILL` through a pidfd (to the process, not one thread) to each
    /// member whose first thread has exited while another runs on (it reads
    /// `Z`, with more than one thread): `cgroup.kill` leaves such a process
    /// running (seen on Linux 6.18, `matrix *::leader_thread_exits::*`).
    fn kill_behind_exited_first_threads(&self) {
        for pid in self.pids().unwrap_or_default() {
            let Ok(stat) = identity::read_stat(pid) else {
                continue;
            };
            if stat.state != 'Z' || !stat.is_running() {
                continue;
            }
            let start_time = stat.start_time;
            let belongs = || {
                Ok(identity::read_stat(pid)
                    .is_ok_and(|s| s.start_time == start_time && s.is_running())
                    && self.holds(pid))
            };
            if let Err(error) = identity::signal_if(pid, Signal::KILL, belongs) {
                tracing::warn!(pid, %error, "SIGKILL to a member whose first thread exited failed");
            }
        }
    }

    /// Writes `max` to the leaf's `cpu.max` if it holds a limit (the file is
    /// there only with the `cpu` controller enabled for the leaf).
    fn unthrottle(&self) {
        let cpu_max = self.path.join("cpu.max");
        let limited = fs::read_to_string(&cpu_max).is_ok_and(|value| !value.starts_with("max"));
        if limited && let Err(error) = fs::write(&cpu_max, b"max") {
            tracing::warn!(path = %cpu_max.display(), %error, "lifting cpu.max after the kill failed");
        }
    }

    pub(crate) fn is_empty(&self) -> io::Result<bool> {
        let events = match &self.watch {
            Some(watch) => sys::read_from_start(watch.get_ref().as_fd())?,
            None => fs::read_to_string(self.path.join("cgroup.events"))?,
        };
        Ok(events.lines().any(|l| l.trim() == "populated 0"))
    }

    /// Waits for `populated 0`, woken by the kernel's change notification on
    /// `cgroup.events` (never by polling), or for the deadline.
    pub(crate) async fn wait_empty(&mut self, deadline: Instant) -> io::Result<bool> {
        loop {
            // Reading re-arms the notification, so read before waiting.
            if self.is_empty()? {
                return Ok(true);
            }
            let Some(watch) = &self.watch else {
                return Ok(false);
            };
            tokio::select! {
                ready = watch.ready(tokio::io::Interest::PRIORITY) => ready?.clear_ready(),
                () = tokio::time::sleep_until(deadline) => return self.is_empty(),
            }
        }
    }

    pub(crate) fn members(&mut self) -> Vec<ProcessInfo> {
        let members: Vec<ProcessInfo> = self
            .pids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|pid| identity::read_stat(pid).ok())
            .filter(identity::Stat::is_running)
            .map(|stat| identity::describe(&stat))
            .collect();
        // Read before the leaf check, as in `signal`.
        let inside: Vec<(i32, u64)> = members
            .iter()
            .filter(|m| self.holds(m.pid))
            .map(|m| (m.pid, m.start_time))
            .collect();
        self.seen.extend(inside);
        members
    }

    /// `cgroup.kill`, and `SIGKILL` by identity to remembered members that
    /// left the leaf (synchronous, without waiting).
    pub(crate) fn kill_now(&self) {
        if let Err(error) = self.kill() {
            tracing::warn!(path = %self.path.display(), %error, "cgroup.kill failed");
        }
        self.kill_departed();
    }

    /// Moves every member to this process's own cgroup (where they would be
    /// had corral not started them: the leaves' parent, unless
    /// [`PARENT_VARIABLE`] names another, which may hand controllers down
    /// and then cannot hold processes), then removes the leaf. A member
    /// forked during the move is caught by the next round. If they cannot be
    /// moved, they keep the leaf (reported as left): released processes are
    /// never killed, not even when the tree is dropped.
    pub(crate) fn release(&mut self) -> bool {
        // Released on purpose: no longer ours to end.
        self.seen.clear();
        let Ok(own) = own_dir() else {
            self.forget();
            return false;
        };
        let procs = own.join("cgroup.procs");
        for _ in 0..10 {
            if self.is_empty().unwrap_or(false) {
                break;
            }
            for pid in self.listed().unwrap_or_default() {
                if let Err(error) = fs::write(&procs, pid.to_string()) {
                    tracing::debug!(pid, %error, "moving a released process failed");
                }
            }
        }
        let removed = self.close();
        if !removed {
            self.forget();
        }
        removed
    }

    /// Removes the leaf; false if members survive and it cannot be removed.
    pub(crate) fn close(&mut self) -> bool {
        if self.removed {
            return true;
        }
        self.watch = None;
        // A leaf with no cgroup below it (the usual case) goes in one
        // `rmdir`; only a refused one is searched for cgroups a member made
        // below it (which must go first), then removed again.
        let mut removed = fs::remove_dir(&self.path);
        if removed
            .as_ref()
            .is_err_and(|e| e.kind() != io::ErrorKind::NotFound)
        {
            if let Ok(dir) = sys::dirfd::open_dir_at(None, self.path.as_os_str()) {
                remove_below(&dir, 0);
            }
            removed = fs::remove_dir(&self.path);
        }
        match removed {
            Ok(()) => {
                self.removed = true;
                true
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                self.removed = true;
                true
            }
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cgroup left behind");
                false
            }
        }
    }
}

impl Drop for CgroupTree {
    /// Reached without `close` only when the supervisor was dropped mid-way
    /// (runtime shutdown): kill synchronously, wait a short bound for the
    /// kernel to finish, remove the leaf.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.kill_now();
        let until = std::time::Instant::now() + Duration::from_millis(200);
        while !self.is_empty().unwrap_or(true) && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.close();
    }
}

/// How deep below a leaf the cgroups a member made are followed.
const MAX_DEPTH: usize = 32;

/// The cgroups directly below the cgroup `dir` (a member allowed to write
/// its leaf may create child cgroups and move into them).
fn children(dir: &OwnedFd) -> Vec<(std::ffi::OsString, OwnedFd)> {
    sys::dirfd::names(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            Some((
                name.clone(),
                sys::dirfd::open_dir_at(Some(dir), &name).ok()?,
            ))
        })
        .collect()
}

/// Every process in the cgroup `dir` and in the cgroups below it.
pub(crate) fn subtree_pids(dir: &OwnedFd) -> io::Result<Vec<i32>> {
    fn walk(dir: &OwnedFd, depth: usize, pids: &mut Vec<i32>) -> io::Result<()> {
        let procs = sys::dirfd::open_file_at(dir, std::ffi::OsStr::new("cgroup.procs"))?;
        let text = sys::dirfd::read_capped(&procs, 8 << 20)?;
        pids.extend(
            String::from_utf8_lossy(&text)
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok()),
        );
        if depth < MAX_DEPTH {
            for (_, child) in children(dir) {
                // A child removed meanwhile is no loss.
                let _ = walk(&child, depth + 1, pids);
            }
        }
        Ok(())
    }
    let mut pids = Vec::new();
    walk(dir, 0, &mut pids)?;
    Ok(pids)
}

/// Removes every (empty) cgroup below `dir`, deepest first.
pub(crate) fn remove_below(dir: &OwnedFd, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    for (name, child) in children(dir) {
        remove_below(&child, depth + 1);
        if let Err(error) = sys::dirfd::rmdir_at(dir, &name) {
            tracing::debug!(?name, %error, "a cgroup below a leaf left behind");
        }
    }
}

/// Where the cgroup v2 hierarchy is mounted (read once).
pub(crate) fn mount() -> Option<&'static Path> {
    static MOUNT: OnceLock<Option<PathBuf>> = OnceLock::new();
    MOUNT
        .get_or_init(|| find_v2_mount(mountinfo().ok()?))
        .as_deref()
}

/// `/proc/self/mountinfo`, read once: the mount, the leaves' parent and
/// `nsdelegate` all come from it (each was already read once per process).
pub(crate) fn mountinfo() -> Result<&'static str, String> {
    static TEXT: OnceLock<Result<String, String>> = OnceLock::new();
    TEXT.get_or_init(|| {
        fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))
    })
    .as_deref()
    .map_err(Clone::clone)
}

/// The leaf's path as `/proc/PID/cgroup` shows it (the mount's root, then
/// the path below the mount point).
fn own_relative(path: &Path) -> Option<String> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let root = ROOT.get_or_init(|| Some(visible_v2_mount(mountinfo().ok()?)?.root));
    let relative = path.strip_prefix(mount()?).ok()?;
    Some(root.as_deref()?.join(relative).display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_the_v2_mount_on_hybrid_hosts() {
        assert_eq!(
            find_v2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn finds_unified_mount_with_optional_fields_and_escapes() {
        let text =
            "29 23 0:26 / /sys/fs/my\\040cg rw shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(find_v2_mount(text), Some(PathBuf::from("/sys/fs/my cg")));
    }

    #[test]
    fn create_unique_skips_a_taken_name_and_stops_at_a_refusal() {
        let parent = std::env::temp_dir().join(format!("corral-unique-{}", std::process::id()));
        fs::create_dir_all(&parent).expect("a parent");
        let mut tried: Vec<PathBuf> = Vec::new();
        let made = create_unique(&parent, "corral", &mut |path| {
            if tried.is_empty() {
                // A leftover with the name about to be tried.
                fs::create_dir(path).expect("a stale leaf");
            }
            tried.push(path.to_owned());
        });
        let mut calls = 0;
        let refused = create_unique(&parent.join("missing"), "corral", &mut |_| calls += 1);
        let _ = fs::remove_dir_all(&parent);
        let made = made.expect("the next name");
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert_eq!(made, tried[1]);
        assert_eq!(
            refused.map_err(|e| e.kind()).err(),
            Some(io::ErrorKind::NotFound)
        );
        assert_eq!(calls, 1, "a refusal is not retried");
    }

    /// A fresh leaf, or `None` (said as skipped) where none can be created.
    fn leaf() -> Option<Leaf> {
        let leaf = Leaf::create(&mut |_| {}).ok();
        if leaf.is_none() {
            println!("SKIPPED: no cgroup leaf can be created here");
        }
        leaf
    }

    /// A tree over `path`, as the supervisor holds one before `close`.
    fn open_tree(path: &Path) -> CgroupTree {
        CgroupTree {
            path: path.to_owned(),
            watch: None,
            removed: false,
            seen: HashSet::new(),
            signalled: false,
            left_to_inner: 0,
            notes: Vec::new(),
        }
    }

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep")
    }

    /// `holds` is the check made after a member's pidfd was opened: a process
    /// outside the leaf (a recycled pid) is not a member. Needs a usable
    /// cgroup v2 hierarchy (root or a delegated subtree).
    #[test]
    fn holds_only_processes_inside_the_leaf() {
        let Some(leaf) = leaf() else {
            return;
        };
        let tree = open_tree(leaf.path());
        let mut child = sleeper();
        let pid = child.id() as i32;
        let outside = tree.holds(pid);
        let moved = fs::write(tree.path.join("cgroup.procs"), pid.to_string());
        let inside = tree.holds(pid);
        let _ = child.kill();
        let _ = child.wait();
        drop(tree);
        drop(leaf);
        moved.expect("moved into the leaf");
        assert!(!outside, "a process outside the leaf counted as a member");
        assert!(inside, "a process inside the leaf not counted as a member");
    }

    /// `close` removes the leaf once it is empty, says so when members keep
    /// it busy, and counts a leaf someone else removed as removed.
    #[test]
    fn close_removes_an_empty_leaf_and_reports_a_busy_one() {
        let Some(leaf) = leaf() else {
            return;
        };
        let path = leaf.path().to_owned();
        let mut tree = open_tree(&path);
        let mut child = sleeper();
        let moved = fs::write(path.join("cgroup.procs"), child.id().to_string());
        let busy = tree.close();
        let _ = child.kill();
        let _ = child.wait();
        let until = std::time::Instant::now() + Duration::from_secs(2);
        let mut closed = tree.close();
        while !closed && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            closed = tree.close();
        }
        let mut again = open_tree(&path);
        let gone = again.close();
        drop((again, tree, leaf));
        moved.expect("moved into the leaf");
        assert!(!busy, "a leaf with a member reported as removed");
        assert!(closed, "an empty leaf not removed");
        assert!(!path.exists());
        assert!(gone, "a leaf removed by someone else is removed");
    }

    /// A tree dropped without `close` (its supervisor was dropped mid-way)
    /// kills its members, waits for the kernel to empty the leaf, and
    /// removes it.
    #[test]
    fn dropping_an_open_tree_kills_the_members_and_removes_the_leaf() {
        use std::os::unix::process::ExitStatusExt;
        let Some(leaf) = leaf() else {
            return;
        };
        let path = leaf.path().to_owned();
        let mut child = sleeper();
        let moved = fs::write(path.join("cgroup.procs"), child.id().to_string());
        drop(open_tree(&path));
        let removed = !path.exists();
        let until = std::time::Instant::now() + Duration::from_secs(2);
        let mut status = child.try_wait().expect("try_wait");
        while status.is_none() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            status = child.try_wait().expect("try_wait");
        }
        if status.is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(leaf);
        moved.expect("moved into the leaf");
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(libc::SIGKILL),
            "the member was not killed"
        );
        assert!(removed, "the leaf {} was left behind", path.display());
    }

    /// A remembered member is ended only while it is the very process that
    /// was listed: a pid now held by another process (another start time,
    /// as after reuse) is left alone. Needs no cgroup: the leaf here does not
    /// exist, so every process counts as outside it.
    #[test]
    fn a_departed_member_is_killed_by_identity_only() {
        use std::os::unix::process::ExitStatusExt;
        let mut tree = open_tree(Path::new("/nonexistent/corral-leaf"));
        tree.removed = true;
        let mut child = sleeper();
        let pid = child.id() as i32;
        let start = identity::read_stat(pid).expect("stat").start_time;
        tree.seen.insert((pid, start + 1));
        let impostor = tree.kill_departed().killed;
        let spared = identity::read_stat(pid).is_ok_and(|s| s.is_running());
        tree.seen.clear();
        tree.seen.insert((pid, start));
        let killed = tree.kill_departed().killed;
        let status = child.wait().expect("reaped");
        assert!(impostor.is_empty(), "{impostor:?}");
        assert!(spared, "a process with another start time was killed");
        assert_eq!(killed.len(), 1, "{killed:?}");
        assert_eq!((killed[0].pid, killed[0].start_time), (pid, start));
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    /// mountinfo in a container made with `unshare` that mounted cgroup2
    /// read-only over the hybrid host's `/sys/fs/cgroup` (the shape of
    /// `corral-cli`'s `containers` tests).
    const OVERMOUNTED: &str = "\
47 46 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
57 47 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
65 47 0:38 / /sys/fs/cgroup ro,relatime - cgroup2 none rw,nsdelegate
70 22 0:5 / /dev/null rw - devtmpfs udev rw
";

    #[test]
    fn the_cgroup2_mount_over_an_inherited_one_is_the_one_used() {
        assert_eq!(
            find_v2_mount(OVERMOUNTED),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert!(has_nsdelegate(OVERMOUNTED));
        // Hidden by a later mount above it, not only on it.
        let tmpfs_over = format!("{HYBRID}50 31 0:40 / /sys/fs rw - tmpfs tmpfs rw\n");
        assert_eq!(find_v2_mount(&tmpfs_over), None);
        // Of two visible ones, the first (the system's, not one mounted
        // later elsewhere).
        let second = format!("{HYBRID}51 22 0:38 / /mnt/cg rw - cgroup2 cgroup2 rw\n");
        assert_eq!(
            find_v2_mount(&second),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            find_v2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn the_own_cgroup_is_found_below_the_mounts_root_or_refused() {
        let mount = |root: &str| V2Mount {
            point: PathBuf::from("/sys/fs/cgroup"),
            root: PathBuf::from(root),
            options: String::new(),
        };
        assert_eq!(
            own_path(&mount("/"), "/a/b"),
            Ok(PathBuf::from("/sys/fs/cgroup/a/b"))
        );
        // A part of the hierarchy bound at the mount point.
        assert_eq!(
            own_path(&mount("/a"), "/a/b"),
            Ok(PathBuf::from("/sys/fs/cgroup/b"))
        );
        // Mounted outside this process's cgroup namespace (bubblewrap binds
        // the host's mount into one): the mount point is not its cgroup.
        let refused = own_path(&mount("/.."), "/").expect_err("refused");
        assert!(refused.contains("mount -t cgroup2"), "{refused}");
        assert!(own_path(&mount("/a"), "/ab").is_err());
    }

    #[test]
    fn unescape_decodes_only_a_backslash_and_three_octal_digits() {
        for (field, path) in [
            ("/a\\134b\\011c", "/a\\b\tc"),
            ("/a\\0400", "/a 0"),
            ("\\040a", " a"),
            ("/a040b", "/a040b"),
            ("/a\\04", "/a\\04"),
            ("/a\\", "/a\\"),
            ("/a\\089", "/a\\089"),
            ("\\x040", "\\x040"),
        ] {
            assert_eq!(unescape(field), PathBuf::from(path), "{field:?}");
        }
    }

    #[test]
    fn nsdelegate_is_read_from_the_v2_mounts_super_options() {
        assert!(!has_nsdelegate(HYBRID));
        let delegated = "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
        assert!(has_nsdelegate(delegated));
        // A mount option (left of " - ") is not a super option.
        assert!(!has_nsdelegate(
            "29 23 0:26 / /sys/fs/cgroup rw,nsdelegate - cgroup2 cgroup2 rw\n"
        ));
        // Only the cgroup2 mount counts, and only a whole option.
        assert!(!has_nsdelegate(
            "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,nsdelegate\n"
        ));
        assert!(!has_nsdelegate(
            "41 31 0:38 / /u rw - cgroup2 cgroup2 rw,nsdelegatex\n"
        ));
        assert!(!has_nsdelegate("41 31 0:38 / /u rw - cgroup2\n"));
        assert!(!has_nsdelegate("garbage\n"));
    }

    /// A leaf made by root is writable by root only: another user cannot
    /// move a process through its `cgroup.procs` or its ancestors'.
    #[test]
    fn a_leaf_made_by_root_is_not_writable_by_another_user() {
        let Some(leaf) = leaf() else {
            return;
        };
        let nobody = writable_by(leaf.path(), 65534, Some(65534));
        let me = sys::geteuid();
        let owner = writable_by(leaf.path(), me, None);
        drop(leaf);
        if me == 0 {
            assert_eq!(nobody, None);
        }
        assert!(owner.is_some(), "the creator can write its own leaf");
    }

    #[test]
    fn no_v2_mount_is_none() {
        assert_eq!(
            find_v2_mount("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"),
            None
        );
        assert_eq!(find_v2_mount("garbage\n\n - \n"), None);
    }

    #[test]
    fn own_cgroup_reads_the_unified_line() {
        assert_eq!(
            own_cgroup("4:memory:/x\n0::/user.slice/a.scope\n"),
            Some("/user.slice/a.scope")
        );
        assert_eq!(own_cgroup("0::/\n"), Some("/"));
        assert_eq!(own_cgroup("1:cpu:/\n"), None);
        assert_eq!(own_cgroup("0::relative\n"), None);
    }
}
