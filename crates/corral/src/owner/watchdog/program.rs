//! Which program is the watchdog: one named by [`set_executable`] (from
//! [`Settings`](crate::settings::Settings)) or
//! `$CORRAL_WATCHDOG`, or this program if it calls [`hook`] first in `main`.

use std::{
    path::PathBuf,
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use super::{helper, state::lock};
use crate::sys;

/// The argument that makes a hooked program run as the watchdog.
pub const HOOK_ARG: &str = "__corral-watchdog";

static HOOKED: AtomicBool = AtomicBool::new(false);
static EXECUTABLE: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Call first thing in `main` of a program that uses corral:
///
/// ```no_run
/// corral::watchdog::hook();
/// // ... the rest of `main`
/// ```
///
/// When the program was started as corral's watchdog (with [`HOOK_ARG`]), this
/// runs the watchdog and never returns. Otherwise it records that this
/// executable can serve as its own watchdog, and returns at once.
pub fn hook() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == HOOK_ARG)
    {
        helper::run();
    }
    HOOKED.store(true, Ordering::SeqCst);
}

/// Uses this program (which must call [`hook`] in its `main`, or be the
/// `corral` command) as the watchdog: what
/// [`Settings::watchdog_executable`](crate::settings::Settings::watchdog_executable)
/// applies.
pub(crate) fn set_executable(path: impl Into<PathBuf>) {
    *lock(&EXECUTABLE) = Some(path.into());
}

/// The watchdog executable, or why there is none. In this order:
/// the one [`Settings::watchdog_executable`](crate::settings::Settings::watchdog_executable)
/// named, then `$CORRAL_WATCHDOG` (which must be an absolute
/// path: a relative one would be looked up in whatever directory or `PATH`
/// the helper happens to start with), then this program if it called
/// [`hook`].
///
/// # Errors
/// A one-line reason, naming what to change.
pub fn executable() -> Result<PathBuf, String> {
    if let Some(path) = lock(&EXECUTABLE).clone() {
        return Ok(path);
    }
    if let Some(path) = from_env(std::env::var_os("CORRAL_WATCHDOG")) {
        return path;
    }
    if HOOKED.load(Ordering::SeqCst) {
        return sys::current_exe()
            .map(PathBuf::from)
            .map_err(|e| format!("cannot find this executable: {e}"));
    }
    Err(
        "no watchdog executable: call corral::watchdog::hook() first in main, \
         or set CORRAL_WATCHDOG to the corral binary"
            .to_owned(),
    )
}

/// What to execute for the watchdog `program`: this process's own
/// executable through `/proc/self/exe` when `program` is its path, so that a
/// watchdog started (or restarted) after that path was deleted or replaced
/// (an upgrade in place) is still this program, the one that speaks this
/// owner's protocol; any other program by its path.
pub(super) fn runnable(program: &std::path::Path) -> PathBuf {
    match sys::current_exe() {
        Ok(me) if me == program => PathBuf::from("/proc/self/exe"),
        _ => program.to_owned(),
    }
}

/// `$CORRAL_WATCHDOG`, if set: an absolute path, or why it is refused.
fn from_env(value: Option<std::ffi::OsString>) -> Option<Result<PathBuf, String>> {
    let path = PathBuf::from(value.filter(|p| !p.is_empty())?);
    Some(if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "CORRAL_WATCHDOG={} is not an absolute path: set it to the full path \
             of the corral binary (e.g. \"$(command -v corral)\") or unset it",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn corral_watchdog_must_be_absolute() {
        assert_eq!(from_env(None), None);
        assert_eq!(from_env(Some("".into())), None);
        assert_eq!(
            from_env(Some("/usr/bin/corral".into())),
            Some(Ok(PathBuf::from("/usr/bin/corral")))
        );
        for relative in ["corral", "./corral", "bin/corral"] {
            let refused = from_env(Some(relative.into())).expect("set");
            let reason = refused.expect_err(relative);
            assert!(reason.contains("CORRAL_WATCHDOG") && reason.contains("absolute"));
        }
    }
}
