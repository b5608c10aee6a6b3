//! The command line, as clap parses it.

use std::{ffi::OsString, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use corral::{BackendChoice, duration};

use crate::{
    gnu_duration,
    kit::{exit, limits::LimitArgs, sink::ReportArgs},
};

/// `VERSION (COMMIT)`, or the version alone when the build could not tell
/// the commit (build.rs).
pub const VERSION: &str = env!("CORRAL_VERSION");

const LONG_VERSION: &str = concat!(
    env!("CORRAL_VERSION"),
    "\nSee which containment backends this machine offers: corral capabilities"
);

const EXAMPLES: &str = "\
Examples:
  corral run 10s make test
  corral run --timeout 10s -- make test
  corral run -t 1m30s -k 2s -- ./server --port 8080
  corral run -t 5 -s INT --report run.json -- python3 job.py
  echo hello | corral run -- cat
  corral capabilities";

/// Run a command as an owned process tree and end all of it on time.
#[derive(Debug, Parser)]
#[command(
    name = "corral",
    version = VERSION,
    long_version = LONG_VERSION,
    after_help = EXAMPLES,
    subcommand_required = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `corral run ...` parsed against the `run` subcommand alone, without
/// building the rest of the command line (every `mcp` subcommand and its
/// options): the same [`RunArgs`] the whole parse gives for the same
/// arguments, without what was about a third of corral's start-up cost
/// over GNU `timeout` (BENCHMARKS.md section 3). `None` for any other command line, and for
/// one the subcommand does not take as it is (an error, `--help`): the
/// whole parse then answers it in its own words.
pub fn run_alone(args: &[OsString]) -> Option<RunArgs> {
    if args.get(1).is_none_or(|first| first != "run") {
        return None;
    }
    if let Some(plain) = plain_run(&args[2..]) {
        return Some(plain);
    }
    let command = RunArgs::augment_args(clap::Command::new("run"));
    let matches = command.try_get_matches_from(&args[1..]).ok()?;
    <RunArgs as clap::FromArgMatches>::from_arg_matches(&matches).ok()
}

/// `corral run`'s defaults, as clap reads them (and [`plain_run`]).
const NO_TIMEOUT: &str = "0";
const KILL_AFTER: &str = "5s";
const FINAL_BOUND: &str = "1s";
const FIRST_SIGNAL: &str = "TERM";

/// The two shapes nearly every `corral run` takes, read without clap: the
/// command after `--` with no option before it, or with a time limit alone
/// (`-t D`, `--timeout D`, `--timeout=D`: what [`run::gnu::rewrite`]
/// makes of `corral run D COMMAND`). Building clap's parser for `run` costs
/// about 0.1 ms, a tenth of what `corral run -- true` spends over GNU
/// `timeout` (BENCHMARKS.md section 3). The same [`RunArgs`] clap gives
/// (`tests::run_alone_gives_what_the_whole_parse_gives_or_nothing`);
/// `None` for anything else, a bad duration included: clap then answers.
///
/// [`run::gnu::rewrite`]: crate::run::gnu::rewrite
fn plain_run(args: &[OsString]) -> Option<RunArgs> {
    // The time limit, and where the `--` before the command is.
    let (timeout, dashes) = match args.first()?.to_str()? {
        "--" => (NO_TIMEOUT, 0),
        "-t" | "--timeout" => (args.get(1)?.to_str()?, 2),
        other => (other.strip_prefix("--timeout=")?, 1),
    };
    let command = match args.get(dashes..)? {
        [dash, command @ ..] if dash == "--" && !command.is_empty() => command,
        _ => return None,
    };
    let duration = |text: &str| gnu_duration::parse_lenient(text).ok();
    Some(RunArgs {
        timeout: duration(timeout)?,
        kill_after: duration(KILL_AFTER)?,
        final_bound: duration(FINAL_BOUND)?,
        signal: parse_signal(FIRST_SIGNAL).ok()?,
        preserve_status: false,
        foreground: false,
        verbose: false,
        backend: BackendArg::Auto,
        user: None,
        limits: LimitArgs::default(),
        report: ReportArgs::default(),
        grace_ends: corral::GraceEnds::default(),
        timeout_name: None,
        command: command.to_vec(),
    })
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND with a time limit, like timeout(1), and end its whole
    /// process tree (setsid and double-fork escapes included).
    #[command(
        after_help = run_after_help(),
        override_usage = "corral run [OPTIONS] DURATION COMMAND [ARGS]...\n       \
                          corral run [OPTIONS] [-t DURATION] -- COMMAND [ARGS]..."
    )]
    Run(RunArgs),
    /// Say which containment backends this machine offers, and why not the
    /// others.
    Capabilities {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// MCP tooling: `corral mcp wrap -- SERVER_COMMAND...` guards a stdio MCP
    /// server; `corral mcp call` and `corral mcp list` talk to one (see
    /// docs/mcp.md).
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: McpCommand,
    },
    /// List the live trees in the crash ledger: owner, age, members.
    Ps(LedgerArgs),
    /// End the trees whose owner died (identity-checked; see docs/design.md).
    Reap {
        /// Only say what would be ended.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        ledger: LedgerArgs,
    },
    /// Print a shell completion script to standard output.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// For packagers: write the man pages or the completion scripts into
    /// DIR (scripts/install, the Debian package).
    #[command(hide = true)]
    Generate {
        /// What to write.
        what: Generated,
        /// Where (created if missing).
        dir: PathBuf,
    },
}

