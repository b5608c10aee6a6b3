use std::sync::Arc;

use super::*;

fn pools(waiting: usize, admitted: usize) -> Arc<Pools> {
    Arc::new(Pools::new(
        HttpLimits {
            waiting,
            admitted,
            ..HttpLimits::default()
        },
        admitted,
    ))
}

fn alice() -> Principal {
    Principal::new("alice")
}

#[test]
fn a_new_connection_beyond_the_waiting_pool_closes_the_oldest_waiting_one() {
    let pools = pools(2, 8);
    let first = pools.enter();
    let second = pools.enter();
    assert!(
        second.admit(&alice()).is_ok(),
        "an admitted one leaves the waiting pool"
    );
    let third = pools.enter();
    assert!(!first.closed.is_cancelled());
    let fourth = pools.enter();
    assert!(first.closed.is_cancelled(), "the oldest waiting one goes");
    assert!(
        !second.closed.is_cancelled(),
        "an admitted one is never pushed out"
    );
    assert!(!third.closed.is_cancelled() && !fourth.closed.is_cancelled());
    assert!(
        first.admit(&alice()).is_err(),
        "a closed connection is not admitted"
    );
}

#[test]
fn beyond_the_admitted_pool_a_request_is_refused_until_a_place_is_free() {
    let pools = pools(8, 1);
    let first = pools.enter();
    let second = pools.enter();
    assert!(first.admit(&alice()).is_ok());
    assert!(
        first.admit(&alice()).is_ok(),
        "a second request on an admitted connection"
    );
    assert_eq!(second.admit(&alice()), Err(Refused::Full));
    assert!(!second.closed.is_cancelled(), "it stays waiting");
    first.leave();
    assert!(second.admit(&alice()).is_ok());
}

#[test]
fn one_client_holds_at_most_its_share_of_the_admitted_pool() {
    let pools = Arc::new(Pools::new(
        HttpLimits {
            waiting: 8,
            admitted: 4,
            ..HttpLimits::default()
        },
        2,
    ));
    let bob = Principal::new("bob");
    let bobs: Vec<Admission> = (0..3).map(|_| pools.enter()).collect();
    assert!(bobs[0].admit(&bob).is_ok() && bobs[1].admit(&bob).is_ok());
    assert_eq!(bobs[2].admit(&bob), Err(Refused::Client(2)));
    let hers = pools.enter();
    assert!(
        hers.admit(&alice()).is_ok(),
        "alice gets a place beside bob's"
    );
    bobs[0].leave();
    assert!(bobs[2].admit(&bob).is_ok(), "bob's place is free again");
}
