//! The open HTTP connections, in two pools: nobody without the token takes
//! a place a client with it needs.

use std::{
    collections::{BTreeMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio_util::sync::CancellationToken;

use super::HttpLimits;

/// The open connections, in two pools: the ones waiting for a request
/// that passes the gate (at most [`HttpLimits::waiting`], the oldest closed
/// first), and the admitted ones (at most [`HttpLimits::admitted`]).
/// Whoever lacks the token fills only the first pool.
pub(super) struct Pools {
    limits: HttpLimits,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// Waiting connections by accept order, each with what closes it.
    waiting: BTreeMap<u64, CancellationToken>,
    admitted: HashSet<u64>,
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
    pub(super) fn new(limits: HttpLimits) -> Self {
        Self {
            limits,
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
    /// the gate). False when that pool is full or the connection is being
    /// closed.
    pub(super) fn admit(&self) -> bool {
        let mut state = self.pools.lock();
        if state.admitted.contains(&self.id) {
            return true;
        }
        if state.admitted.len() >= self.pools.limits.admitted
            || state.waiting.remove(&self.id).is_none()
        {
            return false;
        }
        state.admitted.insert(self.id);
        true
    }

    pub(super) fn admitted(&self) -> bool {
        self.pools.lock().admitted.contains(&self.id)
    }

    /// The connection is closed: its place is free.
    pub(super) fn leave(&self) {
        let mut state = self.pools.lock();
        state.waiting.remove(&self.id);
        state.admitted.remove(&self.id);
    }
}

#[cfg(test)]
mod tests;