/// What `corral generate` writes (generate.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    /// `corral.1`, one page per subcommand (`corral-run.1`,
    /// `corral-mcp-wrap.1`, ...), and `corral-timeout.1`.
    Man,
    /// `corral.bash`, `_corral` (zsh) and `corral.fish`.
    Completions,
}

/// `corral mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Relay an MCP client (stdin/stdout) to a stdio MCP server run as an
    /// owned process tree, and end all of that tree when either side goes.
    Wrap(WrapArgs),
    /// Call one tool of a stdio MCP server run as an owned process tree,
    /// print its result, and end all of that tree.
    #[command(override_usage = "corral mcp call [OPTIONS] TOOL [ARGS_JSON] -- SERVER_COMMAND...")]
    Call(CallArgs),
    /// List the tools of a stdio MCP server run as an owned process tree,
    /// and end all of that tree.
    #[command(override_usage = "corral mcp list [OPTIONS] -- SERVER_COMMAND...")]
    List(ListArgs),
    /// Read or cancel a task a call ran as (`corral mcp call --task`), from
    /// a new process with the same credentials: for scripts that detach and
    /// come back.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Be an MCP server (stdio, or streamable HTTP with --http) whose tools
    /// run commands as owned process trees: run, list_runs, read_run,
    /// wait_run, kill_run.
    Serve(ServeArgs),
    /// Put every MCP server of every agent host on this machine (Claude
    /// Code, Claude Desktop, Codex, Gemini CLI, opencode, Cursor, VS Code)
    /// behind `corral mcp wrap`, and take them back out.
    #[command(subcommand)]
    Guard(GuardCommand),
}

/// `corral mcp task ...`.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Read task ID once (`tasks/get`): print its result if it completed
    /// (exit as `corral mcp call` would have); 124 while it still works,
    /// or if it was cancelled.
    #[command(override_usage = "corral mcp task get [OPTIONS] --url URL ID")]
    #[command(after_help = task_after_help())]
    Get(TaskArgs),
    /// Ask the server to cancel task ID (`tasks/cancel`): corral's server
    /// ends the run's whole tree. Exit 0 once the server acknowledged it.
    #[command(override_usage = "corral mcp task cancel [OPTIONS] --url URL ID")]
    #[command(after_help = task_after_help())]
    Cancel(TaskArgs),
}

/// `corral mcp task get|cancel ID`.
#[derive(Debug, Args)]
pub struct TaskArgs {
    /// The task's id, as `corral mcp call --task` printed it.
    #[arg(value_name = "ID", value_parser = parse_task_id)]
    pub id: String,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// Checks a task id: what a server gives (`task-` and 32 hex digits for
/// corral's) is printable ASCII without spaces; anything else is a mistake
/// of the caller's, said with the fix.
fn parse_task_id(input: &str) -> Result<String, String> {
    const FIX: &str = "give the id `corral mcp call --task` printed (on standard error, and \
                       as task_id in its --json envelope), e.g. task-0123456789abcdef0123456789abcdef";
    if input.is_empty() {
        return Err(format!("ID is empty; {FIX}"));
    }
    if input.len() > 256 {
        return Err(format!(
            "ID has {} bytes, more than 256; {FIX}",
            input.len()
        ));
    }
    if !input.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(format!(
            "{input:?} is not a task id: it has spaces or characters outside printable ASCII; {FIX}"
        ));
    }
    Ok(input.to_owned())
}

fn task_after_help() -> String {
    format!(
        "{}\n\
         A task belongs to the credentials that created it: give the same --url and\n\
         --header as the call (another token is told the task is unknown). With\n\
         --json, the envelope of `corral mcp call` with task_id and task_status.\n\
         \n\
         Examples:\n  \
           corral mcp task get --url http://127.0.0.1:8080/mcp --header \"Authorization: Bearer $T\" task-...\n  \
           corral mcp task cancel --url http://127.0.0.1:8080/mcp --header \"Authorization: Bearer $T\" task-...",
        exit::CALL.help()
    )
}

/// `corral mcp guard ...`.
#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// List every MCP server entry of every known host config (user scope,
    /// and the project's): host, file, scope, name, what it starts, and
    /// whether it is guarded. Variables are shown by name only.
    #[command(after_help = exit::GUARD.help())]
    Status(GuardStatusArgs),
    /// Rewrite each chosen stdio entry so the host starts `CORRAL mcp wrap
    /// [WRAP OPTIONS] -- COMMAND ARGS...`; nothing else in the file changes.
    #[command(
        after_help = guard_on_after_help(),
        override_usage = "corral mcp guard on [--host H]... [--server NAME]... [--project DIR] [--dry-run] [-- WRAP OPTIONS...]"
    )]
    On(GuardOnArgs),
    /// Take the guard away: each guarded entry gets back the bytes `on`
    /// replaced.
    #[command(after_help = exit::GUARD.help())]
    Off(GuardSelect),
}

