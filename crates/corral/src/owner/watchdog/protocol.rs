//! The wire protocol from the owner to its helper: one JSON line per
//! [`Message`].

use std::{collections::HashSet, path::PathBuf};

use serde::{Deserialize, Serialize};

use crate::{identity::Identity, ledger::Record};

/// One message to the helper, a JSON line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Message {
    /// Kill this tree if the owner dies; remove its record from `ledger`.
    /// Sending again with the same id replaces the entry.
    Watch {
        record: Box<Record>,
        ledger: PathBuf,
    },
    /// The members of a scanned tree changed: only what changed is sent, and
    /// members that exited are dropped, so an update stays as small as the
    /// change whatever the size of the tree.
    Members {
        id: String,
        #[serde(default)]
        added: Vec<Identity>,
        #[serde(default)]
        removed: Vec<Identity>,
    },
    /// The tree is gone: forget it.
    Forget { id: String },
    /// Forget every tree: the whole state follows (after the owner had to
    /// drop messages, see [`QUEUE_MESSAGES`](super::client::QUEUE_MESSAGES)).
    Reset,
}

/// `message` as a JSON line.
pub(super) fn line_of(message: &Message) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// What changed from `old` to `new`: (added, removed).
pub(super) fn delta(old: &[Identity], new: &[Identity]) -> (Vec<Identity>, Vec<Identity>) {
    let before: HashSet<&Identity> = old.iter().collect();
    let after: HashSet<&Identity> = new.iter().collect();
    let added = new.iter().filter(|m| !before.contains(m)).copied();
    let removed = old.iter().filter(|m| !after.contains(m)).copied();
    (added.collect(), removed.collect())
}
