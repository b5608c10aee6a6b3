//! The parts of the command line around `run`: help, version, completions,
//! capabilities.

mod common;

use common::corral;

#[test]
fn help_and_version_exit_0() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["--version"],
        &["-V"],
        &["run", "--help"],
    ] {
        let output = corral().args(args).output().expect("run corral");
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(!output.stdout.is_empty(), "{args:?}");
    }
}

/// `corral --version` and `-V` name the commit corral was built from
/// (build.rs), here the checkout's HEAD; built where git cannot tell (a
/// tarball), the version alone.
#[test]
fn version_names_the_commit() {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let version = env!("CARGO_PKG_VERSION");
    // What build.rs gave this package. Where git answers this test's user,
    // it must be HEAD's; where it does not (the unprivileged pass runs as
    // another user than the checkout's, and git refuses a repository of
    // another owner), the build's word is all there is to compare with.
    let built = format!("corral {}", env!("CORRAL_VERSION"));
    let expected = match &head {
        Some(head) => format!("corral {version} ({})", &head[..12]),
        None => built.clone(),
    };
    assert_eq!(built, expected, "build.rs named another commit than HEAD");
    for flag in ["--version", "-V"] {
        let output = corral().arg(flag).output().expect("run corral");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(stdout.lines().next(), Some(expected.as_str()), "{flag}");
    }
}

#[test]
fn run_help_documents_the_decisions_and_examples() {
    let output = corral()
        .args(["run", "--help"])
        .output()
        .expect("run corral");
    let help = String::from_utf8_lossy(&output.stdout);
    for needle in [
        "--kill-after",
        "default: 5s",
        "0 sends SIGKILL at once",
        "--final-bound",
        "default: 1s",
        "124",
        "125",
        "128+N",
        "timeout gives 137",
        "nohup",
        // The limits on the whole tree, and their exit statuses.
        "--max-procs",
        "--max-memory",
        "--max-swap",
        "--cpus",
        "--cpu-time",
        "--max-open-files",
        "--limits-best-effort",
        "137",
        "152",
        "Examples:",
        "1m30s",
    ] {
        assert!(help.contains(needle), "{needle:?} missing from run --help");
    }
    let output = corral().arg("--version").output().expect("run corral");
    assert!(String::from_utf8_lossy(&output.stdout).contains("corral capabilities"));
}

#[test]
fn no_subcommand_is_one_line_125() {
    let output = corral().output().expect("run corral");
    assert_eq!(output.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("corral: no subcommand"), "{stderr}");
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete"),
        ("zsh", "#compdef corral"),
        ("fish", "complete -c corral"),
    ] {
        let output = corral()
            .args(["completions", shell])
            .output()
            .expect("run corral");
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        assert!(
            script.contains(marker) && script.contains("kill-after"),
            "{shell}"
        );
    }
    let output = corral()
        .args(["completions", "tcsh"])
        .output()
        .expect("run corral");
    assert_eq!(output.status.code(), Some(125));
}

#[test]
fn capabilities_lists_every_backend() {
    let output = corral().arg("capabilities").output().expect("run corral");
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    for backend in ["cgroup", "subreaper", "group", "auto picks"] {
        assert!(text.contains(backend), "{text}");
    }
    let output = corral()
        .args(["capabilities", "--json"])
        .output()
        .expect("run corral");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let backends = json["backends"].as_array().expect("backends");
    assert_eq!(backends.len(), 3);
    for backend in backends {
        assert!(backend["available"].is_boolean() && backend["detail"].is_string());
    }
    // The CLI is dedicated to supervision, so the subreaper is on offer.
    assert_eq!(backends[1]["backend"], "subreaper");
    assert_eq!(backends[1]["available"], true, "{}", backends[1]["detail"]);
}

/// A relative `CORRAL_WATCHDOG` would be resolved against whatever directory
/// and `PATH` a spawn runs with: it is refused, with a note naming the
/// variable and the fix; an absolute one is used.
#[test]
fn relative_corral_watchdog_is_refused() {
    let output = corral()
        .args(["capabilities", "--json"])
        .env("CORRAL_WATCHDOG", "corral")
        .output()
        .expect("run corral");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let watchdog = json["watchdog"].as_str().expect("watchdog");
    assert!(
        watchdog.starts_with("off:")
            && watchdog.contains("CORRAL_WATCHDOG")
            && watchdog.contains("absolute"),
        "{watchdog}"
    );
    let output = corral()
        .args(["capabilities", "--json"])
        .env("CORRAL_WATCHDOG", "/usr/local/bin/corral")
        .output()
        .expect("run corral");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(json["watchdog"], "on: /usr/local/bin/corral");
}
