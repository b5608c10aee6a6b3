//! Where things are: the binaries under test and scratch files.
//!
//! Cargo sets `CARGO_BIN_EXE_<name>` (at compile time) only for the tests
//! and benches of the package that has the binary, and cargo-nextest remaps
//! binaries and the package directory for an archive unpacked elsewhere (as
//! `scripts/test-unprivileged` does), giving the new places at run time in
//! `NEXTEST_BIN_EXE_<name>` and `CARGO_MANIFEST_DIR`. The macros here read
//! the compile-time value in the *calling* crate, and prefer the run-time
//! one.

use std::path::PathBuf;

/// The binary `$name` of the calling package (a string literal): where
/// cargo-nextest says it is at run time, else where cargo built it.
#[macro_export]
macro_rules! bin_path {
    ($name:literal) => {
        $crate::paths::runtime_or(
            concat!("NEXTEST_BIN_EXE_", $name),
            env!(concat!("CARGO_BIN_EXE_", $name)),
        )
    };
}

/// The calling package's directory: as the test runner says at run time
/// (nextest remaps it for an archive), else where it was built.
#[macro_export]
macro_rules! manifest_dir {
    () => {
        $crate::paths::runtime_or("CARGO_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"))
    };
}

/// The path in the environment variable `var` at run time, else `built`.
pub fn runtime_or(var: &str, built: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(|| PathBuf::from(built), PathBuf::from)
}

/// A scratch file or directory name for this test process, in the
/// temporary directory (writable by any user, unlike the build's target
/// directory). Not created.
pub fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("corral-test-{}-{name}", std::process::id()))
}

/// A fresh scratch directory ([`scratch`]), removed on drop.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = scratch(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Self(dir)
    }

    /// `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
