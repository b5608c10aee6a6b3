//! The per-process limits a spawn sets on its leader
//! ([`Limits::open_files`], [`Limits::core_size`],
//! [`Limits::address_space`]): which of them this process can set, and
//! which [`Limits::best_effort_process`] skips instead.

use crate::{
    limits::{LimitKind, Limits, NotApplied},
    sys::{self, ProcessLimit},
};

/// `limits` without the per-process limits this process cannot set (above
/// its own hard limit, without root) when best effort for them is asked
/// for, and those skipped, each with why.
pub(crate) fn in_force(limits: &Limits) -> (Limits, Vec<NotApplied>) {
    let root = sys::geteuid() == 0;
    split(limits, |limit| if root { None } else { limit.hard_limit() })
}

/// [`in_force`] with the hard limit of each (`None`: none, or root).
fn split(
    limits: &Limits,
    hard_limit: impl Fn(ProcessLimit) -> Option<u64>,
) -> (Limits, Vec<NotApplied>) {
    let mut kept = *limits;
    let mut skipped = Vec::new();
    if !limits.best_effort_process {
        return (kept, skipped);
    }
    let fields = [
        (
            ProcessLimit::OpenFiles,
            LimitKind::OpenFiles,
            &mut kept.open_files,
        ),
        (
            ProcessLimit::CoreSize,
            LimitKind::CoreSize,
            &mut kept.core_size,
        ),
        (
            ProcessLimit::AddressSpace,
            LimitKind::AddressSpace,
            &mut kept.address_space,
        ),
    ];
    for (limit, kind, value) in fields {
        if let (Some(asked), Some(hard)) = (*value, hard_limit(limit))
            && asked > hard
        {
            *value = None;
            skipped.push(NotApplied {
                limit: kind,
                reason: format!(
                    "{} of {asked} is above this process's hard limit of {hard}, which only \
                     root may raise; ask for at most {hard}",
                    limit.name()
                ),
            });
        }
    }
    (kept, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host whose hard limit is 100 for every per-process limit.
    fn hard_100(_: ProcessLimit) -> Option<u64> {
        Some(100)
    }

    #[test]
    fn best_effort_for_per_process_limits_skips_those_above_the_hard_limit() {
        let limits = Limits::new()
            .open_files(1000)
            .core_size(50)
            .address_space(101)
            .best_effort_process(true);
        let (kept, skipped) = split(&limits, hard_100);
        assert_eq!(kept.open_files, None);
        assert_eq!(kept.core_size, Some(50));
        assert_eq!(kept.address_space, None);
        let kinds: Vec<_> = skipped.iter().map(|s| s.limit).collect();
        assert_eq!(kinds, [LimitKind::OpenFiles, LimitKind::AddressSpace]);
        assert!(skipped[0].reason.contains("RLIMIT_NOFILE"), "{skipped:?}");
        assert!(skipped[0].reason.contains("at most 100"), "{skipped:?}");
    }

    #[test]
    fn without_best_effort_for_per_process_limits_nothing_is_skipped() {
        // Best effort for the tree-wide limits alone leaves them to be
        // refused.
        let limits = Limits::new().open_files(1000).best_effort_tree(true);
        let (kept, skipped) = split(&limits, hard_100);
        assert_eq!(kept, limits);
        assert!(skipped.is_empty());
        // Nothing is skipped below the hard limit, or without one.
        let limits = Limits::new().open_files(1000).best_effort(true);
        assert_eq!(split(&limits, |_| None).0, limits);
        assert_eq!(split(&limits, |_| Some(1000)).0, limits);
    }
}
