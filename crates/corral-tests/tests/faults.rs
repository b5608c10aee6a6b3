//! Faults: what corral does when the machine refuses it something. Each ends
//! in a clear error or a documented fallback, never a panic and never a leak
//! (the "Faults" table of docs/guarantees.md lists them with these tests).
//!
//! Some faults need a process of their own, so the test runs its body in a
//! child: this test binary started again with `--exact NAME`.
//! - Injected faults (`CORRAL_FAULTS`, read once per process; the
//!   `fault-injection` feature is on for this crate's tests): `no-pidfd`
//!   makes `pidfd_open` fail with `ENOSYS`, `no-cgroup2` hides the cgroup v2
//!   mount.
//! - Faults of an unprivileged user (root may create any cgroup and is exempt
//!   from `RLIMIT_NPROC`): as root the child runs as `nobody` (uid 65534,
//!   through `setpriv`), which needs this binary to be reachable by that
//!   user; as any other user it runs as that user. The unprivileged pass
//!   (`scripts/test-unprivileged`) runs them all as `corral-ci`.

mod common;
#[path = "faults/support.rs"]
mod support;

use std::{
    os::unix::process::ExitStatusExt,
    process::{Command as StdCommand, Stdio},
    time::{Duration, Instant},
};

use common::fixture_path;
use corral::{
    Backend, BackendChoice, Command, Error, Outcome, SpawnFailure,
    identity::Identity,
    ledger::{self, SweepAction},
};
use corral_tests::{
    Bystander, Proc, is_root, kill_leftovers, parse_ready, proc,
    this_process::{become_subreaper, open_fd_count},
    wait_until_async,
};
use support::{
    MARK, Run, cgroup_status, in_child, in_child_with, leaves, limit_processes, marked,
    reachable_by_nobody, reap_orphans, running_children, runtime, tasks_of,
};

// ---------------------------------------------------------------------------
// pidfd unavailable (ENOSYS), injected.

/// Without pidfds the identity check still guards every signal: a scanned
/// member is signalled with `kill(2)` only after its start time was checked
/// (the documented small race of kernels before 5.3), and a pid that now
/// belongs to someone else is left alone. Shown through the ledger sweep,
/// which signals recorded members by identity.
#[test]
fn without_pidfds_members_are_killed_by_identity_with_kill() {
    let Run::Body = in_child(
        "without_pidfds_members_are_killed_by_identity_with_kill",
        "no-pidfd",
        false,
    ) else {
        return;
    };
    let caps = corral::capabilities();
    assert!(!caps.pidfd, "the fault is injected: {caps:?}");

    let dir = ledger::dir();
    std::fs::create_dir_all(&dir).expect("ledger dir");
    let mut member = StdCommand::new(fixture_path())
        .args(["sleep", "600"])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn a member");
    let member_id = Proc::of(member.id() as i32).expect("member identity");
    let bystander = Bystander::spawn(fixture_path());
    let stranger = bystander.proc();
    // A dead owner: a pid with a start time nobody has.
    let dead_owner = Identity {
        pid: stranger.pid,
        start_time: stranger.start_time + 7,
    };
    let member_identity = Identity {
        pid: member_id.pid,
        start_time: member_id.start_time,
    };
    let impostor = Identity {
        pid: stranger.pid,
        start_time: stranger.start_time + 1,
    };
    std::fs::write(
        dir.join("member.json"),
        record("member", dead_owner, member_identity),
    )
    .expect("write");
    std::fs::write(
        dir.join("impostor.json"),
        record("impostor", dead_owner, impostor),
    )
    .expect("write");

    let result = ledger::sweep(&dir, false, |_| true).expect("sweep");
    for (record, action) in &result.actions {
        println!("{}: {action:?}", record.id);
        match record.id.as_str() {
            "member" => assert!(
                matches!(action, SweepAction::Killed { members, survivors }
                    if members.iter().any(|m| m.pid == member_id.pid) && survivors.is_empty()),
                "the recorded member was killed: {action:?}"
            ),
            _ => assert_eq!(*action, SweepAction::Dropped, "a reused pid is dropped"),
        }
    }
    assert_eq!(result.actions.len(), 2);
    let status = member.wait().expect("reap the member");
    assert_eq!(status.signal(), Some(9), "killed with SIGKILL: {status:?}");
    assert!(bystander.is_running(), "the impostor's pid was signalled");
}

