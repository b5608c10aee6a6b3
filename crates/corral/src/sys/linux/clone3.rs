//! Spawning with `clone3(CLONE_PIDFD)`, straight into a cgroup where there
//! is one (`CLONE_INTO_CGROUP`).
//!
//! The pidfd comes back with the new pid, so no other thread's `waitpid(-1)`
//! (a host's own reaper) can take the child between its start and the
//! moment it is held: std's spawn and a `pidfd_open` after it leave that
//! window. Moving a running process into a cgroup (a write to `cgroup.procs`) takes a
//! global lock whose writer waits for an RCU grace period: about 10 ms here.
//! A process *created* in the cgroup pays nothing of that, and `CLONE_PIDFD`
//! hands back its pidfd with no window at all. rustix does not wrap `clone3`,
//! so this file does the spawn itself, the way std does it: the parent
//! prepares everything (paths, argv, envp as C strings, pointer arrays); the
//! child only makes async-signal-safe system calls and reports a failure's
//! errno through a close-on-exec pipe. On x86-64 the child borrows the
//! parent's memory until `execve` (`CLONE_VM | CLONE_VFORK`, as glibc's
//! `posix_spawn`): a fork would copy the page tables of the whole supervisor
//! and the `execve` would tear the copy down again (BENCHMARKS.md section 3).
//!
//! # References
//! - <https://man7.org/linux/man-pages/man2/clone3.2.html>

use std::{
    ffi::{CString, c_char, c_int},
    io,
    os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd},
    ptr,
};

/// `struct clone_args` (`linux/sched.h`), the same on every architecture.
#[repr(C, align(8))]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_PIDFD: u64 = 0x1000;
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// What to execute, fully prepared by the parent.
#[derive(Debug)]
pub(crate) struct Exec<'a> {
    /// The paths to try, in order, as `execvp` tries its `PATH` (one when
    /// the program was resolved already): each that does not exist, or
    /// that the child may not execute, passes to the next.
    pub(crate) programs: &'a [CString],
    /// `argv`, program name first.
    pub(crate) argv: &'a [CString],
    /// The whole environment, `KEY=VALUE`.
    pub(crate) envp: &'a [CString],
    /// The working directory, if it changes.
    pub(crate) cwd: Option<super::ChildDir<'a>>,
    /// Descriptors for standard input, output and error (`None`: inherit).
    pub(crate) stdio: [Option<BorrowedFd<'a>>; 3],
    /// The leaf cgroup's directory, if the tree has one.
    pub(crate) cgroup: Option<BorrowedFd<'a>>,
    /// Namespace, user and groups to take on before `exec`.
    pub(crate) creds: super::Credentials,
    /// Start the program with `SIGPIPE` ignored (else at its default).
    pub(crate) ignore_sigpipe: bool,
    /// Signals to reset to their default before `exec` (bit N-1 for N).
    pub(crate) default_signals: u64,
    /// Start the program in a new session, with no controlling terminal.
    pub(crate) new_session: bool,
    /// Start the program in a new process group that it leads.
    pub(crate) new_group: bool,
}

/// Why [`spawn_into_cgroup`] failed.
#[derive(Debug)]
pub(crate) enum Clone3Error {
    /// `clone3` itself failed (an old kernel, a seccomp filter): fall back.
    Unavailable(io::Error),
    /// The child could not set up or execute the program (it was reaped).
    Exec(io::Error),
}

