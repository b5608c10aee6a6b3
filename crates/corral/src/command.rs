//! What to run and how to end it, as plain data.

use std::{
    ffi::{OsStr, OsString},
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use crate::{
    backend::BackendChoice,
    limits::Limits,
    signal::Signal,
    terminate::{GraceEnds, Policy},
};

/// Where one of the command's standard streams comes from or goes: corral's
/// counterpart of [`std::process::Stdio`], with [`Stdio::Capture`] for what
/// corral reads and keeps across a kill.
///
/// The defaults: standard input [`Stdio::Null`] (a tool call never reads the
/// caller's input by accident), standard output and error [`Stdio::Capture`].
///
/// ```
/// let mut command = corral::Command::new("cat");
/// command.stdin(corral::Stdio::Piped).stdout(corral::Stdio::Inherit);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stdio {
    /// `/dev/null`.
    Null,
    /// The caller's own stream (a TTY stays a TTY).
    Inherit,
    /// A pipe the caller holds: the writer of standard input with
    /// [`Child::take_stdin`](crate::Child::take_stdin), the reader of an
    /// output with [`Child::take_stdout`](crate::Child::take_stdout) /
    /// [`Child::take_stderr`](crate::Child::take_stderr).
    Piped,
    /// Output only: read by corral and returned in
    /// [`Finished`](crate::Finished), also after a kill. As standard input it
    /// is refused at the spawn ([`Error::InvalidStdio`](crate::Error::InvalidStdio)).
    Capture,
}

/// What happens to processes the leader leaves behind when it exits by itself.
///
/// ```no_run
/// # async fn demo() -> Result<(), corral::Error> {
/// use std::time::Duration;
/// use corral::{Command, Leftovers};
/// // A script that starts a daemon on purpose, and exits.
/// let finished = Command::new("sh")
///     .args(["-c", "my-daemon &"])
///     .leftovers(Leftovers::Release { drain: Duration::from_millis(200) })
///     .run()
///     .await?;
/// println!("left running: {:?}", finished.report.released);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Leftovers {
    /// Terminate them with the same [`Policy`] (the default: a tool call must
    /// not leak helpers).
    #[default]
    Terminate,
    /// Leave them running (deliberate daemons). Captured output is drained for
    /// at most `drain`, then the pipes are detached. Released processes are
    /// listed in the report; corral no longer owns them (their cgroup, if any,
    /// is kept and reported).
    Release {
        /// How long to keep reading output after the leader exits.
        drain: Duration,
    },
}

/// Where the command starts.
#[derive(Debug, Clone)]
pub(crate) enum WorkingDir {
    /// A path, entered with `chdir` in the child.
    Path(PathBuf),
    /// An open directory, entered with `fchdir` in the child.
    Open(Arc<OwnedFd>),
}

