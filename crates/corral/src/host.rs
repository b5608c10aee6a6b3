//! Settings of the supervising process itself, for programs that dedicate a
//! process to supervision (the `corral` command).
//!
//! Each changes this process, so a library never calls them behind its
//! program's back; a supervisor's `main` does, at start-up, as `corral run`
//! does:
//!
//! ```
//! use std::os::{fd::AsRawFd, unix::fs::FileTypeExt};
//! use corral::{host, Signal};
//! // Refuse to start where the runtime could not open what it needs.
//! host::spare_descriptors(16)?;
//! // A parent's `trap '' CHLD` would let the kernel reap the command itself.
//! host::default_sigchld()?;
//! assert!(!host::is_ignored(Signal::CHLD)?);
//! // Not stopped by a command in the background reaching for the terminal,
//! // whose ignore the command itself does not inherit.
//! host::ignore(Signal::TTIN)?;
//! assert!(host::is_ignored(Signal::TTIN)?);
//! let mut command = corral::Command::new("vi");
//! command.default_signals([Signal::TTIN]);
//! // Pass on an ignored SIGPIPE, as the parent left it.
//! command.ignore_sigpipe(host::sigpipe_ignored_at_start() == Some(true));
//! // SIGRTMAX cannot be handled by tokio: keep it pending instead of fatal.
//! let max = host::highest_signal().expect("Linux has real-time signals");
//! assert_eq!(max.number(), Signal::MAX);
//! host::block(max)?;
//! // Every signal a handler may take: 1 to 64 but glibc's 32 and 33.
//! assert_eq!(host::all_signals().count(), 62);
//! // A descriptor handed to this process, kept from every program it runs.
//! let report = std::fs::File::open("/dev/null")?;
//! host::close_on_exec(report.as_raw_fd())?;
//! // Its own copy of it, to write to (a file, a pipe or a socket alike).
//! let mine = std::fs::File::from(host::adopt(report.as_raw_fd())?);
//! assert!(mine.metadata()?.file_type().is_char_device());
//! // End with the parent.
//! let parent = host::parent_pid();
//! assert_eq!(host::signal_on_parent_death(Signal::TERM, parent)?, host::ParentWatch::Armed);
//! // Give large freed buffers back to the kernel (glibc only).
//! assert_eq!(host::release_large_frees(1 << 20), cfg!(target_env = "gnu"));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::{io, os::fd::AsFd};

use crate::{signal::Signal, sys};

/// Whether `signal` is ignored by this process right now (as `nohup` leaves
/// `SIGHUP`, or a shell leaves `SIGINT` for background jobs). A supervisor
/// should leave such a signal ignored, so its command inherits that.
///
/// # Errors
/// If the disposition cannot be read (an invalid signal).
pub fn is_ignored(signal: Signal) -> io::Result<bool> {
    sys::is_ignored(signal)
}

/// Has the allocator give every freed block of at least `bytes` back to
/// the kernel at once (glibc's `mallopt(M_MMAP_THRESHOLD)`); `false` where
/// it cannot (another C library). For a long-running supervisor whose large
/// buffers come and go (`corral mcp serve`'s 12 MB answers): glibc's
/// default threshold rises to the size of the largest block freed, after
/// which blocks that size come from the heap and stay there once freed, so
/// the process's peak grows with what the allocator keeps, not with what it
/// holds (`docs/flakes.md` (28)).
pub fn release_large_frees(bytes: usize) -> bool {
    sys::fixed_mmap_threshold(bytes)
}

/// Sets `SIGCHLD` back to its default disposition (without `SA_NOCLDWAIT`).
/// A parent may leave it ignored (`trap '' CHLD` in a shell), which makes
/// the kernel reap children by itself; [`Command::spawn`](crate::Command::spawn)
/// then refuses to go on ([`Error::ChildrenAutoreaped`](crate::Error::ChildrenAutoreaped)).
/// A process dedicated to supervision calls this at start-up, as GNU
/// `timeout` does; a library never changes it behind its program's back.
///
/// # Errors
/// If the kernel refuses the change (it does not for `SIGCHLD`).
pub fn default_sigchld() -> io::Result<()> {
    sys::default_sigchld()
}

/// Whether `SIGPIPE` was ignored when this program started (`trap '' PIPE`
/// in the parent shell), as a constructor of this library recorded it before
/// `main`: Rust's runtime sets it to ignored before `main` runs, so a
/// disposition read later says nothing about the parent's. `None` if the
/// record is missing (a platform without `.init_array`). A supervisor passes
/// an ignored `SIGPIPE` on with [`Command::ignore_sigpipe`](crate::Command::ignore_sigpipe).
pub fn sigpipe_ignored_at_start() -> Option<bool> {
    sys::sigpipe_ignored_at_start()
}

