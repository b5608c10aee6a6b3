//! Every process-wide setting of corral, in one place.
//!
//! corral keeps a few things per process rather than per [`Command`](crate::Command):
//! which program serves as the owner-death watchdog, whether this process
//! is a subreaper, where the crash ledger lives, and whether the first
//! spawn sweeps the ledger for trees a crashed earlier run left. A host
//! states them once, at start-up, before its first spawn:
//!
//! ```no_run
//! corral::watchdog::hook(); // first in `main`: this program can be its own watchdog
//! corral::settings::Settings::new()
//!     .ledger_dir("/run/my-agent/corral")
//!     .startup_sweep(false)
//!     .apply();
//! println!("{:?}", corral::settings::in_effect());
//! ```
//!
//! What else corral does to the process, without being asked, and where it
//! is documented:
//! - a constructor in `.init_array` records, before `main`, whether
//!   `SIGPIPE` was ignored by the parent
//!   ([`host::sigpipe_ignored_at_start`](crate::host::sigpipe_ignored_at_start));
//!   it reads a disposition and changes nothing;
//! - the first spawn starts the watchdog process (unless
//!   [`Command::watchdog`](crate::Command::watchdog) is off or there is no watchdog executable) and,
//!   unless turned off here, the start-up sweep on a thread of its own,
//!   bounded to 5 s;
//! - each spawn writes a record to the ledger directory (unless
//!   [`Command::ledger`](crate::Command::ledger) is off), removed when its tree is ended.
//!
//! Nothing else is global: every other setting is the [`Command`](crate::Command)'s, and
//! [`Command::spawn`](crate::Command::spawn) changes no signal disposition, mask or limit of this
//! process (those are [`host`](crate::host)'s functions, for a process
//! dedicated to supervision, called only by its program).

use std::path::PathBuf;

use crate::{
    contain,
    owner::{self, ledger, watchdog},
};

/// The process-wide settings to apply, each left as it is unless set.
///
/// The defaults, as in effect when nothing is applied:
/// - watchdog executable: `$CORRAL_WATCHDOG` (an absolute path), else this
///   program if it called [`watchdog::hook`] first in `main`, else none (the
///   owner-death guard is off, and every report says so);
/// - subreaper: not claimed ([`BackendChoice::Auto`](crate::BackendChoice)
///   falls back from cgroups to a process group, not to a subreaper);
/// - ledger directory: `$CORRAL_LEDGER_DIR`, else `$XDG_RUNTIME_DIR/corral`,
///   else `/run/corral` for root, else `$TMPDIR/corral-UID`;
/// - start-up sweep: on, unless `CORRAL_NO_STARTUP_SWEEP=1`.
///
/// ```
/// use corral::settings::{in_effect, Settings};
/// let dir = std::env::temp_dir().join("my-agent-ledger");
/// Settings::new()
///     .watchdog_executable("/usr/bin/corral")
///     .subreaper()
///     .ledger_dir(&dir)
///     .startup_sweep(false)
///     .apply();
/// let now = in_effect();
/// assert_eq!(now.watchdog_executable.as_deref(), Ok("/usr/bin/corral".as_ref()));
/// assert!(now.subreaper);
/// assert_eq!(now.ledger_dir, dir);
/// assert!(!now.startup_sweep);
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "nothing changes until `apply` is called"]
pub struct Settings {
    watchdog_executable: Option<PathBuf>,
    subreaper: bool,
    ledger_dir: Option<PathBuf>,
    startup_sweep: Option<bool>,
}

impl Settings {
    /// No change to any setting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `path` as the owner-death watchdog (a program that calls
    /// [`watchdog::hook`] first in `main`, or the `corral` command), before
    /// `$CORRAL_WATCHDOG` and a hooked program itself.
    pub fn watchdog_executable(mut self, path: impl Into<PathBuf>) -> Self {
        self.watchdog_executable = Some(path.into());
        self
    }

    /// Declares this process dedicated to supervision, which lets
    /// [`BackendChoice::Auto`](crate::BackendChoice::Auto) choose the
    /// subreaper backend (this process a child subreaper for its trees) when
    /// cgroups are not available. Cannot be taken back.
    ///
    /// A subreaper adopts *every* orphan below it, so it suits a process that
    /// does nothing but supervise (the `corral` command does this). Processes
    /// this process adopts while a subreaper-backed tree runs, and that started
    /// after the tree's leader, are treated as part of that tree, unless another
    /// live tree of this process claims them: its leader, a process of its group
    /// or its leaf cgroup, or a member its scans found. Other trees spawned
    /// meanwhile are left alone whatever their backend; an orphan that a
    /// group-backed tree never saw and that left its group (`setsid` and double
    /// fork: the group backend's documented hole) is indistinguishable from the
    /// subreaper tree's own, and is treated as such.
    pub fn subreaper(mut self) -> Self {
        self.subreaper = true;
        self
    }

    /// Keeps the crash ledger in `dir` (created if missing; refused at the
    /// spawn unless only this user and root can write it and the
    /// directories above it).
    pub fn ledger_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.ledger_dir = Some(dir.into());
        self
    }

    /// Whether the first spawn sweeps the ledger for trees a crashed earlier
    /// run of this executable left (default on). Only turning it off is
    /// kept: once off, it stays off.
    pub fn startup_sweep(mut self, on: bool) -> Self {
        self.startup_sweep = Some(on);
        self
    }

    /// Applies what was set. Call it before the first spawn: a tree already
    /// running keeps the ledger directory and watchdog it started with.
    pub fn apply(self) {
        if let Some(path) = self.watchdog_executable {
            watchdog::set_executable(path);
        }
        if self.subreaper {
            contain::claim_subreaper();
        }
        if let Some(dir) = self.ledger_dir {
            ledger::set_dir(dir);
        }
        if self.startup_sweep == Some(false) {
            owner::disable_startup_sweep();
        }
    }
}

/// The process-wide settings in effect now ([`in_effect`]).
///
/// ```
/// let now = corral::settings::in_effect();
/// assert!(!now.subreaper, "a process is no subreaper until it says so");
/// println!("ledger in {}, watchdog {:?}", now.ledger_dir.display(), now.watchdog_executable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InEffect {
    /// The watchdog executable, or why there is none (the reason names what
    /// to change).
    pub watchdog_executable: Result<PathBuf, String>,
    /// Whether this process claimed the subreaper role.
    pub subreaper: bool,
    /// The crash ledger's directory.
    pub ledger_dir: PathBuf,
    /// Whether the first spawn sweeps the ledger.
    pub startup_sweep: bool,
    /// Whether `SIGPIPE` was ignored when this program started (`None`:
    /// not recorded).
    pub sigpipe_ignored_at_start: Option<bool>,
}

/// The process-wide settings in effect now, defaults and environment
/// included.
///
/// ```
/// use corral::settings::{in_effect, Settings};
/// assert!(in_effect().startup_sweep || std::env::var_os("CORRAL_NO_STARTUP_SWEEP").is_some());
/// Settings::new().startup_sweep(false).apply();
/// assert!(!in_effect().startup_sweep);
/// ```
pub fn in_effect() -> InEffect {
    InEffect {
        watchdog_executable: watchdog::executable(),
        subreaper: contain::subreaper_claimed(),
        ledger_dir: ledger::dir(),
        startup_sweep: owner::startup_sweep_on(),
        sigpipe_ignored_at_start: crate::host::sigpipe_ignored_at_start(),
    }
}