/// Creates the process (inside the cgroup, if one is given) and executes the
/// program. Returns its pid and pidfd once `execve` succeeded.
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/clone3.2.html>
/// - <https://man7.org/linux/man-pages/man2/execve.2.html>
pub(crate) fn spawn_into_cgroup(exec: &Exec<'_>) -> Result<(i32, OwnedFd), Clone3Error> {
    let programs: Vec<*const c_char> = exec
        .programs
        .iter()
        .map(|p| p.as_ptr())
        .chain([ptr::null()])
        .collect();
    let argv: Vec<*const c_char> = exec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain([ptr::null()])
        .collect();
    let envp: Vec<*const c_char> = exec
        .envp
        .iter()
        .map(|e| e.as_ptr())
        .chain([ptr::null()])
        .collect();
    let stdio = exec.stdio.map(|fd| fd.map_or(-1, |fd| fd.as_raw_fd()));
    let (cwd, cwd_fd) = exec.cwd.map_or((ptr::null(), -1), |dir| dir.raw());
    let (report_read, report_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Clone3Error::Unavailable(e.into()))?;
    let mut pidfd: c_int = -1;
    let mut args = CloneArgs {
        flags: CLONE_PIDFD | CLONE_CLEAR_SIGHAND,
        pidfd: ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    if let Some(cgroup) = exec.cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = cgroup.as_raw_fd() as u64;
    }
    let child = Child {
        programs: programs.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd,
        cwd_fd,
        stdio,
        report: report_write.as_raw_fd(),
        creds: exec.creds,
        new_session: exec.new_session,
        new_group: exec.new_group,
        sigpipe: if exec.ignore_sigpipe {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        },
        default_signals: exec.default_signals,
    };
    let ret = clone3(&mut args, &child);
    if ret < 0 {
        return Err(Clone3Error::Unavailable(io::Error::from_raw_os_error(
            -ret as i32,
        )));
    }
    drop(report_write);
    let pid = ret as i32;
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let mut errno = [0u8; 4];
    let mut read = 0;
    while read < errno.len() {
        match rustix::io::read(&report_read, &mut errno[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => {
                super::kill_and_reap(std::os::fd::AsFd::as_fd(&pidfd));
                return Err(Clone3Error::Exec(error.into()));
            }
        }
    }
    if read == 0 {
        return Ok((pid, pidfd));
    }
    super::kill_and_reap(std::os::fd::AsFd::as_fd(&pidfd));
    Err(Clone3Error::Exec(super::child_error(i32::from_ne_bytes(
        errno,
    ))))
}

/// Starts a process in the cgroup `cgroup` (`clone3` with
/// `CLONE_INTO_CGROUP`) that exits at once, and reaps it: the kernel's own
/// answer to whether that cgroup accepts processes, asked the way a tree's
/// leader is started. Its exit signal is none, so only a wait that names it
/// (through its pidfd, with `__WALL`) can reap it: no reaper of orphans sees
/// it. `Ok(false)`: this kernel has no `clone3` (no answer).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/clone3.2.html>
/// - <https://man7.org/linux/man-pages/man2/waitid.2.html>
pub(crate) fn exit_in_cgroup(cgroup: BorrowedFd<'_>) -> io::Result<bool> {
    let mut pidfd: c_int = -1;
    let mut args = CloneArgs {
        flags: CLONE_PIDFD | CLONE_INTO_CGROUP,
        pidfd: ptr::addr_of_mut!(pidfd) as u64,
        exit_signal: 0,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a valid, fully initialised `clone_args` of the size
    // passed. Without CLONE_VM the child gets a copy of our memory, like
    // fork, and only calls `_exit`, which is async-signal-safe.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            ptr::from_mut(&mut args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret == 0 {
        // SAFETY: we are the new child process.
        unsafe { libc::_exit(0) }
    }
    if ret < 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ENOSYS) => Ok(false),
            _ => Err(error),
        };
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    loop {
        // SAFETY: an all-zero siginfo_t is a valid out-parameter; `pidfd` is
        // the child's pidfd, open for the whole call.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; waitid only writes `info`.
        let waited = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::__WALL,
            )
        };
        if waited == 0 {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The child's stack while it shares our memory, until `execve`: what
/// `Child::exec` needs (a few frames of plain system calls), with room to
/// spare.
#[cfg(target_arch = "x86_64")]
const CHILD_STACK: usize = 64 * 1024;

/// `clone3(args)`; the child runs `child.exec()`. The new pid, or `-errno`.
///
/// On x86-64 the child shares our memory until `execve`, on a stack of its
/// own, and we are suspended until then (`CLONE_VM | CLONE_VFORK`, as
/// glibc's `posix_spawn` does): nothing of our address space is copied, and
/// the `execve` has no copy to tear down, which a fork of a process this
/// size pays for twice. Sound because `Child::exec` only reads what we
/// prepared and makes async-signal-safe calls (no allocation, no lock), and
/// runs no signal handler (`CLONE_CLEAR_SIGHAND` resets them; its signal
/// mask is its own). Elsewhere, and for a child that changes its user or
/// group, a fork-like `clone3` ([`clone3_copy`]).
#[cfg(all(target_arch = "x86_64", target_pointer_width = "64"))]
fn clone3(args: &mut CloneArgs, child: &Child) -> isize {
    // A credential change marks the task's memory map non-dumpable
    // (`commit_creds` -> `set_dumpable(mm, suid_dumpable)`); shared, that map
    // is ours: we would lose core dumps and ptrace access, and our `/proc`
    // files would become root's. Such a child gets a copy instead.
    if child.changes_credentials() {
        return clone3_copy(args, child);
    }
    const CLONE_VM: u64 = 0x100;
    const CLONE_VFORK: u64 = 0x4000;
    /// Aligned as the ABI wants a stack: 16 bytes.
    #[repr(C, align(16))]
    struct Stack([u8; CHILD_STACK]);
    extern "C" fn child_main(child: *const Child) -> ! {
        // SAFETY: we are the new child; `child` points into the suspended
        // parent's memory, which we share and which outlives us (the parent
        // resumes only at our `execve` or `_exit`).
        unsafe { (*child).exec() }
    }
    let mut stack: Box<std::mem::MaybeUninit<Stack>> = Box::new_uninit();
    args.flags |= CLONE_VM | CLONE_VFORK;
    args.stack = stack.as_mut_ptr() as u64;
    args.stack_size = CHILD_STACK as u64;
    let ret: isize;
    // SAFETY: `args` is a valid, fully initialised `clone_args` of the size
    // passed, naming a stack of `CHILD_STACK` bytes that lives until the
    // child has executed or exited (we are suspended until then). The
    // parent only gets the syscall's result back (`syscall` clobbers rcx
    // and r11). The child starts on the new stack (the kernel points rsp at
    // its 16-byte aligned top), calls `child_main`, which never returns, and
    // touches no frame of ours.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") ptr::from_mut(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") ptr::from_ref(child),
            in("r13") child_main as extern "C" fn(*const Child) -> !,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    drop(stack);
    ret
}

/// `clone3(args)` like a fork; the child runs `child.exec()`. The new pid,
/// or `-errno`.
#[cfg(not(all(target_arch = "x86_64", target_pointer_width = "64")))]
fn clone3(args: &mut CloneArgs, child: &Child) -> isize {
    clone3_copy(args, child)
}

/// `clone3(args)` like a fork (the child gets a copy of our memory); the
/// child runs `child.exec()`. The new pid, or `-errno`.
fn clone3_copy(args: &mut CloneArgs, child: &Child) -> isize {
    // SAFETY: `args` is a valid, fully initialised `clone_args` of the size
    // passed. Without CLONE_VM the child gets a copy of our memory, like
    // fork; it runs only `Child::exec`, which makes async-signal-safe calls
    // on data prepared above and never returns.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            ptr::from_mut(args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret == 0 {
        // SAFETY: we are the new child process.
        unsafe { child.exec() }
    }
    if ret < 0 {
        -(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL) as isize)
    } else {
        ret as isize
    }
}

