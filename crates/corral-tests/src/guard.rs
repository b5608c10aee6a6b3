//! Killing what a test or bench started, by identity, also when it fails
//! half-way.

use std::{
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use crate::{proc::Proc, wait::wait_until};

/// How long [`kill_leftovers`] waits for what it killed to be gone.
pub const LEFTOVER_BOUND: Duration = Duration::from_secs(5);

/// SIGKILLs each of `procs` that is still alive (by identity, see
/// [`Proc::signal`]), then waits up to `bound` until none of them is alive
/// any more (zombies count as gone). Returns (killed, still alive). Never
/// panics.
pub fn kill_within(procs: &[Proc], bound: Duration) -> (usize, usize) {
    let killed = procs.iter().filter(|p| p.kill()).count();
    wait_until(bound, || procs.iter().all(|p| !p.is_alive()));
    (killed, crate::proc::count_alive(procs))
}

/// [`kill_within`] [`LEFTOVER_BOUND`].
pub fn kill_leftovers(procs: &[Proc]) -> (usize, usize) {
    kill_within(procs, LEFTOVER_BOUND)
}

/// Kills on drop, by identity, everything a test started that is still
/// alive: the direct child (if any, then reaped) and every process it was
/// told of ([`Guard::watch`], [`Extend`]).
#[derive(Debug, Default)]
pub struct Guard {
    pub procs: Vec<Proc>,
    pub child: Option<Child>,
}

impl Guard {
    /// Guards `child` (our unreaped child, so its identity is certain).
    pub fn new(child: Child) -> Self {
        let mut guard = Self::default();
        if let Some(me) = i32::try_from(child.id()).ok().and_then(Proc::of) {
            guard.procs.push(me);
        }
        guard.child = Some(child);
        guard
    }

    /// Guards `procs`.
    pub fn of(procs: impl IntoIterator<Item = Proc>) -> Self {
        let mut guard = Self::default();
        guard.extend(procs);
        guard
    }

    /// Also kill `proc` on drop.
    pub fn watch(&mut self, proc: Proc) {
        self.procs.push(proc);
    }

    /// The guarded child.
    ///
    /// # Panics
    /// If the guard holds none.
    pub fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("guard holds a child")
    }

    /// Waits for the child to exit, at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child().try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills what is still alive now; returns what was.
    pub fn kill_running(&mut self) -> Vec<Proc> {
        let running: Vec<Proc> = self.procs.iter().copied().filter(Proc::is_alive).collect();
        for proc in &running {
            proc.kill();
        }
        running
    }
}

impl Extend<Proc> for Guard {
    fn extend<I: IntoIterator<Item = Proc>>(&mut self, procs: I) {
        self.procs.extend(procs);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let (killed, alive) = kill_leftovers(&self.procs);
        if killed > 0 {
            eprintln!("  (guard: killed {killed} leftover processes by pidfd)");
        }
        if alive > 0 {
            eprintln!("  WARNING: {alive} processes still running after SIGKILL");
        }
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
    }
}

/// A child process killed and reaped on drop (our unreaped child: its pid
/// cannot have been reused).
#[derive(Debug)]
pub struct Owned(pub Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Owned {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Owned {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// An innocent process (`FIXTURE sleep 600`) unrelated to anything under
/// test, to check that nothing kills it. Killed with SIGKILL and reaped on
/// drop.
#[derive(Debug)]
pub struct Bystander {
    _child: Owned,
    proc: Proc,
}

impl Bystander {
    /// Starts the bystander, `fixture sleep 600` (stdin and stdout on
    /// /dev/null, stderr inherited).
    pub fn spawn(fixture: impl AsRef<Path>) -> Self {
        let child = Command::new(fixture.as_ref())
            .args(["sleep", "600"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning the bystander `fixture sleep 600`");
        let child = Owned(child);
        let pid = i32::try_from(child.id()).expect("pid fits in i32");
        let proc = Proc::of(pid)
            .unwrap_or_else(|| panic!("the bystander {pid} vanished right after spawning"));
        Self {
            _child: child,
            proc,
        }
    }

    /// The bystander's identity.
    pub fn proc(&self) -> Proc {
        self.proc
    }

    /// Whether the bystander is still alive (not a zombie).
    pub fn is_running(&self) -> bool {
        self.proc.is_alive()
    }
}
