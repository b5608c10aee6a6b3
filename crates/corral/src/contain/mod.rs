//! Containment: how the processes of one tree are found, signalled and
//! awaited.
//!
//! Three backends, probed at run time in this order:
//! - [`Backend::Cgroup`]: a cgroup v2 leaf per invocation. The only Linux
//!   mechanism that holds `setsid` and double-fork escapes whatever the
//!   process tree does (a member allowed to write another cgroup's
//!   `cgroup.procs` can still leave: see `docs/security.md`);
//!   killed with `cgroup.kill`, emptiness learnt from `cgroup.events`.
//! - [`Backend::Subreaper`]: this process becomes a child subreaper, so every
//!   orphan of the tree re-parents to it and stays findable through `/proc`.
//!   Process-global, so only for a process dedicated to supervision (see
//!   [`Settings::subreaper`](crate::settings::Settings::subreaper)).
//! - [`Backend::Group`]: a process group, plus the leader's descendants while
//!   they are still connected to it. Portable; a `setsid` child whose parent
//!   has exited, or a double-forked daemon, escapes it.
//!
//! Trees of one process never touch each other, whatever their backends: every
//! live tree is in a process-wide registry (`registry`) from the fork of its
//! leader until that leader is reaped, and the rules that find members by
//! scanning `/proc` leave out what another tree claims.

mod cgroup;
mod controllers;
mod group;
mod halt;
mod leader;
mod mark;
mod nested;
mod orphaned;
mod recorded;
mod registry;
mod scan;
mod subreaper;
mod tree;
mod walker;

pub use cgroup::PARENT_VARIABLE as CGROUP_PARENT_VARIABLE;
pub(crate) use controllers::{Applied as AppliedLimits, online_cpus};
pub(crate) use leader::Leader;
pub(crate) use mark::{VARIABLE as MARK_VARIABLE, value as mark_value};
pub(crate) use nested::recognise as recognise_nested;
pub(crate) use recorded::{Ended, Named, Rebuilt, is_corral_leaf, rebuild, running_members};
pub(crate) use registry::is_exempt;
pub(crate) use registry::{Live, exempt, released, spawning, unexempt};
pub(crate) use tree::{Prepared, Tree};

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};

use crate::backend::{Backend, BackendChoice};
use crate::{
    error::Error,
    limits::{LimitKind, Limits},
    rlimits, sys,
};

static SUBREAPER_CLAIMED: AtomicBool = AtomicBool::new(false);

/// Declares this process dedicated to supervision: what
/// [`Settings::subreaper`](crate::settings::Settings::subreaper) applies
/// (documented there).
pub(crate) fn claim_subreaper() {
    SUBREAPER_CLAIMED.store(true, Ordering::SeqCst);
}

/// Whether this process's own machinery may wait for its exited child
/// `pid` (a tree's leader, a spawn in progress, a helper of the host: see
/// `registry::waits_for`), or reaps it itself: while a subreaper-backed tree
/// runs, its scans reap the zombies it adopts and read them as the trail of
/// a member that hops. Another reaper of this process leaves such a child
/// alone.
pub(crate) fn waits_for(pid: i32) -> bool {
    subreaper::claimed() || registry::waits_for(pid)
}

/// Whether [`claim_subreaper`] was called.
pub(crate) fn subreaper_claimed() -> bool {
    SUBREAPER_CLAIMED.load(Ordering::SeqCst)
}

/// Whether leaf cgroups can be made here and hold processes: where, or why
/// not.
pub(crate) fn probe_cgroup() -> Result<PathBuf, String> {
    cgroup::probe(controllers::hosts_processes).map(|(parent, _)| parent)
}

/// Whether the subreaper backend can work here at all.
pub(crate) fn probe_subreaper() -> Result<(), String> {
    subreaper::probe()
}

/// Why the group backend cannot keep the leader in the caller's process
/// group.
const FOREGROUND_GROUP: &str = "it puts the command in a process group of its own, so the \
    command cannot stay in the terminal's foreground (--foreground); the cgroup and \
    subreaper backends can";

/// Prepares the chosen backend. With `foreground` (the leader stays in the
/// caller's process group), the group backend is refused: it needs a
/// process group of its own.
///
/// `reserve` hears the path of a cgroup leaf before it is created (see
/// `owner::Registration::cgroup_reserved`).
/// Whether trees can be found by walking `/proc` here: not where `/proc`
/// belongs to another PID namespace than this process's (`unshare --pid`
/// without `--mount-proc`), whose numbers name other processes.
pub(crate) fn scannable() -> Result<(), String> {
    if sys::proc_is_own_namespace() {
        Ok(())
    } else {
        Err(
            "/proc shows another PID namespace than this process's (unshare --pid without \
             --mount-proc): its numbers name other processes; mount a /proc for this \
             namespace, or use the cgroup backend"
                .to_owned(),
        )
    }
}

