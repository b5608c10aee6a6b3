//! Runs each `fixture` mode directly (without corral) and checks that it
//! behaves as documented. Every test cleans up what it started: the leader
//! via its `Child`, every other process via `kill_leftovers` (pidfd plus
//! identity check) and `reap_zombies` (the test binary is a subreaper, so
//! orphans do not pile up as zombies under pid 1).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::fixture_path;
use corral_tests::{
    Bystander, Proc, kill_leftovers, parse_ready, read_ready, read_ready_blocking, stat,
    this_process::{become_subreaper, reap_zombies},
    wait_until_async,
};
use rustix::process::Signal;

/// A running fixture: the leader's `Child` and every process it reported.
/// Dropping it kills and reaps all of them, even if the test panicked.
struct Started {
    child: Child,
    procs: Vec<Proc>,
}

impl Started {
    /// Spawns `fixture ARGS` (stdin null, stdout piped) and reads its
    /// readiness line; returns the rest of its stdout.
    fn spawn(args: &[&str]) -> (Self, BufReader<ChildStdout>) {
        become_subreaper();
        let mut child = Command::new(fixture_path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning the fixture");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        // Own the child before anything can panic, so it is cleaned up.
        let mut started = Started {
            child,
            procs: Vec::new(),
        };
        let (procs, stdout) = read_ready_blocking(stdout);
        assert_eq!(
            procs[0].pid,
            i32::try_from(started.child.id()).expect("pid fits in i32"),
            "the leader's pid comes first"
        );
        started.procs = procs;
        (started, stdout)
    }

    fn leader(&self) -> Proc {
        self.procs[0]
    }

    /// The processes the leader created.
    fn descendants(&self) -> &[Proc] {
        &self.procs[1..]
    }

    fn running(&self) -> usize {
        self.procs.iter().filter(|p| p.is_alive()).count()
    }

    /// Waits up to `deadline` for the leader to exit.
    async fn wait_exit(&mut self, deadline: Duration) -> ExitStatus {
        let mut status = None;
        let child = &mut self.child;
        wait_until_async(deadline, || {
            status = child.try_wait().expect("try_wait");
            status.is_some()
        })
        .await;
        status.unwrap_or_else(|| panic!("the fixture did not exit within {deadline:?}"))
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        kill_leftovers(&self.procs);
        let _ = self.child.kill();
        let _ = self.child.wait();
        reap_zombies(&self.procs);
    }
}

/// Runs `fixture ARGS` to completion with `stdin` as input.
fn run(args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut child = Command::new(fixture_path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the fixture");
    let mut input = child.stdin.take().expect("piped stdin");
    input.write_all(stdin).expect("writing stdin");
    drop(input);
    child.wait_with_output().expect("waiting for the fixture")
}

/// Reads from `reader` until EOF on a helper thread; the result (bytes
/// read) arrives on the returned channel.
fn read_to_end_in_background(mut reader: impl Read + Send + 'static) -> mpsc::Receiver<usize> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        let _ = tx.send(rest.len());
    });
    rx
}

