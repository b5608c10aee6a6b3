//! The open HTTP connections, in two pools: nobody without the token takes
//! a place a client with it needs, and no client all the places another
//! needs.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio_util::sync::CancellationToken;

use super::HttpLimits;
use crate::serve::Principal;

/// The open connections, in two pools: the ones waiting for a request
/// that passes the gate (at most [`HttpLimits::waiting`], the oldest closed
/// first), and the admitted ones (at most [`HttpLimits::admitted`], and at
/// most `per_client` of one principal). Whoever lacks the token fills only
/// the first pool.
pub(super) struct Pools {
    limits: HttpLimits,
    per_client: usize,
    state: Mutex<PoolState>,
}

/// Why a request that passed the gate was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// The admitted pool is full.
    Full,
    /// Its principal holds `per_client` admitted connections already.
    Client(usize),
    /// The connection is being closed.
    Closing,
}

#[derive(Default)]
struct PoolState {
    /// Waiting connections by accept order, each with what closes it.
    waiting: BTreeMap<u64, CancellationToken>,
    /// Admitted connections, each with the principal it was admitted as.
    admitted: HashMap<u64, Principal>,
    /// How many admitted connections each principal holds.
    held: HashMap<Principal, usize>,
    next: u64,
}

/// One connection's place in the [`Pools`].
pub(super) struct Admission {
    id: u64,
    pools: Arc<Pools>,
    /// Cancelled when newer connections push this one out of the waiting
    /// pool.
    pub(super) closed: CancellationToken,
}

impl Pools {
    /// Pools within `limits`, where one principal holds at most
    /// `per_client` admitted connections.
    pub(super) fn new(limits: HttpLimits, per_client: usize) -> Self {
        Self {
            limits,
            per_client,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Every update is one step under the lock: nothing is half done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new connection, in the waiting pool; the oldest waiting one is
    /// closed when the pool is full.
    pub(super) fn enter(self: &Arc<Self>) -> Admission {
        let mut state = self.lock();
        while state.waiting.len() >= self.limits.waiting.max(1) {
            if let Some((_, oldest)) = state.waiting.pop_first() {
                oldest.cancel();
            }
        }
        let id = state.next;
        state.next += 1;
        let closed = CancellationToken::new();
        state.waiting.insert(id, closed.clone());
        Admission {
            id,
            pools: Arc::clone(self),
            closed,
        }
    }
}

impl Admission {
    /// Moves this connection to the admitted pool (a request on it passed
    /// the gate as `principal`); a connection already admitted stays, as
    /// whom it was admitted.
    pub(super) fn admit(&self, principal: &Principal) -> Result<(), Refused> {
        let mut state = self.pools.lock();
        if state.admitted.contains_key(&self.id) {
            return Ok(());
        }
        if state.admitted.len() >= self.pools.limits.admitted {
            return Err(Refused::Full);
        }
        let held = state.held.get(principal).copied().unwrap_or(0);
        if held >= self.pools.per_client {
            return Err(Refused::Client(held));
        }
        if state.waiting.remove(&self.id).is_none() {
            return Err(Refused::Closing);
        }
        state.admitted.insert(self.id, principal.clone());
        *state.held.entry(principal.clone()).or_default() += 1;
        Ok(())
    }

    pub(super) fn admitted(&self) -> bool {
        self.pools.lock().admitted.contains_key(&self.id)
    }

    /// The connection is closed: its place is free.
    pub(super) fn leave(&self) {
        let mut state = self.pools.lock();
        state.waiting.remove(&self.id);
        if let Some(principal) = state.admitted.remove(&self.id)
            && let Some(held) = state.held.get_mut(&principal)
        {
            *held -= 1;
            if *held == 0 {
                state.held.remove(&principal);
            }
        }
    }
}

#[cfg(test)]
mod tests;