pub(crate) fn prepare(
    choice: BackendChoice,
    foreground: bool,
    limits: &Limits,
    reserve: &mut dyn FnMut(&Path),
) -> Result<Prepared, Error> {
    // Limits that must hold need the cgroup backend: no fallback then.
    let needs_cgroup = limits
        .wanted()
        .first()
        .copied()
        .filter(|_| !limits.best_effort_tree);
    let refuse = |limit: LimitKind, why: String| Error::LimitUnavailable {
        limit,
        reason: format!(
            "only the cgroup backend can enforce limits, and {why}; or ask for best effort"
        ),
    };
    if let (BackendChoice::Only(other), Some(limit)) = (choice, needs_cgroup)
        && other != Backend::Cgroup
    {
        return Err(refuse(limit, format!("the {other} backend was chosen")));
    }
    let unavailable =
        |backend: Backend, reason: String| Error::BackendUnavailable { backend, reason };
    let group = || {
        if foreground {
            Err(unavailable(Backend::Group, FOREGROUND_GROUP.to_owned()))
        } else {
            Ok(Prepared::Group)
        }
    };
    match choice {
        BackendChoice::Only(Backend::Cgroup) => cgroup::Leaf::create(reserve)
            .map(Prepared::Cgroup)
            .map_err(|e| match e {
                cgroup::LeafError::Unavailable(reason) => unavailable(Backend::Cgroup, reason),
                cgroup::LeafError::Failed(error) => error,
            }),
        BackendChoice::Only(Backend::Subreaper) => scannable()
            .and_then(|()| subreaper::Claim::acquire())
            .map(Prepared::Subreaper)
            .map_err(|reason| unavailable(Backend::Subreaper, reason)),
        BackendChoice::Only(Backend::Group) => {
            scannable().map_err(|reason| unavailable(Backend::Group, reason))?;
            group()
        }
        BackendChoice::Auto => {
            match cgroup::Leaf::create(reserve) {
                Ok(leaf) => return Ok(Prepared::Cgroup(leaf)),
                Err(cgroup::LeafError::Unavailable(reason)) => {
                    tracing::debug!(%reason, "cgroup backend unavailable");
                    if let Some(limit) = needs_cgroup {
                        return Err(refuse(limit, format!("it is unavailable here: {reason}")));
                    }
                }
                Err(cgroup::LeafError::Failed(error)) => return Err(error),
            }
            scannable().map_err(|reason| unavailable(Backend::Group, reason))?;
            if SUBREAPER_CLAIMED.load(Ordering::SeqCst) {
                match subreaper::Claim::acquire() {
                    Ok(claim) => return Ok(Prepared::Subreaper(claim)),
                    Err(reason) => tracing::debug!(%reason, "subreaper backend unavailable"),
                }
            }
            group()
        }
    }
}

/// Applies `limits` to a prepared tree, before its leader starts (see
/// `controllers.rs`). Also returns what the caller should know: a leaf
/// below a cgroup another user owns, whose owner could move the tree out of
/// it and its limits (possible only in this process's own cgroup: a
/// `CORRAL_CGROUP_PARENT` like that is refused).
pub(crate) fn apply_limits(
    prepared: &Prepared,
    limits: &Limits,
) -> Result<(controllers::Applied, Option<String>), Error> {
    let leaf = prepared.cgroup().map(|(path, _)| path);
    let mountinfo = cgroup::mountinfo().unwrap_or_default();
    let mut applied = controllers::apply(leaf.as_deref(), prepared.backend(), limits, mountinfo)
        .map_err(|(limit, reason)| Error::LimitUnavailable { limit, reason })?;
    for skipped in rlimits::in_force(limits).1 {
        applied.not_applied(skipped);
    }
    let note = leaf
        .as_deref()
        .zip(cgroup::mount())
        .and_then(|(leaf, mount)| cgroup::foreign_owner(leaf, mount, sys::geteuid()).ok()?)
        .map(|(file, owner)| {
            format!(
                "{} belongs to user {owner}, who could move the tree out of its leaf cgroup \
                 and so out of its limits; set CORRAL_CGROUP_PARENT to a cgroup only root or \
                 this user owns",
                file.display()
            )
        });
    Ok((applied, note))
}

/// Why the kernel refused a tree's leader in its `leaf` (`error`), and the
/// fix.
pub(crate) fn refused_process(leaf: &Path, error: &std::io::Error) -> String {
    controllers::refused_process(leaf.parent().unwrap_or(leaf), error)
}

/// Whether this host can enforce each kind of limit on the trees of this
/// process now (created under [`cgroup`]'s parent), and why not: the
/// kernel's rules read from the parent ([`controllers::check`]), and a real
/// leaf, made, given a process and removed ([`cgroup::probe`]), that has
/// each controller the parent hands down already. Changes nothing that
/// remains: no controller is enabled.
pub(crate) fn limit_support() -> Vec<(LimitKind, Result<(), String>)> {
    let probed = cgroup::probe(controllers::hosts_processes);
    let mountinfo = cgroup::mountinfo().unwrap_or_default();
    LimitKind::ALL
        .into_iter()
        .map(|kind| {
            let support =
                probed
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|(parent, leaf_controllers)| {
                        kind.controller().map_or(Ok(()), |controller| {
                            let ready = controllers::check(parent, controller, mountinfo)?;
                            controllers::probe(parent, controller, ready, leaf_controllers)
                        })
                    });
            (kind, support)
        })
        .collect()
}
