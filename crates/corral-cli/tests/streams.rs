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