/// Everything the child needs, as raw pointers and numbers.
struct Child {
    /// Null-terminated: the paths to try.
    programs: *const *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    /// A directory to enter with `fchdir` (at 3 or above), or -1; with
    /// `cwd` as well, the directory `cwd` must lead to.
    cwd_fd: c_int,
    stdio: [c_int; 3],
    report: c_int,
    creds: super::Credentials,
    /// Call `setsid` first.
    new_session: bool,
    /// Call `setpgid(0, 0)` first (without `new_session`, which makes a
    /// group too).
    new_group: bool,
    /// `SIGPIPE`'s disposition for the program.
    sigpipe: libc::sighandler_t,
    /// Signals reset to their default (bit N-1 for signal N).
    default_signals: u64,
}

impl Child {
    /// Whether the child changes its user or group before `execve`.
    fn changes_credentials(&self) -> bool {
        self.creds.changes_user()
    }

    /// Sets up standard descriptors, credentials and the directory, then
    /// executes.
    ///
    /// # Safety
    /// Only in the child of `clone3`. Async-signal-safe calls only: no
    /// allocation, no locks, no panics.
    unsafe fn exec(&self) -> ! {
        let mut stdio = self.stdio;
        // SAFETY (whole block): plain system calls on descriptors and
        // pointers prepared by the parent, valid in its memory (shared with
        // us until `execve`, or a copy of it).
        unsafe {
            if self.new_session && libc::setsid() < 0 {
                self.fail();
            }
            if self.new_group && !self.new_session && libc::setpgid(0, 0) < 0 {
                self.fail();
            }
            // A source descriptor below 3 could be overwritten by an earlier
            // dup2: move such ones out of the way first.
            for (target, fd) in stdio.iter_mut().enumerate() {
                if *fd >= 0 && *fd < 3 && *fd != target as c_int {
                    *fd = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                    if *fd < 0 {
                        self.fail();
                    }
                }
            }
            for (target, &fd) in stdio.iter().enumerate() {
                let target = target as c_int;
                if fd < 0 {
                    continue;
                }
                let ok = if fd == target {
                    libc::fcntl(fd, libc::F_SETFD, 0) == 0
                } else {
                    libc::dup2(fd, target) == target
                };
                if !ok {
                    self.fail();
                }
            }
            // In the leaf from birth: a new cgroup namespace is rooted there.
            // The user changes before the working directory, as std does, so
            // the directory is entered with the user's rights.
            if self.creds.apply().is_err() {
                self.fail();
            }
            let errno = super::enter_dir(self.cwd, self.cwd_fd);
            if errno != 0 {
                self.report_and_exit(-errno);
            }
            // As std does: an empty signal mask, and SIGPIPE at its default
            // (Rust programs ignore it) unless the caller passes an ignored
            // one on. Other ignored signals stay ignored, but those asked
            // for at their default.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut());
            super::reset_to_default(self.default_signals);
            libc::signal(libc::SIGPIPE, self.sigpipe);
            // As execvp: a path that is not there, or not ours to execute,
            // passes to the next; "permission denied" is the answer if any
            // said so.
            let mut denied = false;
            let mut next = self.programs;
            while !(*next).is_null() {
                libc::execve(*next, self.argv, self.envp);
                match *libc::__errno_location() {
                    libc::EACCES => denied = true,
                    libc::ENOENT
                    | libc::ENOTDIR
                    | libc::ESTALE
                    | libc::ENODEV
                    | libc::ETIMEDOUT => {}
                    _ => self.fail(),
                }
                next = next.add(1);
            }
            if denied {
                self.report_and_exit(libc::EACCES);
            }
            self.fail()
        }
    }

    /// Reports errno to the parent and exits.
    unsafe fn fail(&self) -> ! {
        // SAFETY: errno is thread-local.
        unsafe { self.report_and_exit(*libc::__errno_location()) }
    }

    /// Writes `code` to the parent and exits.
    unsafe fn report_and_exit(&self, code: c_int) -> ! {
        // SAFETY: write and _exit are async-signal-safe. The raw `write`
        // system call, not glibc's cancellable wrapper, whose cancellation
        // state lives in the thread block we may share with the suspended
        // parent thread.
        unsafe {
            let code = code.to_ne_bytes();
            libc::syscall(libc::SYS_write, self.report, code.as_ptr(), code.len());
            libc::_exit(127)
        }
    }
}
