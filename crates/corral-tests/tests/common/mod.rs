//! What this package's integration tests share beyond the `corral_tests`
//! library: the paths of its own binaries (Cargo gives them only to tests of
//! the same package). Include with `mod common;`.

// Each test binary uses its own subset of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;

/// The `fixture` binary.
pub fn fixture_path() -> PathBuf {
    corral_tests::bin_path!("fixture")
}

/// The `owner` binary.
pub fn owner_path() -> PathBuf {
    corral_tests::bin_path!("owner")
}

/// The `reuse` binary.
pub fn reuse_path() -> PathBuf {
    corral_tests::bin_path!("reuse")
}
