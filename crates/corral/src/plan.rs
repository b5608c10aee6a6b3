//! The spawn's first step: a [`Command`] checked for everything that can be
//! refused before anything is created (no cgroup, no descriptor reserve, no
//! ledger record, no process), into the [`Plan`] the rest of the spawn
//! carries out (`supervise::spawn_tree`: reserve, contain, launch, watch).
//! A refusal here names the fix and leaves nothing behind.

use std::{fs, io, os::fd::AsFd};

use crate::{
    command::{Command, Stdio, WorkingDir},
    error::{Error, SpawnFailure},
    limits::{LimitError, Limits},
    sys,
};

/// A command that passed every check: what the spawn carries out.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The command, as given.
    pub(crate) command: Command,
    /// Whether the leader stays in the caller's process group: asked for,
    /// and not in a session of its own (which has no terminal to be in the
    /// foreground of).
    pub(crate) foreground: bool,
}

/// Checks `command` in the order a caller would fix it: its settings first
/// (standard input, limits), then what it asks of this host (the working
/// directory, the credentials, the per-process limits), then this process
/// itself (`SIGCHLD` left ignored by its parent).
pub(crate) fn validate(command: Command) -> Result<Plan, Error> {
    if command.stdin == Stdio::Capture {
        return Err(Error::InvalidStdio {
            stream: "stdin",
            reason: "standard input cannot be captured; use Stdio::Piped to write to it, or \
                     Stdio::Null",
        });
    }
    command.limits.validate().map_err(Error::InvalidLimits)?;
    check_cwd(&command)?;
    check_credentials(&command)?;
    check_process_limits(&command)?;
    if sys::children_autoreaped().unwrap_or(false) {
        return Err(Error::ChildrenAutoreaped);
    }
    let foreground = command.foreground && !command.new_session;
    Ok(Plan {
        command,
        foreground,
    })
}

/// Checks the working directory up front, so that a bad one is reported as
/// such and not as a missing program.
fn check_cwd(command: &Command) -> Result<(), Error> {
    let failure = |source| Error::Spawn {
        program: command.program(),
        failure: SpawnFailure::BadCwd,
        source,
    };
    let dir = match &command.cwd {
        None => return Ok(()),
        Some(WorkingDir::Path(dir)) => dir,
        Some(WorkingDir::Open(dir)) => {
            return match sys::dirfd::meta(dir.as_fd()) {
                Ok(meta) if meta.is_dir => Ok(()),
                Ok(_) => Err(failure(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    "the working directory's descriptor is not a directory",
                ))),
                Err(source) => Err(failure(source)),
            };
        }
    };
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(failure(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ))),
        Err(source) => Err(failure(io::Error::new(
            source.kind(),
            format!("{}: {source}", dir.display()),
        ))),
    }
}

/// Refuses up front a user or group change the kernel would refuse in the
/// child (only root may take on another identity), with a message naming
/// the fix rather than a bare "operation not permitted".
fn check_credentials(command: &Command) -> Result<(), Error> {
    let me = sys::geteuid();
    if me == 0 {
        return Ok(());
    }
    let (uid, gid) = (command.uid.filter(|&u| u != me), command.gid);
    let gid = gid.filter(|&g| g != sys::getegid());
    let what = match (uid, gid) {
        (Some(uid), _) => format!("user {uid}"),
        (None, Some(gid)) => format!("group {gid}"),
        (None, None) => return Ok(()),
    };
    Err(Error::Spawn {
        program: command.program(),
        failure: SpawnFailure::Other,
        source: io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "running it as {what} needs root (this process runs as uid {me}); run corral as \
                 root or drop the user change"
            ),
        ),
    })
}

/// The per-process limits of `limits` ([`Limits::open_files`] ...), as the
/// child sets them, in a fixed order.
pub(crate) fn process_limits(limits: &Limits) -> [(sys::ProcessLimit, Option<u64>); 3] {
    let limits = &crate::rlimits::in_force(limits).0;
    [
        (sys::ProcessLimit::OpenFiles, limits.open_files),
        (sys::ProcessLimit::CoreSize, limits.core_size),
        (sys::ProcessLimit::AddressSpace, limits.address_space),
    ]
}

/// Refuses up front a per-process limit above this process's hard limit
/// where only root could raise it (the child's `prlimit` would fail with a
/// bare "operation not permitted").
fn check_process_limits(command: &Command) -> Result<(), Error> {
    if sys::geteuid() == 0 {
        return Ok(());
    }
    for (limit, value) in process_limits(&command.limits) {
        if let (Some(value), Some(hard)) = (value, limit.hard_limit())
            && value > hard
        {
            return Err(Error::InvalidLimits(LimitError::AboveHardLimit {
                limit: limit.name(),
                value,
                hard,
            }));
        }
    }
    Ok(())
}
