//! The exit-status table, row by row, on every available backend, compared
//! with GNU `timeout(1)` where the two share the behaviour.

mod common;

use std::{os::unix::fs::PermissionsExt, process::Stdio};

use common::{GNU_TIMEOUT, backend_args, corral, for_backends, shell_status};

const ALL: &[&str] = &["auto", "cgroup", "subreaper", "group"];

/// `corral run --backend B ARGS...` as a shell would report its status;
/// stdin and stdout are null, stderr is returned.
fn corral_status(backend: &str, args: &[&str]) -> (i32, String) {
    let output = corral()
        .arg("run")
        .args(backend_args(backend))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run corral");
    (
        shell_status(output.status),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn gnu_status(args: &[&str]) -> i32 {
    let status = std::process::Command::new(GNU_TIMEOUT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run GNU timeout");
    shell_status(status)
}

/// Checks one row on every backend, and against GNU when `gnu` is given.
fn row(corral_args: &[&str], gnu: Option<&[&str]>, expected: i32) {
    if let Some(gnu) = gnu {
        assert_eq!(gnu_status(gnu), expected, "GNU timeout {gnu:?}");
    }
    for_backends(ALL, |backend| {
        let (status, stderr) = corral_status(backend, corral_args);
        assert_eq!(
            status, expected,
            "{backend}: corral run {corral_args:?}: {stderr}"
        );
    });
}

/// For 125 rows: one stderr line, starting `corral: `, containing `needle`.
fn row_125(corral_args: &[&str], gnu: Option<&[&str]>, needle: &str) {
    row(corral_args, gnu, 125);
    let (_, stderr) = corral_status("auto", corral_args);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.starts_with("corral: "), "{stderr:?}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr:?}");
}

#[test]
fn exit_0_is_passed_through() {
    row(&["--", "true"], Some(&["10", "true"]), 0);
    row(&["-t", "0", "--", "true"], Some(&["0", "true"]), 0);
}

#[test]
fn exit_3_and_255_are_passed_through() {
    row(
        &["--", "sh", "-c", "exit 3"],
        Some(&["10", "sh", "-c", "exit 3"]),
        3,
    );
    row(
        &["--", "sh", "-c", "exit 255"],
        Some(&["10", "sh", "-c", "exit 255"]),
        255,
    );
}

#[test]
fn timeout_is_124() {
    row(
        &["-t", "200ms", "--", "sleep", "10"],
        Some(&["0.2", "sleep", "10"]),
        124,
    );
}

/// GNU gives 137 here (the child died of SIGKILL, which timeout(1) reports
/// as such); corral gives 124 for every timeout. Documented in --help.
#[test]
fn timeout_with_signal_kill_is_124_where_gnu_gives_137() {
    assert_eq!(gnu_status(&["-s", "KILL", "0.2", "sleep", "10"]), 137);
    row(
        &["-t", "200ms", "-s", "KILL", "--", "sleep", "10"],
        None,
        124,
    );
    row(&["-t", "200ms", "-s", "9", "--", "sleep", "10"], None, 124);
}

/// GNU kills itself along with the child when --kill-after fires (137);
/// corral reports the timeout.
#[test]
fn timeout_escalated_to_sigkill_is_124() {
    let stubborn = ["sh", "-c", "trap '' TERM; sleep 10"];
    let mut gnu = vec!["-k", "0.2", "0.2"];
    gnu.extend(stubborn);
    assert_eq!(gnu_status(&gnu), 137);
    let mut args = vec!["-t", "200ms", "-k", "200ms", "--"];
    args.extend(stubborn);
    row(&args, None, 124);
}

#[test]
fn bad_duration_is_125() {
    row_125(
        &["-t", "abc", "--", "true"],
        Some(&["abc", "true"]),
        "--timeout",
    );
    row_125(&["-t", "-1", "--", "true"], None, "negative");
    row_125(&["-t", "nan", "--", "true"], None, "finite");
    row_125(&["-t", "", "--", "true"], None, "empty");
    row_125(&["-t", "5x", "--", "true"], Some(&["5x", "true"]), "unit");
    row_125(&["-k", "1m30", "--", "true"], None, "--kill-after");
    row_125(
        &["--final-bound", "-2s", "--", "true"],
        None,
        "--final-bound",
    );
}

/// GNU's saturation: `inf` and values beyond 2^32 s are no limit, not an
/// error.
#[test]
fn infinite_and_huge_durations_mean_no_limit() {
    row(&["-t", "inf", "--", "true"], Some(&["inf", "true"]), 0);
    row(
        &["-t", "99999999999", "--", "true"],
        Some(&["99999999999", "true"]),
        0,
    );
    row(
        &["-k", "1e400", "--", "true"],
        Some(&["-k", "1e400", "10", "true"]),
        0,
    );
}

#[test]
fn unknown_signal_is_125() {
    row_125(
        &["-s", "FOO", "--", "true"],
        Some(&["-s", "FOO", "1", "true"]),
        "--signal",
    );
    row_125(&["-s", "99", "--", "true"], None, "unknown signal");
}

#[test]
fn missing_double_dash_is_125() {
    row_125(&["true"], None, "after `--`");
    row_125(&["-t", "1", "sleep", "2"], None, "after `--`");
    row_125(&["--"], None, "COMMAND");
}

#[test]
fn unknown_option_is_125() {
    row_125(
        &["--bogus", "--", "true"],
        Some(&["--bogus", "1", "true"]),
        "--bogus",
    );
    row_125(&["-x", "--", "true"], None, "'-x'");
    let output = corral()
        .args(["run", "--backend", "jail", "--", "true"])
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.starts_with("corral: ") && stderr.contains("possible values"),
        "{stderr}"
    );
}

#[test]
fn not_executable_is_126() {
    let script = corral_tests::scratch("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").expect("write script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let path = script.to_str().expect("utf-8 path");
    row(&["--", path], Some(&["10", path]), 126);
    row(&["--", "/"], Some(&["10", "/"]), 126);
    let _ = std::fs::remove_file(&script);
}

#[test]
fn not_found_is_127() {
    row(
        &["--", "/nonexistent/cmd"],
        Some(&["10", "/nonexistent/cmd"]),
        127,
    );
    row(
        &["--", "no-such-command-corral-test"],
        Some(&["10", "no-such-command-corral-test"]),
        127,
    );
    let (_, stderr) = corral_status("auto", &["--", "/nonexistent/cmd"]);
    assert!(
        stderr.starts_with("corral: ") && stderr.contains("not found"),
        "{stderr}"
    );
}

/// GNU re-raises the signal on itself; corral exits 128+N. A shell sees the
/// same number.
#[test]
fn command_killed_by_signal_is_128_plus_n() {
    row(
        &["--", "sh", "-c", "kill -USR1 $$"],
        Some(&["10", "sh", "-c", "kill -USR1 $$"]),
        138,
    );
    row(
        &["--", "sh", "-c", "kill -KILL $$"],
        Some(&["10", "sh", "-c", "kill -KILL $$"]),
        137,
    );
}

#[test]
fn preserve_status_reports_the_command_after_a_timeout() {
    // Died of corral's SIGTERM: 128+15.
    row(
        &["-t", "200ms", "--preserve-status", "--", "sleep", "10"],
        Some(&["--preserve-status", "0.2", "sleep", "10"]),
        143,
    );
    // Exited with its own code from a TERM trap.
    let trap = ["sh", "-c", "trap 'exit 7' TERM; sleep 10 & wait"];
    let mut gnu = vec!["--preserve-status", "0.2"];
    gnu.extend(trap);
    let mut args = vec!["-t", "200ms", "--preserve-status", "--"];
    args.extend(trap);
    row(&args, Some(&gnu), 7);
    // With SIGKILL: 137, as GNU.
    row(
        &[
            "-t",
            "200ms",
            "-s",
            "KILL",
            "--preserve-status",
            "--",
            "sleep",
            "10",
        ],
        Some(&["-s", "KILL", "--preserve-status", "0.2", "sleep", "10"]),
        137,
    );
}

#[test]
fn unavailable_backend_is_125_and_names_the_option() {
    for backend in ["cgroup", "subreaper"] {
        if let Err(reason) = common::backend_available(backend) {
            let (status, stderr) = corral_status(backend, &["--", "true"]);
            assert_eq!(status, 125, "{reason}");
            assert!(stderr.contains("--backend"), "{stderr}");
        }
    }
}
