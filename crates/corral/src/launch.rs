//! Starting the leader: straight into its cgroup with `clone3` where the
//! kernel allows it, otherwise through std's spawn (with a pre-exec hook for
//! the cgroup, `posix_spawn` for the other backends).

use std::{
    ffi::{CString, OsStr, OsString},
    fs, io,
    os::{
        fd::{AsFd, AsRawFd, OwnedFd},
        unix::ffi::{OsStrExt, OsStringExt},
    },
    path::{Path, PathBuf},
};

use crate::{
    command::Command, command::Stdio, command::WorkingDir, contain, contain::Prepared,
    error::Error, error::SpawnFailure, plan, sys,
};

/// A leader that runs: our unreaped child, with its pidfd and our ends of
/// its pipes.
#[derive(Debug)]
pub(crate) struct Launched {
    pub(crate) pid: i32,
    pub(crate) pidfd: OwnedFd,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// What the child changes about itself before `exec`.
fn credentials(command: &Command, prepared: &Prepared) -> sys::Credentials {
    let changes_user = command.uid.is_some() || command.gid.is_some();
    sys::Credentials {
        cgroup_namespace: prepared.cgroup_namespace(),
        clear_groups: changes_user && sys::geteuid() == 0,
        gid: command.gid,
        uid: command.uid,
        rlimits: plan::process_limits(&command.limits)
            .map(|(limit, value)| value.map(|value| (limit.resource(), value))),
    }
}

/// Marks a leader the kernel refused in its leaf cgroup, with why.
#[derive(Debug)]
struct LeafRefused {
    leaf: PathBuf,
    reason: String,
}

impl std::fmt::Display for LeafRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for LeafRefused {}

/// `error` from starting the leader in `prepared`'s leaf, explained when it
/// is the cgroup refusing the process (see [`sys::is_refused_by_cgroup`]).
fn explain_refusal(prepared: &Prepared, error: io::Error) -> io::Error {
    match prepared.cgroup() {
        Some((leaf, _)) if sys::is_refused_by_cgroup(&error) => {
            let reason = contain::refused_process(&leaf, &error);
            io::Error::new(error.kind(), LeafRefused { leaf, reason })
        }
        _ => error,
    }
}

/// Classifies a spawn error for the caller: a leaf cgroup that refused the
/// leader is [`Error::Cgroup`], with the reason and the fix.
pub(crate) fn spawn_error(command: &Command, source: io::Error) -> Error {
    if let Some(refused) = source
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<LeafRefused>())
    {
        return Error::Cgroup {
            path: refused.leaf.clone(),
            source: io::Error::new(source.kind(), refused.reason.clone()),
        };
    }
    let cwd_refused = source
        .get_ref()
        .is_some_and(|inner| inner.is::<sys::CwdRefused>());
    let failure = match source.kind() {
        _ if cwd_refused => SpawnFailure::BadCwd,
        io::ErrorKind::NotFound => SpawnFailure::NotFound,
        io::ErrorKind::PermissionDenied => SpawnFailure::NotExecutable,
        _ if sys::is_not_executable(&source) => SpawnFailure::NotExecutable,
        _ => SpawnFailure::Other,
    };
    Error::Spawn {
        program: command.program(),
        failure,
        source,
    }
}

/// Starts the leader inside the prepared containment.
///
/// With `clone3` (every backend), the leader's pidfd comes with its pid:
/// another thread's `waitpid(-1)` cannot take it before it is held. Where
/// `clone3` is refused (an old kernel, a seccomp filter), std's spawn and a
/// `pidfd_open` after it, which leave that window (`launch_with_std`).
pub(crate) fn launch(command: &Command, prepared: &Prepared) -> io::Result<Launched> {
    let creds = credentials(command, prepared);
    // `no-pidfd` stands for a kernel before 5.3, which has no `clone3`
    // either (the cgroup backend's use of it is kept, as the fault's tests
    // expect of a cgroup that holds the tree without pidfds).
    let no_clone3 = crate::fault::active("no-clone3")
        || (crate::fault::active("no-pidfd") && prepared.cgroup_dir().is_none());
    if !no_clone3 {
        match launch_with_clone3(command, prepared, creds) {
            // The cgroup refused the process: so would a move into it.
            Err(Launch::Unavailable(error))
                if prepared.cgroup_dir().is_some() && sys::is_refused_by_cgroup(&error) =>
            {
                return Err(explain_refusal(prepared, error));
            }
            Err(Launch::Unavailable(error)) => {
                tracing::debug!(%error, "clone3 unavailable; falling back to std's spawn");
            }
            Err(Launch::Failed(error)) => return Err(error),
            Ok(launched) => return Ok(launched),
        }
    }
    launch_with_std(command, prepared, creds).map_err(|error| explain_refusal(prepared, error))
}

