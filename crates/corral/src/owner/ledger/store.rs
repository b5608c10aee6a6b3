//! The one way ledger files are opened, read and written.
//!
//! A record steers signals, so it is believed only if nobody but us (or
//! root) could have written it. The directory is opened once, without
//! following a symlink, after every directory above it was checked; it must
//! be ours and writable by nobody else, and it is created with mode 0700 by
//! the `mkdir` itself. Records are opened relative to that descriptor with
//! `O_NOFOLLOW | O_NONBLOCK`, must be regular files of ours and at most
//! [`RECORD_MAX`] bytes; writes go to an unpredictable temporary name
//! created with `O_EXCL`, then `renameat`. A path swapped after the open
//! changes nothing: every later step goes through the descriptor.
//!
//! See `docs/security.md` for the threat model.

use std::{
    ffi::{OsStr, OsString},
    io,
    os::{fd::OwnedFd, unix::ffi::OsStrExt},
    path::{Component, Path, PathBuf},
};

use crate::{
    error::Error,
    sys::{
        self,
        dirfd::{self, Meta},
    },
};

/// The largest record read; a larger file is skipped as hostile.
pub const RECORD_MAX: usize = 64 * 1024;

/// An open, checked ledger directory.
#[derive(Debug)]
pub(crate) struct Store {
    path: PathBuf,
    dir: OwnedFd,
}

/// Why a directory is refused: one line that names the path, what is wrong
/// with it and the fix.
fn refused(path: &Path, reason: impl Into<String>) -> Error {
    Error::LedgerRefused {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

const FIX: &str = "point CORRAL_LEDGER_DIR (or --ledger) at a directory of your own with mode 0700";

impl Store {
    /// Opens the ledger directory at `path`, creating it (and missing
    /// parents) with mode 0700 when `create`. `Ok(None)`: it does not exist
    /// and `create` is false (an empty ledger).
    ///
    /// # Errors
    /// [`Error::LedgerRefused`] when the directory, or one above it, could
    /// have been written by another user, or is a symlink; or when it cannot
    /// be opened or created.
    pub(crate) fn open(path: &Path, create: bool) -> Result<Option<Self>, Error> {
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()
                .map_err(|e| refused(path, format!("cannot resolve a relative path: {e}")))?
                .join(path)
        };
        let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
            return Err(refused(path, "not a directory name"));
        };
        if matches!(
            absolute.components().next_back(),
            Some(Component::ParentDir | Component::CurDir)
        ) {
            return Err(refused(
                path,
                "must end in a directory name, not '.' or '..'",
            ));
        }
        let Some(above) = open_trusted_ancestors(parent, create)? else {
            return Ok(None);
        };
        let dir = match dirfd::open_dir_at(Some(&above), name) {
            Ok(dir) => dir,
            Err(error) if error.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                match dirfd::mkdir_at(&above, name, 0o700) {
                    Err(error) if error.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(refused(path, format!("cannot create it: {error}")));
                    }
                    _ => {}
                }
                dirfd::open_dir_at(Some(&above), name).map_err(|e| not_a_directory(path, &e))?
            }
            Err(error) => return Err(not_a_directory(path, &error)),
        };
        let meta = dirfd::meta(&dir).map_err(|e| refused(path, e.to_string()))?;
        check_dir(path, &meta)?;
        Ok(Some(Self {
            path: absolute,
            dir,
        }))
    }

    /// The directory's path, as opened.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The names of the records (`*.json`, not hidden).
    pub(crate) fn record_names(&self) -> io::Result<Vec<OsString>> {
        let mut names = dirfd::names(&self.dir)?;
        names.retain(|n| {
            let bytes = n.as_bytes();
            !bytes.starts_with(b".") && bytes.ends_with(b".json")
        });
        Ok(names)
    }

    /// Reads one record's bytes, or says in one line why it is not believed.
    pub(crate) fn read(&self, name: &OsStr) -> Result<Vec<u8>, String> {
        let file = dirfd::open_file_at(&self.dir, name).map_err(|error| {
            if error.raw_os_error() == Some(libc::ELOOP) {
                "a symlink: records are never followed".to_owned()
            } else {
                error.to_string()
            }
        })?;
        let meta = dirfd::meta(&file).map_err(|e| e.to_string())?;
        check_record(&meta)?;
        dirfd::read_capped(&file, RECORD_MAX).map_err(|e| e.to_string())
    }

    /// Publishes `bytes` as `name` atomically: written to a new file with an
    /// unpredictable name (`O_CREAT | O_EXCL`, mode 0600), then renamed.
    pub(crate) fn publish(&self, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
        let mut temporary = OsString::from(".");
        temporary.push(name);
        temporary.push(format!(".{:016x}.tmp", dirfd::random_u64()?));
        let file = dirfd::create_exclusive_at(&self.dir, &temporary, 0o600)?;
        let written = dirfd::write_all(&file, bytes)
            .and_then(|()| dirfd::rename_at(&self.dir, &temporary, name));
        if written.is_err() {
            let _ = dirfd::unlink_at(&self.dir, &temporary);
        }
        written
    }

    /// Removes `name`; a missing file is not an error.
    pub(crate) fn remove(&self, name: &OsStr) -> io::Result<()> {
        match dirfd::unlink_at(&self.dir, name) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}

