//! corral as a drop-in for GNU `timeout(1)`: GNU's syntax in `corral run`,
//! and corral started under the name `timeout` (a symlink to the built
//! binary) behaving as GNU `timeout` 9.1 does, checked against
//! `/usr/bin/timeout` where the two must agree. Every exit status of GNU's
//! table is checked under both names.

mod common;

use std::{
    ffi::OsStr,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use common::{ESCAPEES, GNU_TIMEOUT, assert_all_gone, corral, corral_path, escapees, shell_status};
use corral_tests::{Guard, Lines, Proc, Scratch};

/// A directory holding `timeout`, a symlink to the corral under test.
fn link_dir() -> &'static Scratch {
    static DIR: OnceLock<Scratch> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Scratch::new("gnu-timeout");
        std::os::unix::fs::symlink(corral_path(), dir.path("timeout")).expect("symlink");
        dir
    })
}

fn link() -> PathBuf {
    link_dir().path("timeout")
}

/// Guards `child` once its command has written the mark `running`, and
/// returns the guard and the child's pid (our own unreaped child: its pid is
/// its identity).
fn guard_once_running(child: std::process::Child, running: &Path, context: &str) -> (Guard, u32) {
    let guard = Guard::new(child);
    assert!(
        corral_tests::wait_until(Duration::from_secs(10), || running.exists()),
        "{context}: the command never ran"
    );
    let pid = guard.child.as_ref().expect("guarded").id();
    (guard, pid)
}

/// The three programs compared: GNU, corral as `timeout`, `corral run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Gnu,
    Timeout,
    CorralRun,
}

const ALL: [Who; 3] = [Who::Gnu, Who::Timeout, Who::CorralRun];