enum Launch {
    Unavailable(io::Error),
    Failed(io::Error),
}

fn launch_with_clone3(
    command: &Command,
    prepared: &Prepared,
    creds: sys::Credentials,
) -> Result<Launched, Launch> {
    let setup = prepared.child_setup();
    let failed = Launch::Failed;
    let envp = environment(command).map_err(failed)?;
    let path = envp
        .iter()
        .find_map(|e| e.as_bytes().strip_prefix(b"PATH="))
        .map(OsStr::from_bytes);
    // Looked up here with our rights; for a command of another user, by
    // the child with its own (as `execvp`), from every candidate in order.
    let programs = if creds.changes_user() {
        candidates(&command.program, path).map_err(Launch::Failed)?
    } else {
        vec![resolve(&command.program, path, command.cwd.as_ref()).map_err(Launch::Failed)?]
    };
    let argv = std::iter::once(&command.program)
        .chain(&command.args)
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(Launch::Failed)?;
    let cwd = ChildCwd::new(command.cwd.as_ref(), creds.changes_user()).map_err(Launch::Failed)?;
    let stdin = stream(command.stdin, true).map_err(Launch::Failed)?;
    let stdout = stream(command.stdout, false).map_err(Launch::Failed)?;
    let stderr = stream(command.stderr, false).map_err(Launch::Failed)?;
    let exec = sys::Exec {
        programs: &programs,
        argv: &argv,
        envp: &envp,
        cwd: cwd.child(),
        stdio: [
            stdin.child.as_ref().map(AsFd::as_fd),
            stdout.child.as_ref().map(AsFd::as_fd),
            stderr.child.as_ref().map(AsFd::as_fd),
        ],
        cgroup: prepared.cgroup_dir(),
        creds,
        ignore_sigpipe: command.ignore_sigpipe,
        default_signals: command.default_signals,
        new_session: command.new_session,
        new_group: setup.new_group,
    };
    match sys::spawn_into_cgroup(&exec) {
        Ok((pid, pidfd)) => Ok(Launched {
            pid: reaped_at_launch(pid),
            pidfd,
            stdin: stdin.parent,
            stdout: stdout.parent,
            stderr: stderr.parent,
        }),
        Err(sys::Clone3Error::Unavailable(error)) => Err(Launch::Unavailable(error)),
        Err(sys::Clone3Error::Exec(error)) => Err(Launch::Failed(error)),
    }
}

/// `pid`, after the `leader-reaped-at-launch` fault held the launch (up to
/// 10 s) until something else reaped the leader.
fn reaped_at_launch(pid: i32) -> i32 {
    if crate::fault::active("leader-reaped-at-launch") {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{pid}")).exists()
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    pid
}

fn launch_with_std(
    command: &Command,
    prepared: &Prepared,
    creds: sys::Credentials,
) -> io::Result<Launched> {
    // With a user change, the directory is entered as that user, after
    // the change (std's `current_dir` enters it before, with our rights);
    // an open directory is entered by our hook too (std takes only paths).
    let as_user = creds.changes_user();
    let by_std = !as_user && matches!(command.cwd, Some(WorkingDir::Path(_)));
    let mut std_command = std_command(command, by_std);
    let cwd = if by_std {
        ChildCwd::None
    } else {
        ChildCwd::new(command.cwd.as_ref(), as_user)?
    };
    let mut setup = prepared.child_setup();
    setup.cwd = cwd.child();
    setup.creds = creds;
    setup.ignore_sigpipe = command.ignore_sigpipe;
    setup.default_signals = command.default_signals;
    setup.new_session = command.new_session;
    let mut child = sys::spawn(&mut std_command, setup)?;
    let pid = reaped_at_launch(child.id() as i32);
    // Our child, unless another thread's `waitpid(-1)` (a host's reaper)
    // reaped it since std's spawn returned: then its pid may be another
    // process's already, and a pidfd of it must not stand for the leader.
    // `waitid` on the pidfd answers only for a child of ours.
    let pidfd = match sys::pidfd_open(pid)
        .and_then(|pidfd| sys::exit_status(pidfd.as_fd(), false).map(|_| pidfd))
    {
        Ok(pidfd) => pidfd,
        Err(error) if sys::is_gone(&error) || error.raw_os_error() == Some(libc::ECHILD) => {
            return Err(io::Error::new(
                error.kind(),
                "the command started and ended, and something else in this process (a \
                 waitpid(-1) of another thread) reaped it before corral could hold it, so its \
                 exit status is lost: leave corral's children to corral, or allow clone3, \
                 which leaves no such window",
            ));
        }
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            if sys::is_unsupported(&error) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "this kernel has no pidfds (pidfd_open needs Linux 5.3 or later), and corral \
                     will not hold a process by its bare pid; use the cgroup backend or a newer kernel",
                ));
            }
            return Err(error);
        }
    };
    Ok(Launched {
        pid,
        pidfd,
        stdin: child.stdin.take().map(OwnedFd::from),
        stdout: child.stdout.take().map(OwnedFd::from),
        stderr: child.stderr.take().map(OwnedFd::from),
    })
}

