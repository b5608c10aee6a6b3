//! What this machine and process offer: each backend's availability with
//! the reason, what `Auto` picks, pidfds, the owner-death guard.

use std::path::PathBuf;

use serde::Serialize;

use crate::{backend::Backend, contain, limits::LimitKind, owner::watchdog, sys};

/// Whether one backend can be used here, and why not
/// ([`Capabilities::backends`]).
///
/// ```no_run
/// let caps = corral::capabilities();
/// let cgroup = &caps.backends[0];
/// assert_eq!(cgroup.backend, corral::Backend::Cgroup);
/// if !cgroup.available {
///     eprintln!("no cgroup backend here: {}", cgroup.detail);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendStatus {
    /// The backend.
    pub backend: Backend,
    /// Whether it can be used by this process now.
    pub available: bool,
    /// Where it would live, or why it is unavailable and what would fix it.
    pub detail: String,
}

/// Whether one kind of limit can be enforced on this process's trees
/// ([`Capabilities::limits`]).
///
/// ```no_run
/// let caps = corral::capabilities();
/// for limit in caps.limits.iter().filter(|l| !l.available) {
///     println!("{} ({:?}) unavailable: {}", limit.limit, limit.controller, limit.detail);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitStatus {
    /// The limit.
    pub limit: LimitKind,
    /// The cgroup v2 controller it needs, if any.
    pub controller: Option<&'static str>,
    /// Whether it can be enforced here now.
    pub available: bool,
    /// Why not and what would fix it (empty when available).
    pub detail: String,
}

/// What this machine and process offer ([`capabilities()`]).
///
/// ```no_run
/// let caps = corral::capabilities();
/// println!("auto picks {}; pidfds: {}; watchdog {}", caps.auto, caps.pidfd, caps.watchdog);
/// assert!(caps.backends.iter().any(|b| b.backend == caps.auto));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Every backend, in probe order.
    pub backends: Vec<BackendStatus>,
    /// What [`BackendChoice::Auto`](crate::BackendChoice::Auto) picks now.
    pub auto: Backend,
    /// Whether the kernel has pidfds (signals by identity, not by number).
    pub pidfd: bool,
    /// Where leaf cgroups are created, when the cgroup backend is available.
    pub cgroup_parent: Option<PathBuf>,
    /// The owner-death guard: the watchdog executable, or why there is none.
    pub watchdog: String,
    /// Which resource limits ([`Limits`](crate::limits::Limits)) this
    /// process's trees can have, and why not the others.
    pub limits: Vec<LimitStatus>,
}

/// Probes every backend, and what limits this process's trees can have.
///
/// ```no_run
/// let caps = corral::capabilities();
/// for status in &caps.backends {
///     let mark = if status.available { "yes" } else { "no" };
///     println!("{:<10} {mark:<3} {}", status.backend, status.detail);
/// }
/// assert_eq!(caps.backends.len(), corral::Backend::ALL.len());
/// println!("auto picks {}; pidfds: {}; watchdog {}", caps.auto, caps.pidfd, caps.watchdog);
/// for limit in caps.limits.iter().filter(|l| !l.available) {
///     println!("{} ({:?}) unavailable: {}", limit.limit, limit.controller, limit.detail);
/// }
/// ```
pub fn capabilities() -> Capabilities {
    let backends: Vec<BackendStatus> = Backend::ALL.iter().map(|&b| status(b)).collect();
    let auto = backends
        .iter()
        .find(|s| s.available)
        .map_or(Backend::Group, |s| s.backend);
    let pidfd = sys::pidfd_open(sys::getpid()).is_ok();
    Capabilities {
        backends,
        auto,
        pidfd,
        cgroup_parent: contain::probe_cgroup().ok(),
        watchdog: match watchdog::executable() {
            Ok(path) => format!("on: {}", path.display()),
            Err(reason) => format!("off: {reason}"),
        },
        limits: contain::limit_support()
            .into_iter()
            .map(|(limit, support)| LimitStatus {
                limit,
                controller: limit.controller(),
                available: support.is_ok(),
                detail: support.err().unwrap_or_default(),
            })
            .collect(),
    }
}

fn status(backend: Backend) -> BackendStatus {
    let (available, detail) = match backend {
        Backend::Cgroup => match contain::probe_cgroup() {
            Ok(parent) => (true, format!("leaf cgroups under {}", parent.display())),
            Err(reason) => (false, reason),
        },
        Backend::Subreaper => {
            match contain::scannable().and_then(|()| contain::probe_subreaper()) {
                Ok(()) if contain::subreaper_claimed() => {
                    (true, "this process is dedicated to supervision".to_owned())
                }
                Ok(()) => (
                    false,
                    "usable only by a process dedicated to supervision: apply \
                 Settings::new().subreaper() (the corral command does), or force it"
                        .to_owned(),
                ),
                Err(reason) => (false, reason),
            }
        }
        Backend::Group => match contain::scannable() {
            Ok(()) => (
                true,
                "portable minimum; setsid and double-fork escapes are not contained".to_owned(),
            ),
            Err(reason) => (false, reason),
        },
    };
    BackendStatus {
        backend,
        available,
        detail,
    }
}
