//! corral as `timeout`: started under that name (a symlink or a copy),
//! corral is GNU `timeout` 9.1 to the letter — options, `--help` and
//! `--version` shape, `-v` lines, error messages and exit statuses (137
//! after a forced kill) — and still ends the whole tree. The run itself is
//! `corral run`'s (`crate::run`), with [`RunArgs::timeout_name`] set.

use std::{
    ffi::{OsStr, OsString},
    path::Path,
    process::ExitCode,
    time::Duration,
};

use corral::{GraceEnds, Signal};

use crate::{
    cli::{BackendArg, FirstSignal, RunArgs},
    getopt::{self, Opt},
    gnu_duration,
    kit::{exit::Status, limits::LimitArgs, sink::ReportArgs, startup},
    run::personality::{quote, say, say_raw},
};

/// GNU `timeout`'s options: 9.1's, plus `-f` and `-p`, which later GNU
/// releases accept (POSIX.1-2024's `timeout` has both).
const OPTIONS: &[Opt] = &[
    opt(Some('f'), "foreground", false),
    opt(Some('k'), "kill-after", true),
    opt(Some('p'), "preserve-status", false),
    opt(Some('s'), "signal", true),
    opt(Some('v'), "verbose", false),
    opt(None, "help", false),
    opt(None, "version", false),
];

const fn opt(short: Option<char>, long: &'static str, value: bool) -> Opt {
    Opt { short, long, value }
}

/// Without `-k` (or with `-k 0`), as GNU: no `SIGKILL` to the command
/// after the signal, however long it takes to exit; unlike GNU, what is left
/// of its tree when it exits gets `SIGKILL` at once.
fn until_the_command_exits(run: &mut RunArgs) {
    run.kill_after = Duration::MAX;
    run.grace_ends = GraceEnds::AtLeaderExit;
}

/// The name corral was started under (`argv[0]` as given), if its last
/// component is `timeout`.
pub fn invoked_as() -> Option<String> {
    let first = std::env::args_os().next()?;
    let base = Path::new(&first).file_name()?;
    (base == "timeout").then(|| first.to_string_lossy().into_owned())
}

/// `main` of the `timeout` personality: `name` is `argv[0]`.
pub fn main(name: String, parent: i32) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let run = match parse(&name, &args) {
        Ok(Parsed::Run(run)) => run,
        Ok(Parsed::Help) => {
            print(&help(&name));
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Version) => {
            print(&version());
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            if let Some(message) = message {
                say(&name, &message);
            }
            say_raw(&format!("Try '{name} --help' for more information."));
            return ExitCode::from(Status::Failed.code());
        }
    };
    startup::exit_code(crate::run::main(&run, parent))
}

/// What the command line asks for.
#[derive(Debug)]
enum Parsed {
    Run(Box<RunArgs>),
    Help,
    Version,
}

/// Parses `args` (after `argv[0]`) as GNU `timeout` does. An error is the
/// message to print before "Try ... --help" (none for a missing operand, as
/// GNU 9.1).
fn parse(name: &str, args: &[OsString]) -> Result<Parsed, Option<String>> {
    let parsed = getopt::parse(OPTIONS, args);
    // -k's defaults are set just below.
    let mut run = RunArgs {
        timeout: Duration::ZERO,
        kill_after: Duration::ZERO,
        grace_ends: GraceEnds::WhenElapsed,
        final_bound: corral::Policy::default().final_bound,
        signal: FirstSignal(Some(Signal::TERM)),
        preserve_status: false,
        foreground: false,
        verbose: false,
        backend: BackendArg::Auto,
        user: None,
        limits: LimitArgs::default(),
        report: ReportArgs::default(),
        timeout_name: Some(name.to_owned()),
        command: Vec::new(),
    };
    until_the_command_exits(&mut run);
    for (opt, value) in parsed.options {
        let value = value.unwrap_or_default();
        match opt.long {
            "help" => return Ok(Parsed::Help),
            "version" => return Ok(Parsed::Version),
            "foreground" => run.foreground = true,
            "preserve-status" => run.preserve_status = true,
            "verbose" => run.verbose = true,
            "kill-after" => match interval(&value)? {
                // GNU: 0 disables it, as if -k were not given.
                Duration::ZERO => until_the_command_exits(&mut run),
                after => {
                    run.kill_after = after;
                    run.grace_ends = GraceEnds::WhenElapsed;
                }
            },
            _ => {
                let text = value.to_string_lossy();
                let signal = Signal::parse_or_none(&text)
                    .ok()
                    .filter(|s| s.is_none_or(|s| s.gnu_name().is_some()))
                    .ok_or_else(|| format!("{}: invalid signal", quote(&value)))?;
                run.signal = FirstSignal(signal);
            }
        }
    }
    if let Some(error) = parsed.error {
        return Err(Some(error));
    }
    let mut operands = parsed.operands.into_iter();
    let (Some(limit), Some(program)) = (operands.next(), operands.next()) else {
        return Err(None);
    };
    run.timeout = interval(&limit)?;
    run.command = std::iter::once(program).chain(operands).collect();
    Ok(Parsed::Run(Box::new(run)))
}