/// std's command for `command`; its working directory too if `cwd`.
fn std_command(command: &Command, cwd: bool) -> std::process::Command {
    let mut std_command = std::process::Command::new(&command.program);
    std_command.args(&command.args);
    if command.env_clear {
        std_command.env_clear();
    }
    for (key, value) in &command.env {
        match value {
            Some(value) => std_command.env(key, value),
            None => std_command.env_remove(key),
        };
    }
    if let Some(WorkingDir::Path(dir)) = command.cwd.as_ref().filter(|_| cwd) {
        std_command.current_dir(dir);
    }
    let stdio = |mode| match mode {
        Stdio::Capture | Stdio::Piped => std::process::Stdio::piped(),
        Stdio::Inherit => std::process::Stdio::inherit(),
        Stdio::Null => std::process::Stdio::null(),
    };
    std_command.stdin(stdio(command.stdin));
    std_command.stdout(stdio(command.stdout));
    std_command.stderr(stdio(command.stderr));
    std_command
}

/// The working directory as the child takes it: a path as a C string, or
/// a close-on-exec copy of the open directory clear of the standard
/// descriptors (the command never inherits it); for a child that changes
/// its user, with the path the directory has now, which the child walks
/// with its own rights ([`sys::ChildDir::Reach`]).
enum ChildCwd {
    None,
    Path(CString),
    Open(OwnedFd, Option<CString>),
}

impl ChildCwd {
    fn new(cwd: Option<&WorkingDir>, as_user: bool) -> io::Result<Self> {
        Ok(match cwd {
            None => Self::None,
            Some(WorkingDir::Path(dir)) => Self::Path(nul_free(dir.as_os_str().as_bytes())?),
            Some(WorkingDir::Open(dir)) => {
                let fd = sys::dup_above_stdio(dir.as_fd())?;
                let reach = if as_user {
                    let now = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
                    Some(nul_free(now.as_os_str().as_bytes())?)
                } else {
                    None
                };
                Self::Open(fd, reach)
            }
        })
    }

    fn child(&self) -> Option<sys::ChildDir<'_>> {
        match self {
            Self::None => None,
            Self::Path(path) => Some(sys::ChildDir::Path(path)),
            Self::Open(fd, None) => Some(sys::ChildDir::Fd(fd.as_fd())),
            Self::Open(fd, Some(path)) => Some(sys::ChildDir::Reach {
                fd: fd.as_fd(),
                path,
            }),
        }
    }
}

fn nul_free(path: &[u8]) -> io::Result<CString> {
    CString::new(path).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in the working directory",
        )
    })
}

/// The two ends of one standard stream: the child's (to `dup2`) and ours.
struct Stream {
    child: Option<OwnedFd>,
    parent: Option<OwnedFd>,
}

/// The command's end and ours of one standard stream; `input` for
/// standard input (`Stdio::Capture`, refused there by the spawn's checks,
/// would be a pipe as `Piped`).
fn stream(mode: Stdio, input: bool) -> io::Result<Stream> {
    Ok(match mode {
        Stdio::Inherit => Stream {
            child: None,
            parent: None,
        },
        Stdio::Null => Stream {
            child: Some(
                fs::OpenOptions::new()
                    .read(input)
                    .write(!input)
                    .open("/dev/null")?
                    .into(),
            ),
            parent: None,
        },
        Stdio::Capture | Stdio::Piped => {
            let (read, write) = sys::pipe()?;
            let (child, parent) = if input { (read, write) } else { (write, read) };
            Stream {
                child: Some(child),
                parent: Some(parent),
            }
        }
    })
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument contains a NUL byte",
        )
    })
}

/// The child's environment as `KEY=VALUE` strings.
fn environment(command: &Command) -> io::Result<Vec<CString>> {
    let mut vars: Vec<(OsString, OsString)> = if command.env_clear {
        Vec::new()
    } else {
        std::env::vars_os().collect()
    };
    for (key, value) in &command.env {
        vars.retain(|(k, _)| k != key);
        if let Some(value) = value {
            vars.push((key.clone(), value.clone()));
        }
    }
    vars.into_iter()
        .map(|(key, value)| {
            let mut entry = key.into_vec();
            entry.push(b'=');
            entry.extend(value.into_vec());
            c_string(&entry)
        })
        .collect()
}

