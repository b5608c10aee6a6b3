//! A leaf frozen (`cgroup.freeze`) for the length of a signal step.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

/// How long a leaf is given to report itself frozen (`frozen 1` in
/// `cgroup.events`): a member in an uninterruptible sleep delays it.
const FREEZE_BOUND: Duration = Duration::from_millis(100);

/// How much longer the `slow-frozen-look` fault holds the leaf frozen.
const SLOW_LOOK: Duration = Duration::from_millis(300);

/// The leaf frozen (`cgroup.freeze`) for the length of a signal step, thawed
/// on drop. While it is frozen no member runs: none forks, none exits (which
/// would cut its children's parent links), none moves a child out of the
/// leaf, so one look at the leaf and the members' children is the whole
/// tree until the signal is sent. A kernel without `cgroup.freeze`
/// (before 5.2), a write refused, or a member that does not freeze within
/// [`FREEZE_BOUND`] leaves the step as it was without the freeze: signals
/// still go by identity, and the members still running are what may fork
/// meanwhile.
pub(super) struct Frozen {
    path: PathBuf,
    written: bool,
}

impl Frozen {
    pub(super) fn freeze(path: &Path) -> Self {
        let path = path.to_owned();
        // Frozen by someone else already: left as it is, never thawed here.
        if fs::read_to_string(path.join("cgroup.freeze")).is_ok_and(|v| v.trim() == "1") {
            return Self {
                path,
                written: false,
            };
        }
        if let Err(error) = fs::write(path.join("cgroup.freeze"), b"1") {
            tracing::debug!(path = %path.display(), %error, "cgroup.freeze refused");
            return Self {
                path,
                written: false,
            };
        }
        let frozen = || {
            fs::read_to_string(path.join("cgroup.events"))
                .is_ok_and(|events| events.lines().any(|line| line.trim() == "frozen 1"))
        };
        let until = std::time::Instant::now() + FREEZE_BOUND;
        while !frozen() {
            if std::time::Instant::now() >= until {
                tracing::warn!(path = %path.display(), "the leaf did not freeze in time");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if crate::fault::active("slow-frozen-look") {
            std::thread::sleep(SLOW_LOOK);
        }
        Self {
            path,
            written: true,
        }
    }
}

impl Frozen {
    /// Whether a freeze this step wrote was undone before its end (a
    /// process that may write the leaf's `cgroup.freeze`: root, or the same
    /// user in a delegated subtree).
    pub(super) fn undone(&self) -> bool {
        self.written
            && fs::read_to_string(self.path.join("cgroup.freeze")).is_ok_and(|v| v.trim() == "0")
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if self.written
            && let Err(error) = fs::write(self.path.join("cgroup.freeze"), b"0")
        {
            tracing::warn!(path = %self.path.display(), %error, "thawing the leaf failed");
        }
    }
}
