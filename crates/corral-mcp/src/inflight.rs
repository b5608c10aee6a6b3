//! Requests still waiting for their response, in both directions. Pure.
//!
//! A request is in flight from the moment the relay reads it until the relay
//! reads a response with the same id from the other side, or the sender
//! cancels it (`notifications/cancelled`: the spec says the receiver should
//! not answer, and a late answer is ignored). When the server dies, every
//! client request still in flight gets an error response from the relay.

use std::collections::HashMap;

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

/// The requests in flight, per sender.
#[derive(Debug, Default)]
pub struct InFlight {
    by_client: HashMap<Id, Pending>,
    by_server: HashMap<Id, Pending>,
    seq: u64,
}

impl InFlight {
    fn of(&mut self, sender: Side) -> &mut HashMap<Id, Pending> {
        match sender {
            Side::Client => &mut self.by_client,
            Side::Server => &mut self.by_server,
        }
    }

    /// Records a request sent by `sender`. Returns `false` if a request with
    /// the same id was already in flight from that side (the newer one
    /// replaces it: one response will clear the id).
    pub fn request(&mut self, sender: Side, id: Id, method: &str) -> bool {
        self.seq += 1;
        let pending = Pending {
            id: id.clone(),
            method: method.to_owned(),
            seq: self.seq,
        };
        self.of(sender).insert(id, pending).is_none()
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

    /// How many requests from `sender` are in flight.
    pub fn count(&self, sender: Side) -> usize {
        match sender {
            Side::Client => self.by_client.len(),
            Side::Server => self.by_server.len(),
        }
    }

    /// Removes and returns the requests in flight from `sender`, oldest
    /// first.
    pub fn take(&mut self, sender: Side) -> Vec<Pending> {
        let mut pending: Vec<Pending> = self.of(sender).drain().map(|(_, p)| p).collect();
        pending.sort_by_key(|p| p.seq);
        pending
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
}
