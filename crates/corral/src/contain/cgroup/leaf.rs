//! A leaf cgroup created before the spawn ([`Leaf`]), under the parent
//! [`parent_dir`] chooses, with a name that never repeats; and the probe
//! [`capabilities`](crate::capabilities()) makes of one.

use std::{
    fs, io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    path::{Path, PathBuf},
    time::Duration,
};

use super::{
    parent::{PARENT_VARIABLE, not_a_domain, parent_dir},
    tree::CgroupTree,
};
use crate::{error::Error, sys};

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

const NO_KILL: &str = "cgroup.kill is missing (needs Linux 5.14 or later)";

/// Checks that leaves can be created, carry `cgroup.kill` (Linux 5.14+) and
/// can be removed, for [`capabilities`](crate::capabilities()): makes a leaf,
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
        CgroupTree::watching(self.path.clone(), leader)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