/// Sets `signal`'s disposition in this process to "ignore": for a
/// supervisor that must not be stopped by `SIGTTIN` or `SIGTTOU` when its
/// command, in the background, reaches for the terminal (as GNU `timeout`
/// ignores them). Its command inherits that unless it is reset
/// ([`Command::default_signals`](crate::Command::default_signals)).
///
/// # Errors
/// If the kernel refuses the change (`SIGKILL`, `SIGSTOP`).
pub fn ignore(signal: Signal) -> io::Result<()> {
    sys::ignore(signal)
}

/// Blocks `signal` in the calling thread and every thread it starts later
/// (call it before any other thread exists): sent to this process, it stays
/// pending instead of acting. For a signal a supervisor must survive but
/// cannot handle ([`SignalWatch`] has no slot for `SIGRTMAX`). Programs it
/// spawns start with no signal blocked.
///
/// # Errors
/// If the signal cannot be blocked (`SIGKILL`, `SIGSTOP`).
pub fn block(signal: Signal) -> io::Result<()> {
    sys::block(signal)
}

/// The highest signal number (`SIGRTMAX`).
pub fn highest_signal() -> Option<Signal> {
    Signal::from_number(sys::sigrtmax())
}

/// Every signal this machine has, by number (1 to `SIGRTMAX`), the
/// real-time ones included, but those the C library keeps for itself
/// (32 and 33 under glibc: below `SIGRTMIN`), which no handler may take.
pub fn all_signals() -> impl Iterator<Item = Signal> {
    let reserved = 32..sys::sigrtmin();
    (1..=sys::sigrtmax())
        .filter(move |n| !reserved.contains(n))
        .filter_map(Signal::from_number)
}

/// Whether the parent was still alive once the parent-death signal was armed.
///
/// ```
/// use corral::host::{parent_pid, signal_on_parent_death, ParentWatch};
/// match signal_on_parent_death(corral::Signal::TERM, parent_pid())? {
///     ParentWatch::Armed => {} // SIGTERM comes when the parent dies
///     ParentWatch::AlreadyGone => panic!("the test runner is still there"),
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentWatch {
    /// Armed: `signal` arrives when the parent dies.
    Armed,
    /// The parent had already died (this process was re-parented): act as if
    /// the signal had arrived.
    AlreadyGone,
}

/// Asks the kernel to send `signal` to this process when its parent dies
/// (`PR_SET_PDEATHSIG`), then checks against `parent` (the parent pid read at
/// start-up) that the parent did not die before that took effect.
///
/// # Errors
/// If the kernel refuses the setting.
pub fn signal_on_parent_death(signal: Signal, parent: i32) -> io::Result<ParentWatch> {
    Ok(if sys::parent_death_signal(signal, parent)? {
        ParentWatch::Armed
    } else {
        ParentWatch::AlreadyGone
    })
}

/// Keeps descriptor `fd` (one this process was handed, e.g. `--report-fd N`)
/// from every program it executes from now on: sets close-on-exec. Call it
/// before anything is spawned or forked.
///
/// # Errors
/// If `fd` is not open.
pub fn close_on_exec(fd: i32) -> io::Result<()> {
    sys::set_cloexec(fd)
}

/// A descriptor of this process's own for descriptor `fd` that it was
/// handed (`--report-fd 3`): a close-on-exec duplicate, numbered 3 or
/// above, open on the same file, pipe or socket. For a front end that
/// forbids `unsafe` to write to what it was given; reopening
/// `/proc/self/fd/N` instead fails for a socket, which is what Node.js
/// hands a child for an extra `stdio: "pipe"`.
///
/// # Errors
/// `EBADF` if `fd` is not open; `EMFILE` if no descriptor is left.
pub fn adopt(fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    sys::dup_raw(fd)
}

/// Whether `count` more descriptors can be opened now (taken and given back
/// at once): for a front end to refuse, with a message, to start where its
/// runtime could not open what it needs (tokio panics when its signal
/// driver's socket pair cannot be made).
///
/// # Errors
/// `EMFILE` or `ENFILE` if they are not there.
pub fn spare_descriptors(count: usize) -> io::Result<()> {
    crate::sys::Reserve::take(count).map(drop)
}

/// This process's parent's pid, as read now.
pub fn parent_pid() -> i32 {
    sys::getppid()
}