/// Without pidfds the cgroup backend still runs (its leader's pidfd comes
/// from `clone3(CLONE_PIDFD)`, its members are signalled with `kill(2)` after
/// their `/proc/PID/cgroup` line was checked); the scanned backends refuse to
/// spawn with `Error::Spawn` (`SpawnFailure::Other`, `ENOSYS`), since corral
/// never supervises a leader it holds no pidfd for, and leave nothing behind.
#[test]
fn without_pidfds_cgroup_runs_and_scanned_backends_refuse() {
    let Run::Body = in_child(
        "without_pidfds_cgroup_runs_and_scanned_backends_refuse",
        "no-pidfd",
        false,
    ) else {
        return;
    };
    runtime().block_on(async {
        let fds = open_fd_count();
        for backend in [Backend::Group, Backend::Subreaper] {
            let result = Command::new(fixture_path())
                .args(["sleep", "600"])
                .backend(BackendChoice::Only(backend))
                .spawn();
            match result {
                Err(Error::Spawn {
                    failure, source, ..
                }) => {
                    println!("{backend}: {}", result_message(&failure, &source));
                    assert_eq!(failure, SpawnFailure::Other);
                    assert_eq!(source.kind(), std::io::ErrorKind::Unsupported);
                    let message = source.to_string();
                    assert!(
                        message.contains("no pidfds") && message.contains("5.3"),
                        "{message}"
                    );
                }
                Err(other) => panic!("{backend}: unexpected error {other}"),
                Ok(child) => panic!("{backend}: spawned {} without a pidfd", child.id()),
            }
        }
        assert!(
            running_children().is_empty(),
            "a refused leader was left running: {:?}",
            running_children()
        );
        assert_eq!(open_fd_count(), fds, "descriptors leaked by refused spawns");

        let spawned = Command::new(fixture_path())
            .args(["fork", "3"])
            .backend(BackendChoice::Only(Backend::Cgroup))
            .timeout(Duration::from_millis(500))
            .grace(Duration::from_secs(2))
            .spawn();
        let mut child = match spawned {
            Err(Error::BackendUnavailable { reason, .. }) => {
                println!("SKIPPED: the cgroup part: the cgroup backend is unavailable: {reason}");
                return;
            }
            other => other.expect("the cgroup backend spawns without pidfd_open"),
        };
        let finished = child.wait().await.expect("a result");
        println!("{:?} {:?}", finished.outcome, finished.report.signals);
        assert_eq!(finished.outcome, Outcome::TimedOut);
        assert!(
            !finished.report.escalated,
            "SIGTERM was delivered by kill(2)"
        );
        assert_eq!(finished.report.signals[0].delivered, Some(4));
        assert!(finished.report.survivors.is_empty());
        let ready = finished.stdout.text();
        let procs = parse_ready(ready.lines().next().unwrap_or_default());
        let gone =
            wait_until_async(Duration::from_secs(1), || !procs.iter().any(Proc::is_alive)).await;
        assert!(gone, "members survived: {procs:?}");
        assert!(leaves().is_empty(), "a cgroup leaf was left");
    });
}

fn result_message(failure: &SpawnFailure, source: &std::io::Error) -> String {
    format!("{failure:?}: {source}")
}

fn record(id: &str, owner: Identity, leader: Identity) -> String {
    format!(
        r#"{{"version":1,"id":"{id}","owner":{{"pid":{},"start_time":{}}},"owner_exe":null,
"boot_id":"{}","backend":"group","leader":{{"pid":{},"start_time":{}}},"members":[],
"cgroup":null,"command":"x","created_at":0}}"#,
        owner.pid,
        owner.start_time,
        ledger::boot_id(),
        leader.pid,
        leader.start_time,
    )
}