/// A command to run as an owned tree: a `&mut self` builder, as
/// `tokio::process::Command`, plus corral's own settings (the termination
/// [`Policy`], a time limit, a cancellation token, the backend, limits).
///
/// ```no_run
/// # async fn demo(verbose: bool) -> Result<(), corral::Error> {
/// use std::time::Duration;
/// let mut command = corral::Command::new("npx");
/// command
///     .args(["-y", "some-mcp-server"])
///     .envs([("NODE_ENV", "production")])
///     .timeout(Duration::from_secs(60))
///     .grace(Duration::from_secs(2));
/// if verbose {
///     command.env("DEBUG", "1");
/// }
/// let finished = command.run().await?;
/// println!("{:?}, survivors: {:?}", finished.outcome, finished.report.survivors);
/// # Ok(()) }
/// ```
///
/// Every setting, and the getters that read them back (nothing is started):
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use corral::{BackendChoice, Command, GraceEnds, Leftovers, Limits, Policy, Signal, Stdio};
/// use tokio_util::sync::CancellationToken;
///
/// let mut command = Command::new("make");
/// command
///     .arg("-j4")
///     .args(["all", "check"])
///     .env_clear()
///     .env("PATH", "/usr/bin:/bin")
///     .envs([("LANG", "C")])
///     .env_remove("MAKEFLAGS")
///     .current_dir("/tmp")
///     .stdin(Stdio::Null)
///     .stdout(Stdio::Capture)
///     .stderr(Stdio::Inherit)
///     .capture_limit(1 << 20)
///     .policy(Policy::default())
///     .signal(Signal::INT) // `None`: no first signal, only the grace
///     .grace(Duration::from_secs(2))
///     .grace_ends(GraceEnds::AtLeaderExit)
///     .final_bound(Duration::from_millis(500))
///     .timeout(Duration::from_secs(600))
///     .cancel_on(CancellationToken::new())
///     .backend(BackendChoice::Auto)
///     .leftovers(Leftovers::Release { drain: Duration::from_millis(100) })
///     .limits(Limits::new().max_processes(256))
///     .foreground(false)
///     .new_session(true)
///     .on_signal(|signal| eprintln!("sending {signal:?}"))
///     .watchdog(true)
///     .ledger(true)
///     .ignore_sigpipe(false)
///     .default_signals([Signal::TTIN, Signal::TTOU])
///     .user(1000) // checked at the spawn: root, or this process's own ids
///     .group(1000);
///
/// assert_eq!(command.get_program(), "make");
/// assert_eq!(command.get_args().collect::<Vec<_>>(), ["-j4", "all", "check"]);
/// assert!(command.get_env_clear());
/// assert_eq!(command.get_envs().len(), 3);
/// assert_eq!(command.get_envs().last(), Some(("MAKEFLAGS".as_ref(), None)));
/// assert_eq!(command.get_current_dir(), Some("/tmp".as_ref()));
/// assert_eq!(command.get_policy().signal, Some(Signal::INT));
/// assert_eq!(command.get_policy().bound(), Duration::from_millis(2500));
/// assert_eq!(command.get_timeout(), Some(Duration::from_secs(600)));
/// assert_eq!(command.get_limits().max_processes, Some(256));
/// assert_eq!(command.display(), "make -j4 all check");
/// assert_eq!(command.program(), "make");
///
/// // An open directory instead of a path: the getter no longer names one.
/// command.current_dir_fd(Arc::new(std::fs::File::open("/tmp")?.into()));
/// assert_eq!(command.get_current_dir(), None);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Command {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(OsString, Option<OsString>)>,
    pub(crate) env_clear: bool,
    pub(crate) cwd: Option<WorkingDir>,
    pub(crate) stdin: Stdio,
    pub(crate) stdout: Stdio,
    pub(crate) stderr: Stdio,
    pub(crate) policy: Policy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: Option<CancellationToken>,
    pub(crate) backend: BackendChoice,
    pub(crate) leftovers: Leftovers,
    pub(crate) capture_limit: usize,
    pub(crate) watchdog: bool,
    pub(crate) ledger: bool,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) ignore_sigpipe: bool,
    /// [`Command::default_signals`], one bit per signal number (bit N-1
    /// for signal N).
    pub(crate) default_signals: u64,
    pub(crate) new_session: bool,
    pub(crate) foreground: bool,
    pub(crate) on_signal: OnSignal,
    pub(crate) limits: Limits,
}

/// [`Command::on_signal`]'s callback.
#[derive(Clone, Default)]
pub(crate) struct OnSignal(Option<Arc<dyn Fn(Option<Signal>) + Send + Sync>>);

impl OnSignal {
    /// Calls the callback, if there is one.
    pub(crate) fn call(&self, signal: Option<Signal>) {
        if let Some(callback) = &self.0 {
            callback(signal);
        }
    }
}

impl std::fmt::Debug for OnSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

/// The default cap on captured bytes per stream (64 MiB); the rest is counted
/// in [`Captured::dropped`](crate::capture::Captured::dropped).
pub const DEFAULT_CAPTURE_LIMIT: usize = 64 << 20;