/// The signals a supervisor acts on (what each means is the
/// supervisor's), as one awaitable source: handlers
/// ([`install`](SignalWatch::install)), or signals held since start-up
/// ([`from_held`](SignalWatch::from_held)). `SIGRTMAX` cannot be handled
/// (tokio's signal driver has no slot for it): see [`block`]. A signal that
/// was ignored when the process started gets
/// no handler and stays ignored (an installed handler would be reset to the
/// default by `exec`, and the command would no longer inherit the ignore).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use corral::{host::SignalWatch, Signal};
/// corral::host::ignore(Signal::HUP)?; // as `nohup` leaves it
/// let mut watch = SignalWatch::install(&[Signal::HUP, Signal::USR1])?;
/// assert!(!watch.handles(Signal::HUP), "an ignored signal stays ignored");
/// assert!(watch.handles(Signal::USR1));
/// // GNU `timeout` handles its ending signals whatever they were.
/// let overriding = SignalWatch::install_overriding(&[Signal::HUP], &[Signal::HUP])?;
/// assert!(overriding.handles(Signal::HUP));
/// let me = std::process::id().to_string();
/// std::process::Command::new("kill").args(["-USR1", &me]).status()?;
/// assert_eq!(watch.recv().await, Signal::USR1);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct SignalWatch {
    source: Source,
}

/// Where a [`SignalWatch`]'s signals come from.
#[derive(Debug)]
enum Source {
    /// tokio's handlers, one stream per signal.
    Handlers(Vec<(Signal, tokio::signal::unix::Signal)>),
    /// A `signalfd` for signals blocked in every thread ([`hold_signals`]).
    Held {
        fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
        signals: Vec<Signal>,
    },
}

impl Default for Source {
    fn default() -> Self {
        Self::Handlers(Vec::new())
    }
}

/// Signals blocked since start-up, waiting to be read by a [`SignalWatch`]
/// ([`hold_signals`]).
///
/// ```no_run
/// use corral::{host, Signal};
/// // First thing in `main`, before any thread or runtime starts.
/// let held = host::hold_signals(&[Signal::TERM, Signal::INT], &[])?;
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// runtime.block_on(async {
///     let mut signals = host::SignalWatch::from_held(held)?;
///     let signal = signals.recv().await; // one sent before the runtime started too
///     println!("{signal}");
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct HeldSignals {
    fd: std::os::fd::OwnedFd,
    signals: Vec<Signal>,
}

/// Holds those of `signals` not ignored right now, and those of
/// `even_if_ignored` whatever their disposition (which is set back to the
/// default, as GNU `timeout` does for its own): blocks them in the calling
/// thread and every thread it starts later, and opens a `signalfd` that
/// reads them, for [`SignalWatch::from_held`]. Each one sent to the process
/// from now on waits there (a standard signal sent twice before it is read
/// counts once, as with a handler); none acts. A signal sent to one thread
/// (`tgkill`) stays that thread's.
///
/// The cheap way to watch many signals in a process dedicated to
/// supervision (`corral run` watches about 40): one `sigprocmask`, one
/// descriptor, no handler, where [`SignalWatch::install`] installs a
/// handler per signal. Call it before any thread starts (the library's own
/// threads block every signal, so a watchdog forked earlier may run): a
/// thread started before, that does not block them, would take them with
/// their default action. The signals stay blocked for the life of the
/// process; programs it spawns start with no signal blocked, and the
/// watchdog blocks none.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use corral::{host::{self, SignalWatch}, Signal};
/// host::ignore(Signal::HUP)?; // as `nohup` leaves it
/// host::ignore(Signal::QUIT)?;
/// let held = host::hold_signals(&[Signal::HUP, Signal::QUIT, Signal::USR1], &[Signal::QUIT])?;
/// let mut watch = SignalWatch::from_held(held)?;
/// assert!(!watch.handles(Signal::HUP), "an ignored signal stays ignored");
/// assert!(watch.handles(Signal::QUIT), "as GNU timeout's own");
/// assert!(!host::is_ignored(Signal::QUIT)?, "its command gets the default");
/// let me = std::process::id().to_string();
/// std::process::Command::new("kill").args(["-USR1", &me]).status()?;
/// assert_eq!(watch.recv().await, Signal::USR1);
/// # Ok(()) }
/// ```
///
/// # Errors
/// If a disposition cannot be read or set, or no descriptor is left.
pub fn hold_signals(signals: &[Signal], even_if_ignored: &[Signal]) -> io::Result<HeldSignals> {
    let mut held = Vec::with_capacity(signals.len());
    let mut to_default = Vec::new();
    for &signal in signals {
        if is_ignored(signal)? {
            if !even_if_ignored.contains(&signal) {
                tracing::debug!(%signal, "ignored at start-up: left ignored");
                continue;
            }
            to_default.push(signal);
        }
        held.push(signal);
    }
    let fd = sys::hold(&held)?;
    // Blocked first: one sent meanwhile waits instead of acting.
    for signal in to_default {
        sys::set_default(signal)?;
    }
    Ok(HeldSignals { fd, signals: held })
}