/// The ledger directory itself must be ours and writable by nobody else.
fn check_dir(path: &Path, meta: &Meta) -> Result<(), Error> {
    let me = sys::geteuid();
    if meta.uid != me {
        return Err(refused(
            path,
            format!(
                "owned by uid {} (mode {:04o}), not by uid {me}: another user could have \
                 written its records; have it removed (by root, if it is not yours and sits in \
                 a sticky directory such as /tmp), or {FIX}",
                meta.uid, meta.mode
            ),
        ));
    }
    if meta.mode & 0o022 != 0 {
        return Err(refused(
            path,
            format!(
                "mode {:04o} lets others write records into it; run `chmod 700 {}` after \
                 checking its files, or {FIX}",
                meta.mode,
                path.display()
            ),
        ));
    }
    Ok(())
}

/// A record is believed only as a small regular file of ours.
fn check_record(meta: &Meta) -> Result<(), String> {
    if !meta.is_file {
        return Err("not a regular file (a FIFO, device or directory?)".to_owned());
    }
    let me = sys::geteuid();
    if meta.uid != me {
        return Err(format!("owned by uid {}, not by uid {me}", meta.uid));
    }
    if meta.size > RECORD_MAX as u64 {
        return Err(format!(
            "{} bytes, more than a record may have ({RECORD_MAX})",
            meta.size
        ));
    }
    Ok(())
}

fn not_a_directory(path: &Path, error: &io::Error) -> Error {
    if matches!(error.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) {
        refused(
            path,
            format!("a symlink or not a directory: it is never followed; {FIX}"),
        )
    } else {
        refused(path, error.to_string())
    }
}

/// How many symlinks above the ledger a path may pass through (as the
/// kernel's own limit).
const MAX_SYMLINKS: usize = 40;

