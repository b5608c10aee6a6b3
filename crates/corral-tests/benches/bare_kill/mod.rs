//! What the kill benches share: reading the fixture's readiness line, and the
//! bare `cgroup.kill` of a `tree-ignore N` tree (no library: the kernel's own
//! cost of killing the tree, the floor the backends are measured against).

use std::{
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::Stdio,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use corral_tests::{Guard, Proc, bench::leaf_parent, proc::count_alive, try_parse_ready};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Bounds reading the readiness line (1000 forks on a loaded 2-core VM).
pub const READY_BOUND: Duration = Duration::from_secs(60);
/// Bounds waiting for a tree to be gone after the kill.
pub const WAIT_BOUND: Duration = Duration::from_secs(30);

/// Reads the fixture's readiness line: the identities of the tree.
pub async fn read_ready(stdout: impl AsyncRead + Unpin) -> Result<Vec<Proc>, String> {
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(READY_BOUND, lines.next_line())
        .await
        .map_err(|_| "no readiness line in time".to_owned())?
        .map_err(|e| format!("reading the readiness line: {e}"))?
        .ok_or("the fixture closed stdout without a readiness line")?;
    try_parse_ready(&line).ok_or_else(|| format!("bad readiness line: {line:?}"))
}

/// One bare `cgroup.kill`.
pub struct Bare {
    /// From the write to `cgroup.kill` to `populated 0`.
    pub cleanup: Duration,
    /// ... to the leader reaped.
    pub wall: Duration,
    /// Processes of the tree running at `populated 0`.
    pub alive_at_return: usize,
    /// The tree (kills on drop whatever of it still runs).
    pub guard: Guard,
}

/// The tree `fixture tree-ignore n` in a leaf cgroup of our own (joined
/// before exec), killed with a bare `cgroup.kill`, empty when
/// `cgroup.events` says `populated 0` (woken by `POLLPRI`, no inotify).
pub async fn bare_cgroup_kill(fixture: &Path, n: usize) -> Result<Bare, String> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let parent = leaf_parent().ok_or("no cgroup v2 hierarchy")?;
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let leaf = parent.join(format!("corral-bench-{}-k{seq}", std::process::id()));
    std::fs::create_dir(&leaf).map_err(|e| format!("mkdir {}: {e}", leaf.display()))?;
    // Removes the leaf however this function ends (it is empty by then, or
    // the guard below has killed the tree).
    struct Leaf(PathBuf);
    impl Drop for Leaf {
        fn drop(&mut self) {
            for _ in 0..200 {
                if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            eprintln!("  WARNING: could not remove {}", self.0.display());
        }
    }
    let mut guard = Guard::default();
    let leaf = Leaf(leaf);
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(leaf.0.join("cgroup.procs"))
        .map_err(|e| format!("open cgroup.procs: {e}"))?;
    let procs_fd = procs.as_raw_fd();
    let mut command = tokio::process::Command::new(fixture);
    command
        .args(["tree-ignore".to_owned(), n.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // SAFETY: the hook makes one async-signal-safe `write` of a static
    // buffer to a descriptor that stays open for the whole spawn.
    unsafe {
        command.pre_exec(move || {
            if libc::write(procs_fd, b"0".as_ptr().cast(), 1) == 1 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = command.spawn().map_err(|e| format!("spawn: {e}"))?;
    drop(procs);
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    guard.procs = read_ready(stdout).await?;
    if guard.procs.len() != n + 1 {
        return Err(format!(
            "expected {} processes, {} are running",
            n + 1,
            guard.procs.len()
        ));
    }
    let events = std::fs::File::open(leaf.0.join("cgroup.events"))
        .map_err(|e| format!("open cgroup.events: {e}"))?;
    let populated = |file: &std::fs::File| -> Result<bool, String> {
        let mut buf = [0u8; 128];
        let got = rustix::io::pread(file, &mut buf, 0).map_err(|e| format!("read: {e}"))?;
        Ok(!String::from_utf8_lossy(&buf[..got]).contains("populated 0"))
    };
    let started = Instant::now();
    std::fs::write(leaf.0.join("cgroup.kill"), b"1").map_err(|e| format!("cgroup.kill: {e}"))?;
    let deadline = started + WAIT_BOUND;
    while populated(&events)? {
        if Instant::now() >= deadline {
            return Err("the leaf did not empty in time".to_owned());
        }
        let mut fds = [rustix::event::PollFd::new(
            &events,
            rustix::event::PollFlags::PRI,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    }
    let cleanup = started.elapsed();
    let alive_at_return = count_alive(&guard.procs);
    let _ = tokio::time::timeout(WAIT_BOUND, child.wait()).await;
    let wall = started.elapsed();
    Ok(Bare {
        cleanup,
        wall,
        alive_at_return,
        guard,
    })
}