impl SignalWatch {
    /// Installs handlers for those of `signals` not ignored right now. Needs a
    /// tokio runtime with its I/O driver.
    ///
    /// # Errors
    /// If a disposition cannot be read or a handler cannot be installed.
    pub fn install(signals: &[Signal]) -> io::Result<Self> {
        Self::install_overriding(signals, &[])
    }

    /// [`install`](Self::install), with handlers for those of `signals` in
    /// `even_if_ignored` whatever their disposition at start-up, as GNU
    /// `timeout` installs its own: the command then starts with them at
    /// their defaults (`exec` resets a handled signal), not ignored.
    ///
    /// # Errors
    /// As [`install`](Self::install).
    pub fn install_overriding(signals: &[Signal], even_if_ignored: &[Signal]) -> io::Result<Self> {
        let mut streams = Vec::with_capacity(signals.len());
        for &signal in signals {
            if !even_if_ignored.contains(&signal) && is_ignored(signal)? {
                tracing::debug!(%signal, "ignored at start-up: left ignored");
                continue;
            }
            let kind = tokio::signal::unix::SignalKind::from_raw(signal.number());
            streams.push((signal, tokio::signal::unix::signal(kind)?));
        }
        Ok(Self {
            source: Source::Handlers(streams),
        })
    }

    /// Watches the signals [`hold_signals`] held (those sent since wait
    /// there). Needs a tokio runtime with its I/O driver (panics outside
    /// one).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// use corral::{host::{self, SignalWatch}, Signal};
    /// let held = host::hold_signals(&[Signal::USR2], &[])?;
    /// let me = std::process::id().to_string();
    /// std::process::Command::new("kill").args(["-USR2", &me]).status()?;
    /// // Sent before the watch existed: it waited, held.
    /// let mut watch = SignalWatch::from_held(held)?;
    /// assert!(watch.handles(Signal::USR2));
    /// assert_eq!(watch.recv().await, Signal::USR2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// If the descriptor cannot be registered with the runtime.
    pub fn from_held(held: HeldSignals) -> io::Result<Self> {
        let HeldSignals { fd, signals } = held;
        Ok(Self {
            source: Source::Held {
                fd: sys::register_held(fd)?,
                signals,
            },
        })
    }

    /// Whether `signal` has a handler, or is held (it was not ignored at
    /// start-up).
    pub fn handles(&self, signal: Signal) -> bool {
        match &self.source {
            Source::Handlers(streams) => streams.iter().any(|&(s, _)| s == signal),
            Source::Held { signals, .. } => signals.contains(&signal),
        }
    }

    /// Waits for the next handled signal; pending for ever if there are none.
    ///
    /// # Cancel safety
    /// Cancel safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Signal {
        std::future::poll_fn(|cx| match &mut self.source {
            Source::Handlers(streams) => {
                for (signal, stream) in streams {
                    if let std::task::Poll::Ready(Some(())) = stream.poll_recv(cx) {
                        return std::task::Poll::Ready(*signal);
                    }
                }
                std::task::Poll::Pending
            }
            Source::Held { fd, .. } => loop {
                let Ok(mut ready) = std::task::ready!(fd.poll_read_ready(cx)) else {
                    // The runtime is shutting down: nothing more arrives.
                    return std::task::Poll::Pending;
                };
                match ready.try_io(|fd| {
                    sys::read_held(fd.as_fd())?.ok_or_else(|| io::ErrorKind::WouldBlock.into())
                }) {
                    Ok(Ok(number)) => match Signal::from_number(number) {
                        Some(signal) => return std::task::Poll::Ready(signal),
                        None => continue,
                    },
                    Ok(Err(error)) => {
                        // Not expected of a signalfd: waits for the next
                        // signal rather than spin, and is never silenced.
                        tracing::error!(%error, "reading the held signals");
                        ready.clear_ready();
                    }
                    // Read to the end: wait for the next.
                    Err(_would_block) => {}
                }
            },
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident memory of this process in KiB.
    fn resident_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .expect("status")
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// Large buffers freed leave nothing resident: with glibc's default,
    /// the second 12 MB block comes from the heap and stays resident once
    /// freed (each test runs in a process of its own under nextest; under
    /// `cargo test` another test's allocations may blur it, never make it
    /// pass wrongly, as they only add).
    #[cfg(target_env = "gnu")]
    #[test]
    fn large_frees_go_back_to_the_kernel() {
        assert!(release_large_frees(1 << 20));
        let before = resident_kib();
        for _ in 0..4 {
            let block = vec![1u8; 12 << 20];
            std::hint::black_box(&block);
        }
        let after = resident_kib();
        assert!(
            after < before + 6 * 1024,
            "{before} KiB resident before, {after} KiB after four 12 MiB blocks were freed"
        );
    }
}
