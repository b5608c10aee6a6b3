//! The server's shared state: the options and roots, the concurrency limit,
//! the background runs, the audit log, and the shutdown that ends them all.
//!
//! Every run, foreground or background, holds one permit of the
//! concurrency limit for its whole life and one count in `active`, and its
//! cancellation token is a child of `stop`: shutting down cancels every
//! tree and waits until `active` is back to zero.
//!
//! A background run belongs to the [`Principal`] that started it: the
//! registry answers a lookup only for the owner, and keeps the last
//! [`KEEP_FINISHED`] finished runs of each principal (another principal's
//! runs never push them out). Run ids are 128 random bits: an id cannot be
//! guessed from one's own.

use std::{
    collections::{HashMap, VecDeque},
    fmt::Write as _,
    io,
    sync::{Arc, Mutex},
    time::{Instant, SystemTime},
};

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::{
    Principal, ServeError, ServeOptions,
    audit::Audit,
    roots::Roots,
    run::{Ended, Kept, Plan, lock},
    task_store::TaskStore,
};
use crate::tasks::TaskCount;

/// The polling interval suggested to a client of a task.
const TASK_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Finished background runs kept for `read_run` and `wait_run`, per
/// principal.
const KEEP_FINISHED: usize = 16;

/// One background run.
#[derive(Debug)]
pub(crate) struct Background {
    pub id: String,
    /// Who started it: the only principal that finds it.
    pub owner: Principal,
    pub command: Value,
    pub started: Instant,
    pub kept: Arc<Mutex<Kept>>,
    pub cancel: CancellationToken,
    /// The result, once the run ended.
    pub done: watch::Receiver<Option<Ended>>,
}

