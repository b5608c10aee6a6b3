//! Files opened relative to a directory descriptor, never through a symlink:
//! the mechanics under the ledger's trust checks (the policy lives in
//! `ledger::store`).

use std::{
    ffi::{OsStr, OsString},
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// What `fstat` tells about an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) uid: u32,
    /// The permission bits (with set-id and sticky).
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) ino: u64,
    pub(crate) is_dir: bool,
    pub(crate) is_file: bool,
}

impl Meta {
    /// The sticky bit (`S_ISVTX`): only an entry's owner may rename or
    /// remove it, as in `/tmp`.
    pub(crate) fn sticky(&self) -> bool {
        self.mode & 0o1000 != 0
    }
}

/// `fstat(fd)`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fstat.2.html>
pub(crate) fn meta(fd: impl AsFd) -> io::Result<Meta> {
    let stat = rustix::fs::fstat(fd)?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    Ok(Meta {
        uid: stat.st_uid,
        mode: stat.st_mode & 0o7777,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        ino: stat.st_ino,
        is_dir: kind == FileType::Directory,
        is_file: kind == FileType::RegularFile,
    })
}

/// `openat(at, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)`, with `at = None`
/// for an absolute `name` such as `/`. A symlink as the last component fails
/// with `ELOOP` (or `ENOTDIR`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/openat.2.html>
pub(crate) fn open_dir_at(at: Option<&OwnedFd>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(match at {
        Some(dir) => rustix::fs::openat(dir, name, flags, Mode::empty())?,
        None => rustix::fs::openat(rustix::fs::CWD, name, flags, Mode::empty())?,
    })
}

/// `mkdirat(at, name, mode)`: the mode is set by the creation itself, so
/// there is no window in which the directory is more open than `mode`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/mkdirat.2.html>
pub(crate) fn mkdir_at(at: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(at, name, Mode::from_raw_mode(mode))?)
}

/// Opens `name` in `dir` for reading without following a symlink and without
/// blocking (a FIFO opens at once and is then refused by its type).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/openat.2.html>
pub(crate) fn open_file_at(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// Creates `name` in `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode `mode`):
/// fails if anything, a planted symlink included, already has the name.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/openat.2.html>
pub(crate) fn create_exclusive_at(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<OwnedFd> {
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(mode),
    )?)
}

/// Reads at most `cap` bytes from the start of an open file; more than that
/// is an error (`FileTooLarge`), whatever its size claimed.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/read.2.html>
pub(crate) fn read_capped(fd: &OwnedFd, cap: usize) -> io::Result<Vec<u8>> {
    // Grown as the file turns out larger (most are a few hundred bytes): the
    // cap bounds what is read, not what every read sets aside.
    let mut bytes = vec![0; (cap + 1).min(4096)];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            if bytes.len() > cap {
                break;
            }
            bytes.resize((bytes.len() * 2).min(cap + 1), 0);
        }
        match rustix::io::read(fd, &mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
    if filled > cap {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {cap} bytes"),
        ));
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// Writes all of `bytes` to `fd`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/write.2.html>
pub(crate) fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(())
}

/// `renameat(dir, from, dir, to)`: atomic within the directory.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/renameat.2.html>
pub(crate) fn rename_at(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::renameat(dir, from, dir, to)?)
}

/// `unlinkat(dir, name, 0)`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/unlinkat.2.html>
pub(crate) fn unlink_at(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// `unlinkat(dir, name, AT_REMOVEDIR)`.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/unlinkat.2.html>
pub(crate) fn rmdir_at(dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// The names in an open directory (without `.` and `..`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getdents64.2.html>
pub(crate) fn names(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(&name).to_owned());
        }
    }
    Ok(names)
}

/// 64 unpredictable bits from the kernel (`getrandom`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/getrandom.2.html>
pub(crate) fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(u64::from_ne_bytes(bytes))
}

/// If `name` in `dir` is a symlink: its owner and its target
/// (`fstatat(AT_SYMLINK_NOFOLLOW)`, then `readlinkat`). `None` if it is
/// anything else.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/readlinkat.2.html>
pub(crate) fn symlink_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<(u32, OsString)>> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Symlink {
        return Ok(None);
    }
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(Some((
        stat.st_uid,
        OsStr::from_bytes(target.to_bytes()).to_owned(),
    )))
}

/// `CGROUP2_SUPER_MAGIC`, as `fstatfs` reports a cgroup v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Whether `fd` lies on a cgroup v2 file system (`fstatfs`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/fstatfs.2.html>
pub(crate) fn is_cgroup2(fd: &OwnedFd) -> io::Result<bool> {
    let stat = rustix::fs::fstatfs(fd)?;
    #[allow(clippy::unnecessary_cast, clippy::cast_possible_wrap)]
    Ok(stat.f_type as i64 == CGROUP2_SUPER_MAGIC)
}