/// Every path `execvp` would try for `program` along `path`, in order
/// (relative entries kept relative: the child is in its directory by
/// then); just the program when it names a path.
fn candidates(program: &OsStr, path: Option<&OsStr>) -> io::Result<Vec<CString>> {
    if let Some(named) = named_path(program)? {
        return Ok(vec![named]);
    }
    search_path(path)
        .map(|dir| c_string(dir.join(program).as_os_str().as_bytes()))
        .collect()
}

/// The directories of `path` (the default search path when there is
/// none), an empty entry meaning the working directory.
fn search_path(path: Option<&OsStr>) -> impl Iterator<Item = &Path> {
    path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"))
        .as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(OsStr::from_bytes(dir))
            }
        })
}

/// The program as a path when it names one (no `PATH` search), or none;
/// refused when empty.
fn named_path(program: &OsStr) -> io::Result<Option<CString>> {
    let bytes = program.as_bytes();
    if bytes.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "empty program name",
        ));
    }
    bytes.contains(&b'/').then(|| c_string(bytes)).transpose()
}

/// Finds `program` as `execvp` in the child would: a name with a slash is
/// used as is; otherwise the first executable regular file of that name in
/// `PATH`, a relative entry (`bin`, or empty for `.`) searched from the
/// child's working directory `cwd` and kept relative (the child executes it
/// from there).
fn resolve(program: &OsStr, path: Option<&OsStr>, cwd: Option<&WorkingDir>) -> io::Result<CString> {
    if let Some(named) = named_path(program)? {
        return Ok(named);
    }
    let mut denied = false;
    for dir in search_path(path) {
        let candidate = dir.join(program);
        let found = match cwd.filter(|_| candidate.is_relative()) {
            Some(WorkingDir::Path(cwd)) => sys::is_executable_file(None, &cwd.join(&candidate)),
            Some(WorkingDir::Open(cwd)) => sys::is_executable_file(Some(cwd.as_fd()), &candidate),
            None => sys::is_executable_file(None, &candidate),
        };
        match found {
            Ok(true) => return c_string(candidate.as_os_str().as_bytes()),
            Ok(false) => denied = true,
            // As execvp: a directory we may not search makes the final
            // answer "permission denied" rather than "not found".
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => denied = true,
            Err(_) => {}
        }
    }
    Err(if denied {
        io::Error::from(io::ErrorKind::PermissionDenied)
    } else {
        io::Error::new(io::ErrorKind::NotFound, "not found in PATH")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_its_leaf_refused_is_a_cgroup_error_with_the_reason() {
        let refused = io::Error::new(
            io::ErrorKind::Unsupported,
            LeafRefused {
                leaf: PathBuf::from("/sys/fs/cgroup/init/corral-1-2"),
                reason: "the reason; set CORRAL_CGROUP_PARENT".to_owned(),
            },
        );
        match spawn_error(&Command::new("sh"), refused) {
            Error::Cgroup { path, source } => {
                assert_eq!(path, Path::new("/sys/fs/cgroup/init/corral-1-2"));
                assert_eq!(source.to_string(), "the reason; set CORRAL_CGROUP_PARENT");
            }
            other => panic!("expected Error::Cgroup, got {other:?}"),
        }
        // Any other refusal stays a spawn error.
        assert!(matches!(
            spawn_error(&Command::new("sh"), io::Error::from_raw_os_error(95)),
            Error::Spawn { .. }
        ));
    }

    #[test]
    fn resolves_like_execvp() {
        let found = resolve(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
            None,
        )
        .expect("sh");
        assert!(found.to_bytes().ends_with(b"/sh"));
        assert_eq!(
            resolve(
                OsStr::new("no-such-program-x"),
                Some(OsStr::new("/bin")),
                None
            )
            .map_err(|e| e.kind()),
            Err(io::ErrorKind::NotFound)
        );
        assert_eq!(
            resolve(OsStr::new("./x"), None, None)
                .expect("as is")
                .to_bytes(),
            b"./x"
        );
        assert!(resolve(OsStr::new(""), None, None).is_err());
        // A directory named like the program is skipped and reported as not executable.
        assert_eq!(
            resolve(OsStr::new("bin"), Some(OsStr::new("/")), None).map_err(|e| e.kind()),
            Err(io::ErrorKind::PermissionDenied)
        );
    }

    #[test]
    fn environment_applies_changes_in_order() {
        let mut command = Command::new("x");
        command
            .env_clear()
            .env("A", "1")
            .env("B", "2")
            .env_remove("A")
            .env("C", "3");
        let env: Vec<Vec<u8>> = environment(&command)
            .expect("env")
            .into_iter()
            .map(CString::into_bytes)
            .collect();
        assert_eq!(env, vec![b"B=2".to_vec(), b"C=3".to_vec()]);
        let mut bad = Command::new("x");
        bad.env("K", "a\0b");
        assert!(environment(&bad).is_err());
    }
}
