//! Puts the commit corral is built from into `corral --version`: sets
//! `CORRAL_VERSION` for the crate to `VERSION (COMMIT)`, the commit's first 12
//! hex digits taken from the first of:
//! `$CORRAL_COMMIT` (a packager building from a plain tarball), the
//! `.cargo_vcs_info.json` that `cargo package` writes (a crate from a
//! registry), or `git rev-parse HEAD`. None of them: no commit is shown, and
//! the build goes on.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn main() {
    println!("cargo::rerun-if-env-changed=CORRAL_COMMIT");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let vcs_info = manifest_dir.join(".cargo_vcs_info.json");
    // (commit, its date if known)
    let found = std::env::var("CORRAL_COMMIT")
        .ok()
        .and_then(|c| hex(&c))
        .or_else(|| from_vcs_info(&vcs_info))
        .map(|commit| (commit, String::new()))
        .or_else(|| from_git(&manifest_dir));
    let mut version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let mut date = String::new();
    if let Some((commit, commit_date)) = found {
        version = format!("{version} ({})", &commit[..12]);
        date = commit_date;
    }
    println!("cargo::rustc-env=CORRAL_VERSION={version}");
    // The man pages' date: the commit's (reproducible), when git can say.
    println!("cargo::rustc-env=CORRAL_COMMIT_DATE={date}");
}

/// The `"sha1"` of a packaged crate's `.cargo_vcs_info.json`.
fn from_vcs_info(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    println!("cargo::rerun-if-changed={}", path.display());
    let after = text.split("\"sha1\"").nth(1)?;
    let value = after.split('"').nth(1)?;
    hex(value)
}

/// `git rev-parse HEAD` and the commit's date, rebuilt when HEAD or the
/// branch it names moves.
fn from_git(dir: &Path) -> Option<(String, String)> {
    let git = |args: &[&str]| git(dir, args);
    let commit = hex(&git(&["rev-parse", "HEAD"])?)?;
    // Watch only files that exist: cargo reruns a script whose watched file
    // is missing on every build.
    let watch = |path: Option<String>| {
        if let Some(path) = path.map(|p| dir.join(p)).filter(|p| p.exists()) {
            println!("cargo::rerun-if-changed={}", path.display());
        }
    };
    watch(git(&["rev-parse", "--git-path", "HEAD"]));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &branch]));
    }
    watch(git(&["rev-parse", "--git-path", "packed-refs"]));
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_default();
    Some((commit, date))
}

/// `git ARGS` in `dir`: its output, trimmed, if it succeeded.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn hex(value: &str) -> Option<String> {
    let value = value.trim();
    (value.len() >= 12 && value.chars().all(|c| c.is_ascii_hexdigit())).then(|| value.to_owned())
}
