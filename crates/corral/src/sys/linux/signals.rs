//! This process's own signals: dispositions (and `SIGPIPE`'s as the program
//! found it), the mask, the real-time range, and the reset a child makes
//! before `exec`.

use std::io;

use crate::signal::Signal;

/// Whether `signal`'s disposition in this process is "ignore" (as `nohup`
/// leaves SIGHUP), without changing it.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn is_ignored(signal: Signal) -> io::Result<bool> {
    // SAFETY: an all-zero sigaction is a valid out-parameter.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null `act` only queries; `current` is a valid pointer.
    let rc = unsafe { libc::sigaction(signal.number(), std::ptr::null(), &mut current) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(current.sa_sigaction == libc::SIG_IGN)
}

/// Sets `signal` to be ignored by this process.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signal.2.html>
pub(crate) fn ignore(signal: Signal) -> io::Result<()> {
    // SAFETY: SIG_IGN installs no handler code; `signal` is a valid number.
    if unsafe { libc::signal(signal.number(), libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process's children are reaped by the kernel (SIGCHLD set to
/// `SIG_IGN`, or `SA_NOCLDWAIT`): their pids are then freed while corral still
/// names them, so supervision is refused.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn children_autoreaped() -> io::Result<bool> {
    // SAFETY: an all-zero sigaction is a valid out-parameter.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null `act` only queries; `current` is a valid pointer.
    if unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(current.sa_sigaction == libc::SIG_IGN || current.sa_flags & libc::SA_NOCLDWAIT != 0)
}

/// Sets `SIGCHLD`'s disposition back to the default: `SIG_DFL`, and no
/// flags, so without `SA_NOCLDWAIT` either.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
pub(crate) fn default_sigchld() -> io::Result<()> {
    // SAFETY: an all-zero sigaction is a valid value: empty mask, no flags.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `action` is a valid sigaction installing no handler code; the
    // old action is not asked for.
    if unsafe { libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Blocks `signal` in the calling thread, and so in every thread it starts
/// from now on: a blocked signal stays pending instead of acting.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigprocmask.2.html>
pub(crate) fn block(signal: Signal) -> io::Result<()> {
    block_set(&set_of(&[signal]))
}

/// Blocks every signal of `set` in the calling thread.
fn block_set(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `set` is a valid set; the call only changes this thread's mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// The set of `signals`.
fn set_of(signals: &[Signal]) -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value for `sigemptyset`.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, initialised set; the calls only write it.
    unsafe {
        libc::sigemptyset(&mut set);
        for signal in signals {
            libc::sigaddset(&mut set, signal.number());
        }
    }
    set
}

/// Blocks `signals` in the calling thread (and every thread it starts from
/// now on), then opens a `signalfd` that reads them: a blocked signal stays
/// pending until read there, whichever thread it was sent to, and never
/// acts (nor runs a handler).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signalfd.2.html>
pub(crate) fn hold(signals: &[Signal]) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let set = set_of(signals);
    block_set(&set)?;
    // SAFETY: `set` is a valid set; -1 asks for a new descriptor.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `signalfd` returned a new descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The next signal pending on a [`hold`] descriptor, `None` if there is none.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signalfd.2.html>
pub(crate) fn read_held(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Option<i32>> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero signalfd_siginfo is a valid out-parameter.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: `info` is valid for `size` bytes, and `fd` is open.
    let read = unsafe { libc::read(fd.as_raw_fd(), (&raw mut info).cast(), size) };
    if read < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(error),
        };
    }
    Ok(Some(info.ssi_signo as i32))
}

/// A [`hold`] descriptor registered with the current tokio runtime, for
/// reading as signals arrive.
///
/// # Errors
/// If the registration fails.
///
/// # Panics
/// Outside a tokio runtime with its I/O driver.
pub(crate) fn register_held(
    fd: std::os::fd::OwnedFd,
) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the descriptor, so it stays open, and is not
    // replaced, while registered; dropping it deregisters, then closes it.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

/// Unblocks every signal in the calling thread: for the watchdog, which
/// reads no signal, whatever mask the thread that started it had (the
/// owner's held signals, or every signal, for one started by the library's
/// monitor thread).
pub(crate) fn unblock_all() {
    // SAFETY: an all-zero sigset_t is a valid value for `sigemptyset`.
    let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is a valid set; the call only changes this thread's
    // mask.
    unsafe {
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// Has `command`'s program start with no signal blocked, whatever the
/// mask of the thread that spawns it, which std passes on: set in the child
/// between `fork` and `exec`, so it holds from the program's first
/// instruction (the watchdog, started by the library's monitor thread,
/// which blocks every signal).
pub(crate) fn exec_unblocked(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the child between `fork` and `exec`, and only
    // calls `sigemptyset` and `pthread_sigmask` (async-signal-safe) on a set
    // on its own stack: no allocation, no lock.
    unsafe {
        command.pre_exec(|| {
            unblock_all();
            Ok(())
        });
    }
}

/// Sets `signal`'s disposition to the default (`SIG_DFL`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signal.2.html>
pub(crate) fn set_default(signal: Signal) -> io::Result<()> {
    // SAFETY: SIG_DFL installs no handler code; `signal` is a valid number.
    if unsafe { libc::signal(signal.number(), libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts `work` on a thread of `builder` that blocks every signal, from its
/// first instruction: a signal sent to this process is never taken by one of
/// the library's own threads, where its default action would end the
/// process without its cleanup (a supervisor that reads its signals from a
/// [`hold`] descriptor blocks them in every other thread).
pub(crate) fn spawn_unsignalled<T: Send + 'static>(
    builder: std::thread::Builder,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<std::thread::JoinHandle<T>> {
    // SAFETY: all-zero sigset_t values are valid for `sigfillset` and as
    // out-parameters.
    let (mut all, mut before): (libc::sigset_t, libc::sigset_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: both sets are valid; the calls change only this thread's mask,
    // which is put back below whatever the spawn did.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
    }
    let spawned = builder.spawn(work);
    // SAFETY: `before` is the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) };
    spawned
}

/// Whether the calling thread blocks any signal.
pub(super) fn thread_blocks_signals() -> bool {
    // SAFETY: a null `set` only reads this thread's mask into `current`, a
    // valid out-parameter.
    unsafe {
        let mut current: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut current);
        (1..=libc::SIGRTMAX()).any(|n| libc::sigismember(&current, n) == 1)
    }
}

/// Resets each signal of `signals` (bit N-1 for signal N) to its default
/// disposition, in a child about to `exec`.
///
/// # Safety
/// Only in a forked child before `exec` (it changes the whole process's
/// dispositions); async-signal-safe.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/signal.2.html>
pub(crate) unsafe fn reset_to_default(signals: u64) {
    for number in 1..=64 {
        if signals & (1 << (number - 1)) != 0 {
            // SAFETY: SIG_DFL installs no handler code; `signal` is
            // async-signal-safe. A number the kernel refuses changes nothing.
            unsafe { libc::signal(number, libc::SIG_DFL) };
        }
    }
}

/// `SIGPIPE`'s disposition as this program found it, before Rust's runtime
/// set it to ignored: 0 not recorded, 1 not ignored, 2 ignored.
static SIGPIPE_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Runs before `main` (and so before Rust's runtime ignores `SIGPIPE`), as
/// the C runtime calls every function in `.init_array`.
extern "C" fn record_sigpipe() {
    let ignored = is_ignored(Signal::PIPE).unwrap_or(false);
    SIGPIPE_AT_START.store(
        if ignored { 2 } else { 1 },
        std::sync::atomic::Ordering::Relaxed,
    );
}

// SAFETY: the function only reads a disposition (`sigaction` with a null
// `act`) and stores an atomic: nothing that needs the Rust runtime.
#[used]
#[unsafe(link_section = ".init_array")]
static RECORD_SIGPIPE: extern "C" fn() = record_sigpipe;

/// Whether `SIGPIPE` was ignored when this program started (as a parent with
/// `trap '' PIPE` leaves it), as recorded before `main`; `None` if the
/// record did not run (a program that does not link the constructor).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/sigaction.2.html>
/// - <https://doc.rust-lang.org/std/process/index.html> (std ignores `SIGPIPE` before `main`)
pub(crate) fn sigpipe_ignored_at_start() -> Option<bool> {
    match SIGPIPE_AT_START.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    }
}

/// The highest signal number (`SIGRTMAX`).
///
/// # References
/// - <https://man7.org/linux/man-pages/man7/signal.7.html>
pub(crate) fn sigrtmax() -> i32 {
    libc::SIGRTMAX()
}

/// The lowest real-time signal a program may use (`SIGRTMIN`: glibc keeps
/// 32 and 33 for its threads).
pub(crate) fn sigrtmin() -> i32 {
    libc::SIGRTMIN()
}
