//! Scenario `cancel`: the call is cancelled (`Child::terminate`) after the
//! supervisor's re-scans learnt both members, one of whose pids a bystander
//! took.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use corral::{Backend, BackendChoice};

use crate::{
    Failure, LEARN, Res, fail, note,
    pid_space::Factory,
    procs::{Ident, kill_verified, wait_freed},
    tree::{check_bystander, check_leaves_gone, tree_script},
};

pub(crate) async fn cancel(backend: Backend, fixture: &Path, factory: &mut Factory) -> Res<String> {
    corral::settings::Settings::new()
        .startup_sweep(false)
        .apply();
    let script = tree_script(fixture)?;
    let mut child = corral::Command::new("/bin/sh")
        .args(["-c", &script])
        .backend(BackendChoice::Only(backend))
        .grace(Duration::from_millis(500))
        .final_bound(Duration::from_secs(1))
        .watchdog(false)
        .ledger(false)
        .spawn()
        .map_err(|error| match error {
            corral::Error::BackendUnavailable { .. } => Failure::Skip(error.to_string()),
            error => Failure::Fail(format!("spawn: {error}")),
        })?;
    let leader = Ident::of(child.id()).ok_or("the leader vanished")?;
    let leaves: Vec<PathBuf> = child.cgroup().map(Path::to_path_buf).into_iter().collect();
    let mut tap = child.stdout_tap().ok_or("no stdout tap")?;
    let two_lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() >= 2;
    let ready = tokio::time::timeout(Duration::from_secs(10), tap.wait_for(two_lines)).await;
    if !matches!(ready, Ok(true)) {
        return fail(format!(
            "no two readiness lines: {:?}",
            String::from_utf8_lossy(&tap.snapshot())
        ));
    }
    let snapshot = tap.snapshot();
    let members: Vec<Ident> = String::from_utf8_lossy(&snapshot)
        .lines()
        .filter_map(|l| l.strip_prefix("ready "))
        .filter_map(|pid| pid.trim().parse().ok())
        .filter_map(Ident::of)
        .collect();
    let [x, y] = members.as_slice() else {
        return fail(format!("expected two live members, got {members:?}"));
    };
    let (x, y) = (*x, *y);
    note(format!(
        "tree: leader sh {leader}, members {x} and {y} ({backend})"
    ));
    // Let the supervisor's re-scans learn both members by identity.
    tokio::time::sleep(LEARN).await;
    if !kill_verified(x) {
        return fail(format!("could not kill the member {x}"));
    }
    wait_freed(x, Duration::from_secs(5)).await?;
    note(format!("member {x} killed and reaped by sh"));
    let bystander = factory.hunt(x).await?;
    // The re-scans now see the bystander at the member's old pid.
    tokio::time::sleep(LEARN).await;
    check_bystander(bystander, "before the cancel")?;
    let cancelled = Instant::now();
    child.terminate();
    let finished = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .map_err(|_| "the cancelled call did not return within 10 s")?
        .map_err(|e| format!("wait: {e}"))?;
    let took = cancelled.elapsed();
    note(format!(
        "cancelled: {:?} in {took:?}, signals {:?}, survivors {}",
        finished.outcome,
        finished
            .report
            .signals
            .iter()
            .map(|s| format!("{} to {:?}", s.signal, s.delivered))
            .collect::<Vec<_>>(),
        finished.report.survivors.len()
    ));
    check_bystander(bystander, "by the cancellation")?;
    if finished
        .report
        .survivors
        .iter()
        .any(|s| s.pid == bystander.pid)
    {
        return fail(format!(
            "the report names the bystander {bystander} as a survivor: {:?}",
            finished.report.survivors
        ));
    }
    if !finished.report.survivors.is_empty() {
        return fail(format!("survivors: {:?}", finished.report.survivors));
    }
    if finished.outcome != corral::Outcome::Cancelled {
        return fail(format!("outcome {:?}, not Cancelled", finished.outcome));
    }
    for (what, p) in [("leader", leader), ("member", y)] {
        if p.is_running() {
            return fail(format!(
                "the {what} {p} survived the cancel: {}",
                p.describe_pid()
            ));
        }
    }
    check_leaves_gone(&leaves).await?;
    Ok(format!(
        "bystander {bystander} took the pid of killed member {x}; cancel ended leader {} \
         and member {} in {} ms; the bystander was not signalled",
        leader.pid,
        y.pid,
        took.as_millis()
    ))
}
