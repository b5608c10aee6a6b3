//! `corral ps` and `corral reap` against real ledgers: a tree whose owner and
//! watchdog both died is ended by `reap`; a record naming a reused pid is
//! dropped without signalling anyone; torn files give a warning, never a
//! crash.

mod common;

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use common::{ESCAPEES, assert_all_gone, corral, escapees};
use corral_tests::{Guard, Lines, Proc, stat, this_process, wait_until};
use rustix::process::Signal;

fn ledger_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("corral-cli-ledger-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("ledger dir");
    dir
}

/// Removes its directory when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn records(dir: &PathBuf) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        })
        .unwrap_or(0)
}

/// When corral's exit is seen, its watchdog is gone too (corral closes the
/// watchdog's socket and reaps it before exiting), and so is the tree's
/// record: a caller that waits for corral, then removes the cgroup it ran
/// corral in, finds nothing of corral's still there (docs/flakes.md (36)).
#[test]
fn a_clean_run_leaves_neither_its_watchdog_nor_its_record() {
    clean_run("clean", corral().args(["run", "--"]));
}

/// The same under the `timeout` personality, whose watchdog is forked
/// after its arguments are parsed.
#[test]
fn a_clean_run_as_timeout_leaves_neither_its_watchdog_nor_its_record() {
    use std::os::unix::process::CommandExt;
    let mut command = corral();
    command.arg0("timeout").arg("60");
    clean_run("clean-timeout", &mut command);
}

fn clean_run(name: &str, corral: &mut std::process::Command) {
    // A watchdog that outlived corral, even by a moment, is re-parented to
    // this process and stays visible (running, or a zombie until reaped).
    this_process::become_subreaper();
    let dir = ledger_dir(name);
    // Removed whatever the outcome: an assertion below must not leave it.
    let _remove = RemoveOnDrop(dir.clone());
    let child = corral
        .args(["sh", "-c", "echo $$; read line; true"])
        .env("CORRAL_LEDGER_DIR", &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let mut guard = Guard::new(child);
    let lines = Lines::new(guard.child().stdout.take().expect("piped"));
    let leader: i32 = lines
        .next(Duration::from_secs(10))
        .and_then(|l| l.trim().parse().ok())
        .expect("the command's pid");
    let owner = Proc::of(guard.child().id() as i32).expect("corral runs");
    let mut watchdog = None;
    assert!(
        wait_until(Duration::from_secs(5), || {
            watchdog = common::other_child(owner.pid, leader);
            watchdog.is_some() && records(&dir) == 1
        }),
        "corral runs a watchdog and records the tree"
    );
    let watchdog = watchdog.expect("found");
    // The watchdog has corral's signal dispositions: the job-control
    // signals ignored (a watchdog stopped by SIGTTOU on a `tostop` terminal
    // could not end the tree). Checked before the guard takes the
    // watchdog: a failure here kills only corral, and the watchdog then
    // ends the tree and removes its record and leaf, as it should.
    let status = std::fs::read_to_string(format!("/proc/{}/status", watchdog.pid))
        .expect("the watchdog's status");
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .expect("a signal mask")
    };
    let bit = |signal: Signal| 1u64 << (signal.as_raw() - 1);
    assert_ne!(
        mask("SigIgn:") & bit(Signal::TTOU),
        0,
        "SIGTTOU not ignored"
    );
    assert_ne!(
        mask("SigIgn:") & bit(Signal::TTIN),
        0,
        "SIGTTIN not ignored"
    );
    // It blocks nothing: neither what corral holds for its own reading
    // (`host::hold_signals`) nor corral's SIGRTMAX; a SIGTERM ends it (and
    // corral starts another).
    assert_eq!(mask("SigBlk:"), 0, "the watchdog blocks signals");
    guard.watch(watchdog);
    // End of input: the command exits, and so does corral.
    drop(guard.child().stdin.take());
    let status = guard
        .wait_exit(Duration::from_secs(10))
        .expect("corral exits");
    assert!(status.success(), "{status:?}");
    assert_eq!(records(&dir), 0, "the record outlived corral");
    let outlived = stat(watchdog.pid).filter(|s| s.start_time == watchdog.start_time);
    if outlived.is_some() {
        // Cleaned up before failing: waited for (it exits by itself on the
        // closed socket), then reaped.
        wait_until(Duration::from_secs(5), || !watchdog.is_alive());
        this_process::reap_zombies(std::slice::from_ref(&watchdog));
    }
    assert!(
        outlived.is_none(),
        "the watchdog outlived corral: {outlived:?}"
    );
}

