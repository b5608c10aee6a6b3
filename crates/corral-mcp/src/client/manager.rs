//! Named connections: connect, disconnect, shut down, and reconnect a server
//! that crashed, within a budget.
//!
//! Reconnecting is lazy and single-flight: a call to a connection whose
//! server crashed starts one attempt sequence (capped, jittered backoff
//! before each attempt, at most [`Reconnect::attempts`] spawns); concurrent
//! callers wait for that same sequence. When the budget is spent the name
//! is reported failed ([`ConnectError::Failed`]) until
//! [`Manager::reconnect`] is asked. The budget refills only when a
//! connection lived [`Reconnect::stable_after`] before it crashed, so a
//! server that dies right after every handshake cannot make the runtime
//! spawn more than the cap. Calls in flight at a crash end in
//! [`CallError::OutcomeUnknown`]; the runtime never sends them again.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::{Duration, SystemTime},
};

use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value};
use tokio::time::{Instant, sleep};

use super::{
    connection::{Connection, Launch, OnEnd, Teardown, open},
    core::lock,
    options::{CallOptions, ConnectOptions, HttpOptions, Reconnect},
    outcome::{CallError, ConnectError, Ended},
    tasks::TaskCount,
};

/// How to reach a server again (what the manager keeps to reconnect).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Server {
    /// A stdio server spawned as an owned tree.
    Stdio(corral::Command),
    /// A streamable HTTP endpoint (see [`Connection::http`]).
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers and connection bounds.
        options: HttpOptions,
    },
}

/// The state of one name.
#[derive(Debug)]
enum State {
    /// Connected: since when, and how much of the budget the reconnects
    /// that led to it spent.
    Live(Arc<Connection>, Instant, u32),
    /// The server crashed; `spent` attempts of the budget are used.
    Crashed { spent: u32, why: Ended },
    /// The budget is spent.
    Failed { attempts: u32, last: String },
}

#[derive(Debug)]
struct Slot {
    server: Server,
    options: ConnectOptions,
    state: State,
    /// Which connection of this name is current (a late teardown of an
    /// older one must not touch the slot).
    generation: u64,
    /// Held for the whole of one reconnect sequence.
    reconnecting: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct Inner {
    slots: Mutex<HashMap<String, Slot>>,
    shut: std::sync::atomic::AtomicBool,
}

/// Named connections to MCP servers. Dropping the manager drops every
/// connection, which tears each down in its own task.
#[derive(Debug, Default)]
pub struct Manager {
    inner: Arc<Inner>,
    tasks: TaskCount,
}

impl Manager {
    /// An empty manager.
    pub fn new() -> Self {
        Self::default()
    }

    /// The manager's tasks alive now (writers, readers, supervisors).
    pub fn live_tasks(&self) -> usize {
        self.tasks.live()
    }

    /// The count behind [`Manager::live_tasks`], which outlives the manager
    /// (to see its connections' tasks finish after it was dropped).
    pub fn task_count(&self) -> TaskCount {
        self.tasks.clone()
    }

    /// Names with a live connection now.
    pub fn connected(&self) -> Vec<String> {
        let slots = lock(&self.inner.slots);
        let mut names: Vec<String> = slots
            .iter()
            .filter(|(_, slot)| matches!(slot.state, State::Live(..)))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// Whether `name` is known at all (live, crashed or failed).
    pub fn contains(&self, name: &str) -> bool {
        lock(&self.inner.slots).contains_key(name)
    }

    /// The live connection of `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<Connection>> {
        match &lock(&self.inner.slots).get(name)?.state {
            State::Live(connection, ..) => Some(connection.clone()),
            _ => None,
        }
    }

