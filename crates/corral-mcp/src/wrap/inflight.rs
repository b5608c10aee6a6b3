//! Requests still waiting for their response, in both directions. Pure.
//!
//! A request is in flight from the moment the relay reads it until the relay
//! reads a response with the same id from the other side, or the sender
//! cancels it (`notifications/cancelled`: the spec says the receiver should
//! not answer, and a late answer is ignored). When the server dies, every
//! client request still in flight gets an error response from the relay.
//!
//! The table is capped at [`MAX_IN_FLIGHT`] requests per side: a peer that
//! sends requests and never sees them answered (or a hostile one) cannot
//! grow the relay's memory without bound. Past the cap the *oldest* request
//! is forgotten: a request that old is the one most likely abandoned by its
//! sender, while the newest are the ones a live client still waits for. A
//! forgotten request's late response is forwarded all the same (as
//! [`Matched::Unknown`]); what it loses is the relay's error answer if the
//! server dies.

use std::collections::{BTreeMap, HashMap};

use crate::message::Id;

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The MCP client (our standard input).
    Client,
    /// The MCP server (its standard output).
    Server,
}

impl Side {
    /// The other side.
    pub fn peer(self) -> Self {
        match self {
            Self::Client => Self::Server,
            Self::Server => Self::Client,
        }
    }

    /// `client` or `server`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
        }
    }
}

/// A request waiting for its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The request id.
    pub id: Id,
    /// The request's method.
    pub method: String,
    /// Arrival order, for answering in order.
    seq: u64,
}

/// What a response matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matched {
    /// A request in flight, now answered.
    Request,
    /// No request in flight with that id (a late answer to a cancelled
    /// request, or a peer's mistake). Forwarded all the same.
    Unknown,
}

/// How many requests per side the table tracks at most; past it the oldest
/// is forgotten. Far above what a client keeps open (one per tool call in
/// progress), small enough that a flood costs a few hundred KiB.
pub const MAX_IN_FLIGHT: usize = 4096;

/// The requests in flight from one side: by id, and in arrival order.
#[derive(Debug, Default)]
struct Table {
    by_id: HashMap<Id, Pending>,
    /// Arrival number to id, oldest first: what to forget past the cap.
    order: BTreeMap<u64, Id>,
}

impl Table {
    fn remove(&mut self, id: &Id) -> Option<Pending> {
        let pending = self.by_id.remove(id)?;
        self.order.remove(&pending.seq);
        Some(pending)
    }
}

/// The requests in flight, per sender.
#[derive(Debug)]
pub struct InFlight {
    by_client: Table,
    by_server: Table,
    seq: u64,
    cap: usize,
    forgotten: u64,
}

impl Default for InFlight {
    fn default() -> Self {
        Self::with_cap(MAX_IN_FLIGHT)
    }
}

impl InFlight {
    /// A table tracking at most `cap` requests per side (at least one).
    pub fn with_cap(cap: usize) -> Self {
        Self {
            by_client: Table::default(),
            by_server: Table::default(),
            seq: 0,
            cap: cap.max(1),
            forgotten: 0,
        }
    }

    fn of(&mut self, sender: Side) -> &mut Table {
        match sender {
            Side::Client => &mut self.by_client,
            Side::Server => &mut self.by_server,
        }
    }

    /// Records a request sent by `sender`. Returns `false` if a request with
    /// the same id was already in flight from that side (the newer one
    /// replaces it: one response will clear the id). At the cap, the oldest
    /// request of that side is forgotten first (see [`InFlight::forgotten`]).
    pub fn request(&mut self, sender: Side, id: Id, method: &str) -> bool {
        self.seq += 1;
        let seq = self.seq;
        let cap = self.cap;
        let table = self.of(sender);
        let fresh = table.remove(&id).is_none();
        let mut forgotten = 0;
        while table.by_id.len() >= cap {
            let Some((_, oldest)) = table.order.pop_first() else {
                break;
            };
            table.by_id.remove(&oldest);
            forgotten += 1;
        }
        table.order.insert(seq, id.clone());
        let pending = Pending {
            id: id.clone(),
            method: method.to_owned(),
            seq,
        };
        table.by_id.insert(id, pending);
        self.forgotten += forgotten;
        fresh
    }

    /// How many requests were forgotten so far because the table was full.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Records a response sent by `responder`, which answers a request of
    /// the other side.
    pub fn response(&mut self, responder: Side, id: &Id) -> Matched {
        match self.of(responder.peer()).remove(id) {
            Some(_) => Matched::Request,
            None => Matched::Unknown,
        }
    }

    /// Records that `sender` cancelled its request `id`. Returns whether it
    /// was in flight.
    pub fn cancel(&mut self, sender: Side, id: &Id) -> bool {
        self.of(sender).remove(id).is_some()
    }

    #[cfg(test)]
    /// How many requests from `sender` are in flight.
    pub fn count(&self, sender: Side) -> usize {
        match sender {
            Side::Client => self.by_client.by_id.len(),
            Side::Server => self.by_server.by_id.len(),
        }
    }

