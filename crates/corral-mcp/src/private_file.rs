//! Files only the server's own user (or root) could have written: the
//! `--token-file` files and the `--audit` log (and, readable by others but
//! writable by nobody else, the `--tools` file: code the server runs).
//!
//! A token file chooses who may run commands as the server's user, often
//! root; the audit log holds every run's command line (secrets in `argv`
//! too) and is appended to as that user. Either one written, read or
//! replaced by another local user hands that user the server. So a file is
//! opened without following a symlink and without blocking, and believed
//! only when, checked on the opened descriptors, never on paths:
//! - every directory from the file's up to `/` is owned by the server's
//!   effective user or root, and writable by group or others only with the
//!   sticky bit (else another user could rename, swap or replace the file,
//!   e.g. `alice.token` with `bob.token`);
//! - the file is a regular file with one name, owned by the server's
//!   effective user or root, and closed to group and others (mode 600 or
//!   stricter: a token is a secret, and audit records hold `argv`).
//!
//! A refusal is an [`io::Error`] of kind `PermissionDenied` (or the open's
//! own error) whose text names the file or directory, its owner and mode,
//! and the fix; the caller puts its option (`--audit FILE: `) in front.
//!
//! ```
//! use std::{io::Write, os::unix::fs::PermissionsExt};
//!
//! use corral_mcp::private_file::{self, Access};
//!
//! # fn main() -> std::io::Result<()> {
//! let dir = std::env::temp_dir().join(format!("private-file-doc-{}", std::process::id()));
//! std::fs::create_dir(&dir)?;
//! let audit = dir.join("audit.jsonl");
//! // Created mode 600 when missing, and appended to.
//! writeln!(private_file::open(&audit, Access::Append)?, "{{}}")?;
//! assert_eq!(std::fs::metadata(&audit)?.permissions().mode() & 0o777, 0o600);
//! assert_eq!(std::fs::read_to_string(&audit)?, "{}\n");
//!
//! // Readable by others: refused, naming the file and the fix.
//! std::fs::set_permissions(&audit, std::fs::Permissions::from_mode(0o644))?;
//! let refused = private_file::open(&audit, Access::Read).unwrap_err();
//! assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
//! assert!(refused.to_string().contains("audit.jsonl"), "{refused}");
//! # std::fs::remove_dir_all(&dir)
//! # }
//! ```

use std::{
    fs::File,
    io,
    os::{
        fd::{AsFd, AsRawFd as _, OwnedFd},
        unix::ffi::OsStringExt as _,
    },
    path::{Path, PathBuf},
};

use rustix::fs::{FileType, Mode, OFlags, Stat};

/// How a private file is opened: `corral mcp serve` reads its token files
/// and appends to its audit log.
///
/// ```no_run
/// use std::{io::Read, path::Path};
///
/// use corral_mcp::private_file::{self, Access};
///
/// # fn main() -> std::io::Result<()> {
/// let mut token = String::new();
/// private_file::open(Path::new("/etc/corral/alice.token"), Access::Read)?.read_to_string(&mut token)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only; the file must exist.
    Read,
    /// Write only, appending (`O_APPEND`); created with mode 0600 when
    /// missing.
    Append,
}

/// Opens `path` as [`Access`] says, if only this process's effective user
/// or root could have written it and nobody else can read it (the module's
/// rule).
///
/// # Errors
/// The file or a directory above it fails the rule (kind
/// `PermissionDenied`, the text names it and the fix), or cannot be opened.
pub fn open(path: &Path, access: Access) -> io::Result<File> {
    open_checked(path, access, Closed::ToRead)
}

/// Opens `path` for reading if only this process's effective user or root
/// could have written it: the module's rule, except that group and others
/// may read the file (they still may not write it). `corral mcp serve
/// --tools` reads its tools file so: the file is code the server runs, not
/// a secret.
///
/// # Errors
/// As [`open`].
pub(crate) fn open_unwritable(path: &Path) -> io::Result<File> {
    open_checked(path, Access::Read, Closed::ToWrite)
}

/// Checks the program at the absolute `path` that a `--tools` file names,
/// as the server will run it: every directory on the way (symbolic links
/// followed, each from a directory that passed) by the module's rule, and
/// the file it ends at owned by this process's effective user or root and
/// writable by nobody else (hard links allowed: a program is not a
/// secret, and its other names cannot change its contents). A path that
/// does not exist passes if the deepest directory of it that does passes:
/// then only this user or root can put a program there later.
///
/// # Errors
/// A directory or the file fails the rule (kind `PermissionDenied`, the
/// text names it and the fix), or cannot be looked at.
pub(crate) fn check_program(path: &Path) -> io::Result<Option<String>> {
    check_program_at(path, 0)
}