/// Opens `dir` component by component from `/` with `O_NOFOLLOW`, checking
/// that nobody but us or root could replace any of them: each is owned by us
/// or root and, if others may write to it, sticky (as `/tmp` is). A symlink
/// on the way (`/var/run`) is followed only if it is owned by us or root (its
/// directory was checked, so nobody else can swap it). Missing directories
/// are created (mode 0700) when `create`, each after its parent passed;
/// otherwise `Ok(None)`.
fn open_trusted_ancestors(dir: &Path, create: bool) -> Result<Option<OwnedFd>, Error> {
    let root =
        dirfd::open_dir_at(None, OsStr::new("/")).map_err(|e| refused(dir, e.to_string()))?;
    check_ancestor(Path::new("/"), &root)?;
    // The directories walked so far, so that `..` goes back up one.
    let mut walked: Vec<(PathBuf, OwnedFd)> = vec![(PathBuf::from("/"), root)];
    let mut pending: std::collections::VecDeque<OsString> = components(dir).collect();
    let mut symlinks = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if walked.len() > 1 {
                walked.pop();
            }
            continue;
        }
        let (here, fd) = walked.last().expect("the root stays");
        let path = here.join(&name);
        let opened = match dirfd::open_dir_at(Some(fd), &name) {
            Err(error) if error.kind() == io::ErrorKind::NotFound && create => {
                match dirfd::mkdir_at(fd, &name, 0o700) {
                    Err(error) if error.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(refused(&path, format!("cannot create it: {error}")));
                    }
                    _ => dirfd::open_dir_at(Some(fd), &name),
                }
            }
            other => other,
        };
        let next = match opened {
            Ok(next) => next,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) if matches!(error.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                let link =
                    dirfd::symlink_at(fd, &name).map_err(|e| refused(&path, e.to_string()))?;
                let Some((owner, target)) = link else {
                    return Err(refused(&path, "not a directory"));
                };
                let me = sys::geteuid();
                if owner != me && owner != 0 {
                    return Err(refused(
                        &path,
                        format!(
                            "a symlink above the ledger owned by uid {owner}, neither root nor \
                             uid {me}: not followed; {FIX}"
                        ),
                    ));
                }
                symlinks += 1;
                if symlinks > MAX_SYMLINKS {
                    return Err(refused(&path, "too many symlinks"));
                }
                let target = PathBuf::from(target);
                if target.is_absolute() {
                    walked.truncate(1);
                }
                for (n, component) in components(&target).enumerate() {
                    pending.insert(n, component);
                }
                continue;
            }
            Err(error) => return Err(refused(&path, error.to_string())),
        };
        check_ancestor(&path, &next)?;
        walked.push((path, next));
    }
    Ok(walked.pop().map(|(_, fd)| fd))
}

/// Inside a user namespace (an unprivileged `unshare -U`), files of owners
/// the namespace does not map, the real root's `/` and `/tmp` among them,
/// show as the overflow uid: it is accepted for the directories *above* the
/// ledger (the ledger directory and its records must still be ours). Outside
/// one, `None`: a directory of `nobody` is nobody's to trust.
fn outside_owner() -> Option<u32> {
    static OVERFLOW: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *OVERFLOW.get_or_init(|| {
        let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
        let initial = map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
        if initial {
            return None;
        }
        std::fs::read_to_string("/proc/sys/kernel/overflowuid")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// The names to walk in `path`: normal components and `..` (`.` and the
/// root are implied).
fn components(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name.to_owned()),
        Component::ParentDir => Some(OsString::from("..")),
        _ => None,
    })
}

