//! Signals sent to corral end the whole tree; ignored ones stay ignored; the
//! death of corral's parent counts as SIGTERM.

mod common;

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{ESCAPEES, assert_all_gone, backend_args, corral, escapees, for_backends};
use corral_tests::{Guard, Lines, Proc, proc::has_signal};
use rustix::process::Signal;

/// corral must be gone this long after the signal: -k 300ms plus the final
/// bound (1 s) plus slack for a noisy machine.
const EXIT_BOUND: Duration = Duration::from_secs(10);

/// Starts corral over the escapee tree and returns it with the tree's pids.
fn start_with_escapees(backend: &str) -> (Guard, Lines, Proc, Vec<Proc>) {
    start_with_escapees_in(corral(), backend)
}

fn start_with_escapees_in(mut command: Command, backend: &str) -> (Guard, Lines, Proc, Vec<Proc>) {
    let mut child = command
        .arg("run")
        .args(backend_args(backend))
        .args(["-k", "300ms", "--", "bash", "-c", ESCAPEES])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    let mut guard = Guard::new(child);
    let me = Proc::of(guard.child().id() as i32).expect("corral runs");
    let tree = escapees(&lines, &mut guard);
    (guard, lines, me, tree)
}

fn signal_ends_the_tree(signal: Signal, number: i32) {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let (mut guard, _lines, me, tree) = start_with_escapees(backend);
        // The tree runs, so corral took its signals before the spawn.
        assert!(me.takes(number), "{backend}: signal {number} not taken");
        let sent = Instant::now();
        assert!(me.signal(signal), "signal corral");
        let status = guard.wait_exit(EXIT_BOUND).unwrap_or_else(|| {
            panic!("{backend}: corral still runs {EXIT_BOUND:?} after signal {number}")
        });
        assert_eq!(status.code(), Some(128 + number), "{backend}");
        assert_all_gone(&tree, &format!("{backend}, signal {number}"));
        eprintln!("{backend}: signal {number} -> exit in {:?}", sent.elapsed());
    });
}

#[test]
fn sigint_ends_the_tree_and_exits_130() {
    signal_ends_the_tree(Signal::INT, 2);
}

#[test]
fn sigterm_ends_the_tree_and_exits_143() {
    signal_ends_the_tree(Signal::TERM, 15);
}

#[test]
fn sighup_ends_the_tree_and_exits_129() {
    signal_ends_the_tree(Signal::HUP, 1);
}

#[test]
fn sigquit_ends_the_tree_and_exits_131() {
    signal_ends_the_tree(Signal::QUIT, 3);
}

/// SIGKILL cannot be caught: corral's watchdog (corral itself, re-entered
/// through `corral::watchdog::hook`) ends the tree. A private ledger keeps
/// other corral processes' start-up sweeps from doing the watchdog's job.
#[test]
fn sigkill_to_corral_still_ends_the_tree() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let ledger = PrivateLedger::new(backend);
        let mut command = corral();
        command
            .env("CORRAL_LEDGER_DIR", &ledger.0)
            .env("CORRAL_NO_STARTUP_SWEEP", "1");
        let (mut guard, _lines, me, tree) = start_with_escapees_in(command, backend);
        // The subreaper backend tells the watchdog of the leader just after
        // the fork (the library's documented window); its ledger record,
        // written right after that message, says the watchdog knows.
        assert!(
            corral_tests::wait_until(Duration::from_secs(5), || ledger.knows_leader()),
            "{backend}: no ledger record with the leader"
        );
        // The watchdog is corral's child other than the leader.
        let leader = tree.first().map_or(0, |p| p.pid);
        let watchdog = common::other_child(me.pid, leader).expect("corral's watchdog");
        guard.watch(watchdog);
        assert!(me.signal(Signal::KILL));
        let status = guard.wait_exit(EXIT_BOUND).expect("corral dies");
        assert_eq!(common::shell_status(status), 137);
        assert!(
            corral_tests::wait_until(Duration::from_secs(5), || tree
                .iter()
                .all(|p| !p.is_alive())),
            "{backend}: the tree outlived corral"
        );
        // Its work done (the record dropped), the watchdog is gone too.
        assert!(
            corral_tests::wait_until(Duration::from_secs(5), || ledger.records().is_empty()
                && !watchdog.is_alive()),
            "{backend}: the watchdog or the record outlived the tree"
        );
    });
}

/// A ledger directory of one test. On drop (after the test's [`Guard`] has
/// killed what it started) it removes the cgroup leaves its records name,
/// which a failing run leaves behind, then itself.
struct PrivateLedger(std::path::PathBuf);

impl PrivateLedger {
    fn new(backend: &str) -> Self {
        Self(corral_tests::scratch(&format!("ledger-{backend}")))
    }

    fn records(&self) -> Vec<serde_json::Value> {
        std::fs::read_dir(&self.0)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.path().extension().is_some_and(|e| e == "json"))
            .filter_map(|entry| std::fs::read(entry.path()).ok())
            .filter_map(|text| serde_json::from_slice(&text).ok())
            .collect()
    }

    /// Whether a record names the tree's leader.
    fn knows_leader(&self) -> bool {
        self.records().iter().any(|r| !r["leader"].is_null())
    }
}

