//! What the owner keeps of every live tree, shared with the writer thread,
//! so that a new or resynchronised helper can be told everything.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use super::protocol::{Message, line_of};
use crate::ledger::Record;

/// What the owner keeps per tree: enough to tell a new helper everything.
#[derive(Debug, Clone)]
pub(super) struct Watched {
    pub(super) record: Record,
    pub(super) ledger: PathBuf,
}

pub(super) type Shared = Arc<Mutex<HashMap<String, Watched>>>;

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The whole state as lines: [`Message::Reset`], then every tree.
pub(super) fn snapshot(watched: &HashMap<String, Watched>) -> Vec<u8> {
    let mut lines = line_of(&Message::Reset);
    for entry in watched.values() {
        lines.extend(line_of(&Message::Watch {
            record: Box::new(entry.record.clone()),
            ledger: entry.ledger.clone(),
        }));
    }
    lines
}