// ---------------------------------------------------------------------------
// cgroup v2 absent (injected) or refused (unprivileged).

/// No cgroup v2 hierarchy: the cgroup backend is unavailable and says why,
/// `Auto` falls back (group, or subreaper once claimed), forcing the cgroup
/// backend is an error naming the reason.
#[test]
fn without_cgroup_v2_auto_falls_back_and_says_why() {
    let Run::Body = in_child(
        "without_cgroup_v2_auto_falls_back_and_says_why",
        "no-cgroup2",
        false,
    ) else {
        return;
    };
    let status = cgroup_status();
    println!("cgroup: {status:?}");
    assert!(!status.available);
    assert!(
        status.detail.contains("no cgroup v2 hierarchy is mounted"),
        "{status:?}"
    );
    assert_eq!(corral::capabilities().cgroup_parent, None);
    falls_back("no cgroup v2 hierarchy is mounted");
}

/// cgroup creation refused (an unprivileged user, a parent cgroup it may not
/// write): the same fallback, with the kernel's refusal in the reason.
/// As root this runs as `nobody` under the machine's real cgroup parent,
/// which is left untouched (the `mkdir` is refused).
#[test]
fn cgroup_refused_auto_falls_back_and_says_why() {
    let Run::Body = in_child("cgroup_refused_auto_falls_back_and_says_why", "", true) else {
        return;
    };
    let status = cgroup_status();
    println!("cgroup: {status:?}");
    if status.available {
        println!(
            "SKIPPED: this user may create cgroups here (a delegated subtree): {}",
            status.detail
        );
        return;
    }
    if status.detail.contains("no cgroup v2") {
        println!("SKIPPED: no cgroup v2 here at all: {}", status.detail);
        return;
    }
    assert!(
        status.detail.contains("cannot create a cgroup under")
            && (status.detail.contains("ermission denied") || status.detail.contains("ead-only")),
        "{status:?}"
    );
    falls_back("cannot create a cgroup under");
}

/// cgroup creation refused by a limit (the parent's `cgroup.max.descendants`
/// is reached): a clear error that names the parent and the limit, with
/// `Auto` too (a limit is not a missing capability, so corral does not
/// quietly run with weaker containment), and nothing is left. Root only: the
/// test makes a cgroup whose limit is 0 and its child moves itself in.
#[test]
fn cgroup_limit_reached_is_a_clear_error() {
    const NAME: &str = "cgroup_limit_reached_is_a_clear_error";
    const DIR: &str = "CORRAL_TEST_LIMITED_CGROUP";
    if let Some(dir) = std::env::var_os(DIR) {
        let Run::Body = in_child(NAME, "", false) else {
            return;
        };
        limited_cgroup_body(&std::path::PathBuf::from(dir));
        return;
    }
    let parent = corral::capabilities().cgroup_parent;
    let Some(dir) = parent
        .filter(|_| is_root())
        .map(|parent| parent.join(format!("corral-faults-limit-{}", std::process::id())))
    else {
        println!("SKIPPED: needs root and the cgroup backend to make a limited cgroup");
        return;
    };
    std::fs::create_dir(&dir).expect("create the limited cgroup");
    let limit = std::fs::write(dir.join("cgroup.max.descendants"), "0");
    let limited = limit.is_ok();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if limited {
            let _ = in_child_with(NAME, "", false, &[(DIR, dir.as_os_str())]);
        }
    }));
    // The child has exited; its watchdog may take a moment to follow.
    let until = Instant::now() + Duration::from_secs(5);
    while std::fs::remove_dir(&dir).is_err() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    limit.expect("set cgroup.max.descendants");
    assert!(!dir.exists(), "{} left behind", dir.display());
    if let Err(panic) = run {
        std::panic::resume_unwind(panic);
    }
}