/// `args` run by `who` in the C locale, with `argv[0]` `timeout` for both
/// timeouts (so their messages can be compared word for word).
fn command(who: Who, args: &[&str]) -> Command {
    let mut command = match who {
        Who::Gnu => Command::new(GNU_TIMEOUT),
        Who::Timeout => Command::new(link()),
        Who::CorralRun => {
            let mut command = corral();
            command.arg("run");
            command
        }
    };
    if who != Who::CorralRun {
        command.arg0("timeout");
    }
    command
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn output(who: Who, args: &[&str]) -> Output {
    command(who, args).output().expect("run")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Checks that each of `who` exits with `expected` for `args`.
fn row(args: &[&str], expected: &[(Who, i32)]) {
    for &(who, code) in expected {
        let output = output(who, args);
        assert_eq!(
            shell_status(output.status),
            code,
            "{who:?} {args:?}: {}",
            stderr(&output)
        );
    }
}

/// The same status for all three.
fn row_all(args: &[&str], code: i32) {
    row(args, &ALL.map(|who| (who, code)));
}

// The exit-status table, under both names and against GNU.

#[test]
fn the_commands_own_status() {
    row_all(&["10", "true"], 0);
    row_all(&["10", "sh", "-c", "exit 3"], 3);
    row_all(&["10", "sh", "-c", "exit 255"], 255);
}

#[test]
fn timed_out_is_124() {
    row_all(&["0.2", "sleep", "10"], 124);
    row_all(&["-s", "INT", "0.2", "sleep", "10"], 124);
}

/// A command that stopped itself still ends at the time limit: each signal
/// but `SIGKILL` is followed by `SIGCONT`, as GNU's is, so the stopped
/// command handles it now (124), not at the `SIGKILL` a grace later (137).
#[test]
fn a_stopped_command_gets_its_signal_at_the_time_limit() {
    row_all(
        &["-k", "60", "0.3", "sh", "-c", "kill -STOP $$; sleep 60"],
        124,
    );
    // With --foreground too, where GNU sends no SIGCONT.
    row(
        &[
            "--foreground",
            "-k",
            "60",
            "0.3",
            "sh",
            "-c",
            "kill -STOP $$; sleep 60",
        ],
        &[(Who::Timeout, 124), (Who::CorralRun, 124)],
    );
}

#[test]
fn bad_usage_is_125() {
    // corral run takes corral's own forms too (a limit `true` meets even on
    // a loaded machine).
    row(
        &["5000ms", "true"],
        &[(Who::Gnu, 125), (Who::Timeout, 125), (Who::CorralRun, 0)],
    );
    for args in [
        &["x", "true"][..],
        &["-1", "true"],
        &["nan", "true"],
        &["-s", "FOO", "1", "true"],
        &["-s", "65", "1", "true"],
        &["-k", "x", "1", "true"],
        &["--bogus", "1", "true"],
        &["-x", "1", "true"],
    ] {
        row_all(args, 125);
    }
    // Without a command: GNU's usage error; corral run's own.
    row(
        &["1"],
        &[(Who::Gnu, 125), (Who::Timeout, 125), (Who::CorralRun, 125)],
    );
    row(
        &[],
        &[(Who::Gnu, 125), (Who::Timeout, 125), (Who::CorralRun, 125)],
    );
}

#[test]
fn cannot_invoke_is_126() {
    let dir = Scratch::new("gnu-timeout-126");
    let script = dir.path("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let script = script.to_str().expect("utf-8 path");
    row_all(&["10", script], 126);
}

#[test]
fn not_found_is_127() {
    row_all(&["10", "corral-test-no-such-command"], 127);
}

#[test]
fn killed_by_signal_n_is_128_plus_n() {
    row_all(&["10", "sh", "-c", "kill -USR1 $$"], 128 + 10);
    // --preserve-status: the signal corral sent, after a timeout.
    row_all(&["--preserve-status", "0.2", "sleep", "10"], 128 + 15);
    row_all(&["--preserve", "-s", "HUP", "0.2", "sleep", "10"], 128 + 1);
    // GNU 9.1 lacks -p (added later); corral takes it under both names.
    let short = ["-p", "-s", "HUP", "0.2", "sleep", "10"];
    row(&short, &[(Who::Timeout, 129), (Who::CorralRun, 129)]);
}

/// GNU reports a forced kill as 128+9, so does corral as `timeout`; `corral
/// run` keeps its documented 124 for every timeout.
#[test]
fn escalation_to_sigkill_is_137_as_timeout_and_124_as_corral_run() {
    let ignores_term = ["-k", "0.3", "0.2", "sh", "-c", "trap '' TERM; sleep 10"];
    let expected = [(Who::Gnu, 137), (Who::Timeout, 137), (Who::CorralRun, 124)];
    row(&ignores_term, &expected);
    row(&["-s", "KILL", "0.2", "sleep", "10"], &expected);
    row(&["-s", "137", "0.2", "sleep", "10"], &expected);
    // --preserve-status: the command's own death, by SIGKILL, everywhere.
    let preserved = [
        "--preserve-status",
        "-k",
        "0.3",
        "0.2",
        "sh",
        "-c",
        "trap '' TERM; sleep 10",
    ];
    row_all(&preserved, 137);
}

// Messages, word for word.

#[test]
fn usage_errors_read_as_gnus() {
    for args in [
        &["x", "true"][..],
        &["1ms", "true"],
        &["-s", "32", "1", "true"],
        &["-s", "RTMIN-1", "1", "true"],
        &["--v", "1", "true"],
        &["--foo", "1", "true"],
        &["-x", "1", "true"],
        &["-s"],
        &["--signal"],
        &["--verbose=1", "1", "true"],
        &["1"],
        &[],
    ] {
        let gnu = output(Who::Gnu, args);
        let ours = output(Who::Timeout, args);
        assert_eq!(stderr(&ours), stderr(&gnu), "{args:?}");
        assert_eq!(ours.status.code(), Some(125), "{args:?}");
    }
}

#[test]
fn not_found_and_not_executable_read_as_gnus() {
    let gnu = output(Who::Gnu, &["1", "corral-test-no-such-command"]);
    let ours = output(Who::Timeout, &["1", "corral-test-no-such-command"]);
    assert_eq!(stderr(&ours), stderr(&gnu));
}

#[test]
fn verbose_lines_are_gnus() {
    for args in [
        &["-v", "0.2", "sleep", "10"][..],
        &["-v", "-s", "RTMIN+1", "0.2", "sleep", "10"],
        &["-v", "-s", "50", "0.2", "sleep", "10"],
        &[
            "-v",
            "-k",
            "0.3",
            "0.2",
            "sh",
            "-c",
            "trap '' TERM; sleep 10",
        ],
        &["-v", "-s", "0", "-k", "0.3", "0.2", "sleep", "10"],
    ] {
        let gnu = output(Who::Gnu, args);
        let ours = output(Who::Timeout, args);
        assert_eq!(stderr(&ours), stderr(&gnu), "{args:?}");
    }
    // In a UTF-8 locale GNU quotes with ‘’.
    let gnu = command(Who::Gnu, &["-v", "0.2", "sleep", "10"])
        .env("LC_ALL", "C.UTF-8")
        .output();
    let ours = command(Who::Timeout, &["-v", "0.2", "sleep", "10"])
        .env("LC_ALL", "C.UTF-8")
        .output();
    assert_eq!(stderr(&ours.expect("run")), stderr(&gnu.expect("run")));
}

/// Each -v line comes as its signal is sent, as GNU's do: the TERM line
/// at the deadline, the KILL line after -k.
#[test]
fn verbose_lines_come_as_each_signal_is_sent() {
    let args = ["-v", "-k", "3", "0.2", "sh", "-c", "trap '' TERM; sleep 10"];
    let mut child = command(Who::Timeout, &args).spawn().expect("spawn");
    let started = Instant::now();
    let lines = Lines::new(child.stderr.take().expect("stderr"));
    let mut guard = Guard::new(child);
    let first = lines
        .next(Duration::from_secs(2))
        .expect("the TERM line, before the KILL");
    assert_eq!(
        first.trim_end(),
        "timeout: sending signal TERM to command 'sh'"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let second = lines.next(Duration::from_secs(10)).expect("the KILL line");
    assert_eq!(
        second.trim_end(),
        "timeout: sending signal KILL to command 'sh'"
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    let status = guard.wait_exit(Duration::from_secs(10)).expect("exits");
    assert_eq!(shell_status(status), 137);
}

/// Without -k (or with -k 0) GNU waits for ever for a command slow to stop
/// after the signal, and so does corral as `timeout`: a command that takes
/// 6 s to stop (longer than the 5 s corral once imposed) exits by itself,
/// and timeout gives 124 as GNU does, not 137 for a kill. What the command
/// left behind, ignoring the signal, is gone when corral returns (GNU
/// leaves it running: this test kills it).
#[test]
fn without_kill_after_a_command_slow_to_stop_is_waited_for_as_gnu_does() {
    // The trap is set before the child starts (it resets it, then ignores
    // TERM), long before the 1 s deadline.
    let script = "trap 'sleep 6; exit 0' TERM; (trap '' TERM; exec sleep 60) & echo $!; wait";
    let runs: [(Who, &[&str]); 3] = [
        (Who::Gnu, &[]),
        (Who::Timeout, &[]),
        (Who::Timeout, &["-k", "0"]),
    ];
    // Side by side: the whole test takes one command's 7 s.
    let started = Instant::now();
    let mut running = Vec::new();
    for (who, extra) in runs {
        let mut args = extra.to_vec();
        args.extend(["1", "sh", "-c", script]);
        let mut child = command(who, &args).spawn().expect("spawn");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let line = lines.next(Duration::from_secs(5)).expect("the child's pid");
        let left = Proc::of_line(&line);
        guard.watch(left);
        running.push((who, extra, guard, left));
    }
    for (who, extra, mut guard, left) in running {
        let context = format!("{who:?} {extra:?}");
        let status = guard
            .wait_exit(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("{context}: timeout did not exit"));
        assert_eq!(shell_status(status), 124, "{context}");
        assert!(
            started.elapsed() >= Duration::from_secs(6),
            "{context}: the command was not waited for ({:?})",
            started.elapsed()
        );
        if who == Who::Timeout {
            assert_all_gone(&[left], &context);
        }
    }
}

#[test]
fn help_and_version() {
    let help = output(Who::Timeout, &["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "Usage: timeout [OPTION] DURATION COMMAND [ARG]...",
        "--kill-after=DURATION",
        "--foreground",
        "137",
        "whole process tree",
        "ln -s",
    ] {
        assert!(text.contains(needle), "{needle:?} not in --help");
    }
    let version = output(Who::Timeout, &["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("timeout (corral) "));
    // Under the symlink's own path, messages name that path, as GNU does.
    let by_path = Command::new(link())
        .args(["x", "true"])
        .output()
        .expect("run");
    assert!(stderr(&by_path).starts_with(&format!("{}: ", link().display())));
}

// Syntax.

#[test]
fn options_end_at_the_first_operand() {
    for who in ALL {
        let out = output(who, &["10", "sh", "-c", "printf %s \"$1\"", "sh", "-s"]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "-s", "{who:?}");
    }
}

#[test]
fn abbreviations_and_attached_values() {
    let expected = [(Who::Gnu, 137), (Who::Timeout, 137), (Who::CorralRun, 124)];
    row(&["--sig=KILL", "0.2", "sleep", "10"], &expected);
    row(&["-sKILL", "0.2", "sleep", "10"], &expected);
    row(
        &["--kill=0.2", "--signal", "CONT", "0.2", "sleep", "10"],
        &expected,
    );
    row(&["-k0.2", "-sCONT", "0.2", "sleep", "10"], &expected);
}

#[test]
fn corral_runs_own_forms_still_work() {
    let ok = |args: &[&str], code| {
        let out = output(Who::CorralRun, args);
        assert_eq!(shell_status(out.status), code, "{args:?}: {}", stderr(&out));
    };
    ok(&["-t", "0.2", "--", "sleep", "10"], 124);
    ok(&["--", "true"], 0);
    ok(&["-t", "1m30s", "-k", "500ms", "--", "true"], 0);
    ok(&["1m30s", "true"], 0);
    ok(&["300ms", "sleep", "10"], 124);
}

#[test]
fn gnu_durations() {
    // Accepted by both; huge and infinite values are no limit.
    for limit in [
        "2.34e+5d",
        "0x1p3",
        "inf",
        "infinity",
        "1e400",
        "99999999999",
        "1e-10000",
        "+1",
        " 1",
    ] {
        row_all(&[limit, "true"], 0);
    }
    // Hexadecimal and exponent forms are honoured.
    row_all(&["0x1p-3", "sleep", "10"], 124);
    row_all(&["2e-1", "sleep", "10"], 124);
}

/// Which DURATIONs are accepted, and which refused, is GNU's, form by form.
#[test]
fn durations_are_accepted_and_refused_as_gnu_does() {
    for limit in [
        "1",
        "1.5",
        ".5",
        "5.",
        "1e1",
        "1E1",
        "1e+1",
        "1e-1",
        "0x1",
        "0X1P1",
        "0x.8",
        "0x1p",
        "0x",
        "1e",
        "inf",
        "INF",
        "Infinity",
        "infinit",
        "infd",
        "nan",
        "NaN(1)",
        "-0",
        "-0.0",
        "+0",
        " 1",
        "\t1",
        "1 ",
        "1s",
        "1m",
        "1h",
        "1d",
        "1S",
        "1ms",
        "1ss",
        "",
        ".",
        "e1",
        "1..",
        "\u{ff11}",
        "0x1.8p-1s",
        "1e-10000",
        "1e400",
        "4294967296",
        "1e99999999999",
        "99999999999999999999999",
        "-1",
        "--1",
        "+-1",
        "0b1",
        "1_000",
        "1,5",
    ] {
        let gnu = output(Who::Gnu, &[limit, "true"]);
        let ours = output(Who::Timeout, &[limit, "true"]);
        assert_eq!(
            shell_status(ours.status),
            shell_status(gnu.status),
            "{limit:?}: {}",
            stderr(&ours)
        );
        assert_eq!(stderr(&ours), stderr(&gnu), "{limit:?}");
    }
}

// Signals.

/// Which SIGNALs are accepted, and which refused, is GNU's, form by form.
#[test]
fn signals_are_accepted_and_refused_as_gnu_does() {
    for signal in [
        "HUP",
        "hup",
        "SIGHUP",
        "sighup",
        "1",
        "0",
        "EXIT",
        "SIGEXIT",
        "64",
        "65",
        "32",
        "33",
        "34",
        "RTMIN",
        "RTMIN+0",
        "RTMIN2",
        "RTMIN+30",
        "RTMIN+31",
        "RTMAX-30",
        "RTMAX-31",
        "RTMAX+1",
        "RTMIN-1",
        "RTMAX",
        "137",
        "128",
        "255",
        "256",
        "265",
        "CLD",
        "IOT",
        "POLL",
        "IO",
        "STKFLT",
        "PWR",
        "SIGRTMIN+2",
        "SIG",
        "",
        "+15",
        " 15",
        "15 ",
        "1.5",
        "KILLX",
        "SIGSIGTERM",
        "99999999999999999999",
    ] {
        let gnu = output(Who::Gnu, &["-s", signal, "10", "true"]);
        let ours = output(Who::Timeout, &["-s", signal, "10", "true"]);
        assert_eq!(
            shell_status(ours.status),
            shell_status(gnu.status),
            "{signal:?}: {}",
            stderr(&ours)
        );
        assert_eq!(stderr(&ours), stderr(&gnu), "{signal:?}");
    }
}

/// `-s 0` sends nothing at the deadline and only starts the -k clock.
#[test]
fn signal_0_sends_nothing_then_kill() {
    let script = "trap 'echo got TERM' TERM; sleep 10 & wait; sleep 10 & wait";
    for (who, code) in [(Who::Gnu, 137), (Who::Timeout, 137), (Who::CorralRun, 124)] {
        let started = Instant::now();
        let out = output(who, &["-s", "0", "-k", "0.5", "0.2", "sh", "-c", script]);
        assert_eq!(shell_status(out.status), code, "{who:?}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{who:?}: no TERM");
        assert!(started.elapsed() >= Duration::from_millis(600), "{who:?}");
    }
}

/// A real-time signal reaches the command.
#[test]
fn real_time_signals_are_delivered() {
    let script = "trap 'exit 7' RTMIN+2; sleep 10 & wait";
    for signal in ["RTMIN+2", "SIGRTMIN+2", "36"] {
        row_all(
            &[
                "--preserve-status",
                "-s",
                signal,
                "0.2",
                "bash",
                "-c",
                script,
            ],
            7,
        );
    }
}

// The tree.

/// As `timeout`, with and without --foreground, the whole tree is ended.
#[test]
fn the_whole_tree_is_ended_under_the_timeout_name() {
    for extra in [&[][..], &["--foreground"]] {
        let mut child = Command::new(link())
            .args(extra)
            .args(["-k", "0.3", "1", "bash", "-c", ESCAPEES])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let tree = escapees(&lines, &mut guard);
        let status = guard
            .wait_exit(Duration::from_secs(10))
            .expect("timeout exits");
        // bash, the command, died of TERM (GNU gives 124 then too); its
        // TERM-ignoring member got KILL after -k.
        assert_eq!(shell_status(status), 124, "{extra:?}");
        assert!(
            corral_tests::wait_until(Duration::from_secs(2), || tree
                .iter()
                .all(|p| !p.is_alive())),
            "{extra:?}"
        );
        assert_all_gone(&tree, &format!("timeout {extra:?}"));
    }
}

/// --foreground: the command is in the caller's process group (as GNU's),
/// and the group backend, which cannot do that, is refused.
#[test]
fn foreground_keeps_the_callers_process_group() {
    let my_group = corral_tests::stat(std::process::id() as i32)
        .map(|s| s.pgid)
        .expect("own stat");
    let print_group = ["sh", "-c", "cut -d' ' -f5 /proc/$$/stat"];
    for who in ALL {
        let mut args = vec!["--foreground", "10"];
        args.extend(print_group);
        let out = output(who, &args);
        assert_eq!(out.status.code(), Some(0), "{who:?}: {}", stderr(&out));
        let group: i32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("pgid");
        assert_eq!(group, my_group, "{who:?}");
    }
    let mut args = vec!["--backend", "group", "--foreground", "10"];
    args.extend(print_group);
    let out = output(Who::CorralRun, &args);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("foreground"), "{}", stderr(&out));
}

#[test]
fn the_link_needs_nothing_but_its_name() {
    // A copy works as well as a symlink: only argv[0] counts.
    let out = Command::new(corral_path())
        .arg0(OsStr::new("/some/where/timeout"))
        .args(["0.2", "sleep", "10"])
        .status()
        .expect("run");
    assert_eq!(shell_status(out), 124);
}

// Supervisors inside supervisors.

/// As GNU's `timeout.cmd`: marks `$RUNNING`, then counts down in short
/// sleeps until the trap for `signal` has written `$RECEIVED`.
fn trapping_command(signal: &str) -> String {
    format!(
        "trap 'echo > \"$RECEIVED\"; exit' {signal}; echo > \"$RUNNING\"; \
         n=200; until [ -e \"$RECEIVED\" ] || [ $n = 0 ]; do sleep 0.1; n=$((n - 1)); done"
    )
}

/// The `timeout` program `who` stands for: GNU's, or corral by that name.
fn timeout_program(who: Who) -> PathBuf {
    match who {
        Who::Gnu => GNU_TIMEOUT.into(),
        _ => link(),
    }
}

/// GNU's cascaded timeouts (`tests/timeout/timeout-group.sh`): in `timeout
/// -s ALRM 30 timeout -s SIG 25 CMD`, `SIGALRM` sent to the outer one makes
/// the inner one send SIG to CMD, whose trap runs; the outer exits 124. The
/// outer corral leaves the inner corral's tree to it (`contain/nested.rs`)
/// instead of sending `SIGALRM` to CMD itself. GNU nested in GNU is no
/// reference here: run from this test it failed 2 times in 15 (exit 142, no
/// trap run), and GNU's own test skips itself when the status is not 124.
#[test]
fn cascaded_timeouts_let_the_inner_one_apply_its_signal() {
    let who = Who::Timeout;
    for inner in ["INT", "USR1"] {
        let scratch = Scratch::new("cascaded");
        let running = scratch.path("running");
        let received = scratch.path("received");
        let script = trapping_command(inner);
        let inner_timeout = timeout_program(who);
        let child = command(who, &["-s", "ALRM", "30"])
            .arg(&inner_timeout)
            .arg0("timeout")
            .args(["-s", inner, "25", "sh", "-c", &script])
            .env("RUNNING", &running)
            .env("RECEIVED", &received)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn the outer timeout");
        let (mut guard, outer) = guard_once_running(child, &running, &format!("{who:?}/{inner}"));
        // Our own unreaped child: its pid is its identity.
        unsafe { libc::kill(outer.cast_signed(), libc::SIGALRM) };
        let status = guard
            .wait_exit(Duration::from_secs(10))
            .expect("the outer timeout exits");
        assert_eq!(shell_status(status), 124, "{who:?}/{inner}");
        assert!(
            received.exists(),
            "{who:?}/{inner}: the command never got {inner} from the inner timeout"
        );
    }
}

/// GNU's Ctrl-C case (`tests/timeout/timeout-group.sh`): a script that
/// ignores `SIGINT` starts `timeout --foreground 25 CMD &`, and `SIGINT` goes
/// to the script's whole process group, as Ctrl-C would. CMD's INT trap
/// must run: as GNU's, corral as `timeout` handles `SIGINT` whatever its
/// parent left ignored (so CMD starts with it at its default, and can trap
/// it), and passes the `SIGINT` it receives on instead of its own `SIGTERM`
/// (which would end CMD in the middle of its trap).
#[test]
fn a_command_whose_parent_ignored_int_still_traps_it_under_foreground() {
    for who in [Who::Gnu, Who::Timeout] {
        let scratch = Scratch::new("foreground-int");
        let running = scratch.path("running");
        let received = scratch.path("received");
        let cmd = trapping_command("INT");
        let timeout = timeout_program(who);
        let group = "trap '' INT; \"$TIMEOUT\" --foreground 25 sh -c \"$CMD\" & wait";
        let mut command = Command::new("sh");
        command
            .args(["-c", group])
            .env("TIMEOUT", &timeout)
            .env("CMD", cmd)
            .env("RUNNING", &running)
            .env("RECEIVED", &received)
            .stdin(Stdio::null())
            .process_group(0);
        let child = command.spawn().expect("spawn the script");
        let (mut guard, group_id) = guard_once_running(child, &running, &format!("{who:?}"));
        // The group of our own unreaped child, made for it: Ctrl-C.
        unsafe { libc::kill(-group_id.cast_signed(), libc::SIGINT) };
        guard
            .wait_exit(Duration::from_secs(10))
            .expect("the script ends");
        assert!(
            received.exists(),
            "{who:?}: the command's INT trap never ran"
        );
    }
}

/// The cascaded timeouts started as a script's background job (whose shell
/// ignores `SIGINT`, as GNU's test runs them): the inner `timeout`'s
/// `SIGINT` must still reach a command that can trap it.
#[test]
fn cascaded_timeouts_work_as_a_background_job() {
    let who = Who::Timeout;
    let scratch = Scratch::new("cascaded-bg");
    let running = scratch.path("running");
    let received = scratch.path("received");
    let cmd = trapping_command("INT");
    let timeout = timeout_program(who);
    // The script waits for the command, then sends ALRM to the outer
    // timeout, its own background job, and reports its status.
    let script = "\"$TIMEOUT\" -s ALRM 30 \"$TIMEOUT\" -s INT 25 sh -c \"$CMD\" & pid=$!; \
                  until [ -e \"$RUNNING\" ]; do sleep 0.05; done; \
                  kill -ALRM $pid; wait $pid; echo $?";
    let out = Command::new("sh")
        .args(["-c", script])
        .env("TIMEOUT", &timeout)
        .env("CMD", cmd)
        .env("RUNNING", &running)
        .env("RECEIVED", &received)
        .stdin(Stdio::null())
        .output()
        .expect("run the script");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "124",
        "{who:?}"
    );
    assert!(received.exists(), "{who:?}: the command never got INT");
}

// Signals received while the tree is being ended, and the job-control ones.

/// A leader that records each of `TERM`, `INT` and `HUP` it gets to
/// `$LOG` and exits after `HUP`, and a background child that records
/// `TERM` and `HUP` to `$CHILD_LOG` (a background job of `sh` starts with
/// `SIGINT` ignored) and exits after `HUP`; `$RUNNING` marks both ready.
const RECORDING: &str = "( trap 'echo TERM >> \"$CHILD_LOG\"' TERM; \
      trap 'echo HUP >> \"$CHILD_LOG\"; exit 0' HUP; \
      echo > \"$CHILD_READY\"; n=300; while [ $n != 0 ]; do sleep 0.1; n=$((n - 1)); done ) & \
    for s in TERM INT; do trap \"echo $s >> \\\"\\$LOG\\\"\" $s; done; \
    trap 'echo HUP >> \"$LOG\"; wait; exit 0' HUP; \
    until [ -e \"$CHILD_READY\" ]; do sleep 0.05; done; echo > \"$RUNNING\"; \
    n=300; while [ $n != 0 ]; do sleep 0.1; n=$((n - 1)); done";

/// The lines of `path` (none if it is not there yet).
fn lines_of(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The signals a trap recorded to `path`, one for each run of repeats: GNU
/// without --foreground sends each signal to its command, then to its group
/// (the command included), and the trap may run for both.
fn signals_recorded(path: &std::path::Path) -> Vec<String> {
    let mut lines = lines_of(path);
    lines.dedup();
    lines
}

/// GNU `timeout` passes on every signal it receives, not only the first
/// (its `cleanup` runs for each): `TERM` starts the ending (the -k grace,
/// long here, starts), then `INT` and `HUP` reach the command and its
/// background child as well, and the command decides (it exits after
/// `HUP`). (GNU, which then ignores each signal it sent to the group, passes
/// a repeat of one on only with --foreground; corral always does.) corral as `timeout` and `corral run` do the same; `corral run`
/// lists each in its report. GNU exits as its command did (0), and so does
/// corral as `timeout`; `corral run` with 128+N of the signal that ended
/// the tree.
#[test]
fn signals_received_while_the_tree_is_ended_are_passed_on() {
    for (who, code) in [(Who::Gnu, 0), (Who::Timeout, 0), (Who::CorralRun, 143)] {
        let scratch = Scratch::new("second-signal");
        let (log, child_log) = (scratch.path("log"), scratch.path("child-log"));
        let running = scratch.path("running");
        let report = scratch.path("report.json");
        let mut args = Vec::new();
        if who == Who::CorralRun {
            args.extend(["--report", report.to_str().expect("utf-8")]);
        }
        args.extend(["-k", "300", "600", "sh", "-c", RECORDING]);
        let child = command(who, &args)
            .env("LOG", &log)
            .env("CHILD_LOG", &child_log)
            .env("CHILD_READY", scratch.path("child-ready"))
            .env("RUNNING", &running)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        let (mut guard, pid) = guard_once_running(child, &running, &format!("{who:?}"));
        let pid = pid.cast_signed();
        let mut expected = Vec::new();
        for (signal, name) in [(libc::SIGTERM, "TERM"), (libc::SIGINT, "INT")] {
            // Our own unreaped child: its pid is its identity.
            unsafe { libc::kill(pid, signal) };
            expected.push(name.to_owned());
            assert!(
                corral_tests::wait_until(Duration::from_secs(10), || signals_recorded(&log)
                    == expected),
                "{who:?}: the command got {:?}, not {expected:?}",
                signals_recorded(&log)
            );
        }
        unsafe { libc::kill(pid, libc::SIGHUP) };
        let status = guard
            .wait_exit(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{who:?}: timeout did not exit after HUP"));
        assert_eq!(shell_status(status), code, "{who:?}");
        assert_eq!(signals_recorded(&log), ["TERM", "INT", "HUP"], "{who:?}");
        assert_eq!(
            signals_recorded(&child_log),
            ["TERM", "HUP"],
            "{who:?}: the child"
        );
        if who == Who::CorralRun {
            let text = std::fs::read_to_string(&report).expect("the report");
            let report: serde_json::Value = serde_json::from_str(&text).expect("json");
            let sent: Vec<&str> = report["signals"]
                .as_array()
                .expect("signals")
                .iter()
                .filter_map(|s| s["signal"].as_str())
                .collect();
            assert_eq!(sent, ["SIGTERM", "SIGINT", "SIGHUP"], "{text}");
        }
    }
}

/// GNU's `SIGALRM` once the ending began (its kill-after timer, or sent
/// from outside, as here) sends its signal again, `SIGKILL` after -k, and
/// counts the run as timed out. With -k, a command that traps `TERM` and goes
/// on is killed at once, not after the grace (300 s here): 137. Without, it
/// gets `TERM` again (it exits 0 at the second): 124. So as corral's
/// `timeout`; `corral run` (its grace always ends) kills, and exits 128+N
/// of the signal that ended the tree. (`$ALARMED` tells the trap a `TERM`
/// came after the alarm, not a repeat of the first.) GNU's rows (137 and
/// `TERM`; 124 and `TERM`, `again`, as `/usr/bin/timeout` gave by hand) are
/// left out: run beside other tests under load, GNU `timeout` exited before
/// its command's trap ran, 2 to 3 runs in 10 (not understood yet).
#[test]
fn an_alarm_while_the_tree_is_ended_is_gnus_alarm() {
    let runs: [(Who, &[&str], i32, &[&str]); 3] = [
        (Who::Timeout, &["-k", "300"], 137, &["TERM"]),
        (Who::CorralRun, &["-k", "300"], 143, &["TERM"]),
        (Who::Timeout, &[], 124, &["TERM", "again"]),
    ];
    for (who, extra, code, got) in runs {
        let context = format!("{who:?} {extra:?}");
        let scratch = Scratch::new("late-alarm");
        let (log, running) = (scratch.path("log"), scratch.path("running"));
        let script = "trap 'if [ -e \"$ALARMED\" ]; then echo again >> \"$LOG\"; exit 0; fi; \
                      echo TERM >> \"$LOG\"' TERM; \
                      echo > \"$RUNNING\"; \
                      n=3000; while [ $n != 0 ]; do sleep 0.1; n=$((n - 1)); done";
        let alarmed = scratch.path("alarmed");
        let mut args = extra.to_vec();
        args.extend(["600", "sh", "-c", script]);
        let child = command(who, &args)
            .env("LOG", &log)
            .env("RUNNING", &running)
            .env("ALARMED", &alarmed)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        let (mut guard, pid) = guard_once_running(child, &running, &context);
        let pid = pid.cast_signed();
        // Our own unreaped child: its pid is its identity.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        assert!(
            corral_tests::wait_until(Duration::from_secs(10), || signals_recorded(&log)
                == ["TERM"]),
            "{context}: the command got {:?}, not TERM",
            signals_recorded(&log)
        );
        std::fs::write(&alarmed, "").expect("mark");
        unsafe { libc::kill(pid, libc::SIGALRM) };
        let status = guard
            .wait_exit(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{context}: the alarm did not end the command"));
        assert_eq!(shell_status(status), code, "{context}");
        assert_eq!(signals_recorded(&log), got, "{context}");
    }
}

/// The bits of `SIGTTIN` and `SIGTTOU` in a `SigIgn:` line of
/// `/proc/PID/status`.
fn job_control_ignored(line: &str) -> u64 {
    let mask = line
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("not a SigIgn line: {line:?}"));
    mask & (1 << (libc::SIGTTIN - 1) | 1 << (libc::SIGTTOU - 1))
}

/// GNU `timeout` ignores `SIGTTIN` and `SIGTTOU` itself (it must not stop
/// when its background command reaches for the terminal) and resets both to
/// their defaults in its child: the command starts with them at their
/// defaults even when timeout's parent left them ignored. corral as
/// `timeout` and `corral run` (both ways of starting the command: clone3
/// into a cgroup, and fork with the group backend) do the same.
#[test]
fn ttin_and_ttou_are_ignored_by_timeout_and_at_their_defaults_in_the_command() {
    let both = 1 << (libc::SIGTTIN - 1) | 1 << (libc::SIGTTOU - 1);
    let print = [
        "sh",
        "-c",
        "grep SigIgn /proc/$$/status; grep SigIgn /proc/$PPID/status",
    ];
    for parent_ignores in [false, true] {
        for (who, extra) in [
            (Who::Gnu, &[][..]),
            (Who::Timeout, &[]),
            (Who::CorralRun, &[]),
            (Who::CorralRun, &["--backend", "group"]),
        ] {
            let context = format!("{who:?} {extra:?}, parent ignores: {parent_ignores}");
            let mut args = extra.to_vec();
            args.push("10");
            args.extend(print);
            let mut command = command(who, &args);
            if parent_ignores {
                // SAFETY: SIG_IGN in the forked child before exec.
                unsafe {
                    command.pre_exec(|| {
                        libc::signal(libc::SIGTTIN, libc::SIG_IGN);
                        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
                        Ok(())
                    });
                }
            }
            let out = command.output().expect("run");
            assert_eq!(out.status.code(), Some(0), "{context}: {}", stderr(&out));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            let [cmd, supervisor] = lines[..] else {
                panic!("{context}: {text:?}");
            };
            assert_eq!(job_control_ignored(cmd), 0, "{context}: the command");
            assert_eq!(
                job_control_ignored(supervisor),
                both,
                "{context}: timeout itself"
            );
        }
    }
}
