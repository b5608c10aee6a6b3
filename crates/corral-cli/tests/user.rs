//! `corral run --user USER[:GROUP]`: names and numbers, an unknown user, and
//! the refusal without root.

mod common;

use std::process::{Output, Stdio};

use common::{corral, corral_path};

const NOBODY: &str = "65534";

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn run(args: &[&str]) -> Output {
    corral()
        .arg("run")
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .expect("run corral")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The command runs as the user and group given, by number or by name, with
/// no supplementary group.
#[test]
fn runs_the_command_as_the_user_given_by_number_or_name() {
    if !is_root() {
        return println!("SKIPPED: --user needs root");
    }
    let Some(name) = user_name(NOBODY) else {
        return println!("SKIPPED: no user {NOBODY} in /etc/passwd");
    };
    let ids = "echo $(id -u) $(id -g) $(id -G)";
    for spec in [NOBODY, name.as_str(), &format!("{NOBODY}:{NOBODY}")] {
        let output = run(&["--user", spec, "--", "sh", "-c", ids]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "--user {spec}: {}",
            text(&output.stderr)
        );
        assert_eq!(
            text(&output.stdout).trim(),
            format!("{NOBODY} {NOBODY} {NOBODY}"),
            "--user {spec}"
        );
    }
    // A group other than the user's own.
    let output = run(&["-u", &format!("{name}:0"), "--", "id", "-g"]);
    assert_eq!(text(&output.stdout).trim(), "0", "{}", text(&output.stderr));
}

/// An unknown user is refused before anything runs (125), naming the fix.
#[test]
fn an_unknown_user_is_refused_with_the_fix() {
    let output = run(&["--user", "no-such-user-corral", "--", "true"]);
    assert_eq!(output.status.code(), Some(125));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unknown user \"no-such-user-corral\"") && stderr.contains("e.g."),
        "{stderr}"
    );
    let output = run(&["--user", "0:no-such-group-corral", "--", "true"]);
    assert_eq!(output.status.code(), Some(125));
    assert!(
        text(&output.stderr).contains("unknown group"),
        "{}",
        text(&output.stderr)
    );
}

/// Without root, --user is refused (125) with a message that says so. As
/// root the check runs corral itself as nobody, through --user.
#[test]
fn without_root_user_is_refused() {
    let inner = [corral_path().to_string_lossy().into_owned()];
    let output = if is_root() {
        let mut args = vec!["--user", NOBODY, "--"];
        args.push(&inner[0]);
        args.extend(["run", "--user", "0", "--", "true"]);
        run(&args)
    } else {
        run(&["--user", "0", "--", "true"])
    };
    assert_eq!(output.status.code(), Some(125), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--user 0 needs root") && stderr.contains("run corral as root"),
        "{stderr}"
    );
}

/// The name of the user `uid`, from /etc/passwd.
fn user_name(uid: &str) -> Option<String> {
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.get(2) == Some(&uid)).then(|| fields[0].to_owned())
        })
}
