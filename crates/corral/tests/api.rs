//! The API as a tokio host uses it: a `&mut` builder that can be spawned
//! again, a synchronous spawn that needs a runtime, a cancel-safe `wait`,
//! the leader's identity, `Stdio`, and the process-wide settings.

use std::{ffi::OsStr, time::Duration};

use corral::{Command, Error, Outcome, Stdio, settings::Settings};

/// Field 22 of `/proc/PID/stat` (the start time), if the process exists.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[test]
fn a_spawn_outside_a_runtime_is_refused_with_the_fix() {
    let error = Command::new("true").spawn().expect_err("no runtime here");
    assert!(matches!(error, Error::NoRuntime), "{error:?}");
    assert!(error.to_string().contains("tokio runtime"), "{error}");
}

#[tokio::test]
async fn captured_standard_input_is_refused_before_anything_starts() {
    let dir = tempfile_dir("capture-stdin");
    let marker = dir.join("ran");
    let mut command = Command::new("sh");
    command
        .args(["-c", "touch \"$1\"", "sh"])
        .arg(&marker)
        .stdin(Stdio::Capture);
    let error = command.spawn().expect_err("refused");
    assert!(
        matches!(
            error,
            Error::InvalidStdio {
                stream: "stdin",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("Stdio::Piped"), "{error}");
    assert!(!marker.exists(), "the command ran");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[tokio::test]
async fn a_command_is_spawned_again_as_it_was_and_read_back_by_its_getters() {
    let mut command = Command::new("sh");
    command
        .args(["-c", "echo \"$GREETING $NAME\""])
        .envs([("GREETING", "hello"), ("NAME", "corral")])
        .env_remove("UNSET_ME")
        .timeout(Duration::from_secs(30));
    let verbose = true;
    if verbose {
        command.env("NAME", "again");
    }
    assert_eq!(command.get_program(), OsStr::new("sh"));
    assert_eq!(
        command.get_args().collect::<Vec<_>>(),
        ["-c", "echo \"$GREETING $NAME\""]
    );
    let envs: Vec<_> = command.get_envs().collect();
    assert_eq!(
        envs,
        [
            (OsStr::new("GREETING"), Some(OsStr::new("hello"))),
            (OsStr::new("NAME"), Some(OsStr::new("corral"))),
            (OsStr::new("UNSET_ME"), None),
            (OsStr::new("NAME"), Some(OsStr::new("again"))),
        ]
    );
    assert_eq!(command.get_timeout(), Some(Duration::from_secs(30)));
    let first = command.run().await.expect("first run");
    let second = command.run().await.expect("second run");
    for finished in [&first, &second] {
        assert!(finished.outcome.success(), "{:?}", finished.outcome);
        assert_eq!(finished.outcome.code(), Some(0));
        assert_eq!(finished.stdout.text(), "hello again\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_is_cancel_safe_and_gives_its_result_once() {
    let mut command = Command::new("sh");
    command
        .args(["-c", "echo ready; read line; exit 7"])
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped);
    let mut child = command.spawn().expect("spawn");
    let leader = child.identity();
    assert_eq!(leader.pid, child.id());
    assert_eq!(start_time(leader.pid), Some(leader.start_time), "identity");
    let mut stdout = child.take_stdout().expect("piped");
    let mut ready = [0u8; 6];
    tokio::io::AsyncReadExt::read_exact(&mut stdout, &mut ready)
        .await
        .expect("readiness line");
    // A wait given up on (its future dropped) leaves the tree running.
    tokio::select! {
        biased;
        finished = child.wait() => panic!("the leader waits for its input: {finished:?}"),
        () = std::future::ready(()) => {}
    }
    assert_eq!(
        start_time(leader.pid),
        Some(leader.start_time),
        "still runs"
    );
    drop(child.take_stdin());
    let finished = child.wait().await.expect("the result");
    assert_eq!(finished.outcome, Outcome::Exited { code: 7 });
    assert_eq!(finished.outcome.code(), Some(7));
    assert!(!finished.outcome.success());
    let again = child.wait().await.expect_err("taken");
    assert!(matches!(again, Error::AlreadyWaited), "{again:?}");
}

#[test]
fn settings_are_applied_and_read_back_in_one_place() {
    let dir = tempfile_dir("settings");
    let before = corral::settings::in_effect();
    assert!(!before.subreaper);
    Settings::new()
        .watchdog_executable("/nonexistent/watchdog")
        .ledger_dir(dir.join("ledger"))
        .startup_sweep(false)
        .subreaper()
        .apply();
    let now = corral::settings::in_effect();
    assert_eq!(
        now.watchdog_executable,
        Ok("/nonexistent/watchdog".into()),
        "{now:?}"
    );
    assert_eq!(now.ledger_dir, dir.join("ledger"));
    assert!(!now.startup_sweep);
    assert!(now.subreaper);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A fresh directory for one test, removed first if an earlier run left it.
fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("corral-api-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
