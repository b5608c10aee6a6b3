//! `corral run`'s limit options: exit statuses (137 for an out-of-memory
//! kill, 152 for a spent CPU-time budget), the report's `limits`, bad values,
//! and limits this host cannot enforce. The memory row needs the v2 memory
//! controller: on a hybrid host it says `SKIPPED:`, and the pure cgroup v2
//! lane runs it (`CORRAL_REQUIRE_LIMITS=1`).

mod common;

use std::{ffi::OsStr, path::Path, process::Stdio};

use common::{corral, shell_status};
use corral::LimitKind;
use corral_tests::{Scratch, skip};
use serde_json::Value;

/// The JSON report corral wrote to `path`.
fn read_report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the report")).expect("the report is JSON")
}

/// `corral run ARGS...` with a report: the status as a shell shows it, the
/// standard error, and the report (if written).
fn run(args: &[&str], scratch: &Scratch) -> (i32, String, Option<Value>) {
    let report = scratch.path("report.json");
    let output = corral()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run corral");
    let parsed = report.exists().then(|| read_report(&report));
    (
        shell_status(output.status),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        parsed,
    )
}

#[test]
fn a_spent_cpu_time_budget_exits_152_and_the_report_names_it() {
    if skip::cgroup_parent().is_none() {
        return;
    }
    let scratch = Scratch::new("cli-cpu-time");
    // Two busy loops, one in the background: the budget is the tree's.
    let (status, stderr, report) = run(
        &[
            "--backend",
            "cgroup",
            "-t",
            "60",
            "--cpu-time",
            "0.5",
            "--",
            "sh",
            "-c",
            "(while :; do :; done) & while :; do :; done",
        ],
        &scratch,
    );
    assert_eq!(status, 152, "{stderr}");
    let report = report.expect("a report");
    assert_eq!(report["exit_status"], 152);
    assert_eq!(report["outcome"]["kind"], "limit_exceeded");
    assert_eq!(report["outcome"]["limit"], "cpu_time");
    assert_eq!(report["effects_unknown"], true);
    assert_eq!(report["limits"]["applied"][0], "cpu_time=0.5s");
    assert!(report["limits"]["cpu_used"].as_f64().unwrap_or_default() >= 0.5);
    assert_eq!(report["survivors"], Value::Array(Vec::new()));
}

