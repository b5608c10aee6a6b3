//! `corral mcp serve --user USER[:GROUP]`: every run runs as that user; the
//! option is refused without root; a root server without it, or with
//! nobody's uid, warns at start-up.

mod common;

use std::{
    os::unix::fs::PermissionsExt,
    process::{Output, Stdio},
};

use common::{corral, corral_path};

const NOBODY: &str = "65534";

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A directory anyone may enter, for a root and for the copy of corral that
/// runs as nobody (the checkout may sit in a private one).
fn open_scratch(name: &str) -> corral_tests::Scratch {
    let scratch = corral_tests::Scratch::new(name);
    std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    scratch
}

/// `corral mcp call --json run ARGUMENTS -- SERVER...`.
fn call_run(arguments: &str, server: &[&str]) -> Output {
    corral()
        .args([
            "mcp",
            "call",
            "--json",
            "--timeout",
            "30s",
            "run",
            arguments,
            "--",
        ])
        .args(server)
        .stdin(Stdio::null())
        .output()
        .expect("run corral mcp call")
}

#[test]
fn serve_user_runs_every_command_as_that_user() {
    if !is_root() {
        return println!("SKIPPED: --user needs root");
    }
    let root = open_scratch("serve-user-root");
    let corral = corral_path();
    let corral = corral.to_string_lossy();
    let root_dir = root.0.to_string_lossy();
    for spec in [NOBODY, &format!("{NOBODY}:{NOBODY}")] {
        let output = call_run(
            r#"{"shell": "echo $(id -u) $(id -g) $(id -G)"}"#,
            &[&corral, "mcp", "serve", "--user", spec, "--root", &root_dir],
        );
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let envelope: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("a JSON envelope");
        let result = &envelope["result"]["structuredContent"];
        assert_eq!(
            result["stdout"],
            format!("{NOBODY} {NOBODY} {NOBODY}\n"),
            "--user {spec}: {envelope:#}"
        );
    }
    // Without --user, the same call runs as root (what the option changes).
    let output = call_run(
        r#"{"argv": ["id", "-u"]}"#,
        &[&corral, "mcp", "serve", "--root", &root_dir],
    );
    let envelope: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("a JSON envelope");
    assert_eq!(envelope["result"]["structuredContent"]["stdout"], "0\n");
}

#[test]
fn serve_user_without_root_is_refused_with_the_fix() {
    let copy = open_scratch("serve-user-corral");
    let binary = copy.0.join("corral");
    std::fs::copy(corral_path(), &binary).expect("copy corral");
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let binary = binary.to_string_lossy();
    let serve = [&*binary, "mcp", "serve", "--user", "0", "--root", "/"];
    // As root, corral itself runs the server as nobody.
    let output = if is_root() {
        corral()
            .args(["run", "--user", NOBODY, "--"])
            .args(serve)
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
    } else {
        std::process::Command::new(serve[0])
            .args(&serve[1..])
            .stdin(Stdio::null())
            .output()
    }
    .expect("run corral mcp serve");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("--user 0 needs root")
            && stderr.contains("corral mcp serve runs as uid")
            && stderr.contains("start the server as root"),
        "{stderr}"
    );
}

#[test]
fn a_root_server_without_user_or_with_nobody_warns_at_start_up() {
    let root = open_scratch("serve-user-warning");
    let root_dir = root.0.to_string_lossy();
    let started = |extra: &[&str]| {
        corral()
            .args(["mcp", "serve", "--root", &root_dir])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("run corral mcp serve")
    };
    let output = started(&[]);
    let stderr = text(&output.stderr);
    let warned = stderr
        .lines()
        .filter(|line| line.contains("warning: running as root without --user"))
        .count();
    if is_root() {
        assert_eq!(warned, 1, "{stderr}");
        assert!(stderr.contains("add --user USER"), "{stderr}");
        assert!(stderr.contains("useradd --system"), "{stderr}");
        // nobody's uid is shared with whatever else runs as nobody: warned.
        let output = started(&["--user", NOBODY]);
        let stderr = text(&output.stderr);
        let warned = stderr
            .lines()
            .filter(|line| line.contains("warning: --user 65534 runs every command as nobody"))
            .count();
        assert_eq!(warned, 1, "{stderr}");
        assert!(
            stderr.contains("useradd --system --no-create-home corral-run"),
            "{stderr}"
        );
        // An account of the runs' own: no warning.
        let output = started(&["--user", "4242:4242"]);
        assert!(
            !text(&output.stderr).contains("warning"),
            "{}",
            text(&output.stderr)
        );
    } else {
        assert_eq!(warned, 0, "{stderr}");
    }
}
