//! The command's standard streams are its own: inherited, not captured.

mod common;

use std::{
    io::{Read, Write},
    process::Stdio,
    thread,
};

use common::corral;

#[test]
fn stdin_is_passed_through() {
    let mut child = corral()
        .args(["run", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"x\n").expect("write");
    drop(stdin);
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(output.stdout, b"x\n");
}

#[test]
fn binary_output_is_untouched() {
    // Every byte value, including NUL, CR and invalid UTF-8, 1 MiB in all.
    let data: Vec<u8> = (0..(1 << 20))
        .map(|i: u32| (i % 251) as u8 ^ (i >> 8) as u8)
        .collect();
    let mut child = corral()
        .args(["run", "-t", "60s", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = data.clone();
    let writer = thread::spawn(move || stdin.write_all(&input));
    let mut received = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut received)
        .expect("read");
    writer.join().expect("writer thread").expect("write");
    assert_eq!(child.wait().expect("wait").code(), Some(0));
    assert!(received == data, "output differs from input");
}

#[test]
fn stderr_is_the_commands_own() {
    let output = corral()
        .args(["run", "--", "sh", "-c", "echo out; echo err >&2"])
        .output()
        .expect("run corral");
    assert_eq!(output.stdout, b"out\n");
    assert_eq!(output.stderr, b"err\n", "corral adds nothing without -v");
}

#[test]
fn verbose_prints_each_signal_on_stderr_only() {
    let output = corral()
        .args(["run", "-v", "-t", "200ms", "--", "sleep", "10"])
        .env_remove("RUST_LOG")
        .output()
        .expect("run corral");
    assert_eq!(output.status.code(), Some(124));
    assert!(output.stdout.is_empty(), "stdout belongs to the command");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("corral: sent SIGTERM to ") && l.ends_with('s')),
        "{stderr}"
    );
    assert!(
        stderr.contains("signal sent"),
        "the library's debug events: {stderr}"
    );
}

/// On a terminal the command's streams are that terminal (`script` makes a
/// pseudo-terminal; skipped where it is missing).
#[test]
fn a_tty_stays_a_tty() {
    let script = std::path::Path::new("/usr/bin/script");
    if !script.exists() {
        eprintln!("SKIPPED: /usr/bin/script is not installed");
        return;
    }
    let inner = format!(
        "{} run -- sh -c 'test -t 0 && test -t 1 && test -t 2 && echo tty-ok'",
        common::corral_path().display()
    );
    let output = std::process::Command::new(script)
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("tty-ok"), "{stdout:?}");
    assert_eq!(output.status.code(), Some(0));
}

/// With `-v`, a standard error nobody reads any more (`2>&1 | head -1`
/// once head is gone) ends neither corral nor, through its watchdog, the
/// command: the lines are dropped. Before, the first failed write panicked
/// (exit 101 or 125) and the command was killed. Here standard error is a
/// pipe whose reader is closed before corral starts, so every `-v` line
/// fails while the command runs.
#[test]
fn a_closed_stderr_ends_neither_corral_nor_its_command() {
    let scratch = corral_tests::Scratch::new("closed-stderr");
    let done = scratch.path("done.txt");
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut command = corral();
    common::private_ledger(&mut command, "closed-stderr");
    let status = command
        .args(["run", "-v", "-t", "5", "--", "sh", "-c"])
        .arg("sleep 1; echo finished > \"$0\"")
        .arg(&done)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .expect("run corral");
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&done).ok().as_deref(),
        Some("finished\n"),
        "the command did not finish"
    );
}

/// The signals the command starts with ignored (`SigIgn`), run by corral
/// under a shell that ran `prelude` first.
fn ignored_by_the_command(prelude: &str, backend: &str) -> u64 {
    mask_of_the_command(prelude, backend, "SigIgn")
}

/// The command's signal mask line `field` (`SigIgn`, `SigBlk`) under
/// `corral run --backend BACKEND`, started from `sh` after `prelude`. The
/// command is `grep` itself: a shell would clear its mask at start-up.
fn mask_of_the_command(prelude: &str, backend: &str, field: &str) -> u64 {
    let script = format!(
        "{prelude} exec \"$0\" run --backend {backend} -t 10 -- grep {field} /proc/self/status"
    );
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(common::corral_path())
        .stdin(Stdio::null())
        .output()
        .expect("run corral under sh");
    let line = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{line}");
    line.trim()
        .strip_prefix(&format!("{field}:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("not a SigIgn line: {line:?}"))
}

/// The command starts with no signal blocked on every backend, although
/// corral holds SIGRTMAX blocked for itself (std's spawn would pass the
/// supervisor's mask on).
#[test]
fn the_command_starts_with_no_signal_blocked() {
    common::for_backends(&["cgroup", "subreaper", "group"], |backend| {
        let blocked = mask_of_the_command("", backend, "SigBlk");
        assert_eq!(
            blocked, 0,
            "{backend}: the command starts with {blocked:x} blocked"
        );
    });
}

/// A SIGPIPE the parent left ignored is ignored by the command too (as
/// `--help` says of every ignored signal), although Rust's runtime ignores
/// it in corral either way: the command then gets EPIPE from a write to a
/// closed pipe (`yes` says so and exits 1) instead of dying of SIGPIPE. A
/// SIGPIPE at its default stays at its default for the command.
#[test]
fn sigpipe_reaches_the_command_as_the_parent_left_it() {
    common::for_backends(&["cgroup", "subreaper", "group"], |backend| {
        let ignored = ignored_by_the_command("trap '' PIPE;", backend);
        assert!(
            corral_tests::proc::has_signal(ignored, 13),
            "{backend}: SIGPIPE not passed on as ignored: {ignored:x}"
        );
        let default = ignored_by_the_command("trap - PIPE;", backend);
        assert!(
            !corral_tests::proc::has_signal(default, 13),
            "{backend}: the command ignores SIGPIPE: {default:x}"
        );
        for (prelude, expected) in [("trap '' PIPE;", 1), ("trap - PIPE;", 128 + 13)] {
            let script = format!(
                "{prelude} \"$0\" run --backend {backend} -t 10 -- yes | true; \
                 echo \"${{PIPESTATUS[0]}}\""
            );
            let output = std::process::Command::new("bash")
                .arg("-c")
                .arg(script)
                .arg(common::corral_path())
                .stdin(Stdio::null())
                .output()
                .expect("run corral under bash");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert_eq!(stdout.trim(), expected.to_string(), "{backend}, {prelude}");
            if expected == 1 {
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(stderr.contains("yes: "), "{backend}: {stderr}");
            }
        }
    });
}
