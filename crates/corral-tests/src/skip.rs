//! What this machine can run. A test that cannot do (part of) its work
//! here says so in a line starting `SKIPPED:` on its standard output (which
//! `scripts/test-unprivileged` lists) and passes.

use std::path::PathBuf;

/// Prints `SKIPPED: {reason}`.
pub fn skipped(reason: impl std::fmt::Display) {
    println!("SKIPPED: {reason}");
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Where corral creates cgroup leaves, or `None` (said as skipped) without
/// the cgroup backend.
pub fn cgroup_parent() -> Option<PathBuf> {
    let parent = corral::capabilities().cgroup_parent;
    if parent.is_none() {
        skipped("the cgroup backend is not available here");
    }
    parent
}

/// The backend that holds `setsid` and double-fork escapes here: the
/// cgroup backend where this machine offers it, else `Auto` with the
/// subreaper role claimed (this test process is dedicated to its test), so
/// the first tree alive gets the subreaper backend and a second one at the
/// same time the process group (one subreaper tree per process). The
/// process-group backend cannot hold escapes (docs/guarantees.md G1): a test
/// about whole trees runs one tree with escaping helpers at a time.
pub fn containing_backend() -> corral::BackendChoice {
    if corral::capabilities().cgroup_parent.is_some() {
        return corral::BackendChoice::Only(corral::Backend::Cgroup);
    }
    corral::settings::Settings::new().subreaper().apply();
    corral::BackendChoice::Auto
}

/// Whether this host can enforce `limit` on this process's trees (see
/// `corral capabilities`). Without it the test is said to be skipped, unless
/// `CORRAL_REQUIRE_LIMITS=1` (the pure cgroup v2 lane sets it), where a
/// missing controller is a failure: there, nothing may skip.
pub fn limit_available(limit: corral::LimitKind) -> bool {
    let status = corral::capabilities()
        .limits
        .into_iter()
        .find(|s| s.limit == limit)
        .expect("capabilities list every limit");
    if status.available {
        return true;
    }
    assert!(
        std::env::var_os("CORRAL_REQUIRE_LIMITS").is_none_or(|v| v != "1"),
        "CORRAL_REQUIRE_LIMITS=1 but the {limit} limit is unavailable: {}",
        status.detail
    );
    skipped(format!(
        "the {limit} limit is unavailable here: {}",
        status.detail
    ));
    false
}