impl Background {
    pub(crate) fn state(&self) -> &'static str {
        if self.done.borrow().is_some() {
            "finished"
        } else {
            "running"
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub options: ServeOptions,
    pub roots: Roots,
    audit: Option<Audit>,
    permits: Arc<Semaphore>,
    /// Cancelled at shutdown: every run's token is a child.
    pub stop: CancellationToken,
    /// Runs alive (foreground and background).
    pub active: TaskCount,
    background: Mutex<Registry>,
    /// The runs answered as MCP tasks.
    pub tasks: TaskStore,
}

#[derive(Debug, Default)]
struct Registry {
    runs: HashMap<String, Arc<Background>>,
    /// Each principal's finished runs, oldest first (evicted past
    /// [`KEEP_FINISHED`]).
    finished: HashMap<Principal, VecDeque<String>>,
}

/// Why a run could not start.
#[derive(Debug)]
pub(crate) enum Refused {
    Busy(usize),
    ShuttingDown,
    Cancelled,
}

impl Shared {
    pub(crate) fn new(options: ServeOptions) -> Result<Self, ServeError> {
        let roots =
            Roots::new(&options.roots).map_err(|(path, why)| ServeError::Root { path, why })?;
        super::command_tools::check_options(&options, &roots)?;
        let audit = match &options.audit {
            Some(path) => Some(Audit::open(path).map_err(|source| ServeError::Audit {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        Ok(Self {
            permits: Arc::new(Semaphore::new(options.max_concurrent.max(1))),
            tasks: TaskStore::new(options.task_ttl, options.max_tasks.max(1), TASK_POLL),
            options,
            roots,
            audit,
            stop: CancellationToken::new(),
            active: TaskCount::default(),
            background: Mutex::default(),
        })
    }

    /// A permit to run a tree: at once, after waiting for one (unless the
    /// server rejects when busy), or refused.
    pub(crate) async fn permit(
        &self,
        cancel: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, Refused> {
        if self.stop.is_cancelled() {
            return Err(Refused::ShuttingDown);
        }
        if self.options.reject_when_busy {
            return self
                .permits
                .clone()
                .try_acquire_owned()
                .map_err(|_| Refused::Busy(self.options.max_concurrent));
        }
        tokio::select! {
            permit = self.permits.clone().acquire_owned() => permit.map_err(|_| Refused::ShuttingDown),
            () = cancel.cancelled() => Err(Refused::Cancelled),
            () = self.stop.cancelled() => Err(Refused::ShuttingDown),
        }
    }

    /// Trees alive now (permits taken).
    pub(crate) fn running(&self) -> usize {
        self.options.max_concurrent.max(1) - self.permits.available_permits()
    }

    /// A new run id: `run-` and 128 bits from the kernel's random source,
    /// in hex (nothing in it follows from another id).
    ///
    /// # Errors
    /// `getrandom(2)` failed.
    pub(crate) fn next_id() -> io::Result<String> {
        Self::random_id("run-")
    }

    /// `prefix` and 128 bits from the kernel's random source, in hex.
    ///
    /// # Errors
    /// `getrandom(2)` failed.
    pub(crate) fn random_id(prefix: &str) -> io::Result<String> {
        let mut bytes = [0u8; 16];
        let mut filled = 0;
        while filled < bytes.len() {
            match rustix::rand::getrandom(
                &mut bytes[filled..],
                rustix::rand::GetRandomFlags::empty(),
            ) {
                Ok(n) => filled += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let mut id = String::from(prefix);
        for byte in bytes {
            let _ = write!(id, "{byte:02x}");
        }
        Ok(id)
    }

    /// Registers a background run.
    pub(crate) fn add(&self, run: Arc<Background>) {
        lock(&self.background).runs.insert(run.id.clone(), run);
    }

    /// Notes that `owner`'s background run `id` finished; evicts `owner`'s
    /// oldest finished ones past the cap.
    pub(crate) fn finished(&self, owner: &Principal, id: &str) {
        let mut guard = lock(&self.background);
        let registry = &mut *guard;
        let finished = registry.finished.entry(owner.clone()).or_default();
        finished.push_back(id.to_owned());
        while finished.len() > KEEP_FINISHED {
            if let Some(old) = finished.pop_front() {
                registry.runs.remove(&old);
            }
        }
    }

    /// `caller`'s background run `id`; `None` for an unknown id and for
    /// another principal's run alike.
    pub(crate) fn get(&self, caller: &Principal, id: &str) -> Option<Arc<Background>> {
        lock(&self.background)
            .runs
            .get(id)
            .filter(|run| run.owner == *caller)
            .cloned()
    }

    /// `caller`'s background runs, oldest first.
    pub(crate) fn list(&self, caller: &Principal) -> Vec<Arc<Background>> {
        let mut runs: Vec<_> = lock(&self.background)
            .runs
            .values()
            .filter(|run| run.owner == *caller)
            .cloned()
            .collect();
        runs.sort_by_key(|run| run.started);
        runs
    }

    /// Appends the audit line of a finished run (failures are logged: the
    /// run's result does not depend on the audit file).
    pub(crate) fn audit(
        &self,
        plan: &Plan,
        principal: &Principal,
        id: Option<&str>,
        ended: &Ended,
    ) {
        let Some(audit) = &self.audit else { return };
        let time = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        let result = &ended.result;
        let survivors = result["cleanup"]["survivors"]
            .as_array()
            .map_or(0, Vec::len);
        let mut record = json!({
            "time": time,
            "principal": principal.name(),
            "run_id": id,
            "cwd": plan.cwd,
            "outcome": result["outcome"],
            "exit_code": result.get("exit_code"),
            "signal": result.get("signal"),
            "duration_ms": result["duration_ms"],
            "survivors": survivors,
            "stdout_bytes": result.get("stdout_bytes"),
            "stderr_bytes": result.get("stderr_bytes"),
        });
        if let (Value::Object(record), Value::Object(command)) = (&mut record, plan.describe()) {
            record.extend(command);
        }
        if let Err(error) = audit.append(&record) {
            tracing::warn!(%error, "cannot append to the audit log");
        }
    }

    /// Ends every run and waits until every tree is gone.
    pub(crate) async fn shutdown(&self) {
        self.stop.cancel();
        self.permits.close();
        self.active.idle().await;
    }
}
