//! Reading a host's config and replacing it without losing anything:
//! nobody else's file is touched, the original bytes are kept first, the
//! write is atomic, and a change the host makes meanwhile is kept.
//!
//! - **Trust.** The path is followed through symbolic links as the host
//!   follows them; the file is then opened from its directory by
//!   descriptor, without following a link, and changed only when that
//!   directory and every one above it pass the ledger's rule (owned by
//!   this user or root, writable by others only with the sticky bit:
//!   [`crate::private_file::trusted_directory`]) and the file is a regular
//!   file owned by this user. So root never writes a file or directory
//!   another user owns.
//! - **Atomic.** The new text goes to a temporary file in the same
//!   directory, with the file's mode, owner and group, flushed to disk,
//!   and replaces the file by one `rename`.
//! - **Nothing lost.** Just before the rename the file is read again; if
//!   it changed since it was read, the change is made again on what is
//!   there now. The replacement itself is an exchange (`renameat2`
//!   `RENAME_EXCHANGE`): the file it displaced is read once more, and if a
//!   host replaced it in the instant between the check and the exchange,
//!   the change is made again on the host's version. A host that writes
//!   the file in place (not by rename) through a descriptor it opened
//!   before the exchange can still lose its write into the displaced file;
//!   the hosts guarded here replace theirs by rename.
//! - **Bounded.** A host that keeps rewriting the file can outrun every
//!   attempt, so corral gives up once the check has found the file changed
//!   50 times (`ATTEMPTS`), and only at such a check: the file then holds the
//!   host's last write, as the host left it. An exchange that displaced a
//!   host's write is always followed by another attempt, since until the
//!   change is made on that write the file holds corral's change made on an
//!   older version.
//! - **Backups.** The bytes read first are kept in the state directory
//!   before the first write (mode 600: configs hold secrets).

use std::{
    ffi::{OsStr, OsString},
    fs::File,
    io::{self, Read as _, Write as _},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

/// The largest config read (`~/.claude.json` holds histories).
const MAX_BYTES: u64 = 64 << 20;

/// How many times the check finds a file changed before corral leaves it
/// to the host that keeps changing it.
pub(super) const ATTEMPTS: usize = 50;

/// A config opened for a change: its directory, name and bytes.
#[derive(Debug)]
pub struct Opened {
    /// Where it is once symbolic links are followed.
    pub real: PathBuf,
    dir: OwnedFd,
    name: OsString,
    /// Its bytes when opened.
    pub bytes: Vec<u8>,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// Reads `path` to show it (no write will follow): `None` when missing.
///
/// # Errors
/// It cannot be read, or is larger than 64 MiB.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match File::open(path) {
        Ok(file) => read_capped(file).map(Some),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

fn read_capped(file: File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "larger than 64 MiB: not a config corral changes",
        ));
    }
    Ok(bytes)
}

/// Opens `path` to change it, following symbolic links as the host does,
/// if the trust rule (module docs) allows: `None` when it does not exist.
///
/// # Errors
/// The rule refuses it (kind `PermissionDenied`, the text names the owner
/// and the fix), or it cannot be read.
pub fn open(path: &Path) -> io::Result<Option<Opened>> {
    let real = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "names no file"));
    };
    let dir = crate::private_file::trusted_directory(parent)?;
    let fd = open_file(&dir, name)?;
    let stat = rustix::fs::fstat(&fd)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "not a regular file; corral changes only regular files",
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if stat.st_uid != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "owned by {}, and corral runs as {}: corral changes only its own user's files; \
                 run it as that user (e.g. sudo -u {} corral mcp guard ...)",
                crate::private_file::described(stat.st_uid),
                crate::private_file::described(me),
                crate::private_file::user_name(stat.st_uid)
                    .unwrap_or_else(|| format!("#{}", stat.st_uid)),
            ),
        ));
    }
    let bytes = read_capped(File::from(fd))?;
    Ok(Some(Opened {
        real: real.clone(),
        dir,
        name: name.to_os_string(),
        bytes,
        mode: stat.st_mode & 0o7777,
        uid: stat.st_uid,
        gid: stat.st_gid,
    }))
}

fn open_file(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?)
}

/// What is in the file now.
fn current(opened: &Opened) -> io::Result<Vec<u8>> {
    read_capped(File::from(open_file(&opened.dir, &opened.name)?))
}

/// A test's hook at one step of [`replace`].
#[cfg(test)]
type Hook = std::cell::RefCell<Option<Box<dyn FnMut()>>>;

#[cfg(test)]
thread_local! {
    /// Runs between the last check and the exchange (tests only: a writer
    /// lands in the window on purpose).
    pub static BEFORE_EXCHANGE: Hook = const { std::cell::RefCell::new(None) };
    /// Runs after the temporary file is written, before the check.
    pub static BEFORE_CHECK: Hook = const { std::cell::RefCell::new(None) };
    /// Takes the plain-rename path, as on a file system without
    /// `RENAME_EXCHANGE`.
    pub static NO_EXCHANGE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn run_hook(hook: &'static std::thread::LocalKey<Hook>) {
    hook.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook();
        }
    });
}