/// Which entries `corral mcp guard` acts on.
#[derive(Debug, Args)]
pub struct GuardSelect {
    /// Only this host's files (repeatable).
    #[arg(long = "host", value_name = "HOST", value_parser = guard_hosts())]
    pub hosts: Vec<String>,
    /// Only the entries of this name (repeatable).
    #[arg(long = "server", value_name = "NAME")]
    pub servers: Vec<String>,
    /// The project whose files (`.mcp.json`, `.codex/config.toml`, ...)
    /// are included; default: the current directory.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print what would change as a unified diff; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `corral mcp guard status`.
#[derive(Debug, Args)]
pub struct GuardStatusArgs {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only this host's files (repeatable).
    #[arg(long = "host", value_name = "HOST", value_parser = guard_hosts())]
    pub hosts: Vec<String>,
    /// Only the entries of this name (repeatable).
    #[arg(long = "server", value_name = "NAME")]
    pub servers: Vec<String>,
    /// The project whose files are included; default: the current
    /// directory.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// `corral mcp guard on`.
#[derive(Debug, Args)]
pub struct GuardOnArgs {
    #[command(flatten)]
    pub select: GuardSelect,
    /// Options for `corral mcp wrap` written into each entry, after `--`
    /// (e.g. -- --kill-after 5s --max-memory 2G).
    #[arg(last = true, value_name = "WRAP OPTIONS", allow_hyphen_values = true)]
    pub wrap_options: Vec<String>,
}

/// The hosts `--host` accepts.
fn guard_hosts() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(corral_mcp::guard::HOSTS.iter().map(|h| h.id))
}

fn guard_on_after_help() -> String {
    format!(
        "Examples:\n  \
           corral mcp guard on\n  \
           corral mcp guard on --host codex --dry-run\n  \
           corral mcp guard on --server everything -- --kill-after 5s\n  \
           corral mcp guard off\n\n\
         The original bytes of each file are kept in $XDG_STATE_HOME/corral/guard/backups \
         (default ~/.local/state/corral/guard/backups). See docs/mcp.md.\n\n{}",
        exit::GUARD.help()
    )
}

/// Options of `corral ps` and `corral reap`.
#[derive(Debug, Args)]
pub struct LedgerArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The ledger directory (default: $CORRAL_LEDGER_DIR, else
    /// $XDG_RUNTIME_DIR/corral, /run/corral for root, $TMPDIR/corral-UID).
    #[arg(long, value_name = "DIR")]
    pub ledger: Option<PathBuf>,
}

/// `corral run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// End the tree when this much time has passed. 0 (the default) means no
    /// limit; what the command leaves behind is still ended when it exits.
    /// In GNU's form, DURATION comes first instead.
    #[arg(short, long, value_name = "DURATION", value_parser = gnu_duration::parse_lenient, allow_hyphen_values = true, default_value = NO_TIMEOUT)]
    pub timeout: Duration,

    /// Send SIGKILL this long after SIGNAL if the tree has not ended. Unlike
    /// timeout(1), corral never waits forever: the default is 5s, and 0
    /// sends SIGKILL at once instead of SIGNAL.
    #[arg(short, long, value_name = "DURATION", value_parser = gnu_duration::parse_lenient, allow_hyphen_values = true, default_value = KILL_AFTER)]
    pub kill_after: Duration,

    /// After SIGKILL, wait at most this long for the tree to be gone, then
    /// exit anyway and report the survivors (processes stuck in the kernel).
    #[arg(long, value_name = "DURATION", value_parser = gnu_duration::parse_lenient, allow_hyphen_values = true, default_value = FINAL_BOUND)]
    pub final_bound: Duration,

    /// The first signal sent to every process of the tree: a name (TERM,
    /// SIGTERM, RTMIN+2) or a number, as `kill -l` lists them; 0 (or EXIT)
    /// sends none and only starts the --kill-after clock.
    #[arg(short, long, value_name = "SIG", default_value = FIRST_SIGNAL, value_parser = parse_signal)]
    pub signal: FirstSignal,

    /// Exit with the command's own status even after a timeout (the exit
    /// code, or 128+N if it died of signal N) instead of 124.
    #[arg(short, long)]
    pub preserve_status: bool,

    /// Keep the command in corral's process group, so that from a script
    /// run in a terminal it can read the terminal and gets its signals (as
    /// timeout --foreground). corral's cgroup and subreaper backends always
    /// do, and still end the whole tree; with --backend group it is refused.
    #[arg(short, long)]
    pub foreground: bool,

    /// Say on standard error what corral does (each signal sent). RUST_LOG
    /// overrides the log filter.
    #[arg(short, long)]
    pub verbose: bool,

    /// How to contain the tree: auto picks cgroup, then subreaper, then
    /// group (see `corral capabilities`).
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,

    /// Run the command as USER, with USER's primary group or GROUP (names
    /// from /etc/passwd and /etc/group, or numbers), and no supplementary
    /// groups. Needs root. Under root, such a command cannot move itself out
    /// of its leaf cgroup. The environment (HOME, USER) is passed unchanged.
    #[arg(short, long, value_name = "USER[:GROUP]")]
    pub user: Option<String>,

    // --max-procs, --max-memory, --max-swap, --cpus, --cpu-time,
    // --limits-best-effort (the same for every subcommand that runs a tree).
    #[command(
        flatten,
        next_help_heading = "Limits on the whole tree (cgroup v2; see corral capabilities)"
    )]
    pub limits: LimitArgs,

    // --report, --report-fd (the same for every supervising subcommand).
    #[command(flatten)]
    pub report: ReportArgs,

    /// What else ends the --kill-after grace; `corral run`'s is only its
    /// time passing. As `timeout` without -k: the command's exit.
    #[arg(skip)]
    pub grace_ends: corral::GraceEnds,

    /// Set when corral runs as `timeout` (its `argv[0]`): GNU's messages,
    /// prefixed with this name, and GNU's 137 after an escalation.
    #[arg(skip)]
    pub timeout_name: Option<String>,

    /// The command and its arguments, after `--`.
    #[arg(
        last = true,
        required = true,
        value_name = "COMMAND",
        num_args = 1..,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// `--signal`: the first signal, or none (GNU's `-s 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstSignal(pub Option<corral::Signal>);

