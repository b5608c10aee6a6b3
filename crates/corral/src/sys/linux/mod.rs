//! Linux syscalls, through `rustix` where it has them, `libc` where it does not.
//!
//! One file per concern: `pidfd.rs` (other processes: signals sent, exits
//! waited for), `pidns.rs` (pid numbers across PID namespaces),
//! `signals.rs` (this process's dispositions and mask), `process.rs` (this
//! process's ids, settings, limits, `fork`), `files.rs` (descriptors),
//! `dirfd.rs` (files opened relative to a checked directory), `spawn.rs` and
//! `clone3.rs` (starting a child), `creds.rs` (the user it takes on),
//! `clock.rs`, `memory.rs` (the allocator), `errno.rs` (what an error's code
//! means).

mod clock;
mod clone3;
mod creds;
pub(crate) mod dirfd;
mod errno;
mod files;
mod memory;
mod pidfd;
mod pidns;
mod process;
mod signals;
mod spawn;

pub(crate) use clock::boot_ticks;
pub(crate) use clone3::{Clone3Error, Exec, exit_in_cgroup, spawn_into_cgroup};
pub(crate) use creds::Credentials;
pub(crate) use errno::{
    is_gone, is_no_child, is_not_executable, is_out_of_descriptors, is_refused_by_cgroup,
    is_unsupported,
};
pub(crate) use files::{
    Reserve, async_fd_or_back, dup_above_stdio, dup_raw, is_executable_file, open_dir, open_events,
    pipe, read_from_start, send_now, set_cloexec, stdout_to_null,
};
pub(crate) use memory::fixed_mmap_threshold;
pub(crate) use pidfd::{
    exit_status, kill, kill_and_reap, kill_group, peek_exited_child, pidfd_exited, pidfd_open,
    pidfd_signal, pidfd_wait, pidfd_wait_until, reap, reap_pidfd, reap_within, wait_readable,
};
pub(crate) use pidns::{pid_in_own_namespace, proc_is_own_namespace, proc_pid_of};
#[cfg(test)]
pub(crate) use process::limit_open_files;
pub(crate) use process::{
    Forked, ProcessLimit, current_exe, fork, getegid, geteuid, getpid, getppid, has_children,
    is_child_subreaper, open_files_limit, own_process_group, parent_death_signal,
    set_child_subreaper, single_threaded,
};
pub(crate) use signals::{
    block, children_autoreaped, default_sigchld, exec_unblocked, hold, ignore, is_ignored,
    read_held, register_held, reset_to_default, set_default, sigpipe_ignored_at_start, sigrtmax,
    sigrtmin, spawn_unsignalled, unblock_all,
};
pub(crate) use spawn::{ChildDir, ChildSetup, CwdRefused, child_error, enter_dir, spawn};
