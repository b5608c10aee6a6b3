//! Scenario `ledger`.

use std::{path::Path, time::Duration};

use corral::{
    Backend,
    ledger::{self, SweepAction},
};

use crate::{
    Res, fail, note,
    owner::Owner,
    pid_space::Factory,
    procs::{Ident, kill_verified, reap, wait_until},
    tree::check_bystander,
};

/// `ledger`: the owner dies without a watchdog, its leader is killed and
/// reaped here, a bystander (a session leader) takes the leader's pid, and the
/// sweep runs over the dead owner's record.
pub(crate) async fn sweep_after_owner(
    owner: &mut Owner,
    backend: Backend,
    factory: &mut Factory,
    ledger_dir: &Path,
    (x, y): (Ident, Ident),
) -> Res<String> {
    let leader = owner.leader;
    let records = ledger::load(ledger_dir).expect("ledger").0;
    match records.as_slice() {
        [record]
            if record.leader.map(|l| (l.pid, l.start_time)) == Some((leader.pid, leader.start)) => {
        }
        _ => {
            return fail(format!(
                "expected one record naming the leader {leader}: {records:?}"
            ));
        }
    }
    if !kill_verified(owner.me) {
        return fail(format!("could not kill the owner {}", owner.me));
    }
    let child = &mut owner.child;
    if !wait_until(Duration::from_secs(5), || {
        matches!(child.try_wait(), Ok(Some(_)) | Err(_))
    })
    .await
    {
        return fail("the owner did not die of SIGKILL");
    }
    let me = i32::try_from(std::process::id()).unwrap_or(1);
    if !wait_until(Duration::from_secs(2), || {
        leader.stat().is_some_and(|s| s.ppid == me)
    })
    .await
    {
        return fail(format!(
            "the leader {leader} was not re-parented to PID 1: {}",
            leader.describe_pid()
        ));
    }
    note(format!(
        "owner killed; leader {leader} re-parented to PID 1"
    ));
    // Now the leader is ours: kill it and reap it, which frees its pid (and,
    // for the group backend, its process group id).
    if !kill_verified(leader) {
        return fail(format!("could not kill the leader {leader}"));
    }
    if !wait_until(Duration::from_secs(5), || {
        leader.stat().is_some_and(|s| !s.is_running()) && reap(leader.pid)
    })
    .await
    {
        return fail(format!(
            "could not reap the leader: {}",
            leader.describe_pid()
        ));
    }
    note(format!("leader {leader} killed and reaped"));
    if backend == Backend::Group {
        // The kernel keeps a pid allocated while it is still some process's
        // group id, so the leader's pid (= the group id) is free only once
        // the whole group is gone: end the members too. This is the only
        // window in which a stale group id can name a new group.
        for p in [x, y] {
            kill_verified(p);
        }
        let reaped = wait_until(Duration::from_secs(5), || {
            for p in [x, y] {
                if p.stat().is_some_and(|s| !s.is_running()) {
                    reap(p.pid);
                }
            }
            x.stat().is_none() && y.stat().is_none()
        })
        .await;
        if !reaped {
            return fail(format!(
                "the members were not reaped: {}, {}",
                x.describe_pid(),
                y.describe_pid()
            ));
        }
        note(format!(
            "members {x} and {y} killed and reaped: group {} is empty",
            leader.pid
        ));
    }
    let bystander = factory.hunt(leader).await?;
    let swept = corral::ledger::sweep(ledger_dir, false, |_| true).expect("sweep");
    note(format!(
        "sweep: {:?}",
        swept
            .actions
            .iter()
            .map(|(r, a)| (&r.id, a))
            .collect::<Vec<_>>()
    ));
    check_bystander(bystander, "by the sweep")?;
    let [(_, action)] = swept.actions.as_slice() else {
        return fail(format!(
            "expected one sweep action, got {:?}",
            swept.actions
        ));
    };
    let expected = match (backend, action) {
        // The leaf still holds both sleepers (`cgroup.kill` names no pids);
        // on the subreaper backend the record names only the leader, whose
        // identity no longer holds, and the sleepers, orphans with no link
        // to it, are found by the tree's mark in their environment.
        (Backend::Cgroup | Backend::Subreaper, SweepAction::Killed { members, survivors }) => {
            let mut pids: Vec<i32> = members.iter().map(|m| m.pid).collect();
            pids.sort_unstable();
            // Both members are the tree's; the list is what the sweep saw
            // running when it began (a member can be caught mid-exit), so it
            // must name nothing else, and afterwards neither may run.
            let want = [x.pid, y.pid];
            if pids.is_empty() || pids.iter().any(|p| !want.contains(p)) || !survivors.is_empty() {
                return fail(format!(
                    "the sweep killed {members:?} (survivors {survivors:?}); expected {x} and {y}"
                ));
            }
            if x.is_running() || y.is_running() {
                return fail("the sweep left members of the tree running");
            }
            if backend == Backend::Cgroup {
                "killed the two members through the leaf"
            } else {
                "killed the two members by the tree's mark"
            }
        }
        // The bystander leads a process group with the recorded group id.
        (Backend::Group, SweepAction::Dropped) => {
            "dropped the record without signalling the reused group id"
        }
        _ => return fail(format!("unexpected sweep action {action:?}")),
    };
    let left = ledger::load(ledger_dir).expect("ledger").0;
    if !left.is_empty() {
        return fail(format!("the sweep kept the record: {left:?}"));
    }
    Ok(format!(
        "bystander {bystander} (its own process group) took the pid of the dead owner's leader \
         {leader}; the sweep {expected}; the bystander was not signalled"
    ))
}