/// Parses `--signal` as GNU does (see [`corral::Signal::parse_or_none`]),
/// with surrounding spaces allowed.
fn parse_signal(input: &str) -> Result<FirstSignal, corral::ParseSignalError> {
    match corral::Signal::parse_or_none(input.trim()) {
        Ok(signal) => Ok(FirstSignal(signal)),
        // The error names what was given.
        Err(_) => input
            .parse::<corral::Signal>()
            .map(|s| FirstSignal(Some(s))),
    }
}

/// `corral mcp wrap`: relay an MCP client (stdin/stdout) to a stdio MCP
/// server run as an owned process tree, and end all of that tree when either
/// side goes.
#[derive(Debug, Args)]
#[command(after_help = exit::WRAP.help())]
pub struct WrapArgs {
    // --close-grace, --kill-after, --final-bound, --backend (the same for
    // every subcommand that runs an MCP server).
    #[command(flatten)]
    pub tree: ServerTreeArgs,

    /// Drop frames longer than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = corral_mcp::frame::DEFAULT_MAX_FRAME_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_frame_bytes: usize,

    // --report, --report-fd (the same for every supervising subcommand).
    #[command(flatten)]
    pub report: ReportArgs,

    /// Log lifecycle events to stderr (RUST_LOG overrides the filter).
    #[arg(short, long)]
    pub verbose: bool,

    /// The server command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "SERVER_COMMAND",
          allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// How an MCP server's tree is run and ended: the same for `corral mcp
/// wrap`, `call` and `list`.
#[derive(Debug, Args)]
pub struct ServerTreeArgs {
    /// After the server's stdin is closed, how long it may take to exit by
    /// itself before its tree gets SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, default_value = "2s")]
    pub close_grace: Duration,

    /// From SIGTERM to SIGKILL.
    #[arg(short, long, value_name = "DURATION", value_parser = duration::parse, default_value = "2s")]
    pub kill_after: Duration,

    /// After SIGKILL, wait at most this long, then exit and report survivors.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, default_value = "1s")]
    pub final_bound: Duration,

    /// How to contain the tree: auto (cgroup, then subreaper, then group),
    /// cgroup, subreaper or group.
    #[arg(long, value_name = "BACKEND", default_value = "auto", value_parser = clap::value_parser!(BackendChoice))]
    pub backend: BackendChoice,

    // Limits on the server's whole tree: --max-procs, --max-memory,
    // --max-swap, --cpus, --cpu-time, --limits-best-effort.
    #[command(
        flatten,
        next_help_heading = "Limits on the server's whole tree (cgroup v2; see corral capabilities)"
    )]
    pub limits: LimitArgs,
}

/// Which MCP server a client subcommand talks to: a command run as an owned
/// tree (after `--`), or a streamable HTTP endpoint (`--url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerTarget {
    /// A stdio server: this command and its arguments.
    Stdio(Vec<OsString>),
    /// A streamable HTTP endpoint, with the headers to send.
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// `(name, value)` pairs from `--header`.
        headers: Vec<(String, String)>,
    },
}

/// What `corral mcp call` and `corral mcp list` share: the server, its
/// tree, the deadlines and the output form.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Deadline of the whole handshake (`server/discover`, then the legacy
    /// `initialize` with what is left); discover gets a quarter of it.
    /// Default: 10s for discover, 30s for initialize.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub connect_timeout: Option<Duration>,

    /// Hard deadline of the request once connected; past it the outcome is
    /// unknown (exit 124). 0 means none.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, default_value = "60s")]
    pub timeout: Duration,

    /// Print one JSON envelope on standard output instead of text.
    #[arg(long)]
    pub json: bool,

    /// How to answer the server's elicitation requests (there is no user
    /// to ask): decline them, or accept with each field's default (declined
    /// when a required field has none). Without it, the capability is not
    /// declared and such requests are refused.
    #[arg(long, value_name = "POLICY")]
    pub elicitation: Option<ElicitationPolicy>,

    // --close-grace, --kill-after, --final-bound, --backend.
    #[command(flatten)]
    pub tree: ServerTreeArgs,

    /// Log lifecycle events to stderr (RUST_LOG overrides the filter).
    #[arg(short, long)]
    pub verbose: bool,

    /// A streamable HTTP MCP endpoint to connect to instead of a server
    /// command (plain http://; there is no process tree to end).
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub url: Option<String>,

    /// A header sent with every HTTP request, e.g. 'Authorization: Bearer
    /// TOKEN' (with --url; repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header, requires = "url")]
    pub headers: Vec<(String, String)>,

    /// The server command and its arguments, after `--`.
    #[arg(last = true, required_unless_present = "url", num_args = 1.., value_name = "SERVER_COMMAND",
          allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// `--elicitation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ElicitationPolicy {
    /// Decline every request.
    Decline,
    /// Accept with each field's default.
    Defaults,
}

impl ClientArgs {
    /// The server to connect to.
    pub fn target(&self) -> ServerTarget {
        match &self.url {
            Some(url) => ServerTarget::Http {
                url: url.clone(),
                headers: self.headers.clone(),
            },
            None => ServerTarget::Stdio(self.command.clone()),
        }
    }
}

