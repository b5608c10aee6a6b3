//! Reconnecting a crashed server: lazy, single-flight, within a budget.
//!
//! A call to a name whose server crashed starts one attempt sequence under
//! the slot's flight lock (concurrent callers wait for it, then read the
//! new state): a capped, jittered backoff before each attempt, at most
//! [`Reconnect::attempts`] spawns. When the budget is spent the name is
//! reported failed ([`ConnectError::Failed`]) until [`Manager::reconnect`]
//! is asked. The budget refills only when a connection lived
//! [`Reconnect::stable_after`] before it crashed, so a server that dies right
//! after every handshake cannot make the runtime spawn more than the first
//! server plus the cap. Calls in flight at a crash end in
//! `CallError::OutcomeUnknown`; the runtime never sends them again. A
//! sequence stops at once when the manager shuts down or the slot is
//! replaced.

use std::sync::Arc;

use tokio::time::sleep;

use super::{Manager, Server, State};
use crate::client::{
    connection::Connection,
    options::{ConnectOptions, backoff},
    outcome::{ConnectError, Ended},
    shared::lock,
};

/// What `live` found for a name.
enum Found {
    Live(Arc<Connection>),
    /// A live connection that ended: wait for its teardown.
    Ending(Arc<Connection>),
    /// Wait for the flight lock, then look again.
    Busy(Arc<tokio::sync::Mutex<()>>),
}

impl Manager {
    /// The live connection of `name`, reconnecting a crashed one within its
    /// budget (single-flight); waits for a connect of `name` under way.
    ///
    /// # Errors
    /// [`ConnectError::Unknown`], [`ConnectError::Failed`], or the last
    /// attempt's error.
    pub async fn live(&self, name: &str) -> Result<Arc<Connection>, ConnectError> {
        loop {
            match self.find(name)? {
                Found::Live(connection) => return Ok(connection),
                Found::Ending(connection) => {
                    connection.closed().await;
                    self.crashed_if_current(name, &connection);
                }
                Found::Busy(flight) => {
                    // One connect or sequence at a time; whoever waited
                    // looks again.
                    let Ok(_flight) = flight.try_lock() else {
                        drop(flight.lock().await);
                        continue;
                    };
                    let crashed = {
                        let slots = lock(&self.inner.slots);
                        match slots.get(name) {
                            Some(slot) if Arc::ptr_eq(&slot.flight, &flight) => match &slot.state {
                                State::Crashed { spent, why } => Some((
                                    slot.id,
                                    slot.server.clone(),
                                    slot.options.clone(),
                                    *spent,
                                    why.to_string(),
                                )),
                                _ => None,
                            },
                            _ => None,
                        }
                    };
                    if let Some((slot, server, options, spent, why)) = crashed {
                        return self
                            .reconnect_from(name, slot, server, options, spent, why)
                            .await;
                    }
                    // Still connecting with nobody holding the flight: a
                    // connect that ended without installing or freeing the
                    // name (never expected); do not spin on it.
                    if lock(&self.inner.slots)
                        .get(name)
                        .is_some_and(|slot| matches!(slot.state, State::Connecting))
                    {
                        return Err(self.superseded(name));
                    }
                }
            }
        }
    }

    /// Reads what `name` is now.
    fn find(&self, name: &str) -> Result<Found, ConnectError> {
        let slots = lock(&self.inner.slots);
        let slot = slots
            .get(name)
            .ok_or_else(|| ConnectError::Unknown(name.into()))?;
        Ok(match &slot.state {
            State::Live(connection, ..) if connection.ended().is_none() => {
                Found::Live(connection.clone())
            }
            State::Live(connection, ..) => Found::Ending(connection.clone()),
            State::Failed { attempts, last } => {
                return Err(ConnectError::Failed {
                    attempts: *attempts,
                    last: last.clone(),
                });
            }
            State::Connecting | State::Crashed { .. } => Found::Busy(slot.flight.clone()),
        })
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

    /// Spends the rest of the budget on attempts, with backoff before each;
    /// stops at once on shutdown or when the slot was replaced.
    async fn reconnect_from(
        &self,
        name: &str,
        slot: u64,
        server: Option<Server>,
        options: ConnectOptions,
        spent: u32,
        why: String,
    ) -> Result<Arc<Connection>, ConnectError> {
        let budget = if server.is_some() {
            options.reconnect.attempts
        } else {
            0
        };
        let mut spent = spent;
        let mut last = format!("{why}; no attempt left (Reconnect::attempts is {budget})");
        while let Some(server) = server.as_ref().filter(|_| spent < budget) {
            tokio::select! {
                () = sleep(backoff(&options.reconnect, spent)) => {}
                () = self.inner.closing.cancelled() => return Err(ConnectError::ShutDown),
            }
            spent += 1;
            let counted = self.update(name, slot, |current| {
                current.state = State::Crashed {
                    spent,
                    why: Ended::ServerExited(last.clone()),
                };
            });
            if !counted {
                return Err(self.superseded(name));
            }
            match self.start(name, slot, server, options.clone(), spent).await {
                Ok(connection) => return Ok(connection),
                Err(error @ (ConnectError::ShutDown | ConnectError::Superseded(_))) => {
                    return Err(error);
                }
                Err(error) => {
                    tracing::info!(name, attempt = spent, %error, "reconnect attempt failed");
                    last = error.to_string();
                }
            }
        }
        let failed = ConnectError::Failed {
            attempts: spent,
            last: last.clone(),
        };
        if !self.update(name, slot, |current| {
            current.state = State::Failed {
                attempts: spent,
                last,
            };
        }) {
            return Err(self.superseded(name));
        }
        Err(failed)
    }
}