impl Drop for PrivateLedger {
    fn drop(&mut self) {
        for entry in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let record: Option<serde_json::Value> = std::fs::read(entry.path())
                .ok()
                .and_then(|text| serde_json::from_slice(&text).ok());
            let leaf = record
                .as_ref()
                .and_then(|r| r["cgroup"].as_str().map(str::to_owned));
            if let Some(leaf) = leaf.filter(|l| l.contains("/corral-")) {
                corral_tests::wait_until(Duration::from_secs(2), || {
                    match std::fs::remove_dir(&leaf) {
                        Ok(()) => true,
                        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
                    }
                });
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Under nohup, SIGHUP stays ignored: corral installs no handler, survives
/// SIGHUP, and the command inherits the ignore.
#[test]
fn sighup_ignored_at_start_stays_ignored_under_nohup() {
    let script = "grep SigIgn /proc/self/status; exec sleep 1000";
    let mut child = std::process::Command::new("/usr/bin/nohup")
        .arg(common::corral_path())
        .args(["run", "-k", "300ms", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn nohup corral");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    let mut guard = Guard::new(child);
    // nohup execs corral: same pid.
    let me = Proc::of(guard.child().id() as i32).expect("corral runs");
    let line = lines
        .next(Duration::from_secs(10))
        .expect("the command's SigIgn line");
    let mask = line
        .strip_prefix("SigIgn:")
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("not a SigIgn line: {line:?}"));
    assert!(
        has_signal(mask, 1),
        "the command does not ignore SIGHUP: {line}"
    );
    let masks = me.signal_masks();
    assert!(
        has_signal(masks["SigIgn"], 1),
        "corral does not ignore SIGHUP"
    );
    assert!(!me.takes(1), "corral takes SIGHUP (handled or held)");
    assert!(me.takes(15), "corral does not take SIGTERM");

    assert!(me.signal(Signal::HUP));
    assert!(
        guard.wait_exit(Duration::from_millis(500)).is_none(),
        "corral ended on an ignored SIGHUP"
    );
    assert!(me.signal(Signal::TERM));
    let status = guard.wait_exit(EXIT_BOUND).expect("corral ends on SIGTERM");
    assert_eq!(status.code(), Some(143));
}

/// corral's parent (a shell) is SIGKILLed: corral gets SIGTERM from the
/// kernel, ends the tree and exits.
#[test]
fn parent_death_counts_as_sigterm() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let script = format!(
            "\"$0\" run --backend {backend} -k 300ms -- bash -c '{ESCAPEES}' & echo $!; wait"
        );
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(common::corral_path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn sh");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let shell = Proc::of(guard.child().id() as i32).expect("sh runs");
        let mut procs: Vec<Proc> = lines
            .take(5, Duration::from_secs(10))
            .iter()
            .map(|line| Proc::of_line(line))
            .collect();
        for &proc in &procs {
            guard.watch(proc);
        }
        // The first line may be corral's (from sh) or bash's: corral is the
        // one whose parent is the shell.
        let position = procs
            .iter()
            .position(|p| parent_of(p.pid) == Some(shell.pid))
            .expect("corral among the pids");
        let corral = procs.remove(position);

        assert!(shell.signal(Signal::KILL));
        assert!(
            corral_tests::wait_until(EXIT_BOUND, || !corral.is_alive()),
            "{backend}: corral outlived its parent by {EXIT_BOUND:?}"
        );
        assert_all_gone(&procs, &format!("{backend}, parent death"));
    });
}

fn parent_of(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The signals that end a process by default, other than the four that end
/// the tree and SIGALRM, as (bash's trap name, number): corral passes each
/// on to every process of the tree and lives on.
const PASSED_ON: [(&str, i32); 13] = [
    ("USR1", 10),
    ("USR2", 12),
    ("STKFLT", 16),
    ("VTALRM", 26),
    ("PROF", 27),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("IO", 29),
    ("PWR", 30),
    ("ABRT", 6),
    ("RTMIN", 34),
    ("RTMIN+5", 39),
    ("RTMAX-1", 63),
];

/// A leader and a background child that each print `ready`, then
/// `leader NAME` or `child NAME` for each signal of [`PASSED_ON`] they get.
fn trapping_tree() -> String {
    let names: Vec<&str> = PASSED_ON.iter().map(|&(name, _)| name).collect();
    format!(
        "on() {{ for s in {}; do trap \"echo $1 $s\" $s; done; }}\n\
         ( on child; echo ready; while :; do sleep 0.05; done ) &\n\
         on leader; echo ready; while :; do sleep 0.05; done",
        names.join(" ")
    )
}

/// SIGUSR1, SIGUSR2, the real-time signals and every other signal that
/// would end corral (but the four that end the tree and SIGALRM) reach each
/// process of the tree, and corral lives on: before, corral died of them
/// (exit 128+N) and its watchdog SIGKILLed the tree, which never saw them.
#[test]
fn other_ending_signals_are_passed_on_to_the_whole_tree_and_corral_lives_on() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let mut command = corral();
        common::private_ledger(&mut command, &format!("pass-on-{backend}"));
        let mut child = command
            .arg("run")
            .args(backend_args(backend))
            .args([
                "-t",
                "60",
                "-k",
                "300ms",
                "--",
                "bash",
                "-c",
                &trapping_tree(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn corral");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let me = Proc::of(guard.child().id() as i32).expect("corral runs");
        assert_eq!(
            lines.take(2, Duration::from_secs(10)),
            ["ready", "ready"],
            "{backend}"
        );
        for (name, number) in PASSED_ON {
            assert!(
                common::signal_number(&me, number),
                "{backend}: signal {name}"
            );
            let mut got: Vec<String> = lines.take(2, Duration::from_secs(5));
            got.sort();
            assert_eq!(
                got,
                [format!("child {name}"), format!("leader {name}")],
                "{backend}: {name} did not reach both processes"
            );
            assert!(me.is_alive(), "{backend}: corral died of {name}");
        }
        assert!(me.signal(Signal::TERM));
        let status = guard.wait_exit(EXIT_BOUND).expect("corral ends on SIGTERM");
        assert_eq!(status.code(), Some(143), "{backend}");
    });
}

/// A signal passed on that ends the command ends the call as the command's
/// own death: the rest of the tree is ended, and corral exits 128+N.
#[test]
fn a_passed_on_signal_that_ends_the_command_is_its_exit_status() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let (mut guard, _lines, me, tree) = start_with_escapees(backend);
        assert!(me.signal(Signal::USR1));
        let status = guard.wait_exit(EXIT_BOUND).expect("corral ends");
        assert_eq!(status.code(), Some(128 + 10), "{backend}");
        assert_all_gone(&tree, &format!("{backend}, SIGUSR1"));
    });
}