/// Parses `--header 'NAME: VALUE'`.
fn parse_header(input: &str) -> Result<(String, String), String> {
    match input.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!(
            "{input:?} is not a header: write it as 'NAME: VALUE', e.g. 'Authorization: Bearer TOKEN'"
        )),
    }
}

/// `corral mcp call`: call one tool of an MCP server run as an owned tree,
/// print its result, end the tree.
#[derive(Debug, Args)]
#[command(after_help = call_after_help())]
pub struct CallArgs {
    /// The tool's name.
    #[arg(value_name = "TOOL")]
    pub tool: String,

    /// The tool's arguments: one JSON object, e.g. '{"message": "hi"}'.
    #[arg(value_name = "ARGS_JSON", value_parser = parse_object)]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,

    /// Declare the Tasks extension (2026-07-28): a server may answer a long
    /// call with a task, which corral polls to its end. Its id is said on
    /// standard error at once (and is task_id in the --json envelope): if
    /// corral is killed, `corral mcp task get ID` reads the result later. A
    /// signal or --timeout cancels the task (`tasks/cancel`).
    #[arg(long)]
    pub task: bool,

    #[command(flatten)]
    pub client: ClientArgs,
}

/// `corral mcp list`: list the tools of an MCP server run as an owned tree,
/// then end the tree.
#[derive(Debug, Args)]
#[command(after_help = exit::LIST.help())]
pub struct ListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `corral mcp serve`: an MCP server whose tools run commands as owned
/// trees.
#[derive(Debug, Args)]
#[command(after_help = serve_after_help())]
pub struct ServeArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdin/stdout,
    /// e.g. 127.0.0.1:8080 (port 0: any free port). Loopback only unless
    /// --allow-remote.
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub http: Option<std::net::SocketAddr>,

    /// With --http: allow a non-loopback address (and any Host header).
    /// There is no TLS: put a TLS proxy in front.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,

    /// With --http: a client's bearer token is this file's contents
    /// (trimmed), and the client is named by the file's name without its
    /// extension (alice.token: alice). Repeatable, one file per client: each
    /// client sees and controls only the background runs it started. The
    /// file must be a regular file (not a symlink) with one name, owned by
    /// the user the server runs as (or root), closed to group and others
    /// (chmod 600), in directories (up to /) that only that user or root
    /// can change (or sticky, like /tmp).
    /// Default: one random token, printed on stderr.
    #[arg(long = "token-file", value_name = "FILE", requires = "http")]
    pub token_files: Vec<PathBuf>,

    /// With --http: a browser Origin allowed to call (repeatable; default:
    /// http://127.0.0.1:PORT, http://localhost:PORT, http://[::1]:PORT).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "http")]
    pub allowed_origins: Vec<String>,

    /// A directory commands may run in (repeatable; default: the current
    /// directory).
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,

    /// Trees alive at once; a run beyond waits (default 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(usize))]
    pub max_concurrent: Option<usize>,

    /// Refuse a run beyond --max-concurrent instead of waiting.
    #[arg(long)]
    pub reject_when_busy: bool,

    /// Cap on each output stream kept in a result (default 1 MiB).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(usize))]
    pub max_output: Option<usize>,

    /// Time limit of a run that names none (default 60s).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub default_timeout: Option<Duration>,

    /// Cap on the time limit a run may ask for (default 1h).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub max_timeout: Option<Duration>,

    /// From SIGTERM to SIGKILL when a run is ended (default 2s).
    #[arg(short, long, value_name = "DURATION", value_parser = duration::parse)]
    pub kill_after: Option<Duration>,

    /// After SIGKILL, wait at most this long, then report survivors
    /// (default 1s).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub final_bound: Option<Duration>,

    /// A run not done within this time is answered with a task, when its
    /// request declared the MCP Tasks extension (protocol 2026-07-28): the
    /// client polls tasks/get, and the run outlives its connection within
    /// its own timeout (default 1s; 0s: at once).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, conflicts_with = "no_tasks")]
    pub task_window: Option<Duration>,

    /// Never answer with a task, even to a client that declared the Tasks
    /// extension.
    #[arg(long)]
    pub no_tasks: bool,

    /// How long a finished task's result is kept after its run ended
    /// (default 1h).
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub task_ttl: Option<Duration>,

    /// Tasks kept at once, running and finished (default 64); beyond it the
    /// oldest finished one is dropped, and when all still run a long run is
    /// answered directly.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_tasks: Option<usize>,

    /// How to contain each run: auto (cgroup, then subreaper, then group),
    /// cgroup, subreaper or group.
    #[arg(long, value_name = "BACKEND", default_value = "auto", value_parser = clap::value_parser!(BackendChoice))]
    pub backend: BackendChoice,

    /// Append one JSON line per run to this file (created with mode 600).
    /// Like a --token-file: a regular file (not a symlink) with one name,
    /// owned by the user the server runs as (or root), closed to group and
    /// others (records hold command lines), in directories that only that
    /// user or root can change (or sticky).
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,

    /// Offer the tools of FILE besides the generic ones: each a fixed
    /// command the operator chose, with typed arguments that fill {name}
    /// placeholders inside its argv elements (never through a shell), run
    /// as a run of this server (roots, limits, audit). Read once at start;
    /// like a --token-file, owned by the server's user or root and
    /// writable by nobody else, in directories only they can change (others
    /// may read it). Format: docs/mcp.md, "Tools files".
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,

    /// Offer only the tools of the --tools file, not run, list_runs,
    /// read_run, wait_run and kill_run: the agent can run only the
    /// operator's commands.
    #[arg(long, requires = "tools")]
    pub tools_only: bool,

    /// Run every command as USER, with USER's primary group or GROUP
    /// (names from /etc/passwd and /etc/group, or numbers), and no
    /// supplementary groups. Root only. Under root, such a command cannot
    /// move itself out of its leaf cgroup; without --user, a root server
    /// runs every command as root (it warns at start-up). Give the runs an
    /// account of their own (useradd --system --no-create-home corral-run,
    /// then --user corral-run), not nobody: whatever else runs as nobody
    /// could read, signal or trace the runs (it warns at start-up).
    #[arg(short, long, value_name = "USER[:GROUP]")]
    pub user: Option<String>,

    // Limits on each run's whole tree: --max-procs, --max-memory,
    // --max-swap, --cpus, --cpu-time, --limits-best-effort.
    #[command(
        flatten,
        next_help_heading = "Limits on each run's whole tree (cgroup v2; see corral capabilities)"
    )]
    pub limits: LimitArgs,

    /// Log lifecycle events to stderr (RUST_LOG overrides the filter).
    #[arg(short, long)]
    pub verbose: bool,
}

