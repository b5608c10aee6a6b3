//! The `--report` JSON document: pinned by a golden file, also for spawn
//! failures and `--report-fd`.
//!
//! Regenerate the golden file with `UPDATE_GOLDEN=1 cargo nextest run -p
//! corral-cli -E 'binary(report)'` and review the diff: a changed shape
//! needs a new `version`.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use common::{backend_available, corral};
use serde_json::Value;

fn golden_path() -> PathBuf {
    corral_tests::manifest_dir!().join("tests/golden/report.json")
}

fn temp(name: &str) -> PathBuf {
    corral_tests::scratch(&format!("{name}.json"))
}

fn read_json(path: &PathBuf) -> Value {
    let text = std::fs::read_to_string(path).expect("report written");
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).expect("report is JSON")
}

/// Replaces volatile values (times, pids, start times, paths) by fixed ones,
/// after checking their type.
fn normalise(report: &mut Value) {
    let zero_secs = |value: &mut Value| {
        assert!(value.as_f64().is_some_and(|s| s >= 0.0), "seconds: {value}");
        *value = Value::from(0.0);
    };
    for key in ["run", "cleanup", "total"] {
        zero_secs(&mut report["durations"][key]);
    }
    for signal in report["signals"].as_array_mut().expect("signals") {
        zero_secs(&mut signal["at"]);
    }
    for survivor in report["survivors"].as_array_mut().expect("survivors") {
        survivor["pid"] = Value::from(0);
        survivor["start_time"] = Value::from(0);
    }
    if report["cgroup"].is_string() {
        report["cgroup"] = Value::from("<cgroup>");
    }
}

/// A stubborn command (ignores SIGTERM) timed out: every part of the schema
/// is exercised — two signals, escalation, a leader killed by SIGKILL. The
/// subreaper backend counts deliveries and is available wherever /proc is.
#[test]
fn report_matches_the_golden_file() {
    if let Err(reason) = backend_available("subreaper") {
        eprintln!("SKIPPED: subreaper backend unavailable: {reason}");
        return;
    }
    let path = temp("golden");
    let status = corral()
        .args([
            "run",
            "--backend",
            "subreaper",
            "-t",
            "1s",
            "-k",
            "300ms",
            "--report",
        ])
        .arg(&path)
        .args(["--", "sh", "-c", "trap '' TERM; exec sleep 10"])
        .stdin(Stdio::null())
        .status()
        .expect("run corral");
    assert_eq!(status.code(), Some(124));
    let mut report = read_json(&path);
    normalise(&mut report);
    let actual = serde_json::to_string_pretty(&report).expect("serialise") + "\n";
    let golden_file = golden_path();
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&golden_file, &actual).expect("write golden file");
        return;
    }
    let golden =
        std::fs::read_to_string(&golden_file).expect("golden file (UPDATE_GOLDEN=1 makes it)");
    let golden: Value = serde_json::from_str(&golden).expect("golden is JSON");
    assert_eq!(
        report,
        golden,
        "report differs from {}:\n{actual}",
        golden_file.display()
    );
}

#[test]
fn spawn_failure_writes_a_report() {
    let path = temp("spawn-failed");
    let output = corral()
        .args(["run", "--report"])
        .arg(&path)
        .args(["--", "/nonexistent/cmd", "arg"])
        .output()
        .expect("run corral");
    assert_eq!(output.status.code(), Some(127));
    let report = read_json(&path);
    assert_eq!(report["version"], 1);
    assert_eq!(report["outcome"]["kind"], "spawn_failed");
    let error = report["outcome"]["error"].as_str().expect("error");
    assert!(error.contains("not found"), "{error}");
    assert_eq!(report["exit_status"], 127);
    assert_eq!(
        report["command"],
        serde_json::json!(["/nonexistent/cmd", "arg"])
    );
    assert_eq!(report["leader"], Value::Null);
    assert_eq!(report["backend"], Value::Null);
    assert_eq!(report["effects_unknown"], false);
}

/// `corral run --report-fd 3 -- COMMAND` with descriptor 3 opened on `path`
/// by a shell redirection.
fn with_report_fd(command: &str, path: &Path) -> std::process::Command {
    let script = format!(
        "\"$0\" run --report-fd 3 -- {command} 3>'{}'",
        path.display()
    );
    let mut sh = std::process::Command::new("sh");
    sh.arg("-c").arg(script).arg(common::corral_path());
    sh
}

#[test]
fn report_fd_receives_the_report() {
    let path = temp("report-fd");
    let status = with_report_fd("sh -c 'exit 3'", &path)
        .status()
        .expect("run sh");
    assert_eq!(status.code(), Some(3));
    let report = read_json(&path);
    assert_eq!(
        report["outcome"],
        serde_json::json!({"kind": "exited", "code": 3})
    );
    assert_eq!(report["leader"], serde_json::json!({"code": 3}));
    assert_eq!(report["exit_status"], 3);
    assert_eq!(report["signals"], serde_json::json!([]));
}

