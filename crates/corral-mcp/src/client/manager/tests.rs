//! The reconnect backoff: doubling, capped, jittered down by at most half.

use std::time::Duration;

use super::backoff;
use crate::client::options::Reconnect;

#[test]
fn the_backoff_doubles_up_to_its_cap_and_is_jittered_down_by_at_most_half() {
    let policy = Reconnect {
        attempts: 3,
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(1000),
        stable_after: Duration::from_secs(60),
    };
    for (spent, full) in [
        (0, 100),
        (1, 200),
        (2, 400),
        (3, 800),
        (4, 1000),
        (30, 1000),
        (u32::MAX, 1000),
    ] {
        for _ in 0..50 {
            let wait = backoff(&policy, spent);
            let full = Duration::from_millis(full);
            assert!(wait <= full, "attempt {spent}: {wait:?} over {full:?}");
            assert!(
                wait >= full / 2,
                "attempt {spent}: {wait:?} under half of {full:?}"
            );
        }
    }
}

#[test]
fn a_huge_backoff_does_not_overflow() {
    let policy = Reconnect {
        attempts: 3,
        backoff: Duration::MAX,
        max_backoff: Duration::MAX,
        stable_after: Duration::MAX,
    };
    assert!(backoff(&policy, 5) >= Duration::MAX / 2);
}