/// SIGALRM is the time limit passing (timeout(1)'s own alarm): the policy
/// runs, the command gets SIGTERM, and corral exits 124.
#[test]
fn sigalrm_is_the_time_limit_and_exits_124() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let script = "trap 'echo got TERM; exit 0' TERM; echo ready; \
                      while :; do sleep 0.05; done";
        let mut command = corral();
        common::private_ledger(&mut command, &format!("alarm-{backend}"));
        let mut child = command
            .arg("run")
            .args(backend_args(backend))
            .args(["-t", "60", "--", "bash", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn corral");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let mut guard = Guard::new(child);
        let me = Proc::of(guard.child().id() as i32).expect("corral runs");
        assert_eq!(
            lines.next(Duration::from_secs(10)).as_deref(),
            Some("ready")
        );
        assert!(me.signal(Signal::ALARM));
        assert_eq!(
            lines.next(Duration::from_secs(5)).as_deref(),
            Some("got TERM"),
            "{backend}: the command did not get the policy's SIGTERM"
        );
        let status = guard.wait_exit(EXIT_BOUND).expect("corral ends");
        assert_eq!(status.code(), Some(124), "{backend}");
    });
}

/// A parent that left SIGCHLD ignored (`trap '' CHLD`) does not stop corral
/// (GNU timeout resets it too); the command starts with SIGCHLD at its
/// default.
#[test]
fn sigchld_ignored_by_the_parent_is_reset_and_the_command_runs() {
    // bash, not dash: dash does not leave an ignored SIGCHLD to what it
    // executes.
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg("trap '' CHLD; exec \"$0\" run -t 10 -- sh -c 'grep SigIgn /proc/self/status'")
        .arg(common::corral_path())
        .output()
        .expect("run corral under sh");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let line = String::from_utf8_lossy(&output.stdout);
    let mask = line
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or_else(|| panic!("not a SigIgn line: {line:?}"));
    assert!(!has_signal(mask, 17), "the command ignores SIGCHLD: {line}");
}

/// SIGRTMAX, which corral cannot handle (tokio has no slot for it), is held
/// blocked: it does not end corral (before, corral died of it and its
/// watchdog SIGKILLed the tree), though it is not passed on.
#[test]
fn sigrtmax_does_not_end_corral() {
    for_backends(&["cgroup", "subreaper"], |backend| {
        let (mut guard, _lines, me, tree) = start_with_escapees(backend);
        assert!(common::signal_number(&me, libc::SIGRTMAX()));
        assert!(
            guard.wait_exit(Duration::from_millis(500)).is_none(),
            "{backend}: corral died of SIGRTMAX"
        );
        assert!(
            tree.iter().all(Proc::is_alive),
            "{backend}: the tree was ended"
        );
        assert!(me.signal(Signal::TERM));
        let status = guard.wait_exit(EXIT_BOUND).expect("corral ends on SIGTERM");
        assert_eq!(status.code(), Some(143), "{backend}");
        assert_all_gone(&tree, &format!("{backend}, SIGRTMAX, then SIGTERM"));
    });
}