/// The report's descriptor is corral's alone: the command (and anything it
/// starts) does not inherit it, so it cannot forge or garble the report.
#[test]
fn command_cannot_write_into_the_report_fd() {
    let path = temp("report-fd-forged");
    let output = with_report_fd("sh -c 'echo forged >&3'", &path)
        .output()
        .expect("run sh");
    let text = std::fs::read_to_string(&path).expect("report written");
    let _ = std::fs::remove_file(&path);
    assert!(
        text.starts_with('{'),
        "the command wrote into the report: {text}"
    );
    let report: Value = serde_json::from_str(&text).expect("the report is corral's JSON only");
    assert_ne!(
        report["exit_status"],
        0,
        "the write to fd 3 should fail: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A report file is replaced by a rename, never written in place: a reader
/// never sees half a report (the same writer as `corral mcp wrap`'s).
#[test]
fn report_file_is_replaced_atomically() {
    use std::os::unix::fs::MetadataExt;
    let path = temp("atomic");
    std::fs::write(&path, "old").expect("an earlier file");
    let before = std::fs::metadata(&path).expect("metadata").ino();
    let status = corral()
        .args(["run", "--report"])
        .arg(&path)
        .args(["--", "true"])
        .status()
        .expect("run corral");
    assert_eq!(status.code(), Some(0));
    let after = std::fs::metadata(&path).expect("metadata").ino();
    let report = read_json(&path);
    assert_eq!(report["exit_status"], 0);
    assert_ne!(before, after, "written in place, not renamed over");
    let temp = format!("{}.tmp-", path.display());
    let dir = path.parent().expect("a directory");
    let left: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().display().to_string().starts_with(&temp))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn unwritable_report_fails_before_the_command_runs() {
    let marker = temp("must-not-exist");
    let output = corral()
        .args([
            "run",
            "--report",
            "/nonexistent/dir/report.json",
            "--",
            "touch",
        ])
        .arg(&marker)
        .output()
        .expect("run corral");
    assert_eq!(output.status.code(), Some(125));
    assert!(!marker.exists(), "the command ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("corral: ") && stderr.contains("--report"),
        "{stderr}"
    );
}

/// The keys of every object, recursively, as `a.b.c` paths.
fn shape(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = format!("{prefix}.{key}");
                out.push(path.clone());
                shape(inner, &path, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                shape(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// docs/report.md's examples have the shape of the reports corral writes.
#[test]
fn documented_examples_match_the_schema() {
    let doc = include_str!("../../../docs/report.md");
    let blocks: Vec<Value> = doc
        .split("```json")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default())
        .map(|block| serde_json::from_str(block).expect("example is JSON"))
        .collect();
    assert_eq!(blocks.len(), 2, "a timed-out and a spawn-failed example");
    let golden: Value =
        serde_json::from_str(&std::fs::read_to_string(golden_path()).expect("golden"))
            .expect("JSON");
    let keys = |value: &Value| {
        let mut out = Vec::new();
        shape(value, "", &mut out);
        out.sort();
        out.dedup();
        out
    };
    assert_eq!(
        keys(&blocks[0]),
        keys(&golden),
        "timed-out example vs golden"
    );
    let top = |value: &Value| {
        value
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
    };
    assert_eq!(
        top(&blocks[1]),
        top(&golden),
        "spawn-failed example, top level"
    );
}

/// `--report-fd` on a socket, which is what Node.js hands a child for an
/// extra `stdio: "pipe"` (reopening `/proc/self/fd/N` fails for one), and a
/// descriptor open only for reading refused before the command runs.
#[test]
fn report_fd_accepts_a_socket_and_refuses_a_read_only_descriptor() {
    let script = r#"
import json, socket, subprocess, sys
corral = sys.argv[1]
mine, theirs = socket.socketpair()
fd = theirs.fileno()
child = subprocess.Popen([corral, "run", "--report-fd", str(fd), "--", "sh", "-c", "exit 3"],
                         pass_fds=[fd])
theirs.close()
text = b""
while chunk := mine.recv(65536):
    text += chunk
assert child.wait() == 3, child.returncode
report = json.loads(text)
assert report["exit_status"] == 3, report
with open("/dev/null") as read_only:
    refused = subprocess.run([corral, "run", "--report-fd", str(read_only.fileno()), "--",
                              "sh", "-c", "echo ran"], pass_fds=[read_only.fileno()],
                             capture_output=True, text=True)
assert refused.returncode == 125, refused
assert "ran" not in refused.stdout, refused
assert "not open for writing a report" in refused.stderr, refused.stderr
print("ok")
"#;
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(common::corral_path())
        .output()
        .expect("run python3");
    assert!(
        output.status.success() && output.stdout == b"ok\n",
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
