use std::sync::Arc;

use super::*;

fn pools(waiting: usize, admitted: usize) -> Arc<Pools> {
    Arc::new(Pools::new(HttpLimits {
        waiting,
        admitted,
        ..HttpLimits::default()
    }))
}

#[test]
fn a_new_connection_beyond_the_waiting_pool_closes_the_oldest_waiting_one() {
    let pools = pools(2, 8);
    let first = pools.enter();
    let second = pools.enter();
    assert!(second.admit(), "an admitted one leaves the waiting pool");
    let third = pools.enter();
    assert!(!first.closed.is_cancelled());
    let fourth = pools.enter();
    assert!(first.closed.is_cancelled(), "the oldest waiting one goes");
    assert!(
        !second.closed.is_cancelled(),
        "an admitted one is never pushed out"
    );
    assert!(!third.closed.is_cancelled() && !fourth.closed.is_cancelled());
    assert!(!first.admit(), "a closed connection is not admitted");
}

#[test]
fn beyond_the_admitted_pool_a_request_is_refused_until_a_place_is_free() {
    let pools = pools(8, 1);
    let first = pools.enter();
    let second = pools.enter();
    assert!(first.admit());
    assert!(first.admit(), "a second request on an admitted connection");
    assert!(!second.admit());
    assert!(!second.closed.is_cancelled(), "it stays waiting");
    first.leave();
    assert!(second.admit());
}