    /// Removes and returns the requests in flight from `sender`, oldest
    /// first.
    pub fn take(&mut self, sender: Side) -> Vec<Pending> {
        let table = std::mem::take(self.of(sender));
        let mut by_id = table.by_id;
        table
            .order
            .into_values()
            .filter_map(|id| by_id.remove(&id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: i128) -> Id {
        Id::Number(id)
    }

    #[test]
    fn a_response_from_the_other_side_clears_a_request() {
        let mut inflight = InFlight::default();
        assert!(inflight.request(Side::Client, n(1), "tools/call"));
        assert_eq!(inflight.count(Side::Client), 1);
        // The client answering its own id does not clear it.
        assert_eq!(inflight.response(Side::Client, &n(1)), Matched::Unknown);
        assert_eq!(inflight.response(Side::Server, &n(1)), Matched::Request);
        assert_eq!(inflight.count(Side::Client), 0);
        assert_eq!(inflight.response(Side::Server, &n(1)), Matched::Unknown);
    }

    #[test]
    fn both_directions_are_tracked_separately_even_with_equal_ids() {
        let mut inflight = InFlight::default();
        inflight.request(Side::Client, n(0), "tools/list");
        inflight.request(Side::Server, n(0), "sampling/createMessage");
        assert_eq!(inflight.response(Side::Client, &n(0)), Matched::Request);
        assert_eq!(inflight.count(Side::Server), 0);
        assert_eq!(inflight.count(Side::Client), 1);
    }

    #[test]
    fn string_and_number_ids_differ() {
        let mut inflight = InFlight::default();
        inflight.request(Side::Client, Id::String("1".into()), "a");
        assert_eq!(inflight.response(Side::Server, &n(1)), Matched::Unknown);
        assert_eq!(
            inflight.response(Side::Server, &Id::String("1".into())),
            Matched::Request
        );
    }

    #[test]
    fn a_cancelled_request_is_not_in_flight_any_more() {
        let mut inflight = InFlight::default();
        inflight.request(Side::Client, n(4), "tools/call");
        assert!(inflight.cancel(Side::Client, &n(4)));
        assert!(!inflight.cancel(Side::Client, &n(4)));
        assert!(inflight.take(Side::Client).is_empty());
        // Its late answer is unknown, and still forwarded by the relay.
        assert_eq!(inflight.response(Side::Server, &n(4)), Matched::Unknown);
    }

    #[test]
    fn a_reused_id_is_reported_and_tracked_once() {
        let mut inflight = InFlight::default();
        assert!(inflight.request(Side::Client, n(1), "a"));
        assert!(!inflight.request(Side::Client, n(1), "b"));
        assert_eq!(inflight.count(Side::Client), 1);
        assert_eq!(inflight.take(Side::Client)[0].method, "b");
    }

    #[test]
    fn take_returns_oldest_first_and_empties() {
        let mut inflight = InFlight::default();
        for id in [9, 3, 7, 1] {
            inflight.request(Side::Client, n(id), "m");
        }
        inflight.request(Side::Client, Id::String("s".into()), "m");
        let ids: Vec<Id> = inflight
            .take(Side::Client)
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, [n(9), n(3), n(7), n(1), Id::String("s".into())]);
        assert_eq!(inflight.count(Side::Client), 0);
    }

    /// A peer that floods requests never answered cannot grow the table past
    /// the cap: the oldest are forgotten, the newest kept, the other side's
    /// table untouched.
    #[test]
    fn the_table_is_capped_and_forgets_the_oldest() {
        let mut inflight = InFlight::default();
        inflight.request(Side::Server, n(-1), "sampling/createMessage");
        let flood = MAX_IN_FLIGHT as i128 * 3;
        for id in 0..flood {
            inflight.request(Side::Client, n(id), "tools/call");
        }
        assert_eq!(inflight.count(Side::Client), MAX_IN_FLIGHT);
        assert_eq!(
            inflight.forgotten(),
            (flood as usize - MAX_IN_FLIGHT) as u64
        );
        assert_eq!(inflight.response(Side::Server, &n(0)), Matched::Unknown);
        assert_eq!(
            inflight.response(Side::Server, &n(flood - 1)),
            Matched::Request
        );
        assert_eq!(inflight.count(Side::Server), 1);
        let kept = inflight.take(Side::Client);
        assert_eq!(kept.len(), MAX_IN_FLIGHT - 1);
        assert_eq!(kept[0].id, n(flood - MAX_IN_FLIGHT as i128));
    }

    #[test]
    fn a_reused_id_at_the_cap_forgets_nothing() {
        let mut inflight = InFlight::with_cap(2);
        inflight.request(Side::Client, n(1), "a");
        inflight.request(Side::Client, n(2), "b");
        assert!(!inflight.request(Side::Client, n(2), "c"));
        assert_eq!(inflight.forgotten(), 0);
        let ids: Vec<Id> = inflight
            .take(Side::Client)
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, [n(1), n(2)]);
    }
}
