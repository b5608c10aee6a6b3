//! Fault injection for tests: makes the library behave as on a machine that
//! lacks a facility, without touching the machine.
//!
//! Compiled in only with the cargo feature `fault-injection` (off by
//! default); without it [`active`] is a constant `false`. With it, the
//! comma-separated names in `CORRAL_FAULTS` (read once per process) are
//! active:
//!
//! | name         | effect |
//! |--------------|--------|
//! | `no-pidfd`   | `pidfd_open` fails with `ENOSYS`, as before Linux 5.3, and a tree without a cgroup is not started with `clone3` (which came with 5.3) |
//! | `no-cgroup2` | no cgroup v2 hierarchy is found, as on a v1-only host |
//! | `no-clone3` | `clone3` is skipped, as where it is refused: std's spawn, the child joining its leaf (if any) in the pre-exec hook |
//! | `leader-reaped-at-launch` | the launch waits (up to 10 s), right after the leader started and before anything else of the spawn, until something else reaped it (as a host's `waitpid(-1)` thread can) |
//! | `slow-watchdog-restart` | a replaced watchdog is told nothing for 2 s after it started (an owner killed in that window: the state must already be in its socket) |
//! | `fail-after-launch` | the spawn fails just after the leader started (as when descriptors or memory run out there), once the file named by `CORRAL_FAULT_WHEN` exists (waited for up to 10 s), so the command can start its tree first |
//! | `hold-after-launch` | the spawn waits 10 s just after the leader started, before the leader is recorded (an owner killed in that window: the watchdog must already know the tree) |
//! | `leader-reaped-first` | the spawn waits (up to 10 s) until the leader has exited and something else reaped it before it reads the leader's `/proc` entry, as when a host's `waitpid(-1)` thread wins that race |
//! | `slow-frozen-look` | each signal step of a cgroup tree holds its leaf frozen 300 ms longer before it looks, as a slow step on a loaded machine does (a member undoing the freeze meanwhile must be noticed) |
//! | `nsdelegate` | the cgroup v2 mount counts as mounted with `nsdelegate`, so the leader gets its own cgroup namespace (the kernel's refusal to let it out needs the real option) |
//!
//! Each name is checked at one place (`sys::pidfd_open` and, for `clone3`,
//! `launch::launch`; the cgroup backend's `parent_dir` and
//! `delegates_namespaces`, `launch::launch`, `launch::reaped_at_launch`,
//! `fault::after_launch`, `supervise::open_leader`, `cgroup::frozen`,
//! `watchdog::Client::restart`), so
//! a fault changes what the kernel appears to offer and nothing else. The
//! tests are in `crates/corral-tests/tests/faults.rs` (`nsdelegate` and
//! `no-clone3` in `leave_leaf.rs`).

/// Whether the fault `name` is injected in this process.
#[cfg(feature = "fault-injection")]
pub(crate) fn active(name: &str) -> bool {
    use std::sync::OnceLock;
    static FAULTS: OnceLock<Vec<String>> = OnceLock::new();
    FAULTS
        .get_or_init(|| {
            std::env::var("CORRAL_FAULTS")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|fault| !fault.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .iter()
        .any(|fault| fault == name)
}

/// Whether the fault `name` is injected in this process: never, without the
/// `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub(crate) const fn active(_name: &str) -> bool {
    false
}

/// The `hold-after-launch` fault: a 10 s wait. The `fail-after-launch`
/// fault: an error once the file named by `CORRAL_FAULT_WHEN` exists (or
/// 10 s have passed). `Ok` without them.
pub(crate) fn after_launch() -> Result<(), crate::error::Error> {
    if active("hold-after-launch") {
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    if !active("fail-after-launch") {
        return Ok(());
    }
    let when = std::env::var_os("CORRAL_FAULT_WHEN").unwrap_or_default();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::path::Path::new(&when).exists() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Err(crate::error::Error::Os {
        what: "an injected fault after the leader started",
        source: std::io::Error::other("injected (fail-after-launch)"),
    })
}
