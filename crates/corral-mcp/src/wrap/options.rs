//! What `wrap` is asked to do, as plain data.

use std::{ffi::OsString, time::Duration};

use corral::BackendChoice;

use crate::frame::DEFAULT_MAX_FRAME_BYTES;

/// The default `--close-grace`: how long the server may take to exit after
/// its standard input closes.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// The default `--kill-after`: from `SIGTERM` to `SIGKILL`.
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(2);
/// The default `--final-bound`: how long to wait after `SIGKILL` before
/// reporting survivors.
pub const DEFAULT_FINAL_BOUND: Duration = Duration::from_secs(1);

/// Options of [`wrap`](crate::wrap); start from [`WrapOptions::new`].
///
/// ```
/// use std::time::Duration;
///
/// use corral_mcp::{DEFAULT_CLOSE_GRACE, WrapOptions};
///
/// let mut options = WrapOptions::new(["uvx", "mcp-server-fetch"]);
/// assert_eq!(options.command, ["uvx", "mcp-server-fetch"]);
/// assert_eq!(options.close_grace, DEFAULT_CLOSE_GRACE);
/// // A server that needs longer to save its state on the way out.
/// options.close_grace = Duration::from_secs(10);
/// options.limits = corral::Limits::new().max_memory(1 << 30);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WrapOptions {
    /// The server command and its arguments.
    pub command: Vec<OsString>,
    /// After the server's standard input is closed, how long it may take to
    /// exit by itself before its tree gets `SIGTERM`.
    pub close_grace: Duration,
    /// From `SIGTERM` to `SIGKILL`.
    pub kill_after: Duration,
    /// After `SIGKILL`, how long to wait before reporting survivors.
    pub final_bound: Duration,
    /// The longest frame relayed, in bytes (without its newline).
    pub max_frame_bytes: usize,
    /// How to contain the server's tree.
    pub backend: BackendChoice,
    /// Limits on the server's whole tree (see `corral::Limits`).
    pub limits: corral::Limits,
}

impl WrapOptions {
    /// The defaults for `command`: 2 s close grace, 2 s to `SIGKILL`, 1 s
    /// final bound, 16 MiB frames, the best backend.
    pub fn new<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            close_grace: DEFAULT_CLOSE_GRACE,
            kill_after: DEFAULT_KILL_AFTER,
            final_bound: DEFAULT_FINAL_BOUND,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            backend: BackendChoice::Auto,
            limits: corral::Limits::default(),
        }
    }
}