/// `RENAME_EXCHANGE`, or `EINVAL` when a test asks for the fallback.
fn exchange(dir: &OwnedFd, temp: &OsStr, name: &OsStr) -> rustix::io::Result<()> {
    #[cfg(test)]
    if NO_EXCHANGE.with(std::cell::Cell::get) {
        return Err(rustix::io::Errno::INVAL);
    }
    rustix::fs::renameat_with(dir, temp, dir, name, RenameFlags::EXCHANGE)
}

/// Replaces the file with `change` applied to its bytes, redone on the
/// newest bytes whenever the file changed since they were read (module
/// docs). `change` returns the new bytes (already re-parsed) or an error
/// that stops everything. Returns the bytes the change was made on and
/// the bytes written.
///
/// # Errors
/// `change` failed, the file kept changing, or a write failed; the file
/// is then as the host left it.
pub fn replace(
    opened: &Opened,
    change: &mut dyn FnMut(&[u8]) -> io::Result<Vec<u8>>,
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    // The bytes the next change is made on, and what the name should hold
    // when it is replaced.
    let mut base = opened.bytes.clone();
    let mut expected = opened.bytes.clone();
    // Checks that found the file changed.
    let mut changed = 0;
    loop {
        let new = change(&base)?;
        let temp = write_temp(opened, &new)?;
        #[cfg(test)]
        run_hook(&BEFORE_CHECK);
        let now = current(opened);
        match now {
            Ok(now) if now == expected => {}
            Ok(now) => {
                let _ = rustix::fs::unlinkat(&opened.dir, &temp, AtFlags::empty());
                changed += 1;
                if changed == ATTEMPTS {
                    // The file is the host's last write: leaving it here
                    // loses nothing.
                    return Err(io::Error::other(format!(
                        "the file changed {ATTEMPTS} times while corral was changing it; stop \
                         the host that keeps rewriting it and run the command again"
                    )));
                }
                base.clone_from(&now);
                expected = now;
                continue;
            }
            Err(error) => {
                let _ = rustix::fs::unlinkat(&opened.dir, &temp, AtFlags::empty());
                return Err(error);
            }
        }
        #[cfg(test)]
        run_hook(&BEFORE_EXCHANGE);
        match exchange(&opened.dir, &temp, &opened.name) {
            Ok(()) => {
                let displaced = read_capped(File::from(open_file(&opened.dir, &temp)?));
                let _ = rustix::fs::unlinkat(&opened.dir, &temp, AtFlags::empty());
                let displaced = displaced?;
                if displaced == expected {
                    return Ok((base, new));
                }
                // A host replaced the file in the instant before the
                // exchange: make the change again on its version. The file
                // holds corral's change on an older version until then, so
                // this is no place to give up.
                base = displaced;
                expected = new;
            }
            Err(
                rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP,
            ) => {
                // No exchange on this file system: a plain rename, the
                // check just before it the only guard.
                rustix::fs::renameat(&opened.dir, &temp, &opened.dir, &opened.name).inspect_err(
                    |_| {
                        let _ = rustix::fs::unlinkat(&opened.dir, &temp, AtFlags::empty());
                    },
                )?;
                return Ok((base, new));
            }
            Err(error) => {
                let _ = rustix::fs::unlinkat(&opened.dir, &temp, AtFlags::empty());
                return Err(error.into());
            }
        }
    }
}

/// Writes `bytes` to a new temporary file beside the file, with its mode,
/// owner and group, flushed to disk; returns its name.
fn write_temp(opened: &Opened, bytes: &[u8]) -> io::Result<OsString> {
    let mut attempt = 0u32;
    let (name, fd) = loop {
        let mut name = OsString::from(".");
        name.push(&opened.name);
        name.push(format!(".corral-guard-{}-{attempt}", std::process::id()));
        match rustix::fs::openat(
            &opened.dir,
            &name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => break (name, fd),
            Err(rustix::io::Errno::EXIST) if attempt < 100 => attempt += 1,
            Err(error) => return Err(error.into()),
        }
    };
    let written = (|| -> io::Result<()> {
        // The owner is this user (the trust rule); the group may be one
        // this user cannot give a file (root can).
        match rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(opened.uid)),
            Some(rustix::fs::Gid::from_raw(opened.gid)),
        ) {
            Ok(()) | Err(rustix::io::Errno::PERM) => {}
            Err(error) => return Err(error.into()),
        }
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(opened.mode))?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(error) = written {
        let _ = rustix::fs::unlinkat(&opened.dir, &name, AtFlags::empty());
        return Err(error);
    }
    Ok(name)
}

/// A file name for `path` inside one directory: `/` becomes `%2F` (and
/// `%` becomes `%25`), so every path has its own.
pub fn flat_name(path: &Path) -> String {
    path.to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
}

/// Keeps `bytes` (the file at `real` before corral changed it) in
/// `dir` (made with mode 700 when missing), as a new file of mode 600;
/// returns its path.
///
/// # Errors
/// The directory or file cannot be made.
pub fn backup(dir: &Path, real: &Path, bytes: &[u8]) -> io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    make_private_dir(dir)?;
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let stem = format!("{}.{seconds}", flat_name(real));
    for n in 0..1000 {
        let path = if n == 0 {
            dir.join(&stem)
        } else {
            dir.join(format!("{stem}-{n}"))
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(bytes)?;
                file.sync_all()?;
                return Ok(path);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::other(
        "too many backups of this file in one second",
    ))
}

/// Makes `dir` and its missing parents, mode 700.
pub fn make_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