/// Parses `--http ADDR`: an IP address and a port.
fn parse_socket_addr(input: &str) -> Result<std::net::SocketAddr, String> {
    input.parse().map_err(|_| {
        format!(
            "{input:?} is not an address: write IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080 \
             (port 0: any free port)"
        )
    })
}

fn serve_after_help() -> String {
    format!(
        "{}\n\
         Examples:\n  \
           corral mcp serve --root ~/src/project\n  \
           corral mcp serve --http 127.0.0.1:8080 --token-file ~/.config/corral/token\n  \
           corral mcp serve --tools /etc/corral/tools.json --tools-only\n\n\
         Over stdio, stdout carries only MCP frames; logs go to stderr. See docs/mcp.md.",
        exit::SERVE.help()
    )
}

/// Parses `ARGS_JSON`: a JSON object, nothing else.
fn parse_object(input: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    const FIX: &str = "give the tool's arguments as one JSON object in single quotes, \
                       e.g. '{\"message\": \"hi\"}', or leave ARGS_JSON out";
    match serde_json::from_str::<serde_json::Value>(input) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "ARGS_JSON must be a JSON object, not {}; {FIX}",
            json_kind(&other)
        )),
        Err(error) => Err(format!("ARGS_JSON is not JSON ({error}); {FIX}")),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn call_after_help() -> String {
    format!(
        "{}\n\
         Output: the text blocks of the tool's result, joined by newlines (its\n\
         structuredContent as JSON if it has no text). With --json, one envelope:\n  \
           {{\"version\": 1, \"outcome\": \"ok\" | \"tool_error\" | \"error\" | \"unknown\" | \"not_sent\",\n   \
            \"exit_status\": N, \"request_id\": ID or null, \"result\": the CallToolResult or null,\n   \
            \"error\": {{\"message\", \"code\", \"data\"}} or null, \"cleanup\": the tree's cleanup,\n   \
            \"read\": what was read from the server, dropped and answered,\n   \
            \"task_id\", \"task_status\": with --task, once the call became a task}}\n\
         \n\
         Signals: SIGINT, SIGTERM or SIGHUP cancel the connect or the call and end the\n\
         server's tree: 124 if the request had been written, else 125. The server's\n\
         whole tree is gone when corral exits, whatever happened.\n\
         \n\
         Examples:\n  \
           corral mcp call echo '{{\"message\": \"hi\"}}' -- node server.js stdio\n  \
           corral mcp call --timeout 5m --json build -- ./mcp-server",
        exit::CALL.help()
    )
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// The best available.
    Auto,
    /// A cgroup v2 leaf per run (holds every escape).
    Cgroup,
    /// corral adopts orphans as a child subreaper.
    Subreaper,
    /// A process group (setsid and double-fork escape it; on a terminal the
    /// command runs in the background and cannot read from it).
    Group,
}

impl BackendArg {
    /// The library's choice.
    pub fn choice(self) -> corral::BackendChoice {
        use corral::{Backend, BackendChoice::Only};
        match self {
            Self::Auto => corral::BackendChoice::Auto,
            Self::Cgroup => Only(Backend::Cgroup),
            Self::Subreaper => Only(Backend::Subreaper),
            Self::Group => Only(Backend::Group),
        }
    }
}

/// Prints the completion script for `shell` to standard output.
///
/// # Errors
/// Never; the signature matches the other subcommands.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<exit::Status> {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "corral", &mut std::io::stdout());
    Ok(exit::Status::Exited(0))
}

/// A clap error as one line (clap prints several: the error, a tip, the
/// usage), with a hint where the fix is not obvious.
pub fn error_line(error: &clap::Error) -> String {
    use clap::error::ErrorKind;
    let rendered = error.render().to_string();
    let mut text = String::new();
    let mut had_tip = false;
    for line in rendered.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if let Some(tip) = line.strip_prefix("tip: ") {
            had_tip = true;
            text.push_str("; ");
            text.push_str(tip);
        } else if !line.is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mcp =
        rendered.contains("Usage: corral mcp") && !rendered.contains("Usage: corral mcp serve");
    let serve = rendered.contains("Usage: corral mcp serve");
    let hint = match error.kind() {
        ErrorKind::MissingRequiredArgument if serve => {
            "; --token-file, --allowed-origin and --allow-remote go with --http ADDR, \
             e.g. corral mcp serve --http 127.0.0.1:8080 --token-file FILE"
        }
        ErrorKind::MissingRequiredArgument | ErrorKind::UnknownArgument if serve => "",
        ErrorKind::MissingRequiredArgument | ErrorKind::UnknownArgument if !had_tip && mcp => {
            "; the server command goes after `--`, e.g. corral mcp list -- node server.js stdio"
        }
        ErrorKind::MissingRequiredArgument | ErrorKind::UnknownArgument if !had_tip => {
            "; the command goes after DURATION or after `--`, e.g. corral run 10s sleep 20 \
             or corral run -t 10s -- sleep 20"
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            text = "no subcommand given".to_owned();
            ": use corral run [OPTIONS] -- COMMAND [ARGS...], corral capabilities or \
             corral completions SHELL (see corral --help)"
        }
        _ => "",
    };
    text.push_str(hint);
    text
}

