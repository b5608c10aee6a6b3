//! `corral run --user USER[:GROUP]`: names and numbers, an unknown user, the
//! refusal without root; and what the report says of a process that left its
//! leaf cgroup, with and without --user.

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
    // With --report, the report says why nothing ran.
    let path = corral_tests::scratch("unknown-user.json");
    let output = run(&[
        "--user",
        "no-such-user-corral",
        "--report",
        path.to_str().expect("a UTF-8 path"),
        "--",
        "true",
    ]);
    assert_eq!(output.status.code(), Some(125));
    let report = std::fs::read_to_string(&path).expect("a report");
    let _ = std::fs::remove_file(&path);
    assert!(
        report.contains("spawn_failed") && report.contains("unknown user"),
        "{report}"
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
    // Run as nobody, corral must be executable by nobody: a copy in a
    // directory anyone may enter (the checkout may sit in a private one).
    let copy = corral_tests::scratch("user-corral");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(&copy).expect("scratch dir");
    let binary = copy.join("corral");
    if is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::copy(corral_path(), &binary).expect("copy corral");
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let inner = [binary.to_string_lossy().into_owned()];
    let output = if is_root() {
        let mut args = vec!["--user", NOBODY, "--"];
        args.push(&inner[0]);
        args.extend(["run", "--user", "0", "--", "true"]);
        run(&args)
    } else {
        run(&["--user", "0", "--", "true"])
    };
    let _ = std::fs::remove_dir_all(&copy);
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

/// Where corral creates leaf cgroups, or `None` without the cgroup backend.
fn cgroup_parent() -> Option<String> {
    let output = corral()
        .args(["capabilities", "--json"])
        .output()
        .expect("run corral capabilities");
    let capabilities: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("capabilities JSON");
    capabilities["cgroup_parent"].as_str().map(str::to_owned)
}

/// A member that moves itself to the parent cgroup on SIGTERM: as root it
/// can, and the report names it in `left_cgroup` (killed); run with --user
/// it cannot, and nothing is left.
#[test]
fn the_report_names_a_process_that_left_the_leaf() {
    if !is_root() {
        return println!("SKIPPED: moving between cgroups and --user need root");
    }
    let Some(parent) = cgroup_parent() else {
        return println!("SKIPPED: the cgroup backend is not available here");
    };
    let escaper = "trap 'echo 0 > \"$PARENT/cgroup.procs\"; exec sleep 30' TERM; \
                   sleep 30 & echo ready $$; wait";
    for user in [None, Some(NOBODY)] {
        let path = corral_tests::scratch("left.json");
        let mut command = corral();
        command.args(["run", "--backend", "cgroup", "-t", "500ms", "-k", "300ms"]);
        if let Some(user) = user {
            command.args(["--user", user]);
        }
        let output = command
            .arg("--report")
            .arg(&path)
            .args(["--", "sh", "-c", "sh -c \"$ESCAPER\" & wait"])
            .env("ESCAPER", escaper)
            .env("PARENT", &parent)
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .expect("run corral");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("a report")).expect("JSON");
        let _ = std::fs::remove_file(&path);
        // Whatever the outcome, the escaper is gone: SIGKILL it by identity
        // if the report names it and it runs (a failing case).
        let left = report["left_cgroup"]
            .as_array()
            .expect("left_cgroup")
            .clone();
        let procs: Vec<corral_tests::Proc> = left
            .iter()
            .filter_map(|p| {
                Some(corral_tests::Proc {
                    pid: i32::try_from(p["pid"].as_i64()?).ok()?,
                    start_time: p["start_time"].as_u64()?,
                })
            })
            .collect();
        let still: Vec<_> = procs.iter().filter(|p| p.is_alive()).collect();
        for p in &still {
            p.signal(rustix::process::Signal::KILL);
        }
        assert!(still.is_empty(), "left running: {still:?}");
        assert_eq!(output.status.code(), Some(124), "{}", text(&output.stderr));
        assert_eq!(report["survivors"], serde_json::json!([]));
        let ready = text(&output.stdout);
        let escaper_pid: i64 = ready
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("a readiness line");
        let stderr = text(&output.stderr);
        match user {
            None => {
                assert_eq!(left.len(), 1, "{report}");
                assert_eq!(left[0]["pid"], escaper_pid, "{report}");
                assert!(stderr.contains("moved out of the leaf cgroup"), "{stderr}");
            }
            Some(_) => {
                assert_eq!(left.len(), 0, "{report}");
                assert!(stderr.contains("Permission denied"), "{stderr}");
            }
        }
    }
}