#[test]
fn bad_limit_values_exit_125_naming_the_rule() {
    let scratch = Scratch::new("cli-bad-limits");
    for (args, needle) in [
        (&["--max-procs", "0"][..], "--max-procs"),
        (&["--max-procs", "many"][..], "--max-procs"),
        (&["--max-memory", "12X"][..], "512M or 2G"),
        (&["--max-memory=-1M"][..], "512M or 2G"),
        (&["--max-swap", "1M"][..], "--max-memory"),
        (&["--cpus", "0"][..], "e.g. 0.5"),
        (&["--cpus", "nan"][..], "e.g. 0.5"),
        (&["--cpu-time", "0"][..], "more than 0"),
        (&["--cpu-time", "soon"][..], "--cpu-time"),
    ] {
        let marker = scratch.path("ran");
        let marker_arg = marker.to_string_lossy().into_owned();
        let mut all = args.to_vec();
        all.extend(["--", "touch", &marker_arg]);
        let (status, stderr, _) = run(&all, &scratch);
        assert_eq!(status, 125, "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
        assert!(!marker.exists(), "{args:?}: the command ran");
    }
}

#[test]
fn a_limit_this_host_cannot_enforce_exits_125_unless_best_effort() {
    if skip::cgroup_parent().is_none() {
        return;
    }
    let missing = corral::capabilities()
        .limits
        .into_iter()
        .find(|s| !s.available);
    let Some(missing) = missing else {
        println!("not applicable: this host enforces every limit");
        return;
    };
    let (flag, value) = match missing.limit {
        LimitKind::Processes => ("--max-procs", "16"),
        LimitKind::Memory => ("--max-memory", "64M"),
        LimitKind::Cpus => ("--cpus", "0.5"),
        other => panic!("unexpected {other:?}"),
    };
    let controller = missing.controller.expect("a controller");
    let scratch = Scratch::new("cli-unenforceable");
    let marker = scratch.path("ran");
    let marker_arg = marker.to_string_lossy().into_owned();
    let (status, stderr, _) = run(&[flag, value, "--", "touch", &marker_arg], &scratch);
    assert_eq!(status, 125, "{stderr}");
    assert!(
        stderr.contains(&format!("the {controller} controller")),
        "{stderr}"
    );
    assert!(stderr.contains("corral capabilities"), "{stderr}");
    assert!(!marker.exists(), "nothing runs when a limit is refused");
    let (status, stderr, report) = run(
        &[
            flag,
            value,
            "--limits-best-effort",
            "--",
            "touch",
            &marker_arg,
        ],
        &scratch,
    );
    assert_eq!(status, 0, "{stderr}");
    assert!(marker.exists());
    let report = report.expect("a report");
    let not_applied = &report["limits"]["not_applied"][0];
    assert!(
        not_applied["reason"]
            .as_str()
            .unwrap_or_default()
            .contains(controller),
        "{report}"
    );
}

#[test]
fn out_of_memory_exits_137_with_the_whole_tree_gone() {
    if skip::cgroup_parent().is_none() || !skip::limit_available(LimitKind::Memory) {
        return;
    }
    let scratch = Scratch::new("cli-oom");
    // `dd` takes a 300 MB buffer and has the kernel fill it in one read, so
    // the tree passes its limit in a moment whatever the CPU it gets (a
    // shell reading 300 MB into a variable took more than 60 s of CPU
    // under emulation on a loaded host: docs/flakes.md (26)); a background
    // sleeper uses none.
    let (status, stderr, report) = run(
        &[
            "--backend",
            "cgroup",
            "-t",
            "60",
            "--max-memory",
            "64M",
            "--",
            "sh",
            "-c",
            "sleep 100 & dd if=/dev/zero of=/dev/null bs=300M count=1; echo done",
        ],
        &scratch,
    );
    assert_eq!(status, 137, "{stderr}");
    let report = report.expect("a report");
    assert_eq!(report["outcome"]["limit"], "memory", "{report}");
    assert!(report["limits"]["oom_kills"].as_u64().unwrap_or_default() >= 1);
    assert_eq!(report["survivors"], Value::Array(Vec::new()));
    let leaf = report["cgroup"].as_str().expect("a leaf");
    assert!(!Path::new(leaf).exists(), "the leaf is removed");
}

/// A cgroup made for one test under this process's own, removed on drop.
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    fn new(name: &str) -> Option<Self> {
        let parent = skip::cgroup_parent()?;
        let path = parent.join(format!("corral-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&path).expect("creating a test cgroup");
        Some(Self(path))
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Leaves corral made in it are gone by now (each run removes its own).
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn leaves_go_in_the_cgroup_corral_cgroup_parent_names() {
    let Some(chosen) = TestCgroup::new("parent") else {
        return;
    };
    let scratch = Scratch::new("cli-chosen-parent");
    let report = scratch.path("report.json");
    let status = corral()
        .env("CORRAL_CGROUP_PARENT", &chosen.0)
        .args(["run", "--backend", "cgroup", "--report"])
        .arg(&report)
        .args(["--", "true"])
        .status()
        .expect("run corral");
    assert!(status.success());
    let report: Value = read_report(&report);
    let leaf = report["cgroup"].as_str().expect("a leaf");
    assert_eq!(
        Path::new(leaf).parent(),
        Some(chosen.0.as_path()),
        "{report}"
    );
}

#[test]
fn a_cgroup_parent_root_did_not_make_is_refused_by_root() {
    if !skip::is_root() {
        skip::skipped("needs root to give a cgroup to another user");
        return;
    }
    let Some(hostile) = TestCgroup::new("hostile") else {
        return;
    };
    // What another user could have made: a cgroup of their own (a delegated
    // subtree), and a symlink to it.
    std::os::unix::fs::chown(&hostile.0, Some(65534), Some(65534)).expect("chown");
    let scratch = Scratch::new("cli-hostile-parent");
    let link = scratch.path("link");
    std::os::unix::fs::symlink(&hostile.0, &link).expect("symlink");
    let marker = scratch.path("ran");
    for (named, needle) in [
        (hostile.0.clone(), "belongs to user 65534".to_owned()),
        (link.clone(), "belongs to user 65534".to_owned()),
        (
            scratch.0.clone(),
            "is not a cgroup of the v2 hierarchy".to_owned(),
        ),
        ("no/such/cgroup".into(), "No such file".to_owned()),
    ] {
        let output = corral()
            .env("CORRAL_CGROUP_PARENT", &named)
            .args(["run", "--"])
            .arg("touch")
            .arg(&marker)
            .output()
            .expect("run corral");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(shell_status(output.status), 125, "{named:?}: {stderr}");
        assert!(
            stderr.contains(&needle),
            "{named:?}: {needle:?} not in {stderr}"
        );
        assert!(stderr.contains("CORRAL_CGROUP_PARENT"), "{stderr}");
        assert!(!marker.exists(), "{named:?}: the command ran");
    }
    let left: Vec<_> = std::fs::read_dir(&hostile.0)
        .expect("read the hostile cgroup")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .collect();
    assert!(
        left.is_empty(),
        "corral made a leaf in the hostile cgroup: {left:?}"
    );
}

/// A root-owned cgroup below one another user owns (a delegated subtree:
/// directory and `cgroup.procs` chowned): that user may write the common
/// ancestor's `cgroup.procs`, so it could move root's tree out of its leaf
/// (and its limits), set the ancestor's limits, or remove and re-create the
/// chosen cgroup between runs. Root refuses it as it refuses the hostile
/// cgroup itself.
#[test]
fn a_cgroup_parent_below_one_another_user_owns_is_refused_by_root() {
    if !skip::is_root() {
        skip::skipped("needs root to give a cgroup to another user");
        return;
    }
    let Some(hostile) = TestCgroup::new("hostile-ancestor") else {
        return;
    };
    for file in [
        "",
        "cgroup.procs",
        "cgroup.subtree_control",
        "cgroup.threads",
    ] {
        std::os::unix::fs::chown(hostile.0.join(file), Some(65534), Some(65534)).expect("chown");
    }
    // Root-owned, so the check passes; its parent is the other user's.
    let inner = hostile.0.join("inner");
    std::fs::create_dir(&inner).expect("a root-owned cgroup below");
    let scratch = Scratch::new("cli-hostile-ancestor");
    let marker = scratch.path("ran");
    let output = corral()
        .env("CORRAL_CGROUP_PARENT", &inner)
        .args(["run", "--cpu-time", "100", "--"])
        .arg("touch")
        .arg(&marker)
        .output()
        .expect("run corral");
    let _ = std::fs::remove_dir(&inner);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !marker.exists(),
        "root ran the tree below a cgroup user 65534 owns (status {}): {stderr}",
        shell_status(output.status)
    );
    assert_eq!(shell_status(output.status), 125, "{stderr}");
    assert!(stderr.contains("65534"), "{stderr}");
}

/// The CPU-time budget is read when it could be spent at the earliest, every
/// online CPU busy, not only those of corral's own affinity: a tree that
/// widens its affinity to CPUs corral may not use does not outrun the
/// checks. Counted from corral's one CPU, the first check of a 1 s budget
/// comes after 1 s of wall time, when two busy CPUs have spent 2 s.
///
/// What is measured is corral's lateness: how long after the budget was
/// spent, at the tree's own average rate (CPU used over the run's wall
/// time), the tree was ended. Counted from one CPU, that is 1 - 1 / rate
/// seconds (0.5 s at two CPUs); the bound is half of it. A tree that got
/// less than 1.5 CPUs on average cannot tell the two apart (the run of
/// `docs/flakes.md` (7) got 1.44, and came 0.4 s late under emulation): the
/// test then says SKIPPED.
#[test]
fn a_tree_that_widens_its_cpu_affinity_does_not_overrun_its_cpu_time_budget() {
    if skip::cgroup_parent().is_none() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cpus < 2 || !Path::new("/usr/bin/taskset").exists() {
        skip::skipped("needs 2 CPUs and taskset");
        return;
    }
    let scratch = Scratch::new("cli-cpu-affinity");
    let report = scratch.path("report.json");
    let all = format!("0-{}", cpus - 1);
    let script = format!(
        "taskset -p -c {all} $$ >/dev/null; for i in $(seq {cpus}); do \
         (while :; do :; done) & done; wait"
    );
    let output = std::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(common::corral_path())
        .args([
            "run",
            "--backend",
            "cgroup",
            "-t",
            "60",
            "--cpu-time",
            "1",
            "--report",
        ])
        .arg(&report)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 152, "{stderr}");
    let report: Value = read_report(&report);
    let used = report["limits"]["cpu_used"].as_f64().expect("cpu_used");
    let wall = report["durations"]["run"].as_f64().expect("durations.run");
    assert!(used >= 1.0, "ended before its budget was spent: {report}");
    let rate = used / wall;
    if rate < 1.5 {
        return skip::skipped(format!(
            "the tree got {rate:.2} CPUs on average, too few to tell"
        ));
    }
    let late = (used - 1.0) / rate;
    let bound = (1.0 - 1.0 / rate) / 2.0;
    assert!(
        late < bound,
        "a 1 s budget ended {late:.2} s after it was spent (bound {bound:.2} s; {used} s of \
         CPU over {wall} s): {report}"
    );
}

#[test]
fn mcp_serve_refuses_to_start_with_limits_its_runs_cannot_have() {
    let output = corral()
        .args(["mcp", "serve", "--backend", "group", "--cpu-time", "5"])
        .stdin(Stdio::null())
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 125, "{stderr}");
    assert!(stderr.contains("need the cgroup backend"), "{stderr}");
    assert!(stderr.contains("--limits-best-effort"), "{stderr}");
    // Where a controller is missing, the same refusal names it.
    let missing = corral::capabilities()
        .limits
        .into_iter()
        .find(|s| !s.available && s.limit == LimitKind::Memory);
    if let Some(missing) = missing {
        let output = corral()
            .args(["mcp", "serve", "--max-memory", "1G"])
            .stdin(Stdio::null())
            .output()
            .expect("run corral");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(shell_status(output.status), 125, "{stderr}");
        assert!(stderr.contains(&missing.detail), "{stderr}");
    }
}

#[test]
fn an_out_of_memory_kill_from_a_parents_limit_is_not_the_trees_limit() {
    if skip::cgroup_parent().is_none() || !skip::limit_available(LimitKind::Memory) {
        return;
    }
    // A parent of our own with 48 MiB for everything below it; the tree's own
    // limit (256 MiB) is never reached: the kill is the parent's.
    let Some(parent) = TestCgroup::new("tight-parent") else {
        return;
    };
    let above = parent.0.parent().expect("a parent");
    std::fs::write(above.join("cgroup.subtree_control"), "+memory").expect("+memory above");
    std::fs::write(parent.0.join("memory.max"), (48u64 << 20).to_string()).expect("memory.max");
    std::fs::write(parent.0.join("memory.swap.max"), "0").expect("memory.swap.max");
    let scratch = Scratch::new("cli-parent-oom");
    let report = scratch.path("report.json");
    let output = corral()
        .env("CORRAL_CGROUP_PARENT", &parent.0)
        .args([
            "run",
            "--backend",
            "cgroup",
            "-t",
            "60",
            "--max-memory",
            "256M",
            "--report",
        ])
        .arg(&report)
        .args([
            "--",
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=200M count=1; echo done",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = read_report(&report);
    assert!(
        report["limits"]["oom_kills"].as_u64().unwrap_or_default() >= 1,
        "{report}"
    );
    assert_ne!(
        report["outcome"]["kind"], "limit_exceeded",
        "the parent's limit was reported as the tree's: {report} {stderr}"
    );
    assert_eq!(report["outcome"]["kind"], "signaled", "{report}");
}

#[test]
fn root_in_a_cgroup_another_user_owns_is_told_its_limits_can_be_lifted() {
    if !skip::is_root() {
        skip::skipped("needs root to give a cgroup to another user");
        return;
    }
    let Some(theirs) = TestCgroup::new("their-session") else {
        return;
    };
    // As a user's own delegated session cgroup would be, with root (sudo)
    // running corral inside it.
    for file in ["", "cgroup.procs"] {
        std::os::unix::fs::chown(theirs.0.join(file), Some(65534), Some(65534)).expect("chown");
    }
    let scratch = Scratch::new("cli-their-session");
    let report = scratch.path("report.json");
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec \"$0\" run --backend cgroup --cpu-time 10 --report {} -- true",
        theirs.0.display(),
        report.display()
    );
    // Leaves in corral's own cgroup (theirs), not in a parent named for the
    // whole test run.
    let status = std::process::Command::new("sh")
        .env_remove("CORRAL_CGROUP_PARENT")
        .args(["-c", &script])
        .arg(common::corral_path())
        .status()
        .expect("run corral in their cgroup");
    assert!(status.success());
    // Nothing of corral's (its watchdog included) is left in the cgroup it
    // ran in once its exit is seen (docs/flakes.md (36)).
    let events = std::fs::read_to_string(theirs.0.join("cgroup.events")).expect("cgroup.events");
    assert!(
        events.lines().any(|l| l == "populated 0"),
        "corral's exit was seen with processes still in its cgroup: {events}"
    );
    let report: Value = read_report(&report);
    let notes = report["notes"].to_string();
    assert!(notes.contains("belongs to user 65534"), "{report}");
    assert!(notes.contains("out of its limits"), "{report}");
    let leaf = report["cgroup"].as_str().expect("a leaf");
    assert!(!Path::new(leaf).exists(), "the leaf is removed: {report}");
}

#[test]
fn per_process_limits_reach_the_whole_tree_on_every_backend() {
    common::for_backends(&["cgroup", "subreaper", "group"], |backend| {
        let scratch = Scratch::new("cli-rlimits");
        let report = scratch.path("report.json");
        // A grandchild reads its own limits: inherited down the tree.
        let output = corral()
            .arg("run")
            .args(common::backend_args(backend))
            .args([
                "--max-open-files",
                "64",
                "--max-core-size",
                "0",
                "--max-address-space",
                "1G",
                "--report",
            ])
            .arg(&report)
            .args(["--", "sh", "-c", "sh -c 'cat /proc/self/limits'"])
            .stdin(Stdio::null())
            .output()
            .expect("run corral");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{backend}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let row = |name: &str| {
            stdout
                .lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| panic!("{backend}: no {name} in {stdout}"))
        };
        assert!(
            row("Max open files").contains("64 64 files"),
            "{backend}: {stdout}"
        );
        assert!(
            row("Max core file size").contains("0 0 bytes"),
            "{backend}: {stdout}"
        );
        assert!(
            row("Max address space").contains("1073741824 1073741824 bytes"),
            "{backend}: {stdout}"
        );
        let report: Value = read_report(&report);
        assert_eq!(
            report["limits"]["applied"],
            serde_json::json!(["RLIMIT_NOFILE=64", "RLIMIT_CORE=0", "RLIMIT_AS=1073741824"]),
            "{backend}"
        );
    });
}

#[test]
fn a_per_process_limit_above_the_hard_limit_is_refused_without_root() {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let Some(hard) = hard else {
        println!("not applicable: no hard limit on open files here");
        return;
    };
    let above = (hard + 1).to_string();
    let unprivileged = || {
        if !skip::is_root() {
            return Some(corral());
        }
        // As nobody, through util-linux's setpriv (busybox's cannot).
        let setpriv = Path::new("/usr/bin/setpriv");
        if !setpriv.exists() || setpriv.read_link().is_ok() {
            return None;
        }
        let mut command = std::process::Command::new(setpriv);
        command
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(common::corral_path());
        Some(command)
    };
    let Some(mut command) = unprivileged() else {
        println!("not applicable: root may raise any limit, and no setpriv to drop it");
        return;
    };
    let output = command
        .args(["run", "--max-open-files", &above, "--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 125, "{stderr}");
    assert!(stderr.contains("RLIMIT_NOFILE"), "{stderr}");
    assert!(
        stderr.contains(&format!("hard limit of {hard}")),
        "{stderr}"
    );
    // Best effort (for per-process limits too): it runs, with the hard
    // limit it inherits.
    let mut command = unprivileged().expect("as above");
    let output = command
        .args(["run", "--limits-best-effort", "--max-open-files", &above])
        .args(["--", "sh", "-c", "ulimit -Hn"])
        .stdin(Stdio::null())
        .output()
        .expect("run corral");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 0, "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        hard.to_string()
    );
}

/// `corral` with `CORRAL_CGROUP_PARENT` set to `parent`, or unset.
fn corral_in(parent: Option<&OsStr>) -> std::process::Command {
    let mut command = corral();
    match parent {
        Some(parent) => command.env("CORRAL_CGROUP_PARENT", parent),
        None => command.env_remove("CORRAL_CGROUP_PARENT"),
    };
    command
}

/// `corral capabilities --json`, with `CORRAL_CGROUP_PARENT` set to `parent`.
fn capabilities_json(parent: Option<&OsStr>) -> Value {
    let output = corral_in(parent)
        .args(["capabilities", "--json"])
        .output()
        .expect("run corral capabilities");
    serde_json::from_slice(&output.stdout).expect("capabilities JSON")
}

/// Issue 22, finding 5: where leaves go under a cgroup other than the root
/// that holds processes (the default layout, without
/// `CORRAL_CGROUP_PARENT`, in the QEMU lane: corral's own cgroup `/init`;
/// under systemd: a session or a service), `corral capabilities` called the
/// process limit available, and `corral run --max-procs` enabled `pids`
/// there, which made that cgroup a thread root: the leader was refused in
/// its leaf with a bare `Operation not supported`, and so was every later
/// tree. The two must agree, in the default layout and in the one
/// `CORRAL_CGROUP_PARENT` names (if set): the limit available and the run
/// applies it, or unavailable with the reason, and the run refused with 125
/// and that reason before anything runs; either way leaves still hold
/// trees afterwards.
#[test]
fn capabilities_and_a_run_with_a_process_limit_agree() {
    let configured = std::env::var_os("CORRAL_CGROUP_PARENT").filter(|v| !v.is_empty());
    agree(None);
    if let Some(parent) = configured {
        agree(Some(&parent));
    }
}

/// The body of [`capabilities_and_a_run_with_a_process_limit_agree`] for one
/// layout.
fn agree(layout: Option<&OsStr>) {
    let scratch = Scratch::new("cli-limits-agree");
    let capabilities = capabilities_json(layout);
    let processes = capabilities["limits"]
        .as_array()
        .and_then(|all| all.iter().find(|l| l["limit"] == "processes"))
        .expect("the processes limit is listed")
        .clone();
    let marker = scratch.path("ran");
    let report_path = scratch.path("report.json");
    let output = corral_in(layout)
        .args(["run", "--max-procs", "32", "--report"])
        .arg(&report_path)
        .arg("--")
        .arg("touch")
        .arg(&marker)
        .stdin(Stdio::null())
        .output()
        .expect("run corral");
    let (status, stderr) = (
        shell_status(output.status),
        String::from_utf8_lossy(&output.stderr),
    );
    if processes["available"] == true {
        assert_eq!(
            status, 0,
            "{layout:?}: capabilities calls the process limit available, but the run failed: \
             {stderr}"
        );
        let report = read_report(&report_path);
        assert_eq!(report["limits"]["applied"][0], "pids.max=32", "{report}");
        assert!(marker.exists(), "{layout:?}: the command did not run");
    } else {
        let detail = processes["detail"].as_str().expect("a reason");
        assert_eq!(status, 125, "{layout:?}: {stderr}");
        assert!(
            stderr.contains("cannot enforce the max processes limit") && stderr.contains(detail),
            "{layout:?}: the run's refusal does not give capabilities' reason {detail:?}: \
             {stderr}"
        );
        assert!(!marker.exists(), "{layout:?}: the command ran");
    }
    let Some(parent) = capabilities["cgroup_parent"].as_str().map(Path::new) else {
        return;
    };
    // A parent other than the root that holds processes can give no leaf a
    // controller: the reason names it and the fix.
    let procs = std::fs::read_to_string(parent.join("cgroup.procs")).unwrap_or_default();
    if parent.join("cgroup.type").exists() && !procs.trim().is_empty() {
        let detail = processes["detail"].as_str().unwrap_or_default();
        assert_eq!(processes["available"], false, "{processes}");
        assert!(
            detail.contains("holds processes") && detail.contains("CORRAL_CGROUP_PARENT"),
            "{detail}"
        );
    }
    // Nothing was left that stops later trees: the parent is still a plain
    // domain, and a tree still starts in a leaf there.
    if parent.join("cgroup.type").exists() {
        let kind = std::fs::read_to_string(parent.join("cgroup.type")).expect("cgroup.type");
        assert_eq!(
            kind.trim(),
            "domain",
            "{} became {kind:?}",
            parent.display()
        );
    }
    let output = corral_in(layout)
        .args(["run", "--backend", "cgroup", "--", "true"])
        .output()
        .expect("run corral");
    assert!(
        output.status.success(),
        "{layout:?}: a tree without limits no longer starts: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A parent whose leaves the kernel refuses processes in (a thread root:
/// here a cgroup with a threaded child; also one that holds processes and
/// hands `pids` or `cpu` down) is found by `capabilities`, which starts a
/// process in a real leaf: the cgroup backend and the limits are
/// unavailable with the reason. A run there is refused with 125 naming the
/// cause and the fix, not a bare `Operation not supported`; nothing runs,
/// and neither leaves a cgroup behind.
#[test]
fn a_parent_whose_leaves_cannot_hold_processes_is_named_by_capabilities_and_run() {
    let Some(parent) = TestCgroup::new("thread-root") else {
        return;
    };
    // A threaded child makes the parent a thread root (`domain threaded`):
    // its domain children, corral's leaves, are `domain invalid`.
    let threaded = parent.0.join("threaded");
    std::fs::create_dir(&threaded).expect("a child cgroup");
    let made = std::fs::write(threaded.join("cgroup.type"), "threaded");
    let cleanup = scopeguard(&threaded);
    made.expect("making the child threaded");
    let kind = std::fs::read_to_string(parent.0.join("cgroup.type")).expect("cgroup.type");
    assert_eq!(kind.trim(), "domain threaded");

    let capabilities = capabilities_json(Some(parent.0.as_os_str()));
    let cgroup = capabilities["backends"]
        .as_array()
        .and_then(|all| all.iter().find(|b| b["backend"] == "cgroup"))
        .expect("the cgroup backend is listed");
    assert_eq!(cgroup["available"], false, "{capabilities}");
    let detail = cgroup["detail"].as_str().expect("a reason");
    assert!(
        detail.contains("domain threaded") && detail.contains("CORRAL_CGROUP_PARENT"),
        "{detail}"
    );
    for limit in capabilities["limits"].as_array().expect("limits") {
        assert_eq!(limit["available"], false, "{limit}");
    }

    let scratch = Scratch::new("cli-thread-root");
    let marker = scratch.path("ran");
    for args in [
        &["run", "--backend", "cgroup", "--"][..],
        &["run", "--max-procs", "8", "--"][..],
    ] {
        let output = corral()
            .env("CORRAL_CGROUP_PARENT", &parent.0)
            .args(args)
            .arg("touch")
            .arg(&marker)
            .output()
            .expect("run corral");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(shell_status(output.status), 125, "{args:?}: {stderr}");
        assert!(
            stderr.contains("domain threaded") && stderr.contains("CORRAL_CGROUP_PARENT"),
            "{args:?}: the cause and the fix are not named: {stderr}"
        );
        assert!(!marker.exists(), "{args:?}: the command ran");
    }
    // corral itself in that cgroup, without CORRAL_CGROUP_PARENT: its
    // leaves would go there, so `Auto` takes another backend, and
    // `--backend cgroup` is refused with the reason.
    let report = scratch.path("auto.json");
    let inside = |args: &str| {
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec \"$0\" run {args} -- touch {}",
            parent.0.display(),
            marker.display()
        );
        std::process::Command::new("sh")
            .args(["-c", &script])
            .arg(common::corral_path())
            .env_remove("CORRAL_CGROUP_PARENT")
            .output()
            .expect("run corral inside the cgroup")
    };
    let output = inside(&format!("--report {}", report.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 0, "{stderr}");
    let auto = read_report(&report);
    assert_ne!(auto["backend"], "cgroup", "{auto}");
    assert!(marker.exists(), "the command did not run");
    std::fs::remove_file(&marker).expect("remove the marker");
    let output = inside("--backend cgroup");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(shell_status(output.status), 125, "{stderr}");
    assert!(stderr.contains("domain threaded"), "{stderr}");
    assert!(!marker.exists(), "--backend cgroup: the command ran");

    let left: Vec<_> = std::fs::read_dir(&parent.0)
        .expect("read the test cgroup")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != "threaded")
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
    drop(cleanup);
}

/// Removes the cgroup `dir` when dropped (before its parent's guard).
fn scopeguard(dir: &Path) -> impl Drop + '_ {
    struct Remove<'a>(&'a Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(self.0);
        }
    }
    Remove(dir)
}