fn run_after_help() -> String {
    format!(
        "{}\n\
         Forms: GNU timeout's `corral run [OPTIONS] DURATION COMMAND [ARGS]...` (options end\n\
         at the first operand: `corral run 10 sleep -s` passes -s to sleep; long options\n\
         may be abbreviated, --kill=1; values attached or not, -sKILL, -k1), or corral's\n\
         `corral run [OPTIONS] [-t DURATION] -- COMMAND [ARGS]...`, where everything after\n\
         `--` is the command (no -t: no limit).\n\
         \n\
         DURATION: a number, fraction allowed, with an optional unit s (the default), m,\n\
         h, d or ms; or a compound with a unit on every part, e.g. 1m30s, 1s500ms; or\n\
         anything GNU timeout takes: exponents and hex (2.34e+5d, 0x1p3), inf. Values\n\
         beyond 2^32 s, and inf, mean no limit, as in GNU timeout.\n\
         \n\
         SIG: a name with or without SIG (TERM, SIGHUP, RTMIN+2, RTMAX-1) or a number\n\
         from 1 to 64 (a number above 128 is read as a shell status: 137 is KILL); 0 or\n\
         EXIT sends nothing at the deadline and only starts the --kill-after clock.\n\
         \n\
         Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to corral end the whole tree\n\
         with the same policy (SIGNAL, then SIGKILL after --kill-after), then corral\n\
         exits 128+N. SIGALRM means the time is up (the policy, then 124). Once the\n\
         tree is being ended, each of these received is passed on to what still runs\n\
         (the grace not reset); SIGALRM then sends SIGKILL. Every other\n\
         signal that would end corral (SIGUSR1, SIGUSR2, real-time signals, ...) is\n\
         passed on to every process of the tree, which runs on; if it ends the command,\n\
         that is the command's status. Not SIGPIPE, which corral ignores (its own writes\n\
         must not reach the tree), nor the fault signals (SEGV, BUS, ILL, FPE, TRAP,\n\
         SYS); SIGRTMAX is held, not passed on. A signal ignored when corral starts (as\n\
         under nohup, or SIGPIPE after trap '' PIPE) stays ignored, and the command\n\
         inherits that; SIGCHLD is set back to its default. corral ignores SIGTTIN and\n\
         SIGTTOU itself (as timeout(1)); the command starts with both at their defaults.\n\
         If corral's parent dies,\n\
         that counts as SIGTERM. A standard error that cannot be written drops -v lines\n\
         and warnings.\n\
         \n\
         Differences from timeout(1): the whole tree is ended, not just the command\n\
         (with --foreground too, where timeout leaves the command's children running);\n\
         signals timeout(1) dies of (USR1, USR2, PIPE, real-time, ...) leaving its\n\
         command running are passed on (PIPE: ignored) and corral lives on;\n\
         --kill-after defaults to 5s and 0 means SIGKILL at once; 124 is returned after\n\
         a timeout even with --signal KILL or when SIGKILL was needed (timeout gives 137);\n\
         the command stays in corral's process group unless --backend group (as with\n\
         timeout --foreground); a script without #! is not run through sh (126);\n\
         `corral run -- 10 cmd` runs the command `10` (timeout reads 10 as DURATION);\n\
         -v prints corral's own lines (as `timeout`, GNU's).\n\
         \n\
         As timeout: started under the name `timeout` (a symlink or a copy), corral is\n\
         GNU timeout to the letter (options, messages, -v lines, 137 after a forced kill)\n\
         and still ends the whole tree; `timeout --help` lists what differs. Install:\n  \
           ln -s \"$(command -v corral)\" ~/.local/bin/timeout\n\
         \n\
         Examples:\n  \
           corral run 10s make test\n  \
           corral run -t 1m30s -k 500ms --report run.json -- ./job.sh\n  \
           nohup corral run -t 2h -- ./backup.sh &",
        exit::RUN.help()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_match_the_library_policy() {
        let cli = Cli::try_parse_from(["corral", "run", "--", "true"]).expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        let policy = corral::Policy::default();
        assert_eq!(run.kill_after, policy.grace);
        assert_eq!(run.final_bound, policy.final_bound);
        assert_eq!(run.signal.0, policy.signal);
        assert_eq!(run.timeout, Duration::ZERO);
        assert_eq!(run.command, ["true"]);
    }

    #[test]
    fn arguments_after_the_double_dash_belong_to_the_command() {
        let cli = Cli::try_parse_from(["corral", "run", "-t", "1", "--", "ls", "-t", "--", "-v"])
            .expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.command, ["ls", "-t", "--", "-v"]);
        assert!(!run.verbose);
    }

    #[test]
    fn mcp_call_arguments_and_errors() {
        let cli = Cli::try_parse_from([
            "corral",
            "mcp",
            "call",
            "--timeout",
            "0.5",
            "echo",
            r#"{"a": 1}"#,
            "--",
            "srv",
            "-x",
        ])
        .expect("parses");
        let Command::Mcp {
            command: McpCommand::Call(call),
        } = cli.command
        else {
            panic!("not mcp call")
        };
        assert_eq!(call.tool, "echo");
        assert_eq!(call.arguments.expect("arguments")["a"], 1);
        assert_eq!(call.client.timeout, Duration::from_millis(500));
        assert_eq!(call.client.connect_timeout, None);
        assert_eq!(
            call.client.target(),
            ServerTarget::Stdio(vec!["srv".into(), "-x".into()])
        );
        let error = Cli::try_parse_from(["corral", "mcp", "call", "echo", "[1]", "--", "srv"])
            .expect_err("not an object");
        assert!(
            error_line(&error).contains("must be a JSON object"),
            "{error}"
        );
        let error = Cli::try_parse_from(["corral", "mcp", "list"]).expect_err("no server");
        assert!(error_line(&error).contains("corral mcp list --"), "{error}");
    }

    /// `run_alone` is a shortcut, never another parser: for every command
    /// line, it gives what the whole parse gives, or nothing (and then the
    /// whole parse answers).
    #[test]
    fn run_alone_gives_what_the_whole_parse_gives_or_nothing() {
        let lines: &[&[&str]] = &[
            &["run", "--", "true"],
            &["run", "--", "ls", "--", "-t"],
            &["run", "10", "sleep", "1"],
            &["run", "0", "true"],
            &["run", "-t", "2.5", "--", "sleep", "--", "1"],
            &["run", "--timeout", "1m", "--", "true"],
            &["run", "--timeout=1e-3", "--", "true"],
            &["run", "-t", "inf", "--", "true"],
            &["run", "-k", "1", "-s", "KILL", "1.5s", "sh", "-c", "exit 3"],
            &["run", "-sKILL", "-k1", "--preserve-status", "5", "true"],
            &["run", "--kill=1", "2", "true"],
            &[
                "run", "-t", "1m30s", "-k", "2s", "--", "./server", "--port", "8080",
            ],
            &[
                "run", "-t", "5", "-s", "INT", "--report", "run.json", "--", "python3",
            ],
            &[
                "run",
                "--report-fd",
                "3",
                "--backend",
                "group",
                "-v",
                "--",
                "x",
            ],
            &[
                "run",
                "--final-bound",
                "0.5",
                "-f",
                "-u",
                "nobody",
                "--",
                "id",
            ],
            &[
                "run",
                "--max-procs",
                "10",
                "--max-memory",
                "64M",
                "--cpus",
                "0.5",
                "--",
                "y",
            ],
            &["run", "--cpu-time", "3s", "--limits-best-effort", "--", "z"],
            &["run", "-t", "1", "--", "ls", "-t", "--", "-v"],
            &["run", "-s", "0", "--", "true"],
            &["run", "--backend", "subreaper", "-t", "0.25", "--", "true"],
            // Refused or answered by the whole parse: errors, help, version.
            &["run", "-t", "-1", "--", "true"],
            &["run", "true"],
            &["run", "--"],
            &["run"],
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--version"],
            &["run", "--no-such-option", "--", "true"],
            &["run", "-s", "NOPE", "--", "true"],
            &["run", "-t", "soon", "--", "true"],
            &["run", "--timeout=soon", "--", "true"],
            &["run", "-t", "1", "--"],
            &["run", "-t", "1", "true"],
            &["run", "-t"],
            &["run", "--timeout=", "--", "true"],
            &["run", "--backend", "magic", "--", "true"],
            &["run", "--max-memory", "lots", "--", "true"],
            // Not `run`.
            &["--version"],
            &["capabilities"],
            &["mcp", "wrap", "--", "server"],
            &["ps"],
        ];
        let (mut taken, mut plainly) = (0, 0);
        for line in lines {
            let argv: Vec<OsString> = std::iter::once("corral")
                .chain(line.iter().copied())
                .map(OsString::from)
                .collect();
            let Ok(argv) = crate::run::gnu::rewrite(argv.clone()) else {
                continue;
            };
            let alone = run_alone(&argv);
            let plain = argv.get(2..).and_then(plain_run);
            match Cli::try_parse_from(&argv) {
                Ok(Cli {
                    command: Command::Run(whole),
                }) => {
                    let alone = alone.unwrap_or_else(|| panic!("{line:?}: not taken alone"));
                    assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{line:?}");
                    taken += 1;
                    if let Some(plain) = plain {
                        assert_eq!(format!("{plain:?}"), format!("{whole:?}"), "{line:?}");
                        plainly += 1;
                    }
                }
                _ => assert!(
                    alone.is_none() && plain.is_none(),
                    "{line:?}: taken alone, not `run` whole"
                ),
            }
        }
        assert_eq!(taken, 20, "every valid `run` line is taken alone");
        assert_eq!(plainly, 9, "the plain shapes are read without clap");
    }

    #[test]
    fn command_without_double_dash_is_an_error() {
        assert!(Cli::try_parse_from(["corral", "run", "true"]).is_err());
        assert!(Cli::try_parse_from(["corral", "run", "-t", "1", "sleep", "2"]).is_err());
        assert!(Cli::try_parse_from(["corral", "run", "--"]).is_err());
    }
}