/// The most `#!` interpreters one program may pass through (the kernel's
/// own limit is 4).
const MAX_INTERPRETERS: usize = 4;

/// [`check_program`], `depth` interpreters deep.
fn check_program_at(path: &Path, depth: usize) -> io::Result<Option<String>> {
    let me = rustix::process::geteuid().as_raw();
    let mut path = path.to_owned();
    for _ in 0..=MAX_LINKS {
        let (Some(name), Some(parent)) = (path.file_name(), path.parent()) else {
            return Err(refused(format!(
                "{} names no file (it ends in /, .. or is /); name the program's file",
                path.display()
            )));
        };
        let dir = match open_directory(parent, me) {
            Ok(dir) => dir,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return check_deepest(parent, me).map(|()| None);
            }
            Err(error) => return Err(error),
        };
        check_directories(&dir, me)?;
        let stat = match rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => return closed_to_creation(&dir).map(|()| None),
            Err(error) => return Err(with_text(error.into(), "cannot stat")),
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(&dir, name, Vec::new())
                    .map_err(|error| with_text(error.into(), "cannot read the link"))?;
                let target = PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes()));
                path = if target.is_absolute() {
                    target
                } else {
                    PathBuf::from(where_is(&dir)).join(target)
                };
            }
            FileType::RegularFile => {
                let (mode, owner) = (stat.st_mode & 0o7777, stat.st_uid);
                let shown = path.display();
                if owner != me && owner != 0 {
                    return Err(refused(format!(
                        "the program {shown} is owned by {} (mode {mode:03o}), and this server \
                         runs as {}: that user can change what the tool runs; name a program \
                         only root or this user can write (chown root {shown})",
                        described(owner),
                        described(me)
                    )));
                }
                if mode & 0o022 != 0 {
                    return Err(refused(format!(
                        "the program {shown} is writable by group or others (owned by {}, mode \
                         {mode:03o}): they can change what the tool runs; run chmod go-w {shown}",
                        described(owner)
                    )));
                }
                return check_interpreter(&dir, name, &path, depth);
            }
            kind => return Err(not_regular(kind)),
        }
    }
    Err(with_text(
        rustix::io::Errno::LOOP.into(),
        "too many symbolic links",
    ))
}

/// The interpreter a script names on its `#!` line, checked as the script
/// is (the kernel runs it with the script's rights). `#!/usr/bin/env NAME`
/// looks `NAME` up along `PATH` when it runs: that name is returned for
/// the caller to check along the run's `PATH`.
fn check_interpreter(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    path: &Path,
    depth: usize,
) -> io::Result<Option<String>> {
    let Ok(file) = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        // Unreadable: no script (the interpreter could not read it either).
        return Ok(None);
    };
    let mut head = [0u8; 256];
    let read = rustix::io::read(&file, &mut head).unwrap_or(0);
    let Some(line) = head[..read].strip_prefix(b"#!") else {
        return Ok(None);
    };
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let Some(interpreter) = words.next() else {
        return Ok(None);
    };
    if depth >= MAX_INTERPRETERS {
        return Err(refused(format!(
            "{}: more than {MAX_INTERPRETERS} #! interpreters deep",
            path.display()
        )));
    }
    if !interpreter.starts_with('/') {
        return Err(refused(format!(
            "{}: its #! interpreter {interpreter:?} is not an absolute path",
            path.display()
        )));
    }
    let looked_up = check_program_at(Path::new(interpreter), depth + 1)
        .map_err(|error| with_text(error, &format!("the #! interpreter of {}", path.display())))?;
    if looked_up.is_some() {
        return Ok(looked_up);
    }
    let is_env = Path::new(interpreter).file_name() == Some(std::ffi::OsStr::new("env"));
    Ok(is_env
        .then(|| words.find(|word| !word.starts_with('-') && !word.contains('=')))
        .flatten()
        .map(str::to_owned))
}

/// The deepest directory of `path` that exists, checked with every one
/// above it, and closed to others' new entries.
fn check_deepest(path: &Path, me: u32) -> io::Result<()> {
    let mut deepest = path;
    loop {
        match open_directory(deepest, me) {
            Ok(dir) => {
                check_directories(&dir, me)?;
                return closed_to_creation(&dir);
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => match deepest.parent() {
                Some(parent) => deepest = parent,
                None => return Err(error),
            },
            Err(error) => return Err(error),
        }
    }
}

/// A directory where a program does not exist yet: one group or others
/// may write, even with the sticky bit (`/tmp`), lets them create it.
fn closed_to_creation(dir: &OwnedFd) -> io::Result<()> {
    let stat = fstat(dir)?;
    let mode = stat.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        let shown = where_is(dir);
        return Err(refused(format!(
            "the program is not in {shown} (mode {mode:03o}), where group or others may \
             create it (the sticky bit stops them replacing files, not adding one); name a \
             program that exists, in a directory only this user or root can write"
        )));
    }
    Ok(())
}

