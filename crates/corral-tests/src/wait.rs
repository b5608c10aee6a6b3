//! Synchronising on a condition and a deadline, not on bare sleeps.

use std::time::{Duration, Instant};

/// How often the predicates are polled.
const POLL: Duration = Duration::from_millis(5);

/// Polls `predicate` every 5 ms until it holds (→ `true`) or `deadline` has
/// passed (→ `false`, after one last check). Blocks the thread: use
/// [`wait_until_async`] inside a runtime.
pub fn wait_until(deadline: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if predicate() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// [`wait_until`] for async code: sleeps on the runtime's timer between
/// polls.
pub async fn wait_until_async(deadline: Duration, mut predicate: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    while !predicate() {
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}
