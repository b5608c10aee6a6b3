//! Where a command may run: the directories the server was given, and the
//! check that a run's `cwd` stays inside one of them.
//!
//! Both sides are canonical (symlinks and `..` resolved), so a symlink
//! inside a root that points out of every root is refused, and one that
//! points into another root is allowed.
//!
//! # Caveats
//! The check is on the path as it is now: a directory swapped for a symlink
//! between [`Roots::resolve`] and the spawn is not caught. Spawn in the
//! resolved path, never in the one the caller gave.

use std::{fmt::Write as _, io, path::PathBuf};

use crate::serve::request::FieldError;

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

    /// The directory a run may use: `None` is the first root; a relative
    /// path is taken from the first root; the path is canonicalized
    /// (symlinks and `..` resolved) and must be a directory inside one of
    /// the roots (component-wise, so `/srv/a2` is not inside `/srv/a`).
    ///
    /// # Errors
    /// A [`FieldError`] on `cwd` naming the resolved path and the roots.
    pub fn resolve(&self, cwd: Option<&str>) -> Result<PathBuf, FieldError> {
        let first = &self.roots[0];
        let Some(cwd) = cwd else {
            return Ok(first.clone());
        };
        let joined = first.join(cwd);
        let canonical = joined.canonicalize().map_err(|error| {
            self.refuse(format!(
                "{} {}: give a directory inside {}",
                joined.display(),
                why(&error),
                self.names()
            ))
        })?;
        if !self.roots.iter().any(|root| canonical.starts_with(root)) {
            let shown = if canonical == joined {
                canonical.display().to_string()
            } else {
                format!(
                    "{} (resolved from {})",
                    canonical.display(),
                    joined.display()
                )
            };
            return Err(self.refuse(format!(
                "{shown} is outside the roots this server may run in: give a directory inside {}",
                self.names()
            )));
        }
        if !canonical.is_dir() {
            return Err(self.refuse(format!(
                "{} is not a directory: give a directory inside {}",
                canonical.display(),
                self.names()
            )));
        }
        Ok(canonical)
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
