//! Where the command starts: an open directory is entered by its
//! descriptor, wherever its path points by then, and relative `PATH`
//! entries are searched from the command's working directory, on every
//! backend this machine has (the cgroup one starts the leader with
//! `clone3`, the others through std's spawn).

use std::{
    fs,
    os::{fd::OwnedFd, unix::fs::PermissionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use corral::{Backend, BackendChoice, Command};

/// A fresh directory for this test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("corral-working-dir-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        Self(dir.canonicalize().expect("canonical scratch"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs `command` on `backend`: its stdout, or `None` when the backend is
/// not available here.
async fn stdout_on(backend: Backend, mut command: Command) -> Option<String> {
    if backend == Backend::Subreaper {
        corral::settings::Settings::new().subreaper().apply();
    }
    match command.backend(BackendChoice::Only(backend)).run().await {
        Ok(finished) => {
            assert_eq!(
                finished.outcome,
                corral::Outcome::Exited { code: 0 },
                "{backend}: {}",
                finished.stderr.text()
            );
            Some(finished.stdout.text())
        }
        Err(corral::Error::BackendUnavailable { reason, .. }) => {
            println!("SKIPPED: backend {backend}: {reason}");
            None
        }
        Err(other) => panic!("{backend}: {other}"),
    }
}

fn open_dir(path: &Path) -> Arc<OwnedFd> {
    Arc::new(OwnedFd::from(
        fs::File::open(path).expect("opening the directory"),
    ))
}

fn is_root() -> bool {
    fs::metadata("/proc/self")
        .map(|meta| std::os::unix::fs::MetadataExt::uid(&meta) == 0)
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_directory_is_entered_where_it_is_not_where_its_path_now_points() {
    let scratch = Scratch::new("swap");
    let checked = scratch.0.join("checked");
    let moved = scratch.0.join("moved");
    let outside = scratch.0.join("outside");
    for backend in Backend::ALL {
        for as_nobody in [false, true] {
            if as_nobody && !is_root() {
                continue;
            }
            fs::create_dir_all(&checked).expect("checked");
            fs::create_dir_all(&outside).expect("outside");
            let dir = open_dir(&checked);
            // After the check: the directory moves away and its path becomes
            // a symlink to somewhere else.
            fs::rename(&checked, &moved).expect("rename");
            std::os::unix::fs::symlink(&outside, &checked).expect("symlink");
            let mut command = Command::new("pwd");
            command.arg("-P").current_dir_fd(dir.clone());
            if as_nobody {
                command.user(65534).group(65534);
            }
            if let Some(stdout) = stdout_on(backend, command).await {
                assert_eq!(
                    stdout,
                    format!("{}\n", moved.display()),
                    "{backend}, as nobody: {as_nobody}"
                );
            }
            // The command did not keep the descriptor: none of its open
            // descriptors is the directory.
            let mut command = Command::new("sh");
            command
                .args([
                    "-c",
                    "for fd in /proc/$$/fd/*; do readlink \"$fd\" || true; done",
                ])
                .current_dir_fd(dir);
            if let Some(stdout) = stdout_on(backend, command).await {
                assert!(
                    !stdout.lines().any(|line| Path::new(line) == moved),
                    "{backend}: {stdout}"
                );
            }
            fs::remove_file(&checked).expect("unlink");
            fs::remove_dir(&moved).expect("rmdir");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_path_entries_are_searched_from_the_working_directory() {
    let scratch = Scratch::new("path");
    let bin = scratch.0.join("bin");
    fs::create_dir_all(&bin).expect("bin");
    let program = bin.join("corral-found-here");
    fs::write(&program, "#!/bin/sh\necho found in the working directory\n").expect("script");
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).expect("chmod");
    assert!(
        !Path::new("bin/corral-found-here").exists(),
        "the test's own directory must not have the program"
    );
    for backend in Backend::ALL {
        for by_descriptor in [false, true] {
            let mut command = Command::new("corral-found-here");
            command.env("PATH", "bin:/usr/bin:/bin");
            if by_descriptor {
                command.current_dir_fd(open_dir(&scratch.0));
            } else {
                command.current_dir(&scratch.0);
            }
            if let Some(stdout) = stdout_on(backend, command).await {
                assert_eq!(
                    stdout, "found in the working directory\n",
                    "{backend}, by descriptor: {by_descriptor}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_command_enters_an_open_directory_only_where_it_may_walk() {
    if !is_root() {
        return println!("SKIPPED: changing the user needs root");
    }
    let scratch = Scratch::new("walk");
    // Only root may walk `private`; `open` inside it is open to all.
    let private = scratch.0.join("private");
    let open = private.join("open");
    fs::create_dir_all(&open).expect("open");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).expect("chmod 700");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    fs::set_permissions(&scratch.0, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    let dir = open_dir(&open);
    for backend in Backend::ALL {
        if backend == Backend::Subreaper {
            corral::settings::Settings::new().subreaper().apply();
        }
        // Root walks the path: the descriptor is entered.
        let mut command = Command::new("pwd");
        command.arg("-P").current_dir_fd(dir.clone());
        if let Some(stdout) = stdout_on(backend, command).await {
            assert_eq!(stdout, format!("{}\n", open.display()), "{backend}");
        }
        // nobody could not walk to it by its path: refused, not entered
        // with the rights of the descriptor's opener.
        let spawned = Command::new("pwd")
            .current_dir_fd(dir.clone())
            .user(65534)
            .group(65534)
            .backend(BackendChoice::Only(backend))
            .run()
            .await;
        match spawned {
            Err(corral::Error::BackendUnavailable { .. }) => {}
            Err(error) => {
                let text = format!("{error:#}");
                assert!(
                    text.contains("working directory") && text.contains("ermission denied"),
                    "{backend}: {text}"
                );
            }
            Ok(finished) => panic!(
                "{backend}: nobody entered a directory it cannot reach: {:?} {}",
                finished.outcome,
                finished.stdout.text()
            ),
        }
    }
}

/// The session and process group `sh` runs in, and its pid.
fn session_of(stat: &str) -> (u32, u32, u32) {
    let fields: Vec<u32> = stat
        .split_whitespace()
        .enumerate()
        .filter(|(i, _)| [0, 4, 5].contains(i))
        .map(|(_, f)| f.parse().expect("a number in /proc/PID/stat"))
        .collect();
    (fields[0], fields[1], fields[2])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_leaves_the_callers_session_and_terminal() {
    for backend in Backend::ALL {
        for new_session in [false, true] {
            // `sh`'s own stat line (the builtin `read`, no child process).
            let mut command = Command::new("sh");
            command
                .args(["-c", "read -r line < /proc/$$/stat; echo \"$line\""])
                .new_session(new_session);
            let Some(stdout) = stdout_on(backend, command).await else {
                continue;
            };
            let (pid, group, session) = session_of(&stdout);
            if new_session {
                assert_eq!((group, session), (pid, pid), "{backend}: {stdout}");
            } else {
                assert_ne!(session, pid, "{backend}: {stdout}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_program_is_looked_up_with_its_own_rights() {
    if !is_root() {
        return println!("SKIPPED: changing the user needs root");
    }
    let scratch = Scratch::new("lookup");
    fs::set_permissions(&scratch.0, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    // A `true` only root may reach, first in PATH; the system's after it.
    let private = scratch.0.join("private");
    fs::create_dir_all(&private).expect("private");
    let program = private.join("true");
    fs::write(&program, "#!/bin/sh\necho private\n").expect("script");
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).expect("chmod 700");
    let path = format!("{}:/usr/bin:/bin", private.display());
    for backend in Backend::ALL {
        // Root finds its own.
        let mut command = Command::new("true");
        command.env("PATH", &path);
        if let Some(stdout) = stdout_on(backend, command).await {
            assert_eq!(stdout, "private\n", "{backend}");
        }
        // nobody cannot search `private`: as `execvp` would, it goes on to
        // the system's `true`, instead of failing on the one root found.
        let mut command = Command::new("true");
        command
            .env("PATH", &path)
            .current_dir("/")
            .user(65534)
            .group(65534);
        if let Some(stdout) = stdout_on(backend, command).await {
            assert_eq!(stdout, "", "{backend}");
        }
    }
}