impl Command {
    /// A command running `program` (looked up in `PATH` if it has no slash).
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            cwd: None,
            stdin: Stdio::Null,
            stdout: Stdio::Capture,
            stderr: Stdio::Capture,
            policy: Policy::default(),
            timeout: None,
            cancel: None,
            backend: BackendChoice::Auto,
            leftovers: Leftovers::default(),
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            foreground: false,
            on_signal: OnSignal::default(),
            limits: Limits::default(),
            watchdog: true,
            ledger: true,
            uid: None,
            gid: None,
            ignore_sigpipe: false,
            default_signals: 0,
            new_session: false,
        }
    }

    /// Adds one argument.
    pub fn arg(&mut self, arg: impl Into<OsString>) -> &mut Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(&mut self, args: I) -> &mut Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> &mut Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    /// Sets environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), Some(v.into()))));
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(&mut self, key: impl Into<OsString>) -> &mut Self {
        self.env.push((key.into(), None));
        self
    }

    /// Starts from an empty environment.
    pub fn env_clear(&mut self) -> &mut Self {
        self.env_clear = true;
        self.env.clear();
        self
    }

    /// Sets the working directory. Relative `PATH` entries are searched
    /// from it, as `execvp` in the command would.
    pub fn current_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cwd = Some(WorkingDir::Path(dir.into()));
        self
    }

    /// Sets the working directory to an open directory, which the child
    /// enters with `fchdir`: the command starts where `dir` is, whatever the
    /// path it was opened by names by then (a directory swapped for a symlink
    /// after the caller checked it cannot move the command). An `O_PATH`
    /// descriptor is enough; the command does not inherit it. Relative
    /// `PATH` entries are searched from it. With [`Command::user`] or
    /// [`Command::group`], the child enters it by the path it has now
    /// (read back from the descriptor), with the command's own rights, and
    /// is refused unless that path still leads to `dir`: a descriptor opened
    /// with the caller's rights never lets the command into a directory
    /// whose path it could not walk. Replaces a [`Command::current_dir`],
    /// and is replaced by one.
    pub fn current_dir_fd(&mut self, dir: impl Into<Arc<OwnedFd>>) -> &mut Self {
        self.cwd = Some(WorkingDir::Open(dir.into()));
        self
    }

    /// Sets standard input (default [`Stdio::Null`]).
    pub fn stdin(&mut self, stdio: Stdio) -> &mut Self {
        self.stdin = stdio;
        self
    }

    /// Sets standard output (default [`Stdio::Capture`]).
    pub fn stdout(&mut self, stdio: Stdio) -> &mut Self {
        self.stdout = stdio;
        self
    }

    /// Sets standard error (default [`Stdio::Capture`]).
    pub fn stderr(&mut self, stdio: Stdio) -> &mut Self {
        self.stderr = stdio;
        self
    }

    /// Sets the whole termination policy.
    pub fn policy(&mut self, policy: Policy) -> &mut Self {
        self.policy = policy;
        self
    }

    /// Sets the first signal of the termination (default `SIGTERM`); `None`
    /// sends nothing and only starts the grace before `SIGKILL` (GNU
    /// `timeout -s 0`).
    pub fn signal(&mut self, signal: impl Into<Option<Signal>>) -> &mut Self {
        self.policy.signal = signal.into();
        self
    }

    /// Sets the grace between the first signal and `SIGKILL` (default 5 s).
    pub fn grace(&mut self, grace: Duration) -> &mut Self {
        self.policy.grace = grace;
        self
    }

    /// Sets what else ends the grace: with [`GraceEnds::AtLeaderExit`], the
    /// leader's exit does, and what is left of the tree then gets `SIGKILL`
    /// at once (default [`GraceEnds::WhenElapsed`]: only the grace passing).
    pub fn grace_ends(&mut self, ends: GraceEnds) -> &mut Self {
        self.policy.grace_ends = ends;
        self
    }

    /// Sets how long to wait after `SIGKILL` before reporting survivors
    /// (default 1 s).
    pub fn final_bound(&mut self, bound: Duration) -> &mut Self {
        self.policy.final_bound = bound;
        self
    }

    /// Terminates the tree when this much time has passed since the spawn.
    pub fn timeout(&mut self, limit: Duration) -> &mut Self {
        self.timeout = Some(limit);
        self
    }

    /// Terminates the tree when this token is cancelled.
    pub fn cancel_on(&mut self, token: CancellationToken) -> &mut Self {
        self.cancel = Some(token);
        self
    }

    /// Chooses the containment backend (default: the best available).
    pub fn backend(&mut self, choice: BackendChoice) -> &mut Self {
        self.backend = choice;
        self
    }

    /// What to do with processes left behind when the leader exits.
    pub fn leftovers(&mut self, leftovers: Leftovers) -> &mut Self {
        self.leftovers = leftovers;
        self
    }

    /// Limits the tree's resources ([`Limits`]). The tree-wide limits
    /// (processes, memory, CPU) are enforced by the kernel on the tree's
    /// leaf cgroup, so only the cgroup backend applies them: with them
    /// (unless [`Limits::best_effort_tree`]), `Auto` never falls back to
    /// another backend, and one this host cannot enforce is
    /// [`Error::LimitUnavailable`](crate::error::Error::LimitUnavailable)
    /// before anything starts. The per-process limits (open files, core
    /// size, address space) are set on the leader before `exec`, on every
    /// backend; one above this process's hard limit (without root) is
    /// [`Error::InvalidLimits`](crate::error::Error::InvalidLimits) unless
    /// [`Limits::best_effort_process`]. What the limits did is in
    /// [`CleanupReport::limits`](crate::outcome::CleanupReport::limits); a
    /// tree a limit ended is [`Outcome::LimitExceeded`](crate::outcome::Outcome::LimitExceeded).
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// Keeps at most this many bytes per captured stream.
    pub fn capture_limit(&mut self, bytes: usize) -> &mut Self {
        self.capture_limit = bytes;
        self
    }

    /// Whether the leader must stay in the caller's process group (default
    /// off), so that, when the caller runs in a terminal's foreground, the
    /// command can read the terminal and gets its signals (GNU `timeout
    /// --foreground`). The cgroup and subreaper backends always leave the
    /// leader there and still end the whole tree; the group backend needs a
    /// process group of its own, so with this on it is never chosen, and
    /// asking for it is [`Error::BackendUnavailable`](crate::error::Error).
    pub fn foreground(&mut self, on: bool) -> &mut Self {
        self.foreground = on;
        self
    }

    /// Calls `callback` as the termination goes, just before each signal is
    /// sent to the tree: `Some(signal)`, or `None` where the policy sends no
    /// first signal and only starts the grace (GNU `timeout -v` says
    /// `sending signal ...` at that moment, even for `-s 0`). It runs on the
    /// supervising task: it must not block.
    pub fn on_signal(
        &mut self,
        callback: impl Fn(Option<Signal>) + Send + Sync + 'static,
    ) -> &mut Self {
        self.on_signal = OnSignal(Some(Arc::new(callback)));
        self
    }

    /// Whether a watchdog process kills the tree if this process dies without
    /// cleaning up (default on; see [`crate::owner::watchdog`]). Off, or without a
    /// watchdog executable, the report says the guard is off.
    pub fn watchdog(&mut self, on: bool) -> &mut Self {
        self.watchdog = on;
        self
    }

    /// Whether the tree is recorded in the crash ledger (default on; see
    /// [`crate::owner::ledger`]).
    pub fn ledger(&mut self, on: bool) -> &mut Self {
        self.ledger = on;
        self
    }

    /// Runs the command as user `uid` (the child calls `setuid` just before
    /// `exec`; supplementary groups are dropped when corral is root). Needs
    /// root unless `uid` is corral's own.
    ///
    /// With the cgroup backend, a command that runs as a user who cannot
    /// write the leaf's or its ancestors' `cgroup.procs` (leaves made by root
    /// belong to root, mode 0644) cannot move itself out of the leaf; where
    /// that user can, the report says so in its notes.
    ///
    /// Set [`Command::group`] too: otherwise the group stays corral's own
    /// (root's group when corral is root). The environment is not changed
    /// (`HOME`, `USER` stay as given).
    pub fn user(&mut self, uid: u32) -> &mut Self {
        self.uid = Some(uid);
        self
    }

    /// Runs the command with primary group `gid` (`setgid` before `exec`,
    /// supplementary groups dropped when corral is root). Needs root unless
    /// `gid` is corral's own.
    pub fn group(&mut self, gid: u32) -> &mut Self {
        self.gid = Some(gid);
        self
    }

    /// Starts the command with `SIGPIPE` ignored. By default it starts with
    /// `SIGPIPE` at its default disposition, as std starts its children
    /// (Rust programs ignore it themselves). A supervisor whose own parent
    /// left it ignored passes that on
    /// ([`host::sigpipe_ignored_at_start`](crate::host::sigpipe_ignored_at_start)):
    /// its command then gets `EPIPE` from a write to a closed pipe instead
    /// of dying of the signal. Every other ignored signal is inherited as is.
    pub fn ignore_sigpipe(&mut self, ignore: bool) -> &mut Self {
        self.ignore_sigpipe = ignore;
        self
    }

    /// Starts the command with `signals` at their default disposition even
    /// where this process ignores them (`execve` keeps an ignored signal
    /// ignored, and resets only handled ones): as GNU `timeout` resets
    /// `SIGTTIN` and `SIGTTOU`, which it ignores itself, in its child.
    /// `SIGKILL` and `SIGSTOP`, never ignored, are left out; so is a
    /// `SIGPIPE` that [`ignore_sigpipe`](Self::ignore_sigpipe) asks for.
    pub fn default_signals(&mut self, signals: impl IntoIterator<Item = Signal>) -> &mut Self {
        for signal in signals {
            let number = signal.number();
            if (1..=64).contains(&number) && signal != Signal::KILL && signal != Signal::STOP {
                self.default_signals |= 1 << (number - 1);
            }
        }
        self
    }

    /// Starts the command in a new session (`setsid`), with no
    /// controlling terminal: nothing in the tree can open `/dev/tty`, read
    /// the caller's terminal, or push input into it (`TIOCSTI`), and a
    /// terminal's hangup does not reach it. For commands from a less
    /// trusted party than the caller (a server's clients, another user with
    /// [`Command::user`]). Off by default; [`Command::foreground`] is then
    /// without effect (the tree has no terminal to be in the foreground
    /// of).
    pub fn new_session(&mut self, on: bool) -> &mut Self {
        self.new_session = on;
        self
    }

    /// The program, as given to [`Command::new`].
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments, in order.
    pub fn get_args(&self) -> impl ExactSizeIterator<Item = &OsStr> {
        self.args.iter().map(OsString::as_os_str)
    }

    /// The environment changes, in the order they were made: `(key,
    /// Some(value))` for a variable set, `(key, None)` for one removed. After
    /// [`Command::env_clear`], only the changes made since.
    pub fn get_envs(&self) -> impl ExactSizeIterator<Item = (&OsStr, Option<&OsStr>)> {
        self.env
            .iter()
            .map(|(key, value)| (key.as_os_str(), value.as_deref()))
    }

    /// Whether the command starts from an empty environment
    /// ([`Command::env_clear`]).
    pub fn get_env_clear(&self) -> bool {
        self.env_clear
    }

    /// The working directory set by [`Command::current_dir`] (`None` if none
    /// was, or if it was given as a descriptor).
    pub fn get_current_dir(&self) -> Option<&Path> {
        match &self.cwd {
            Some(WorkingDir::Path(path)) => Some(path),
            _ => None,
        }
    }

    /// The termination policy.
    pub fn get_policy(&self) -> &Policy {
        &self.policy
    }

    /// The time limit, if one is set.
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The limits.
    pub fn get_limits(&self) -> &Limits {
        &self.limits
    }

    /// The command line, arguments joined by spaces, for messages.
    pub fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The program as given, for messages.
    pub fn program(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}
