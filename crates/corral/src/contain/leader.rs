//! The leader: our direct child, held by a pidfd.

use std::os::fd::OwnedFd;

/// The leader: our direct child, held by a pidfd and not reaped until the
/// cleanup is over, so its pid and process group id cannot be reused.
#[derive(Debug)]
pub(crate) struct Leader {
    pub(crate) pid: i32,
    pub(crate) start_time: u64,
    pub(crate) pidfd: tokio::io::unix::AsyncFd<OwnedFd>,
}
