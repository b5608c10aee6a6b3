//! Who this fixture is and what it started: `--spawn-log`, `--helpers` and
//! the `--pids` file.

use std::ffi::CStr;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use corral_tests::proc::Proc;
use serde_json::{Value, json};

use crate::sys;

/// How long the helpers sleep (`/bin/sleep 3600`).
const HELPER_SECS: &CStr = c"3600";

/// A helper process: what it is for, and its identity.
#[derive(Debug, Clone, Copy)]
pub struct Helper {
    pub role: &'static str,
    pub proc: Proc,
}

/// Appends `PID START_TIME\n` (this process's identity) to `path` in one
/// `O_APPEND` write.
pub fn log_spawn(path: &Path) -> io::Result<()> {
    let me = Proc::of(std::process::id().cast_signed())
        .ok_or_else(|| io::Error::other("cannot read this process's /proc/self/stat"))?;
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    file.write_all(format!("{} {}\n", me.pid, me.start_time).as_bytes())
}

/// Starts the three helpers that escape a naive kill of the server. Call it
/// before starting any thread (it forks).
///
/// - `setsid_child`: `/bin/sleep` in a session of its own that keeps the
///   server's stdout (and stderr) open;
/// - `term_ignorer`: `/bin/sleep` that ignores SIGTERM;
/// - `daemon`: a double-forked `/bin/sleep` (setsid between the forks,
///   stdio on /dev/null).
pub fn start_helpers() -> io::Result<Vec<Helper>> {
    let secs = HELPER_SECS.to_str().unwrap_or("3600");
    let setsid_child = sys::in_new_session(Command::new("/bin/sleep").arg(secs))
        .stdin(Stdio::null())
        .spawn()?;
    let term_ignorer = sys::ignoring_sigterm(Command::new("/bin/sleep").arg(secs))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?;
    let daemon = sys::double_forked_daemon(HELPER_SECS)?;
    let pids = [
        ("setsid_child", child_pid(setsid_child.id())),
        ("term_ignorer", child_pid(term_ignorer.id())),
        ("daemon", daemon),
    ];
    // The `Child` handles are dropped without waiting: the helpers stay.
    pids.into_iter()
        .map(|(role, pid)| {
            let proc = Proc::of(pid).ok_or_else(|| {
                io::Error::other(format!("helper {role} (pid {pid}) vanished at once"))
            })?;
            Ok(Helper { role, proc })
        })
        .collect()
}

fn child_pid(id: u32) -> i32 {
    i32::try_from(id).unwrap_or(-1)
}

/// Writes `{"server":{..},"helpers":[{..},..]}` to `path` atomically
/// (`PATH.tmp`, then a rename).
pub fn write_pids(path: &Path, helpers: &[Helper]) -> io::Result<()> {
    let me = child_pid(std::process::id());
    let server = Proc::of(me).ok_or_else(|| io::Error::other("/proc/self/stat unreadable"))?;
    let doc = json!({
        "server": identity(server),
        "helpers": helpers.iter().map(|h| {
            let mut v = identity(h.proc);
            v["role"] = json!(h.role);
            v
        }).collect::<Vec<_>>(),
    });
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, doc.to_string())?;
    std::fs::rename(&tmp, path)
}

fn identity(proc: Proc) -> Value {
    json!({ "pid": proc.pid, "start_time": proc.start_time })
}