/// In the child: moves into the limited cgroup before corral first reads its
/// own cgroup (once per process), then spawns.
fn limited_cgroup_body(dir: &std::path::Path) {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
        .expect("move into the limited cgroup");
    runtime().block_on(async {
        for choice in [BackendChoice::Only(Backend::Cgroup), BackendChoice::Auto] {
            let result = Command::new(fixture_path())
                .args(["sleep", "600"])
                .backend(choice)
                .spawn();
            match result {
                Err(error @ Error::Cgroup { .. }) => {
                    println!("{choice:?}: {error}");
                    let text = error.to_string();
                    assert!(text.contains(&dir.display().to_string()), "{text}");
                    assert!(text.contains("cgroup.max.descendants"), "{text}");
                }
                Err(other) => panic!("{choice:?}: unexpected error {other}"),
                Ok(child) => panic!("{choice:?}: spawned {} past the limit", child.id()),
            }
            assert!(running_children().is_empty(), "{choice:?} left a process");
        }
    });
}

/// With the cgroup backend unavailable for `why`: `Auto` runs on another
/// backend and the report says which; forcing cgroups fails with the reason
/// and leaves nothing.
fn falls_back(why: &str) {
    runtime().block_on(async {
        let caps = corral::capabilities();
        assert_ne!(caps.auto, Backend::Cgroup);
        let forced = Command::new(fixture_path())
            .args(["sleep", "600"])
            .backend(BackendChoice::Only(Backend::Cgroup))
            .spawn();
        match forced {
            Err(error @ Error::BackendUnavailable { .. }) => {
                println!("forced: {error}");
                assert!(error.to_string().contains(why), "{error}");
            }
            Err(other) => panic!("unexpected error {other}"),
            Ok(child) => panic!("spawned {} on an unusable cgroup backend", child.id()),
        }
        assert!(running_children().is_empty());
        for expected in [Backend::Group, Backend::Subreaper] {
            if expected == Backend::Subreaper {
                corral::settings::Settings::new().subreaper().apply();
            }
            let finished = Command::new(fixture_path())
                .args(["fork", "3"])
                .timeout(Duration::from_millis(300))
                .grace(Duration::from_secs(2))
                .run()
                .await
                .expect("Auto runs on another backend");
            println!("auto: {} {:?}", finished.report.backend, finished.outcome);
            assert_eq!(finished.report.backend, expected);
            assert_eq!(finished.outcome, Outcome::TimedOut);
            assert!(finished.report.survivors.is_empty());
            let procs = parse_ready(finished.stdout.text().lines().next().unwrap_or_default());
            let gone =
                wait_until_async(Duration::from_secs(1), || !procs.iter().any(Proc::is_alive))
                    .await;
            assert!(gone, "members survived: {procs:?}");
        }
    });
}

// ---------------------------------------------------------------------------
// fork refused (RLIMIT_NPROC).

