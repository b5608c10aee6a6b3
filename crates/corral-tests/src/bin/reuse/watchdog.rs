//! Scenario `watchdog`.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use corral::{
    Backend,
    ledger::{self},
};

use crate::{
    LEARN, Res, SLACK, WATCHDOG_BOUND, fail, note,
    owner::Owner,
    pid_space::Factory,
    procs::{Ident, kill_verified, reap_adopted, wait_freed, wait_until},
    tree::check_bystander,
};

/// `watchdog`: member X's pid goes to a bystander, then the owner dies; the
/// watchdog ends the tree and leaves the bystander alone.
pub(crate) async fn watchdog_kills(
    owner: &mut Owner,
    backend: Backend,
    factory: &mut Factory,
    ledger_dir: &Path,
    (x, y): (Ident, Ident),
) -> Res<String> {
    let leader = owner.leader;
    let watchdog = owner.watchdog.ok_or("no watchdog")?;
    // The owner's re-scans learn both members and tell the watchdog.
    tokio::time::sleep(LEARN).await;
    if !kill_verified(x) {
        return fail(format!("could not kill the member {x}"));
    }
    wait_freed(x, Duration::from_secs(5)).await?;
    note(format!("member {x} killed and reaped by sh"));
    let bystander = factory.hunt(x).await?;
    tokio::time::sleep(LEARN).await;
    check_bystander(bystander, "before the owner died")?;
    if !kill_verified(owner.me) {
        return fail(format!("could not kill the owner {}", owner.me));
    }
    let killed = Instant::now();
    let factory_pid = factory.child.id().try_into().unwrap_or(0);
    let gone = wait_until(WATCHDOG_BOUND + SLACK, || {
        reap_adopted(&[factory_pid]);
        !leader.is_running() && !y.is_running()
    })
    .await;
    let took = killed.elapsed();
    note(format!(
        "owner killed; tree gone: {gone} after {} ms",
        took.as_millis()
    ));
    let watchdog_exited = wait_until(Duration::from_secs(3), || {
        reap_adopted(&[factory_pid]);
        watchdog.stat().is_none()
    })
    .await;
    check_bystander(bystander, "by the watchdog")?;
    if !gone {
        return fail(format!(
            "the watchdog did not end the tree within {:?}: leader {}, member {}",
            WATCHDOG_BOUND + SLACK,
            leader.describe_pid(),
            y.describe_pid()
        ));
    }
    if !watchdog_exited {
        return fail(format!(
            "the watchdog {watchdog} did not exit: {}",
            watchdog.describe_pid()
        ));
    }
    let left = ledger::load(ledger_dir).expect("ledger").0;
    if !left.is_empty() {
        return fail(format!(
            "the watchdog left {} ledger record(s): {left:?}",
            left.len()
        ));
    }
    Ok(format!(
        "bystander {bystander} took the pid of killed member {x}; after the owner's SIGKILL \
         the watchdog ended leader {} and member {} ({backend}) in {} ms and removed the \
         record; the bystander was not signalled",
        leader.pid,
        y.pid,
        took.as_millis()
    ))
}
