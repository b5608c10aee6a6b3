//! One soak invocation, run as planned.

use std::{path::PathBuf, time::Duration};

use corral::{BackendChoice, Command, Finished};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    census,
    plan::{Cancel, FINAL, Plan, Stop},
};

/// Captured bytes kept per stream (`flood` writes as fast as it can).
const CAPTURE: usize = 1 << 20;

/// How an invocation ended, seen from the caller.
#[derive(Debug)]
pub enum End {
    Finished(Box<Finished>),
    /// The `Child` (or its `wait` future) was dropped; cleanup went on in the
    /// background.
    Dropped,
    /// The spawn future was dropped unpolled.
    NotSpawned,
    Error(String),
}

#[derive(Debug)]
pub struct Done {
    pub call: usize,
    pub plan: Plan,
    pub end: End,
    pub elapsed: Duration,
}

/// What every invocation shares.
#[derive(Debug, Clone)]
pub struct Setup {
    pub fixture: PathBuf,
    /// Goes into the tree's environment (`census::MARKER`), so that every
    /// process of the tree can be traced back to its invocation.
    pub marker: String,
    pub watchdog: bool,
}

/// Runs one invocation as planned.
pub async fn invoke(call: usize, plan: Plan, setup: Setup) -> Done {
    let token = CancellationToken::new();
    let mut command = Command::new(&setup.fixture);
    command
        .args(&plan.args)
        .env(census::MARKER, setup.marker)
        .watchdog(setup.watchdog)
        .backend(BackendChoice::Only(plan.backend))
        .grace(plan.grace)
        .final_bound(FINAL)
        .timeout(plan.timeout)
        .capture_limit(CAPTURE)
        .cancel_on(token.clone());
    let started = Instant::now();
    let done = |plan, end| Done {
        call,
        plan,
        end,
        elapsed: started.elapsed(),
    };
    if plan.cancel == Cancel::BeforeSpawn {
        let spawn = command.spawn();
        drop(spawn);
        return done(plan, End::NotSpawned);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return done(plan, End::Error(format!("spawn: {error}"))),
    };
    let Some(tap) = child.stdout_tap() else {
        return done(plan, End::Error("no stdout tap".to_owned()));
    };
    let result = match plan.cancel {
        Cancel::DuringOutput => {
            let mut waiting = tap.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(5), waiting.wait_for(|b| !b.is_empty()))
                    .await;
            match plan.stop {
                Stop::Token => token.cancel(),
                Stop::Terminate => child.terminate(),
                Stop::Drop => {
                    drop(child);
                    return done(plan, End::Dropped);
                }
            }
            Some(child.wait().await)
        }
        Cancel::DuringGrace | Cancel::DuringFinal => {
            let at = started + plan.timeout + plan.drop_after;
            tokio::select! {
                result = child.wait() => Some(result),
                () = tokio::time::sleep_until(at) => None,
            }
        }
        Cancel::Never | Cancel::BeforeSpawn => Some(child.wait().await),
    };
    match result {
        Some(Ok(finished)) => done(plan, End::Finished(Box::new(finished))),
        Some(Err(error)) => done(plan, End::Error(format!("wait: {error}"))),
        None => done(plan, End::Dropped),
    }
}
