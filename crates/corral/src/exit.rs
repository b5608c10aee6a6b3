//! How the leader process itself ended: a shared word of the outcome and the
//! system layer that reads it.

use serde::Serialize;

use crate::signal::Signal;

/// How the leader process itself ended ([`Finished::leader`](crate::Finished::leader)).
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use corral::{Exit, Signal};
/// let finished = corral::Command::new("sh").args(["-c", "kill -TERM $$"]).run().await?;
/// assert_eq!(finished.leader, Some(Exit::Signal(Signal::TERM)));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It died of this signal.
    Signal(Signal),
}