#[test]
fn exit_reports_code_and_outputs() {
    let out = run(&["exit", "3", "a", "b"], b"");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"a");
    assert_eq!(out.stderr, b"b");
    let out = run(&["exit", "0"], b"");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn tree_exit_ends_by_itself() {
    // The output is read to its end: every child, which holds stdout, has
    // exited too when this returns.
    let out = run(&["tree-exit", "20"], b"");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for args in [
        &[][..],
        &["nope"],
        &["exit"],
        &["exit", "256"],
        &["fork", "x"],
        &["fork", "1", "2"],
        &["sleep", "-1"],
        &["kill-self", "0"],
        &["slow-die"],
        &["hop", "1"],
        &["tree-exit"],
    ] {
        let out = run(args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("fixture: usage:"),
            "{args:?}: {stderr:?}"
        );
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn echo_stdin_copies_until_eof() {
    let out = run(&["echo-stdin"], b"hello\nworld");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"hello\nworld");
}

#[tokio::test]
async fn kill_self_dies_of_the_signal() {
    let (mut f, _out) = Started::spawn(&["kill-self", "15"]);
    assert_eq!(f.procs.len(), 1);
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

#[tokio::test]
async fn sleep_exits_0_after_the_delay() {
    let start = Instant::now();
    let (mut f, _out) = Started::spawn(&["sleep", "0.2"]);
    assert_eq!(f.running(), 1);
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert!(status.success(), "{status}");
    assert!(start.elapsed() >= Duration::from_millis(200));
}

/// `hop`: the leader exits at once (its first fork), and a process many
/// forks later writes OUT when the time is up. Run without a subreaper, so
/// the hops' zombies go to init; `output` returns once the last hop, which
/// holds stdout, has exited.
#[test]
fn hop_hops_then_the_last_one_writes_out() {
    let out = std::env::temp_dir().join(format!("corral-selftest-hop-{}", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let started = Instant::now();
    let result = Command::new(fixture_path())
        .args(["hop", "0.3"])
        .arg(&out)
        .output()
        .expect("running the fixture");
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    assert!(result.status.success(), "{}", result.status);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let ready = parse_ready(
        String::from_utf8_lossy(&result.stdout)
            .lines()
            .next()
            .unwrap_or_default(),
    );
    assert_eq!(ready.len(), 1, "ready with its own pid: {ready:?}");
    assert_eq!(text, "survived", "the last hop writes OUT");
}

#[tokio::test]
async fn ignore_term_survives_sigterm() {
    let (mut f, _out) = Started::spawn(&["ignore-term"]);
    assert!(f.leader().signal(Signal::TERM));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(f.leader().is_alive());
    assert!(f.child.try_wait().expect("try_wait").is_none());
}

#[tokio::test]
async fn fork_lists_all_children() {
    let (f, _out) = Started::spawn(&["fork", "3"]);
    assert_eq!(f.procs.len(), 4);
    assert_eq!(f.running(), 4);
    let leader = stat(f.leader().pid).expect("leader stat");
    for p in f.descendants() {
        let s = stat(p.pid).expect("child stat");
        assert_eq!((s.ppid, s.pgid), (f.leader().pid, leader.pgid));
    }
}

#[tokio::test]
async fn setsid_child_is_in_a_new_session() {
    let (f, _out) = Started::spawn(&["setsid"]);
    assert_eq!(f.running(), 2);
    let leader = stat(f.leader().pid).expect("leader stat");
    let child = stat(f.procs[1].pid).expect("child stat");
    assert_ne!(child.sid, leader.sid);
    assert_eq!(child.sid, f.procs[1].pid);
}

#[tokio::test]
async fn daemon_escapes_session_and_pipes() {
    let (f, _out) = Started::spawn(&["daemon"]);
    assert_eq!(f.running(), 2);
    let daemon = f.procs[1];
    let leader = stat(f.leader().pid).expect("leader stat");
    let s = stat(daemon.pid).expect("daemon stat");
    assert_ne!(s.sid, leader.sid);
    assert_eq!(s.sid, daemon.pid);
    assert_ne!(s.ppid, f.leader().pid, "the middle process is gone");
    assert_eq!(daemon.ignores(libc::SIGTERM), Some(true));
    assert_eq!(daemon.ignores(libc::SIGHUP), Some(true));
    for fd in 0..=2 {
        let target = std::fs::read_link(format!("/proc/{}/fd/{fd}", daemon.pid));
        assert_eq!(
            target.expect("readlink").to_str(),
            Some("/dev/null"),
            "fd {fd}"
        );
    }
}

#[tokio::test]
async fn leave_children_outlive_the_leader() {
    let (mut f, _out) = Started::spawn(&["leave-children", "3"]);
    assert_eq!(f.procs.len(), 4);
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert!(status.success(), "{status}");
    assert!(f.descendants().iter().all(Proc::is_alive));
    let sessions: Vec<bool> = f
        .descendants()
        .iter()
        .map(|p| stat(p.pid).expect("child stat").sid == p.pid)
        .collect();
    assert_eq!(sessions, [false, true, false], "odd children call setsid()");
}

#[tokio::test]
async fn hold_stdout_keeps_the_pipe_open() {
    let (mut f, mut out) = Started::spawn(&["hold-stdout"]);
    assert_eq!(f.procs.len(), 2);
    let mut line = String::new();
    out.read_line(&mut line).expect("reading leader-done");
    assert_eq!(line, "leader-done\n");
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert!(status.success(), "{status}");
    let grandchild = f.procs[1];
    assert!(grandchild.is_alive());
    let eof = read_to_end_in_background(out);
    assert!(
        eof.recv_timeout(Duration::from_millis(300)).is_err(),
        "stdout must stay open while the grandchild lives"
    );
    kill_leftovers(&[grandchild]);
    assert_eq!(
        eof.recv_timeout(Duration::from_secs(5)),
        Ok(0),
        "EOF once it is gone"
    );
}

#[tokio::test]
async fn slow_die_exits_after_the_delay() {
    let (mut f, mut out) = Started::spawn(&["slow-die", "300"]);
    let sent = Instant::now();
    assert!(f.leader().signal(Signal::TERM));
    let mut line = String::new();
    out.read_line(&mut line).expect("reading term-received");
    assert_eq!(line, "term-received\n");
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "{:?}",
        sent.elapsed()
    );
}

#[tokio::test]
async fn flood_writes_the_pattern_and_dies_quietly_on_epipe() {
    let (mut f, mut out) = Started::spawn(&["flood"]);
    let mut data = vec![0u8; 1 << 20];
    out.read_exact(&mut data).expect("reading the flood");
    let pattern = b"0123456789abcdef";
    assert!(data.chunks(16).all(|c| c == &pattern[..c.len()]));
    drop(out);
    let status = f.wait_exit(Duration::from_secs(5)).await;
    assert!(
        status.signal() == Some(libc::SIGPIPE) || status.code() == Some(0),
        "{status}"
    );
}

#[tokio::test]
async fn fork_storm_children_ignore_sigterm() {
    let (f, _out) = Started::spawn(&["fork-storm", "50"]);
    assert_eq!(f.procs.len(), 51);
    assert_eq!(f.running(), 51);
    for p in f.descendants() {
        assert_eq!(p.ignores(libc::SIGTERM), Some(true));
    }
}

#[tokio::test]
async fn tree_ignore_survives_sigterm() {
    let (f, _out) = Started::spawn(&["tree-ignore", "10"]);
    assert_eq!(f.procs.len(), 11);
    for p in &f.procs {
        assert!(p.signal(Signal::TERM));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(f.running(), 11);
    let new_sessions: Vec<usize> = (0..10)
        .filter(|&i| {
            let p = f.descendants()[i];
            stat(p.pid).expect("child stat").sid == p.pid
        })
        .collect();
    assert_eq!(new_sessions, [2, 5, 8], "every third child calls setsid()");
}

#[tokio::test]
async fn read_ready_parses_identities() {
    let me = std::process::id();
    let line = format!("ready {me}\nrest");
    let mut reader = line.as_bytes();
    let procs = read_ready(&mut reader).await;
    assert_eq!(reader, b"rest");
    let me = i32::try_from(me).expect("pid fits in i32");
    assert_eq!(procs, [Proc::of(me).expect("own identity")]);
    assert!(procs[0].is_alive());
}

#[test]
fn parse_ready_marks_gone_processes() {
    let mut child = Command::new(fixture_path())
        .args(["exit", "0"])
        .spawn()
        .expect("spawning the fixture");
    let pid = i32::try_from(child.id()).expect("pid fits in i32");
    // Not yet reaped, so its identity is still readable.
    let before = Proc::of(pid).expect("identity of the unreaped child");
    child.wait().expect("waiting");
    let procs = parse_ready(&format!("ready {pid}"));
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0].pid, pid);
    // Gone (start time 0), unless the pid was reused by another process.
    assert_ne!(procs[0].start_time, before.start_time);
    assert!(!before.is_alive());
}

#[test]
fn stat_handles_odd_command_names() {
    let dir = std::env::temp_dir().join(format!("corral-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a temp dir");
    let odd = dir.join("a) b (c) d");
    let _ = std::fs::remove_file(&odd);
    std::os::unix::fs::symlink(fixture_path(), &odd).expect("symlinking the fixture");
    let mut child = Command::new(&odd)
        .args(["sleep", "5"])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawning via the symlink");
    let pid = i32::try_from(child.id()).expect("pid fits in i32");
    let s = stat(pid);
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(comm.expect("reading comm"), "a) b (c) d\n");
    let s = s.expect("stat of a process with an odd name");
    assert_eq!(
        s.ppid,
        i32::try_from(std::process::id()).expect("pid fits in i32")
    );
    assert!(s.start_time > 0);
}

#[test]
fn bystander_lives_until_dropped() {
    let bystander = Bystander::spawn(fixture_path());
    let p = bystander.proc();
    assert!(bystander.is_running());
    drop(bystander);
    assert!(!p.is_alive());
}