    /// Connects `name` to `server`.
    ///
    /// # Errors
    /// [`ConnectError`]; nothing of the server is left running after one.
    ///
    /// # Cancel safety
    /// Dropping the future (or cancelling `options.cancel`) tears the new
    /// connection down; the name stays free.
    pub async fn connect(
        &self,
        name: &str,
        server: Server,
        options: ConnectOptions,
    ) -> Result<Arc<Connection>, ConnectError> {
        if self.inner.shut.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ConnectError::ShutDown);
        }
        {
            let mut slots = lock(&self.inner.slots);
            if slots.contains_key(name) {
                return Err(ConnectError::NameTaken(name.into()));
            }
            slots.insert(
                name.into(),
                Slot {
                    server: server.clone(),
                    options: options.clone(),
                    state: State::Crashed {
                        spent: 0,
                        why: Ended::Disconnected,
                    },
                    generation: 0,
                    reconnecting: Arc::default(),
                },
            );
        }
        // Frees the name if this future is dropped before it is connected.
        let mut reservation = Reservation {
            inner: &self.inner,
            name,
            armed: true,
        };
        let result = self.start(name, &server, options, 0).await;
        match result {
            Ok(connection) => {
                reservation.armed = false;
                Ok(connection)
            }
            Err(error) => Err(error),
        }
    }

    /// Adopts a server the caller spawned with corral (see
    /// [`Connection::adopt`]). An adopted server is not reconnected.
    ///
    /// # Errors
    /// As [`Manager::connect`].
    pub async fn adopt(
        &self,
        name: &str,
        child: corral::Child,
        options: ConnectOptions,
    ) -> Result<Arc<Connection>, ConnectError> {
        if self.inner.shut.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ConnectError::ShutDown);
        }
        let mut options = options;
        options.reconnect.attempts = 0;
        {
            let mut slots = lock(&self.inner.slots);
            if slots.contains_key(name) {
                return Err(ConnectError::NameTaken(name.into()));
            }
            slots.insert(
                name.into(),
                Slot {
                    // Never used: the budget is zero.
                    server: Server::Stdio(corral::Command::new("/nonexistent/adopted")),
                    options: options.clone(),
                    state: State::Crashed {
                        spent: 0,
                        why: Ended::Disconnected,
                    },
                    generation: 0,
                    reconnecting: Arc::default(),
                },
            );
        }
        let mut reservation = Reservation {
            inner: &self.inner,
            name,
            armed: true,
        };
        let generation = self.next_generation(name);
        let on_end = self.on_end(name, generation);
        let connection =
            Arc::new(open(Launch::Adopt(child), options, &self.tasks, Some(on_end)).await?);
        self.install(name, generation, &connection, 0);
        reservation.armed = false;
        Ok(connection)
    }

    /// Calls a tool on `name`, reconnecting first if its server crashed
    /// (within the budget). Never retries the call itself.
    ///
    /// # Errors
    /// [`CallError`]; a connection that cannot be had is
    /// [`CallError::NotSent`] with the reason.
    ///
    /// # Cancel safety
    /// As [`Connection::call_tool`]; dropping it during a reconnect leaves
    /// the reconnect to the next caller.
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let connection = self.live(name).await.map_err(|error| CallError::NotSent {
            reason: error.to_string(),
        })?;
        connection.call_tool(tool, arguments, options).await
    }

    /// Lists the tools of `name` (reconnecting as [`Manager::call_tool`]).
    ///
    /// # Errors
    /// As [`Manager::call_tool`].
    pub async fn list_tools(
        &self,
        name: &str,
        options: &CallOptions,
    ) -> Result<Vec<Tool>, CallError> {
        let connection = self.live(name).await.map_err(|error| CallError::NotSent {
            reason: error.to_string(),
        })?;
        connection.list_tools(options).await
    }

    /// The live connection of `name`, reconnecting a crashed one within its
    /// budget (single-flight).
    ///
    /// # Errors
    /// [`ConnectError::Unknown`], [`ConnectError::Failed`], or the last
    /// attempt's error.
    pub async fn live(&self, name: &str) -> Result<Arc<Connection>, ConnectError> {
        loop {
            let (lock_, server, options) = {
                let slots = lock(&self.inner.slots);
                let slot = slots
                    .get(name)
                    .ok_or_else(|| ConnectError::Unknown(name.into()))?;
                match &slot.state {
                    State::Live(connection, ..) if connection.ended().is_none() => {
                        return Ok(connection.clone());
                    }
                    State::Live(..) => {}
                    State::Failed { attempts, last } => {
                        return Err(ConnectError::Failed {
                            attempts: *attempts,
                            last: last.clone(),
                        });
                    }
                    State::Crashed { .. } => {}
                }
                (
                    slot.reconnecting.clone(),
                    slot.server.clone(),
                    slot.options.clone(),
                )
            };
            // One sequence at a time; whoever waited re-reads the state.
            let Ok(_flight) = lock_.try_lock() else {
                let _ = lock_.lock().await;
                continue;
            };
            // Read the state without holding the lock across an await.
            let state = match lock(&self.inner.slots).get(name).map(|slot| &slot.state) {
                Some(State::Crashed { spent, why }) => Ok((*spent, why.to_string())),
                Some(State::Live(connection, ..)) => Err(Some(connection.clone())),
                _ => Err(None),
            };
            let (spent, why) = match state {
                Ok(state) => state,
                // The live connection is ending: wait for its teardown to
                // mark it crashed.
                Err(Some(connection)) => {
                    drop(_flight);
                    connection.closed().await;
                    self.crashed_if_current(name, &connection);
                    continue;
                }
                Err(None) => continue,
            };
            return self
                .reconnect_from(name, &server, options, spent, why)
                .await;
        }
    }

    /// Asks again for a connection whose reconnect budget is spent (or
    /// reconnects a crashed one now), with a fresh budget.
    ///
    /// # Errors
    /// As [`Manager::live`].
    pub async fn reconnect(&self, name: &str) -> Result<Arc<Connection>, ConnectError> {
        {
            let mut slots = lock(&self.inner.slots);
            let slot = slots
                .get_mut(name)
                .ok_or_else(|| ConnectError::Unknown(name.into()))?;
            if let State::Failed { last, .. } = &slot.state {
                slot.state = State::Crashed {
                    spent: 0,
                    why: Ended::ServerExited(last.clone()),
                };
            }
        }
        self.live(name).await
    }

    /// Spends the rest of the budget on attempts, with backoff before each.
    async fn reconnect_from(
        &self,
        name: &str,
        server: &Server,
        options: ConnectOptions,
        spent: u32,
        why: String,
    ) -> Result<Arc<Connection>, ConnectError> {
        let budget = options.reconnect.attempts;
        let mut spent = spent;
        let mut last = format!("{why}; no attempt left (Reconnect::attempts is {budget})");
        while spent < budget {
            sleep(backoff(&options.reconnect, spent)).await;
            spent += 1;
            self.set_state(
                name,
                State::Crashed {
                    spent,
                    why: Ended::Disconnected,
                },
            );
            match self.start(name, server, options.clone(), spent).await {
                Ok(connection) => return Ok(connection),
                Err(error) => {
                    tracing::info!(name, attempt = spent, %error, "reconnect attempt failed");
                    last = error.to_string();
                }
            }
        }
        self.set_state(
            name,
            State::Failed {
                attempts: spent,
                last: last.clone(),
            },
        );
        Err(ConnectError::Failed {
            attempts: spent,
            last,
        })
    }

    /// Opens one connection for `name` and installs it.
    async fn start(
        &self,
        name: &str,
        server: &Server,
        options: ConnectOptions,
        spent: u32,
    ) -> Result<Arc<Connection>, ConnectError> {
        let generation = self.next_generation(name);
        let on_end = self.on_end(name, generation);
        let launch = match server {
            Server::Stdio(command) => Launch::Spawn(command.clone()),
            Server::Http { url, options } => Launch::Http {
                url: url.clone(),
                options: options.clone(),
            },
        };
        let connection = Arc::new(open(launch, options, &self.tasks, Some(on_end)).await?);
        if !self.install(name, generation, &connection, spent) {
            // Disconnected or shut down meanwhile.
            connection.close_for(Ended::Disconnected).await;
            return Err(ConnectError::ShutDown);
        }
        Ok(connection)
    }

    fn next_generation(&self, name: &str) -> u64 {
        let mut slots = lock(&self.inner.slots);
        slots.get_mut(name).map_or(0, |slot| {
            slot.generation += 1;
            slot.generation
        })
    }

    /// Makes `connection` the live one of `name`; false if the name is gone.
    fn install(
        &self,
        name: &str,
        generation: u64,
        connection: &Arc<Connection>,
        spent: u32,
    ) -> bool {
        let mut slots = lock(&self.inner.slots);
        let shut = self.inner.shut.load(std::sync::atomic::Ordering::SeqCst);
        match slots.get_mut(name) {
            Some(slot) if slot.generation == generation && !shut => {
                slot.state = match connection.ended() {
                    // It died between its handshake and now: its teardown
                    // found the slot not live yet, so it is crashed here.
                    Some(why) => State::Crashed { spent, why },
                    None => State::Live(connection.clone(), Instant::now(), spent),
                };
                true
            }
            _ => false,
        }
    }

    /// Marks `name` crashed if `connection` (which ended) is still its live
    /// one, so no caller can spin on an ended connection.
    fn crashed_if_current(&self, name: &str, connection: &Arc<Connection>) {
        if let Some(slot) = lock(&self.inner.slots).get_mut(name)
            && let State::Live(live, _, spent) = &slot.state
            && Arc::ptr_eq(live, connection)
        {
            slot.state = State::Crashed {
                spent: *spent,
                why: connection.ended().unwrap_or(Ended::Dropped),
            };
        }
    }

    fn set_state(&self, name: &str, state: State) {
        if let Some(slot) = lock(&self.inner.slots).get_mut(name) {
            slot.state = state;
        }
    }

    /// What a connection's teardown does to its slot: a crash keeps the
    /// name for a reconnect (spending the budget unless the connection was
    /// stable); any other ending removes it.
    fn on_end(&self, name: &str, generation: u64) -> OnEnd {
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let name = name.to_owned();
        Box::new(move |teardown: &Teardown| {
            let Some(inner) = inner.upgrade() else { return };
            let mut slots = lock(&inner.slots);
            let Some(slot) = slots.get_mut(&name) else {
                return;
            };
            if slot.generation != generation {
                return;
            }
            let crashed = matches!(
                teardown.ended,
                Ended::ReadLoopEnded(_) | Ended::ServerExited(_) | Ended::WriteFailed(_)
            );
            match (&slot.state, crashed) {
                (State::Live(_, since, spent), true) => {
                    // A crash soon after the handshake keeps the budget
                    // spent so far; a stable connection earned a fresh one.
                    let spent = if since.elapsed() >= slot.options.reconnect.stable_after {
                        0
                    } else {
                        *spent
                    };
                    slot.state = State::Crashed {
                        spent,
                        why: teardown.ended.clone(),
                    };
                }
                (State::Live(..), false) => {
                    slots.remove(&name);
                }
                // A connection that never went live: its connect failed.
                _ => {}
            }
        })
    }

    /// Closes `name` and waits for its teardown; the name is free after.
    ///
    /// # Errors
    /// [`ConnectError::Unknown`] if there is no such name.
    ///
    /// # Cancel safety
    /// Cancel safe: the teardown runs in the connection's own task.
    pub async fn disconnect(&self, name: &str) -> Result<Option<Arc<Teardown>>, ConnectError> {
        let slot = lock(&self.inner.slots)
            .remove(name)
            .ok_or_else(|| ConnectError::Unknown(name.into()))?;
        Ok(match slot.state {
            State::Live(connection, ..) => connection.close_for(Ended::Disconnected).await,
            _ => None,
        })
    }

    /// Closes every connection and waits for every teardown; later connects
    /// are refused.
    ///
    /// # Cancel safety
    /// Cancel safe: each teardown runs in its connection's own task.
    pub async fn shutdown(&self) -> Vec<(String, Option<Arc<Teardown>>)> {
        self.inner
            .shut
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let slots: Vec<(String, Slot)> = lock(&self.inner.slots).drain().collect();
        let closing = slots.into_iter().map(|(name, slot)| async move {
            let teardown = match slot.state {
                State::Live(connection, ..) => connection.close_for(Ended::Shutdown).await,
                _ => None,
            };
            (name, teardown)
        });
        let mut done = Vec::new();
        for closing in closing {
            done.push(closing.await);
        }
        done
    }
}

/// Frees a reserved name when a connect is dropped before it finished.
struct Reservation<'a> {
    inner: &'a Arc<Inner>,
    name: &'a str,
    armed: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut slots = lock(&self.inner.slots);
            if matches!(
                slots.get(self.name).map(|slot| &slot.state),
                Some(State::Crashed { .. })
            ) {
                slots.remove(self.name);
            }
        }
    }
}

/// The backoff before attempt `spent + 1`: `backoff * 2^spent`, capped at
/// `max_backoff`, jittered down by up to half.
pub(crate) fn backoff(policy: &Reconnect, spent: u32) -> Duration {
    let full = policy
        .backoff
        .checked_mul(1u32.checked_shl(spent.min(16)).unwrap_or(u32::MAX))
        .unwrap_or(policy.max_backoff)
        .min(policy.max_backoff);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    // A cheap spread in [0, 1): the low bits of the clock, mixed.
    let mixed = u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    #[allow(clippy::cast_precision_loss)]
    let unit = mixed as f64 / (1u64 << 53) as f64;
    full.mul_f64(1.0 - unit / 2.0)
}

#[cfg(test)]
mod tests;
