//! Where a command may run: the directories the server was given, and the
//! check that a run's `cwd` stays inside one of them.
//!
//! Both sides are canonical (symlinks and `..` resolved), so a symlink
//! inside a root that points out of every root is refused, and one that
//! points into another root is allowed.
//!
//! A run's directory is opened once, and the check is on where that open
//! directory really is (read back from `/proc/self/fd`), not on the path:
//! the run enters the same descriptor (`fchdir`), so a directory swapped
//! for a symlink between the check and the spawn cannot move the run, and
//! the result and the audit line name the directory the run used.
//!
//! # Caveats
//! A directory inside a root that someone moves out of every root after
//! the check is still entered (it is the directory that was checked); only
//! who may rename entries of the roots can do that.

use std::{
    fmt::Write as _,
    io,
    os::fd::{AsRawFd, OwnedFd},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use rustix::fs::{Mode, OFlags};

use crate::serve::request::FieldError;

/// A run's working directory, opened once: the run enters this descriptor,
/// and [`Cwd::path`] is where the directory was when it was checked.
#[derive(Debug, Clone)]
pub struct Cwd {
    path: PathBuf,
    dir: Arc<OwnedFd>,
}

impl Cwd {
    #[cfg(test)]
    /// Where the directory was when it was checked (canonical).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open directory (`O_PATH`), for `Command::current_dir_fd`.
    #[must_use]
    pub fn dir(&self) -> Arc<OwnedFd> {
        self.dir.clone()
    }
}

/// Shown as its path (in results and audit lines).
impl serde::Serialize for Cwd {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.path.serialize(serializer)
    }
}

/// The directories runs may use, canonical, in the order given.
#[derive(Debug, Clone)]
pub struct Roots {
    /// Never empty.
    roots: Vec<PathBuf>,
}

impl Roots {
    /// Canonical roots (symlinks resolved); empty `paths` means the current
    /// directory. A root given twice is kept once.
    ///
    /// # Errors
    /// `(path, why)` for a root that does not exist or is not a directory.
    pub fn new(paths: &[PathBuf]) -> Result<Self, (PathBuf, String)> {
        let current;
        let paths = if paths.is_empty() {
            current = [std::env::current_dir()
                .map_err(|error| (PathBuf::from("."), format!("current directory: {error}")))?];
            &current[..]
        } else {
            paths
        };
        let mut roots: Vec<PathBuf> = Vec::with_capacity(paths.len());
        for path in paths {
            let canonical = path
                .canonicalize()
                .map_err(|error| (path.clone(), why(&error)))?;
            if !canonical.is_dir() {
                return Err((
                    path.clone(),
                    format!("{} is not a directory", canonical.display()),
                ));
            }
            if !roots.contains(&canonical) {
                roots.push(canonical);
            }
        }
        Ok(Self { roots })
    }

    /// The directory a run may use, opened: `None` is the first root; a
    /// relative path is taken from the first root; the directory is opened
    /// once (symlinks followed), and where it really is must be inside one
    /// of the roots (component-wise, so `/srv/a2` is not inside `/srv/a`).
    ///
    /// # Errors
    /// A [`FieldError`] on `cwd` naming the resolved path and the roots.
    pub fn resolve(&self, cwd: Option<&str>) -> Result<Cwd, FieldError> {
        let first = &self.roots[0];
        let joined = match cwd {
            None => first.clone(),
            Some(cwd) => first.join(cwd),
        };
        let dir = rustix::fs::open(
            &joined,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|error| self.unopened(&joined, &io::Error::from(error)))?;
        let path = where_it_is(&dir).map_err(|why| {
            self.refuse(format!(
                "{} {why}: give a directory inside {}",
                joined.display(),
                self.names()
            ))
        })?;
        if !self.roots.iter().any(|root| path.starts_with(root)) {
            let shown = if path == joined {
                path.display().to_string()
            } else {
                format!("{} (resolved from {})", path.display(), joined.display())
            };
            return Err(self.refuse(format!(
                "{shown} is outside the roots this server may run in: give a directory inside {}",
                self.names()
            )));
        }
        Ok(Cwd {
            path,
            dir: Arc::new(dir),
        })
    }

    /// The refusal of a directory that could not be opened.
    fn unopened(&self, joined: &Path, error: &io::Error) -> FieldError {
        // ENOTDIR from `O_DIRECTORY`: the path names something else.
        if error.kind() == io::ErrorKind::NotADirectory
            && let Ok(canonical) = joined.canonicalize()
        {
            let rule = if self.roots.iter().any(|root| canonical.starts_with(root)) {
                format!("{} is not a directory", canonical.display())
            } else {
                format!(
                    "{} is outside the roots this server may run in",
                    canonical.display()
                )
            };
            return self.refuse(format!("{rule}: give a directory inside {}", self.names()));
        }
        self.refuse(format!(
            "{} {}: give a directory inside {}",
            joined.display(),
            why(error),
            self.names()
        ))
    }

    /// The roots, canonical, in the order given.
    #[must_use]
    pub fn list(&self) -> &[PathBuf] {
        &self.roots
    }

    fn refuse(&self, rule: String) -> FieldError {
        FieldError {
            field: "cwd".to_owned(),
            rule,
        }
    }

    /// The roots as a list for a message; a relative `cwd` is taken from
    /// the first.
    fn names(&self) -> String {
        let mut names = String::new();
        for (index, root) in self.roots.iter().enumerate() {
            if index > 0 {
                names.push_str(", ");
            }
            let _ = write!(names, "{}", root.display());
            if index == 0 && self.roots.len() > 1 {
                names.push_str(" (where relative paths start)");
            }
        }
        names
    }
}

/// Where the open directory `dir` is now, read back from the kernel
/// (`/proc/self/fd`): the path and the descriptor must name the same
/// directory, or the reason why not as a phrase after the path.
fn where_it_is(dir: &OwnedFd) -> Result<PathBuf, String> {
    let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let path = std::fs::read_link(&link)
        .map_err(|error| format!("cannot be read back from {link} ({error}; is /proc mounted?)"))?;
    let opened = rustix::fs::fstat(dir).map_err(|error| format!("cannot be checked ({error})"))?;
    match std::fs::metadata(&path) {
        Ok(meta) if meta.dev() == opened.st_dev && meta.ino() == opened.st_ino => Ok(path),
        // Removed (the link reads "... (deleted)"), or not reachable by
        // the path the kernel gives (another mount namespace).
        _ => Err(format!(
            "was removed or moved while it was opened (now {})",
            path.display()
        )),
    }
}

/// Why a path cannot be used, as a phrase after the path.
fn why(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "does not exist".to_owned(),
        io::ErrorKind::NotADirectory => "has a part that is not a directory".to_owned(),
        io::ErrorKind::PermissionDenied => "cannot be reached (permission denied)".to_owned(),
        _ => format!("cannot be resolved ({error})"),
    }
}

#[cfg(test)]
mod tests;