/// A DURATION as GNU reads it.
fn interval(text: &OsStr) -> Result<Duration, String> {
    text.to_str()
        .and_then(|t| gnu_duration::parse_gnu(t).ok())
        .ok_or_else(|| format!("invalid time interval {}", quote(text)))
}

fn print(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(text.as_bytes());
}

fn version() -> String {
    format!(
        "timeout (corral) {}\n\
         This is corral's GNU timeout personality: it ends the command's whole process tree.\n\
         See `{name} --help` for how it differs from GNU timeout, and `corral run --help`.\n",
        crate::cli::VERSION,
        name = "timeout"
    )
}

/// The personality's `--help` (also the body of `corral-timeout.1`).
pub fn help(name: &str) -> String {
    format!(
        "\
Usage: {name} [OPTION] DURATION COMMAND [ARG]...
  or:  {name} [OPTION]
Start COMMAND, and end it if still running after DURATION; all of it: every
process it started goes too.

Mandatory arguments to long options are mandatory for short options too.
  -p, --preserve-status
                 exit with COMMAND's own status, also after a timeout
  -f, --foreground
                 leave COMMAND in this process group, so that it can read
                   the terminal and gets its signals; unlike GNU timeout,
                   the processes COMMAND started are still ended on time
  -k, --kill-after=DURATION
                 also send KILL if COMMAND is still running this long
                   after the first signal (to what is left of its tree)
  -s, --signal=SIGNAL
                 the signal to send at the deadline: a name like 'HUP',
                   'RTMIN+2' or a number (see 'kill -l'); 0 sends none and
                   only starts the --kill-after clock
  -v, --verbose  say on standard error each signal sent
      --help        display this help and exit
      --version     output version information and exit

DURATION is a floating point number with an optional suffix:
's' for seconds (the default), 'm' for minutes, 'h' for hours or 'd' for days.
A duration of 0 disables the associated timeout.

Upon timeout, send the TERM signal to every process of COMMAND's tree, if no
other SIGNAL is specified, then KILL to those left after --kill-after, or,
without it, as soon as COMMAND has exited.

EXIT status:
  124  if COMMAND times out, and --preserve-status is not specified
  125  if timeout itself fails (bad option or duration, no containment)
  126  if COMMAND is found but cannot be invoked
  127  if COMMAND cannot be found
  137  if COMMAND is sent the KILL (9) signal (128+9)
  -    the exit status of COMMAND otherwise

This is corral started as 'timeout'. How it differs from GNU timeout 9.1, and
why:
  - the whole process tree is ended, setsid and double-fork escapes included
    (what corral is for); with --foreground too, where GNU leaves the
    command's children running; without -k, COMMAND is waited for as by
    GNU, and what is left of its tree when it exits gets KILL at once
    (what COMMAND left behind when it exited by itself: SIGNAL, then KILL);
  - COMMAND always stays in timeout's process group (on the cgroup and
    subreaper backends), as with GNU's --foreground, and timeout itself does
    not die of the signal it forwards: the status is an exit code (124, 137,
    128+N) where GNU sometimes kills itself with the same signal; $? is the same;
  - each signal but KILL is followed by CONT, so a stopped member handles
    it, with --foreground too (GNU sends CONT only without it);
  - -v also says the signals sent to what COMMAND left behind when it
    exited by itself (GNU sends none);
  - no \"the monitored command dumped core\" line (the library reports the
    signal, not the core dump);
  - DURATION runs on the monotonic clock: time the machine spends suspended
    does not count (GNU's timer runs on the wall clock);
  - a script without #! is not run through sh (126), as in corral run;
  - SIGNAL may be 32 or 33 with corral run, not here (glibc names neither);
  - -f and -p are accepted, as by GNU releases after 9.1 (POSIX.1-2024);
  - --help and --version are corral's own words (it is not GNU coreutils).
The rest (options, DURATION syntax, messages, exit statuses) is GNU's.
Install: ln -s \"$(command -v corral)\" ~/.local/bin/timeout
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn run(list: &[&str]) -> RunArgs {
        match parse("timeout", &args(list)) {
            Ok(Parsed::Run(run)) => *run,
            other => panic!("{list:?}: {other:?}"),
        }
    }

    fn error(list: &[&str]) -> Option<String> {
        match parse("timeout", &args(list)) {
            Err(message) => message,
            other => panic!("{list:?}: {other:?}"),
        }
    }

    #[test]
    fn gnu_command_lines() {
        let parsed = run(&["-sKILL", "--kill=2", "-v", "1.5", "sleep", "-s", "3"]);
        assert_eq!(parsed.signal, FirstSignal(Some(Signal::KILL)));
        assert_eq!(parsed.kill_after, Duration::from_secs(2));
        assert!(parsed.verbose);
        assert_eq!(parsed.timeout, Duration::from_millis(1500));
        assert_eq!(parsed.command, args(&["sleep", "-s", "3"]));
        let none = run(&["-s", "0", "-k", "0", "1e-10000", "true"]);
        assert_eq!(none.signal, FirstSignal(None));
        assert_eq!(none.kill_after, Duration::MAX);
        assert_eq!(none.grace_ends, GraceEnds::AtLeaderExit);
        let absent = run(&["1", "true"]);
        assert_eq!(
            (absent.kill_after, absent.grace_ends),
            (Duration::MAX, GraceEnds::AtLeaderExit)
        );
        let given = run(&["-k", "0", "-k", "2", "1", "true"]);
        assert_eq!(
            (given.kill_after, given.grace_ends),
            (Duration::from_secs(2), GraceEnds::WhenElapsed)
        );
        let reset = run(&["-k", "2", "-k", "0", "1", "true"]);
        assert_eq!(reset.grace_ends, GraceEnds::AtLeaderExit);
        assert_eq!(none.timeout, Duration::ZERO);
        assert!(run(&["-f", "-p", "inf", "true"]).foreground);
        assert_eq!(run(&["--", "1", "true"]).command, args(&["true"]));
    }

    #[test]
    fn gnu_errors() {
        assert_eq!(error(&[]), None);
        assert_eq!(error(&["1"]), None);
        assert_eq!(error(&["-x"]).as_deref(), Some("invalid option -- 'x'"));
        let bad_interval = error(&["1ms", "true"]).expect("a message");
        assert!(
            bad_interval.starts_with("invalid time interval "),
            "{bad_interval}"
        );
        let bad_signal = error(&["-s", "32", "1", "true"]).expect("a message");
        assert!(bad_signal.ends_with(": invalid signal"), "{bad_signal}");
        assert!(error(&["-k", "x", "1", "true"]).is_some());
        assert!(matches!(
            parse("timeout", &args(&["--help", "-x"])),
            Ok(Parsed::Help)
        ));
        assert!(matches!(
            parse("timeout", &args(&["--vers"])),
            Ok(Parsed::Version)
        ));
    }

    #[test]
    fn help_names_every_difference_and_the_install() {
        let text = help("timeout");
        for needle in [
            "--foreground",
            "whole process tree",
            "ln -s",
            "137",
            "as soon as COMMAND has exited",
            "followed by CONT",
        ] {
            assert!(text.contains(needle), "{needle:?}");
        }
    }
}