/// What a file must be closed to, for group and others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// Reading and writing (mode 600 or stricter): a secret.
    ToRead,
    /// Writing (mode 644 or stricter): code, not a secret.
    ToWrite,
}

fn open_checked(path: &Path, access: Access, closed: Closed) -> io::Result<File> {
    let me = rustix::process::geteuid().as_raw();
    let name = path.file_name().ok_or_else(|| {
        refused(format!(
            "{} names no file; name the file itself",
            path.display()
        ))
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let dir = open_directory(dir, me)?;
    check_directories(&dir, me)?;
    let fd = open_in(&dir, name, access)?;
    check_file(&fd, path, me, closed)?;
    Ok(File::from(fd))
}

/// Opens the directory `path` as a descriptor (symbolic links followed
/// only from directories that passed) and checks it and every directory
/// above it by the module's rule: owned by this process's effective user or
/// root, and writable by group or others only with the sticky bit. `corral
/// mcp guard` writes host configs only into such a directory.
///
/// # Errors
/// A directory fails the rule (kind `PermissionDenied`, the text names it
/// and the fix), or cannot be opened.
pub(crate) fn trusted_directory(path: &Path) -> io::Result<OwnedFd> {
    let me = rustix::process::geteuid().as_raw();
    let dir = open_directory(path, me)?;
    check_directories(&dir, me)?;
    Ok(dir)
}

/// The most symbolic links one path may pass through (the kernel's own
/// limit).
const MAX_LINKS: usize = 40;

/// Opens the directory `path` one name at a time, each from the directory
/// before it by descriptor, and checks every directory it passes through
/// (the module's rule). A symbolic link is followed only once the
/// directory that holds it has passed: a link in another user's directory
/// could point anywhere (at a file only root may write, say), and its
/// target's own directories would all be root's.
fn open_directory(path: &Path, me: u32) -> io::Result<OwnedFd> {
    let cannot = |error: rustix::io::Errno| with_text(error.into(), "cannot open its directory");
    let start = |absolute: bool| -> io::Result<OwnedFd> {
        let dir = rustix::fs::open(
            if absolute { "/" } else { "." },
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(cannot)?;
        check_directory(&dir, &fstat(&dir)?, me)?;
        Ok(dir)
    };
    let mut current = start(path.is_absolute())?;
    let mut left = names(path);
    let mut links = 0;
    while let Some(name) = left.pop_front() {
        let next = rustix::fs::openat(
            &current,
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(cannot)?;
        let stat = fstat(&next)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                check_directory(&next, &stat, me)?;
                current = next;
            }
            FileType::Symlink => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(cannot(rustix::io::Errno::LOOP));
                }
                let target = rustix::fs::readlinkat(&current, name.as_os_str(), Vec::new())
                    .map_err(cannot)?;
                let target = PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes()));
                if target.is_absolute() {
                    current = start(true)?;
                }
                for name in names(&target).into_iter().rev() {
                    left.push_front(name);
                }
            }
            kind => {
                return Err(refused(format!(
                    "its path passes through {}, a {}, where a directory must be",
                    name.display(),
                    kind_name(kind)
                )));
            }
        }
    }
    Ok(current)
}