/// fork refused: with `RLIMIT_NPROC` at 0 for an ordinary user every new
/// process is refused, so the spawn fails with `Error::Spawn`
/// (`SpawnFailure::Other`, `EAGAIN`) on every backend, and nothing is left:
/// no process, no descriptor, no cgroup leaf.
#[test]
fn fork_refused_is_a_spawn_error_and_leaves_nothing() {
    let Run::Body = in_child("fork_refused_is_a_spawn_error_and_leaves_nothing", "", true) else {
        return;
    };
    // The runtime (one thread) first: no thread can start after the limit.
    runtime().block_on(async {
        let fds = open_fd_count();
        limit_processes(0);
        for backend in Backend::ALL {
            let result = Command::new(fixture_path())
                .args(["sleep", "600"])
                .backend(BackendChoice::Only(backend))
                .run()
                .await;
            match result {
                Err(Error::BackendUnavailable { reason, .. }) => {
                    println!("{backend}: unavailable ({reason})");
                }
                Err(Error::Spawn {
                    failure, source, ..
                }) => {
                    println!("{backend}: {}", result_message(&failure, &source));
                    assert_eq!(failure, SpawnFailure::Other);
                    assert_eq!(source.raw_os_error(), Some(libc::EAGAIN));
                }
                Err(other) => panic!("{backend}: unexpected error {other}"),
                Ok(finished) => panic!("{backend}: ran despite the limit: {finished:?}"),
            }
            assert!(
                running_children().is_empty(),
                "{backend}: a process was left"
            );
            assert!(leaves().is_empty(), "{backend}: a cgroup leaf was left");
            assert_eq!(open_fd_count(), fds, "{backend}: descriptors leaked");
        }
    });
}
/// every backend: the fixture's `fork-storm 200` (which dies when a fork is
/// refused), and a shell that starts TERM-ignoring children in the
/// background until it cannot. The limit binds the tree only: it is set by
/// `prlimit` inside it, and as root the tree runs as `nobody` (`setpriv`),
/// since root is exempt.
#[test]
fn fork_storm_under_a_process_limit_is_cleaned_up() {
    let fixture = fixture_path();
    let (uid, prefix): (u32, Vec<String>) = if is_root() {
        if let Err(reason) = reachable_by_nobody(&[&fixture]) {
            println!("SKIPPED: the tree must run as an ordinary user and {reason}");
            return;
        }
        (
            65534,
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ]
            .map(str::to_owned)
            .to_vec(),
        )
    } else {
        (rustix::process::geteuid().as_raw(), Vec::new())
    };
    become_subreaper();
    let fixture = fixture.display().to_string();
    let storm = format!(
        r#"i=0; while [ $i -lt 200 ]; do "{fixture}" ignore-term & i=$((i+1)); done; echo all-started; exec "{fixture}" ignore-term"#
    );
    let trees: [(&str, Vec<&str>); 2] = [
        ("fork-storm 200", vec![&fixture, "fork-storm", "200"]),
        ("shell storm", vec!["sh", "-c", &storm]),
    ];
    runtime().block_on(async {
        for backend in Backend::ALL {
            for (name, tree) in &trees {
                // Zombies count against the limit too: reap the orphans of
                // the last storm first (no corral leader is unreaped now).
                reap_orphans();
                let limit = tasks_of(uid) + 40;
                let mark = format!(
                    "{}-{backend}-{}",
                    std::process::id(),
                    name.replace(' ', "-")
                );
                let started = Instant::now();
                let mut argv = prefix.clone();
                argv.extend([
                    "prlimit".to_owned(),
                    format!("--nproc={limit}:{limit}"),
                    "--".to_owned(),
                ]);
                argv.extend(tree.iter().map(|a| (*a).to_owned()));
                let result = Command::new(&argv[0])
                    .args(&argv[1..])
                    .env(MARK, &mark)
                    .backend(BackendChoice::Only(backend))
                    .timeout(Duration::from_secs(2))
                    .grace(Duration::from_millis(200))
                    .final_bound(Duration::from_secs(1))
                    .run()
                    .await;
                let finished = match result {
                    Err(Error::BackendUnavailable { reason, .. }) => {
                        println!("SKIPPED: {backend}: {reason}");
                        continue;
                    }
                    other => other.expect("the storm's leader starts"),
                };
                let stderr = finished.stderr.text();
                println!(
                    "{backend} {name}: limit {limit}, {:?} after {:?}, signals {:?}, stderr {:?}",
                    finished.outcome,
                    started.elapsed(),
                    finished.report.signals,
                    stderr.lines().next().unwrap_or_default()
                );
                assert!(
                    finished.report.survivors.is_empty(),
                    "{backend}: survivors {:?}",
                    finished.report.survivors
                );
                let gone =
                    wait_until_async(Duration::from_secs(2), || marked(&mark).is_empty()).await;
                let left = marked(&mark);
                kill_leftovers(
                    &left
                        .iter()
                        .map(|s| Proc {
                            pid: s.pid,
                            start_time: s.start_time,
                        })
                        .collect::<Vec<_>>(),
                );
                assert!(gone, "{backend} {name}: left running: {left:?}");
            }
        }
        reap_orphans();
    });
}