fn check_ancestor(path: &Path, fd: &OwnedFd) -> Result<(), Error> {
    let meta = dirfd::meta(fd).map_err(|e| refused(path, e.to_string()))?;
    let me = sys::geteuid();
    if meta.uid != me && meta.uid != 0 && Some(meta.uid) != outside_owner() {
        return Err(refused(
            path,
            format!(
                "a directory above the ledger, owned by uid {} (mode {:04o}), neither root nor \
                 uid {me}: its owner could swap the ledger; {FIX}",
                meta.uid, meta.mode
            ),
        ));
    }
    if meta.mode & 0o022 != 0 && !meta.sticky() {
        return Err(refused(
            path,
            format!(
                "a directory above the ledger with mode {:04o}: others may write to it and it \
                 is not sticky, so they could swap the ledger; {FIX}",
                meta.mode
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("corral-store-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A new ledger directory is created with mode 0700 by the `mkdir`
    /// itself, missing parents included.
    #[test]
    fn a_new_directory_is_private() {
        let base = scratch("create");
        let dir = base.join("nested").join("ledger");
        let store = Store::open(&dir, true).expect("opens").expect("created");
        let mode = std::fs::metadata(store.path()).expect("meta").mode() & 0o777;
        let _ = std::fs::remove_dir_all(&base);
        assert_eq!(mode, 0o700);
    }

    /// A missing directory is an empty ledger when reading; nothing is
    /// created.
    #[test]
    fn a_missing_directory_is_not_created_for_reading() {
        let dir = scratch("missing").join("ledger");
        assert!(Store::open(&dir, false).expect("no error").is_none());
        assert!(!dir.exists());
    }

    /// The directory is swapped for another (a symlink to a directory the
    /// attacker reads) after the open: the write still lands in the
    /// directory that was checked, through its descriptor.
    #[test]
    fn a_directory_swapped_after_the_open_is_not_written() {
        let base = scratch("swap");
        let dir = base.join("ledger");
        let store = Store::open(&dir, true).expect("opens").expect("created");
        let moved = base.join("moved");
        let decoy = base.join("decoy");
        std::fs::rename(&dir, &moved).expect("move away");
        std::fs::create_dir(&decoy).expect("decoy");
        std::os::unix::fs::symlink(&decoy, &dir).expect("swap in a symlink");
        store.publish(OsStr::new("r.json"), b"{}").expect("written");
        let in_checked = moved.join("r.json").exists();
        let in_decoy = std::fs::read_dir(&decoy).expect("decoy").count();
        let reopened = Store::open(&dir, false);
        let _ = std::fs::remove_dir_all(&base);
        assert!(in_checked, "the record is not in the checked directory");
        assert_eq!(in_decoy, 0, "the record went through the swapped path");
        assert!(
            matches!(reopened, Err(Error::LedgerRefused { .. })),
            "the swapped-in symlink is refused on the next open"
        );
    }

    /// A name planted where the temporary file goes cannot capture the
    /// write: temporary names are unpredictable and created exclusively, and
    /// leave nothing behind.
    #[test]
    fn writes_use_fresh_temporary_names() {
        let dir = scratch("temp");
        let store = Store::open(&dir, true).expect("opens").expect("created");
        std::os::unix::fs::symlink("/dev/null", dir.join(".r.json.tmp")).expect("plant");
        for _ in 0..3 {
            store.publish(OsStr::new("r.json"), b"{}").expect("written");
        }
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let content = std::fs::read(dir.join("r.json")).expect("record");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(names, [".r.json.tmp", "r.json"]);
        assert_eq!(content, b"{}");
    }

    /// A symlink above the ledger (as `/var/run`) is followed when root or
    /// we own it, and not when another user does: then nothing is created
    /// where it points.
    #[test]
    fn symlinks_above_the_ledger_are_followed_only_if_trusted() {
        if !rustix::process::geteuid().is_root() {
            println!("SKIPPED: planting a symlink of another user needs root");
            return;
        }
        let base = scratch("symlinks");
        let real = base.join("real");
        std::fs::create_dir_all(&real).expect("dir");
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let trusted = Store::open(&link.join("a").join("ledger"), true).map(|s| s.is_some());
        let made = real.join("a").join("ledger").is_dir();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).expect("chown");
        let foreign = Store::open(&link.join("b").join("ledger"), true).map(|_| ());
        let leaked = real.join("b").exists();
        let _ = std::fs::remove_dir_all(&base);
        assert!(matches!(trusted, Ok(true)), "{trusted:?}");
        assert!(made, "the ledger is not where the trusted symlink points");
        let foreign = foreign.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            foreign.contains("symlink above the ledger owned by uid 65534"),
            "{foreign}"
        );
        assert!(
            !leaked,
            "a directory was created through another user's symlink"
        );
    }

    /// A directory others may write to is refused with the fix; so is one
    /// whose parent others may write to without the sticky bit.
    #[test]
    fn open_directories_are_refused() {
        let base = scratch("open");
        let dir = base.join("ledger");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o733)).expect("chmod");
        let own = Store::open(&dir, false).map(|_| ());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let parent = Store::open(&dir, false).map(|_| ());
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let sticky = Store::open(&dir, false).map(|_| ());
        let _ = std::fs::remove_dir_all(&base);
        let text = |r: Result<(), Error>| r.err().map(|e| e.to_string()).unwrap_or_default();
        let own = text(own);
        assert!(own.contains("chmod 700"), "{own}");
        let parent = text(parent);
        assert!(parent.contains("not sticky"), "{parent}");
        assert!(
            sticky.is_ok(),
            "a sticky parent (as /tmp) is fine: {sticky:?}"
        );
    }
}