/// The names a path passes through, `..` kept (the kernel resolves it
/// from the directory it is in).
fn names(path: &Path) -> std::collections::VecDeque<PathBuf> {
    use std::path::Component;
    path.components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Opens `name` in `dir`. [`Access::Append`] creates a missing file with
/// `O_EXCL` (a file that turns up meanwhile is opened as it is, and
/// checked): an `O_CREAT` open of another user's file in a sticky
/// directory would fail with a bare "permission denied"
/// (`fs.protected_regular`) instead of naming its owner.
fn open_in(dir: &OwnedFd, name: &std::ffi::OsStr, access: Access) -> io::Result<OwnedFd> {
    let flags = match access {
        Access::Read => OFlags::RDONLY,
        Access::Append => OFlags::WRONLY | OFlags::APPEND,
    } | OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | OFlags::CLOEXEC
        | OFlags::NOCTTY;
    let mut opened = rustix::fs::openat(dir, name, flags, Mode::empty());
    if access == Access::Append && matches!(opened, Err(rustix::io::Errno::NOENT)) {
        let create = flags | OFlags::CREATE | OFlags::EXCL;
        opened = match rustix::fs::openat(dir, name, create, Mode::from_raw_mode(0o600)) {
            Err(rustix::io::Errno::EXIST) => rustix::fs::openat(dir, name, flags, Mode::empty()),
            other => other,
        };
    }
    opened.map_err(|error| {
        let kind = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .map(|stat| FileType::from_raw_mode(stat.st_mode));
        match kind {
            Ok(FileType::Symlink) => refused(
                "a symbolic link; corral does not follow one here (whoever can change the link \
                 chooses the file): name the file itself"
                    .to_owned(),
            ),
            Ok(kind) if kind != FileType::RegularFile => not_regular(kind),
            _ => with_text(error.into(), "cannot open"),
        }
    })
}

fn not_regular(kind: FileType) -> io::Error {
    refused(format!(
        "not a regular file (a {}); name a regular file",
        kind_name(kind)
    ))
}

/// Checks the directory `dir` and each one above it, by descriptor, up to
/// the root (the directory that is its own parent).
fn check_directories(dir: &OwnedFd, me: u32) -> io::Result<()> {
    let mut stat = fstat(dir)?;
    check_directory(dir, &stat, me)?;
    let mut current = rustix::fs::openat(
        dir,
        "..",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    loop {
        let above = fstat(&current)?;
        if (above.st_dev, above.st_ino) == (stat.st_dev, stat.st_ino) {
            return Ok(());
        }
        check_directory(&current, &above, me)?;
        let next = rustix::fs::openat(
            &current,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        (current, stat) = (next, above);
    }
}

/// One directory: owned by `me` or root, and writable by group or others
/// only with the sticky bit.
fn check_directory(dir: &OwnedFd, stat: &Stat, me: u32) -> io::Result<()> {
    let mode = stat.st_mode & 0o7777;
    let owner = stat.st_uid;
    let shown = where_is(dir);
    if owner != me && owner != 0 {
        return Err(refused(format!(
            "in the directory {shown}, owned by {} (mode {mode:03o}), and corral runs as \
             {}: that user can rename, swap or replace the file; keep it in a directory only \
             this user or root can change, e.g. one made by mkdir -m 700",
            described(owner),
            described(me)
        )));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(refused(format!(
            "in the directory {shown} (owned by {}, mode {mode:03o}), writable by group or \
             others without the sticky bit: they can rename, swap or replace the file; run \
             chmod go-w {shown}, or keep the file in a directory only this user or root can \
             change",
            described(owner)
        )));
    }
    Ok(())
}

/// The opened file: regular, one name, owned by `me` or root, closed to
/// group and others.
fn check_file(fd: &OwnedFd, path: &Path, me: u32, closed: Closed) -> io::Result<()> {
    let shown = path.display();
    let stat = fstat(fd)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(not_regular(kind));
    }
    let mode = stat.st_mode & 0o7777;
    let owner = stat.st_uid;
    if owner != me && owner != 0 {
        let chown = user_name(me).unwrap_or_else(|| me.to_string());
        return Err(refused(format!(
            "owned by {} (mode {mode:03o}), and this server runs as {}: that user could have \
             written it, and may read and rewrite it; use a file only this user or root could \
             have written: remove it and make a new one, or check its contents and run \
             chown {chown} {shown} && chmod 600 {shown}",
            described(owner),
            described(me)
        )));
    }
    if closed == Closed::ToRead && mode & 0o077 != 0 {
        return Err(refused(format!(
            "open to group or others (owned by {}, mode {mode:03o}): run chmod 600 {shown}",
            described(owner)
        )));
    }
    if closed == Closed::ToWrite && mode & 0o022 != 0 {
        return Err(refused(format!(
            "writable by group or others (owned by {}, mode {mode:03o}): they could change \
             what the server runs; run chmod go-w {shown}",
            described(owner)
        )));
    }
    if stat.st_nlink != 1 {
        return Err(refused(format!(
            "{} names for one file (hard links): another name may be in a directory another \
             user can change; copy it to a file of its own (cp {shown} NEW && rm {shown})",
            stat.st_nlink
        )));
    }
    Ok(())
}

fn fstat(fd: impl AsFd) -> io::Result<Stat> {
    rustix::fs::fstat(fd).map_err(|error| with_text(error.into(), "cannot stat"))
}

/// Where an open directory is, for an error (`/proc/self/fd/N`).
fn where_is(dir: &OwnedFd) -> String {
    std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .unwrap_or_else(|_| PathBuf::from("(unknown)"))
        .display()
        .to_string()
}

fn refused(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, text)
}

/// `error` with `what` in front, of the same kind.
fn with_text(error: io::Error, what: &str) -> io::Error {
    io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// What a file type is called in an error.
fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

/// `uid`'s name in `/etc/passwd` (local users only).
pub(crate) fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

/// `uid` as an error names it: `name (uid N)`, or `uid N`.
pub(crate) fn described(uid: u32) -> String {
    user_name(uid).map_or_else(
        || format!("uid {uid}"),
        |name| format!("{name} (uid {uid})"),
    )
}