// ---------------------------------------------------------------------------
// Library bugs these faults exposed, kept as regression tests (both fixed).

/// Without pidfds every spawn starts a watchdog helper, fails to take charge
/// of it (`pidfd for the watchdog: ...`) and drops it unreaped: one zombie
/// (and one fork+exec) per spawn, for as long as the owner lives.
#[test]
fn without_pidfds_the_watchdog_leaves_no_zombies() {
    let Run::Body = in_child(
        "without_pidfds_the_watchdog_leaves_no_zombies",
        "no-pidfd",
        false,
    ) else {
        return;
    };
    corral::settings::Settings::new()
        .watchdog_executable(common::owner_path())
        .apply();
    runtime().block_on(async {
        for _ in 0..3 {
            let result = Command::new(fixture_path())
                .args(["exit", "0"])
                .backend(BackendChoice::Only(Backend::Cgroup))
                .run()
                .await;
            match result {
                Err(Error::BackendUnavailable { reason, .. }) => {
                    println!("SKIPPED: needs the cgroup backend to spawn without pidfds: {reason}");
                    return;
                }
                other => println!("notes: {:?}", other.expect("runs").report.notes),
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let me = std::process::id() as i32;
    let zombies: Vec<proc::Stat> = proc::all_processes()
        .expect("walk")
        .into_iter()
        .filter(|s| s.ppid == me && s.state == 'Z')
        .collect();
    assert!(zombies.is_empty(), "unreaped watchdog helpers: {zombies:?}");
}

/// A process that is a child subreaper of its own accord (an init, a
/// supervisor, the soak) stays one after corral ran a subreaper-backed tree.
/// The library once cleared the flag when the tree closed, and orphans went
/// to init from then on (found by the soak).
#[test]
fn a_subreaper_tree_leaves_the_callers_own_subreaper_flag_alone() {
    become_subreaper();
    runtime().block_on(async {
        let finished = Command::new(fixture_path())
            .args(["exit", "0"])
            .backend(BackendChoice::Only(Backend::Subreaper))
            .run()
            .await
            .expect("runs");
        assert_eq!(finished.report.backend, Backend::Subreaper);
    });
    let mut flag: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    let rc = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut flag as *mut libc::c_int) };
    assert_eq!(rc, 0);
    assert_eq!(flag, 1, "the caller's own subreaper flag was cleared");
}

// ---------------------------------------------------------------------------
// The leader reaped by something else in the host.

/// A host with a reaper of its own (a thread calling `waitpid(-1)`, as some
/// runtimes' `SIGCHLD` handlers do) takes the leader's exit status before
/// corral reads it: here for sure, as the runtime's only thread, which runs
/// the supervisor, is held until the reaper has it. The call still ends
/// when the leader exits (its pidfd says so; before, the supervisor waited
/// for ever when there was no time limit), and the report says why the
/// exit code is unknown. (`SIGCHLD` set to be ignored, which has the kernel
/// reap every child, is refused at the spawn: `Error::ChildrenAutoreaped`.)
#[test]
fn a_leader_reaped_by_another_reaper_of_the_host_still_ends_the_call() {
    reaped_by_another_reaper(
        "a_leader_reaped_by_another_reaper_of_the_host_still_ends_the_call",
        "",
    );
}

/// The same, with the leader reaped before the spawn reads its `/proc`
/// entry (held there by the `leader-reaped-first` fault, as a host's
/// reaper can win that race under load): the spawn succeeds, and the call
/// ends as above.
#[test]
fn a_leader_reaped_before_the_spawn_read_it_still_ends_the_call() {
    reaped_by_another_reaper(
        "a_leader_reaped_before_the_spawn_read_it_still_ends_the_call",
        "leader-reaped-first",
    );
}

/// The same on each backend, with the leader reaped right after it
/// started (held there by the `leader-reaped-at-launch` fault): `clone3`
/// hands back its pidfd with its pid on every backend, so the leader is
/// held although it is gone (before, the scanned backends started it with
/// std's spawn and opened its pidfd after: `ESRCH`, and the spawn failed
/// although the command had run, or worse, a pidfd of whatever process had
/// its pid by then).
#[test]
fn a_leader_reaped_at_its_launch_still_ends_the_call_group() {
    reaped_by_another_reaper_on(
        "a_leader_reaped_at_its_launch_still_ends_the_call_group",
        "leader-reaped-at-launch",
        BackendChoice::Only(Backend::Group),
    );
}

#[test]
fn a_leader_reaped_at_its_launch_still_ends_the_call_subreaper() {
    reaped_by_another_reaper_on(
        "a_leader_reaped_at_its_launch_still_ends_the_call_subreaper",
        "leader-reaped-at-launch",
        BackendChoice::Only(Backend::Subreaper),
    );
}

/// Without `clone3` (std's spawn, then `pidfd_open`), a leader reaped by
/// something else in that window is a clear error naming the cause and
/// the fix, and no pidfd of its pid (another process's by then, perhaps)
/// stands for it.
#[test]
fn without_clone3_a_leader_reaped_at_its_launch_is_a_clear_error() {
    let Run::Body = in_child(
        "without_clone3_a_leader_reaped_at_its_launch_is_a_clear_error",
        "no-clone3,leader-reaped-at-launch",
        false,
    ) else {
        return;
    };
    let reaper = std::thread::spawn(|| {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20) {
            let mut status = 0;
            // SAFETY: waitpid writes one int through the pointer.
            if unsafe { libc::waitpid(-1, &raw mut status, 0) } > 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let result = runtime().block_on(async {
        Command::new("sh")
            .args(["-c", "exit 3"])
            .backend(BackendChoice::Only(Backend::Group))
            .spawn()
    });
    reaper.join().expect("the reaper");
    match result {
        Err(Error::Spawn { source, .. }) => {
            let message = source.to_string();
            assert!(
                message.contains("waitpid(-1)") && message.contains("clone3"),
                "{message}"
            );
        }
        Err(other) => panic!("unexpected error {other}"),
        Ok(child) => panic!("spawned {} though its leader was reaped", child.id()),
    }
}

fn reaped_by_another_reaper(name: &str, faults: &str) {
    reaped_by_another_reaper_on(name, faults, BackendChoice::Auto);
}

fn reaped_by_another_reaper_on(name: &str, faults: &str, backend: BackendChoice) {
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    };
    let Run::Body = in_child(name, faults, false) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reaped = Arc::new(Mutex::new(Vec::new()));
    let reaper = {
        let (stop, reaped) = (Arc::clone(&stop), Arc::clone(&reaped));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let mut status = 0;
                // SAFETY: waitpid writes one int through the pointer.
                let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
                if pid > 0 {
                    reaped.lock().expect("the list").push(pid);
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    let finished = runtime().block_on(async {
        let mut child = Command::new("sh")
            .args(["-c", "exit 3"])
            .backend(backend)
            .spawn()
            .expect("spawned");
        let leader = child.id();
        // The supervisor runs on this (current-thread) runtime: held here,
        // it cannot read the status first.
        let taken = Instant::now() + Duration::from_secs(30);
        while !reaped.lock().expect("the list").contains(&leader) {
            assert!(
                Instant::now() < taken,
                "the host's reaper never took the leader"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .expect("the call ended once the leader exited")
            .expect("a result")
    });
    stop.store(true, Ordering::SeqCst);
    reaper.join().expect("the reaper");
    println!("{:?} {:?}", finished.outcome, finished.report);
    assert_eq!(finished.outcome, Outcome::Exited { code: -1 });
    assert!(finished.leader.is_none());
    assert!(
        finished
            .report
            .notes
            .iter()
            .any(|note| note.contains("exit status was taken by something else")),
        "{:?}",
        finished.report
    );
    assert!(
        finished.report.survivors.is_empty(),
        "{:?}",
        finished.report
    );
}
