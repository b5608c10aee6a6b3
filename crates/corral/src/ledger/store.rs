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
            return Err(refused(path, "must end in a directory name, not '.' or '..'"));
        }
        let parent = match std::fs::canonicalize(parent) {
            Ok(parent) => parent,
            Err(error) if error.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                create_parents(parent).map_err(|e| {
                    refused(path, format!("cannot create {}: {e}", parent.display()))
                })?;
                std::fs::canonicalize(parent)
                    .map_err(|e| refused(path, format!("{}: {e}", parent.display())))?
            }
            Err(error) => {
                return Err(refused(path, format!("{}: {error}", parent.display())));
            }
        };
        let above = open_trusted_ancestors(&parent)?;
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
                 written its records; remove it, or {FIX}",
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

/// Opens `dir` (canonical) component by component from `/`, checking that
/// nobody but us or root could replace any of them: each is owned by us or
/// root and, if others may write to it, sticky (as `/tmp` is).
fn open_trusted_ancestors(dir: &Path) -> Result<OwnedFd, Error> {
    let mut fd = dirfd::open_dir_at(None, OsStr::new("/")).map_err(|e| refused(dir, e.to_string()))?;
    let mut walked = PathBuf::from("/");
    let mut names = dir.components().filter_map(|c| match c {
        Component::Normal(name) => Some(name),
        _ => None,
    });
    loop {
        check_ancestor(&walked, &fd)?;
        let Some(name) = names.next() else {
            return Ok(fd);
        };
        walked.push(name);
        fd = dirfd::open_dir_at(Some(&fd), name).map_err(|e| not_a_directory(&walked, &e))?;
    }
}

fn check_ancestor(path: &Path, fd: &OwnedFd) -> Result<(), Error> {
    let meta = dirfd::meta(fd).map_err(|e| refused(path, e.to_string()))?;
    let me = sys::geteuid();
    if meta.uid != me && meta.uid != 0 {
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

/// Creates the missing directories above the ledger, mode 0700.
fn create_parents(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}
