use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU32, Ordering},
};

use super::*;

/// A fresh directory under the system's temp directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "corral-roots-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        fs::create_dir_all(&path).expect("create scratch dir");
        // Canonical, so expected paths compare equal (the temp dir may be a symlink).
        Self(path.canonicalize().expect("canonical scratch dir"))
    }

    fn dir(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        fs::create_dir_all(&path).expect("create dir");
        path
    }

    fn file(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        fs::write(&path, b"x").expect("create file");
        path
    }

    fn link(&self, relative: &str, target: &Path) -> PathBuf {
        let path = self.0.join(relative);
        symlink(target, &path).expect("create symlink");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn roots(paths: &[PathBuf]) -> Roots {
    Roots::new(paths).unwrap_or_else(|(path, why)| panic!("{}: {why}", path.display()))
}

/// Where `cwd` resolved to.
fn resolved(roots: &Roots, cwd: Option<&str>) -> Result<PathBuf, FieldError> {
    roots.resolve(cwd).map(|cwd| cwd.path().to_owned())
}

fn refused(roots: &Roots, cwd: &str) -> FieldError {
    match roots.resolve(Some(cwd)) {
        Ok(cwd) => panic!("{cwd:?} resolved to {}", cwd.path().display()),
        Err(error) => error,
    }
}

#[test]
fn no_cwd_is_the_first_root() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let b = scratch.dir("b");
    let roots = roots(&[a.clone(), b.clone()]);
    assert_eq!(roots.list(), [a.clone(), b]);
    assert_eq!(resolved(&roots, None), Ok(a));
}

#[test]
fn no_paths_means_the_current_directory() {
    let roots = roots(&[]);
    let current = std::env::current_dir()
        .expect("current dir")
        .canonicalize()
        .expect("canonical");
    assert_eq!(roots.list(), [current]);
}

#[test]
fn roots_are_canonical_and_deduplicated() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let via_link = scratch.link("link-to-a", &a);
    let dotted = scratch.0.join("a/../a/.");
    let roots = roots(&[via_link, dotted, a.clone()]);
    assert_eq!(roots.list(), [a]);
}

#[test]
fn missing_or_file_root_is_refused() {
    let scratch = Scratch::new();
    let missing = scratch.0.join("missing");
    let (path, why) = Roots::new(std::slice::from_ref(&missing)).expect_err("missing root");
    assert_eq!(path, missing);
    assert!(why.contains("does not exist"), "{why}");

    let file = scratch.file("file");
    let (path, why) = Roots::new(std::slice::from_ref(&file)).expect_err("file root");
    assert_eq!(path, file);
    assert!(why.contains("not a directory"), "{why}");
}

#[test]
fn relative_cwd_starts_at_the_first_root() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let sub = scratch.dir("a/sub/deeper");
    let roots = roots(std::slice::from_ref(&a));
    assert_eq!(resolved(&roots, Some("sub/deeper")), Ok(sub.clone()));
    assert_eq!(resolved(&roots, Some("./sub/../sub/deeper/")), Ok(sub));
    assert_eq!(resolved(&roots, Some(".")), Ok(a.clone()));
    assert_eq!(resolved(&roots, Some("")), Ok(a));
}

#[test]
fn absolute_cwd_inside_any_root() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let b = scratch.dir("b");
    let inner = scratch.dir("b/inner");
    let roots = roots(&[a, b]);
    let given = inner.to_str().expect("utf-8 temp path");
    assert_eq!(resolved(&roots, Some(given)), Ok(inner));
}

#[test]
fn dot_dot_escape_is_refused() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    scratch.dir("outside");
    let roots = roots(std::slice::from_ref(&a));
    let error = refused(&roots, "../outside");
    assert_eq!(error.field, "cwd");
    let outside = scratch.0.join("outside");
    assert!(error.rule.contains(&*outside.to_string_lossy()), "{error}");
    assert!(error.rule.contains("outside the roots"), "{error}");
    assert!(error.rule.contains(&*a.to_string_lossy()), "{error}");
    // Escaping and coming back in is fine.
    assert_eq!(resolved(&roots, Some("../a")), Ok(a));
}

#[test]
fn symlink_inside_a_root_pointing_out_is_refused() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let outside = scratch.dir("outside");
    scratch.link("a/escape", &outside);
    let roots = roots(&[a]);
    let error = refused(&roots, "escape");
    assert!(error.rule.contains(&*outside.to_string_lossy()), "{error}");
    assert!(error.rule.contains("resolved from"), "{error}");
    assert!(error.rule.contains("outside the roots"), "{error}");
}

#[test]
fn symlink_pointing_into_another_root_is_allowed() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let b = scratch.dir("b");
    scratch.link("a/to-b", &b);
    let roots = roots(&[a, b.clone()]);
    assert_eq!(resolved(&roots, Some("to-b")), Ok(b));
}

#[test]
fn prefix_sharing_sibling_is_outside() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let a2 = scratch.dir("a2");
    let roots = roots(&[a]);
    let error = refused(&roots, a2.to_str().expect("utf-8 temp path"));
    assert!(error.rule.contains("outside the roots"), "{error}");
    let error = refused(&roots, "../a2");
    assert!(error.rule.contains("outside the roots"), "{error}");
}

#[test]
fn file_is_not_a_directory() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let file = scratch.file("a/notes.txt");
    let roots = roots(&[a]);
    let error = refused(&roots, "notes.txt");
    assert!(error.rule.contains("not a directory"), "{error}");
    assert!(error.rule.contains(&*file.to_string_lossy()), "{error}");
    let error = refused(&roots, "notes.txt/sub");
    assert!(error.rule.contains("not a directory"), "{error}");
}

#[test]
fn missing_path_does_not_exist() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    let roots = roots(std::slice::from_ref(&a));
    let error = refused(&roots, "nope/deeper");
    assert_eq!(error.field, "cwd");
    assert!(error.rule.contains("does not exist"), "{error}");
    assert!(
        error
            .rule
            .contains(&*a.join("nope/deeper").to_string_lossy()),
        "{error}"
    );
    assert!(error.to_string().starts_with("`cwd`: "), "{error}");
}

#[test]
fn dangling_symlink_does_not_exist() {
    let scratch = Scratch::new();
    let a = scratch.dir("a");
    scratch.link("a/dangling", &scratch.0.join("gone"));
    let roots = roots(&[a]);
    let error = refused(&roots, "dangling");
    assert!(error.rule.contains("does not exist"), "{error}");
}

#[test]
fn relative_root_is_made_absolute() {
    let roots = roots(&[PathBuf::from(".")]);
    assert!(roots.list()[0].is_absolute());
}