/// Owner and watchdog both die (the owner frozen first so it cannot replace
/// the watchdog):
/// the tree outlives them, `corral ps` shows it orphaned, `corral reap`
/// ends it, escapees included, and drops the record.
#[test]
fn reap_ends_a_tree_whose_owner_and_watchdog_died() {
    let dir = ledger_dir("orphaned");
    let child = corral()
        .args(["run", "--", "bash", "-c", ESCAPEES])
        .env("CORRAL_LEDGER_DIR", &dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let mut guard = Guard::new(child);
    let lines = Lines::new(guard.child().stdout.take().expect("piped"));
    let tree = escapees(&lines, &mut guard);
    let owner = Proc::of(guard.child().id() as i32).expect("corral runs");
    // The watchdog is corral's other child (forked early, so it shows
    // corral's own command line).
    let mut watchdog = None;
    assert!(
        wait_until(Duration::from_secs(5), || {
            watchdog = common::other_child(owner.pid, tree[0].pid);
            watchdog.is_some() && records(&dir) == 1
        }),
        "corral runs a watchdog and records the tree"
    );
    let watchdog = watchdog.expect("found");
    guard.watch(watchdog);
    // Freeze the owner so it cannot start a new watchdog, kill the watchdog,
    // then the owner. (Freezing the watchdog instead would not do: when its
    // parent dies, the kernel sends its orphaned, stopped process group
    // SIGHUP and SIGCONT, and it wakes up to do its job.)
    assert!(owner.signal(Signal::STOP));
    assert!(watchdog.signal(Signal::KILL));
    assert!(wait_until(Duration::from_secs(2), || !watchdog.is_alive()));
    assert!(owner.signal(Signal::KILL));
    assert!(guard.wait_exit(Duration::from_secs(5)).is_some());
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        tree.iter().all(|p| p.is_alive()),
        "nobody was left to end the tree"
    );

    let ps = corral()
        .args(["ps", "--ledger"])
        .arg(&dir)
        .output()
        .expect("ps");
    let listing = String::from_utf8_lossy(&ps.stdout);
    assert!(ps.status.success());
    assert!(listing.contains("orphaned"), "{listing}");
    assert!(
        listing.contains(&tree[1].pid.to_string()),
        "members listed: {listing}"
    );

    let dry = corral()
        .args(["reap", "--dry-run", "--ledger"])
        .arg(&dir)
        .output()
        .expect("reap");
    assert!(dry.status.success());
    assert!(String::from_utf8_lossy(&dry.stdout).contains("would end"));
    assert!(
        tree.iter().all(|p| p.is_alive()),
        "a dry run signals nothing"
    );
    assert_eq!(records(&dir), 1);

    let started = Instant::now();
    let reap = corral()
        .args(["reap", "--json", "--ledger"])
        .arg(&dir)
        .output()
        .expect("reap");
    assert!(
        reap.status.success(),
        "{}",
        String::from_utf8_lossy(&reap.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&reap.stdout).expect("json");
    assert_eq!(report["actions"][0][1]["action"], "killed");
    assert!(wait_until(Duration::from_secs(1), || tree
        .iter()
        .all(|p| !p.is_alive())));
    assert_all_gone(&tree, "after corral reap");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(records(&dir), 0, "the record is dropped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record whose leader pid now belongs to an unrelated process (another
/// start time) and whose owner is dead: `reap` signals nothing and drops it.
#[test]
fn reap_leaves_a_process_that_took_a_recorded_pid_alone() {
    let dir = ledger_dir("reused");
    let bystander = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let mut guard = Guard::new(bystander);
    let stranger = Proc::of(guard.child().id() as i32).expect("alive");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    for backend in ["group", "subreaper"] {
        let record = serde_json::json!({
            "version": 1, "id": format!("reused-{backend}"),
            "owner": {"pid": stranger.pid, "start_time": stranger.start_time + 3},
            "owner_exe": null, "boot_id": boot.trim(), "backend": backend,
            "leader": {"pid": stranger.pid, "start_time": stranger.start_time + 1},
            "members": [{"pid": stranger.pid, "start_time": stranger.start_time + 2}],
            "cgroup": null, "command": "long gone", "created_at": 0
        });
        std::fs::write(
            dir.join(format!("reused-{backend}.json")),
            record.to_string(),
        )
        .expect("write");
    }
    let reap = corral()
        .args(["reap", "--ledger"])
        .arg(&dir)
        .output()
        .expect("reap");
    assert!(reap.status.success());
    let text = String::from_utf8_lossy(&reap.stdout);
    assert_eq!(text.matches("dropped").count(), 2, "{text}");
    assert!(
        stranger.is_alive(),
        "a process that took a recorded pid was signalled"
    );
    assert_eq!(records(&dir), 0);
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Torn, corrupt and hostile ledger files: one warning each, a clean exit,
/// nothing signalled, the files left for a human to look at.
#[test]
fn torn_and_hostile_ledger_files_are_skipped_with_a_warning() {
    let dir = ledger_dir("corrupt");
    std::fs::write(dir.join("torn.json"), "{\"version\":1,\"id\":\"to").expect("write");
    std::fs::write(dir.join("binary.json"), [0xff, 0x00, 0xfe]).expect("write");
    std::fs::write(dir.join("future.json"), "{\"version\":99}").expect("write");
    let hostile = serde_json::json!({
        "version": 1, "id": "hostile", "owner": {"pid": 999_999, "start_time": 1}, "owner_exe": null,
        "boot_id": "x", "backend": "cgroup", "leader": null, "members": [],
        "cgroup": "/sys/fs/cgroup/unified/init.scope", "command": "x", "created_at": 0
    });
    std::fs::write(dir.join("hostile.json"), hostile.to_string()).expect("write");
    for subcommand in [
        &["ps"][..],
        &["reap"],
        &["reap", "--dry-run"],
        &["ps", "--json"],
    ] {
        let output = corral()
            .args(subcommand)
            .arg("--ledger")
            .arg(&dir)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{subcommand:?}: {stderr}");
        assert_eq!(
            stderr.matches("skipping ledger file").count(),
            4,
            "{subcommand:?}: {stderr}"
        );
        assert!(stderr.contains("is not a corral cgroup leaf"), "{stderr}");
        assert!(!stderr.contains("panicked"));
    }
    assert_eq!(records(&dir), 4, "unreadable files are left in place");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A record's command line is whatever its writer put there: `ps` and `reap`
/// print it with control characters escaped, so it cannot clear the
/// terminal or fake a line of the listing.
#[test]
fn hostile_command_lines_are_printed_escaped() {
    let dir = ledger_dir("escapes");
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    let record = serde_json::json!({
        "version": 1, "id": "escapes", "owner": {"pid": 999_999, "start_time": 1},
        "owner_exe": null, "boot_id": boot.trim(), "backend": "group", "leader": null,
        "members": [], "cgroup": null,
        "command": "sleep 1\u{1b}[2J\nfake-tree 1 alive 0s group - evil\u{9b}31m",
        "created_at": 0
    });
    std::fs::write(dir.join("escapes.json"), record.to_string()).expect("write");
    for (subcommand, lines) in [(&["ps"][..], 2), (&["reap", "--dry-run"], 1)] {
        let output = corral()
            .args(subcommand)
            .arg("--ledger")
            .arg(&dir)
            .output()
            .expect("run");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{subcommand:?}: {stdout}");
        assert!(
            !stdout.contains(['\u{1b}', '\u{9b}']),
            "{subcommand:?} printed a terminal escape: {stdout:?}"
        );
        assert_eq!(stdout.lines().count(), lines, "{subcommand:?}: {stdout:?}");
        assert!(
            stdout.contains("sleep 1\\u{1b}[2J\\nfake-tree"),
            "{stdout:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `corral run` forks its watchdog before its arguments are parsed: on every
/// way out without a tree (a refused option, `--help`, a report file that
/// cannot be opened, a command that cannot start), the watchdog is reaped
/// before corral exits, never left to outlive it.
#[test]
fn no_way_out_of_corral_run_leaves_its_watchdog() {
    // A watchdog that outlived corral is re-parented to this process and
    // stays visible (running, or a zombie until reaped).
    this_process::become_subreaper();
    let dir = ledger_dir("ways-out");
    let me = std::process::id() as i32;
    let lines: &[(&[&str], Option<i32>)] = &[
        (&["run", "--no-such-option", "--", "true"], Some(125)),
        (&["run", "--help"], Some(0)),
        (&["run", "-t", "soon", "--", "true"], Some(125)),
        (
            &[
                "run",
                "--report",
                "/nonexistent/dir/report.json",
                "--",
                "true",
            ],
            Some(125),
        ),
        (&["run", "--", "/nonexistent/command"], Some(127)),
        (&["run", "--", "true"], Some(0)),
    ];
    for (args, code) in lines {
        let output = corral()
            .args(*args)
            .env("CORRAL_LEDGER_DIR", &dir)
            .stdin(Stdio::null())
            .output()
            .expect("run corral");
        assert_eq!(output.status.code(), *code, "{args:?}: {output:?}");
        let left = common::other_child(me, 0);
        if let Some(left) = left {
            wait_until(Duration::from_secs(5), || !left.is_alive());
            this_process::reap_zombies(std::slice::from_ref(&left));
        }
        assert!(
            left.is_none(),
            "{args:?}: the watchdog outlived corral: {left:?}"
        );
    }
    assert_eq!(records(&dir), 0, "a record outlived corral");
    let _ = std::fs::remove_dir_all(&dir);
}
