//! A hostile local user against `corral ps` and `corral reap`: ledger
//! directories and records planted by someone else, symlinks, a FIFO, a
//! 1 GiB record, a record naming a live cgroup that is not the one it was
//! written for. Each case checks that an unrelated process (the bystander,
//! whose real pid and start time every forged record names) lives, and that
//! nothing blocks. The cases that plant files as another user need root (the
//! root pass of `scripts/test`); they print `SKIPPED:` otherwise.

mod common;

use std::{
    os::unix::fs::{PermissionsExt, symlink},
    path::{Path, PathBuf},
    process::{Output, Stdio},
    time::Duration,
};

use common::corral;
use corral_tests::{Guard, Proc, scratch};

/// The uid files are planted as: `nobody`.
const OTHER_UID: u32 = 65534;
/// How long a `ps` or `reap` may take on any of these ledgers.
const BOUND: Duration = Duration::from_secs(10);

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// An unrelated process: the target every forged record names.
fn bystander() -> (Guard, Proc) {
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .expect("sleep");
    let mut guard = Guard::new(child);
    let proc = Proc::of(guard.child().id() as i32).expect("alive");
    (guard, proc)
}

/// A well-formed record whose owner is dead and whose leader is `victim`:
/// believed, it makes `reap` SIGKILL the victim.
fn forged(id: &str, victim: Proc) -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    serde_json::json!({
        "version": 1, "id": id,
        "owner": {"pid": victim.pid, "start_time": victim.start_time + 3},
        "owner_exe": null, "boot_id": boot.trim(), "backend": "group",
        "leader": {"pid": victim.pid, "start_time": victim.start_time},
        "members": [], "cgroup": null, "command": "forged", "created_at": 0
    })
    .to_string()
}

/// A fresh directory of ours, mode 0700.
fn own_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    dir
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).expect("chown");
}

/// Runs `corral ARGS --ledger DIR` (or with `env`), killed if it outlives
/// [`BOUND`].
fn ledger_command(args: &[&str], dir: Option<&Path>, env: &[(&str, &Path)]) -> Output {
    let mut command = corral();
    command.args(args);
    if let Some(dir) = dir {
        command.arg("--ledger").arg(dir);
    }
    command
        .env_remove("CORRAL_LEDGER_DIR")
        .env_remove("XDG_RUNTIME_DIR");
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let mut guard = Guard::new(child);
    let status = guard.wait_exit(BOUND);
    assert!(status.is_some(), "corral {args:?} blocked past {BOUND:?}");
    let child = guard.child.take().expect("child");
    child.wait_with_output().expect("output")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The ledger refusal: exit 125, one line naming the path and the fix.
fn assert_refused(output: &Output, path: &Path, why: &str) {
    let text = stderr(output);
    assert_eq!(output.status.code(), Some(125), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(why), "expected {why:?} in {text}");
    assert!(text.contains("CORRAL_LEDGER_DIR"), "no fix named: {text}");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
}

/// The reproduction of the report: a directory and a record owned by
/// `nobody`, naming an unrelated process. Root's `reap` refuses the
/// directory (named with `--ledger`, `CORRAL_LEDGER_DIR` or through
/// `XDG_RUNTIME_DIR`) and the bystander lives.
#[test]
fn a_forged_record_in_another_users_directory_is_refused() {
    if !is_root() {
        println!("SKIPPED: planting files as another user needs root");
        return;
    }
    let (_guard, victim) = bystander();
    let dir = own_dir("foreign");
    std::fs::write(dir.join("forged.json"), forged("forged", victim)).expect("write");
    chown(&dir.join("forged.json"), OTHER_UID);
    chown(&dir, OTHER_UID);
    for args in [&["reap"][..], &["ps"], &["reap", "--dry-run"]] {
        let output = ledger_command(args, Some(&dir), &[]);
        assert_refused(&output, &dir, "owned by uid 65534");
        let output = ledger_command(args, None, &[("CORRAL_LEDGER_DIR", &dir)]);
        assert_refused(&output, &dir, "owned by uid 65534");
    }
    // XDG_RUNTIME_DIR owned by another user, with a root-owned `corral`
    // inside: the other user could swap it, so root refuses it too.
    let runtime = own_dir("runtime");
    let inner = runtime.join("corral");
    std::fs::create_dir(&inner).expect("inner");
    std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(inner.join("forged.json"), forged("forged", victim)).expect("write");
    chown(&runtime, OTHER_UID);
    let output = ledger_command(&["reap"], None, &[("XDG_RUNTIME_DIR", &runtime)]);
    assert_refused(&output, &runtime, "neither root nor");
    assert!(victim.is_alive(), "the bystander was signalled");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&runtime);
}

/// In a directory of ours, a record owned by another user is skipped with
/// its owner named; the bystander lives.
#[test]
fn a_record_owned_by_another_user_is_skipped() {
    if !is_root() {
        println!("SKIPPED: planting files as another user needs root");
        return;
    }
    let (_guard, victim) = bystander();
    let dir = own_dir("foreign-record");
    std::fs::write(dir.join("forged.json"), forged("forged", victim)).expect("write");
    chown(&dir.join("forged.json"), OTHER_UID);
    let output = ledger_command(&["reap"], Some(&dir), &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("owned by uid 65534"), "{text}");
    assert!(victim.is_alive(), "the bystander was signalled");
    assert!(dir.join("forged.json").exists(), "a skipped file is left");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ledger directory that is a symlink (to a directory of ours holding a
/// forged record) is refused, never followed.
#[test]
fn a_symlinked_ledger_directory_is_refused() {
    let (_guard, victim) = bystander();
    let real = own_dir("link-target");
    std::fs::write(real.join("forged.json"), forged("forged", victim)).expect("write");
    let link = scratch("link");
    let _ = std::fs::remove_file(&link);
    symlink(&real, &link).expect("symlink");
    for args in [&["reap"][..], &["ps"]] {
        let output = ledger_command(args, Some(&link), &[]);
        assert_refused(&output, &link, "symlink");
    }
    assert!(victim.is_alive(), "the bystander was signalled");
    let _ = std::fs::remove_file(&link);
    let _ = std::fs::remove_dir_all(&real);
}

/// A record that is a symlink (to a forged record elsewhere, or to
/// `/dev/zero`) is skipped, never followed.
#[test]
fn a_symlinked_record_is_not_followed() {
    let (_guard, victim) = bystander();
    let dir = own_dir("link-record");
    let elsewhere = scratch("elsewhere.json");
    std::fs::write(&elsewhere, forged("forged", victim)).expect("write");
    symlink(&elsewhere, dir.join("forged.json")).expect("symlink");
    symlink("/dev/zero", dir.join("zero.json")).expect("symlink");
    let output = ledger_command(&["reap"], Some(&dir), &[]);
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("a symlink").count(), 2, "{text}");
    assert!(victim.is_alive(), "the bystander was signalled");
    let _ = std::fs::remove_file(&elsewhere);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FIFO and a 1 GiB file as records: skipped at once (a FIFO opened
/// without blocking, a size over the cap), with no memory growth.
#[test]
fn a_fifo_and_a_huge_record_neither_block_nor_eat_memory() {
    let dir = own_dir("fifo");
    let fifo = dir.join("fifo.json");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let huge = std::fs::File::create(dir.join("huge.json")).expect("create");
    huge.set_len(1 << 30).expect("1 GiB, sparse");
    drop(huge);
    for args in [&["reap"][..], &["ps"], &["ps", "--json"]] {
        let output = ledger_command(args, Some(&dir), &[]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{text}");
        assert!(text.contains("not a regular file"), "{text}");
        assert!(text.contains("more than a record may have"), "{text}");
    }
    // SAFETY: an all-zero rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer only fills `usage`.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    let peak_mib = usage.ru_maxrss / 1024;
    assert!(
        peak_mib < 64,
        "a child grew to {peak_mib} MiB reading the ledger"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory of ours that others may write to is refused with the fix.
#[test]
fn a_ledger_directory_others_can_write_is_refused() {
    let (_guard, victim) = bystander();
    let dir = own_dir("open");
    std::fs::write(dir.join("forged.json"), forged("forged", victim)).expect("write");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let output = ledger_command(&["reap"], Some(&dir), &[]);
    assert_refused(&output, &dir, "chmod 700");
    assert!(victim.is_alive(), "the bystander was signalled");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The cgroup v2 mount and this process's cgroup in it.
fn own_cgroup() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo
        .lines()
        .find(|l| l.contains(" - cgroup2 "))?
        .split_whitespace()
        .nth(4)?
        .to_owned();
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let relative = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(PathBuf::from(format!("{mount}{relative}")))
}

/// A new cgroup leaf `corral-NAME-PID` under this process's cgroup, as root;
/// `None` (with the reason printed) where that cannot be made here.
fn test_leaf(name: &str) -> Option<PathBuf> {
    if !is_root() {
        println!("SKIPPED: creating a cgroup leaf needs root here");
        return None;
    }
    let Some(parent) = own_cgroup() else {
        println!("SKIPPED: no cgroup v2 mount");
        return None;
    };
    let leaf = parent.join(format!("corral-{name}-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir(&leaf) {
        println!("SKIPPED: cannot create {}: {error}", leaf.display());
        return None;
    }
    Some(leaf)
}

/// A cgroup-backend record whose owner is dead (`victim`'s pid, another
/// start time), naming `leaf` with `cgroup_id`.
fn leaf_record(id: &str, victim: Proc, leaf: &Path, cgroup_id: u64) -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    serde_json::json!({
        "version": 1, "id": id,
        "owner": {"pid": victim.pid, "start_time": victim.start_time + 3},
        "owner_exe": null, "boot_id": boot.trim(), "backend": "cgroup",
        "leader": null, "members": [], "cgroup": leaf, "cgroup_id": cgroup_id,
        "command": "forged", "created_at": 0
    })
    .to_string()
}

/// A record naming a live cgroup leaf by path, with another cgroup id than
/// the leaf has (a leaf name reused, or a forged record): nothing in the
/// leaf is killed and the leaf stays. The same record with the leaf's own
/// id does end it, so the id check is what spares the bystander.
#[test]
fn a_record_naming_a_live_foreign_leaf_is_left_alone() {
    use std::os::unix::fs::MetadataExt;
    let Some(leaf) = test_leaf("foreign") else {
        return;
    };
    let (guard, victim) = bystander();
    std::fs::write(leaf.join("cgroup.procs"), victim.pid.to_string()).expect("move into leaf");
    let ino = std::fs::metadata(&leaf).expect("leaf").ino();
    let record = |id: &str, cgroup_id: u64| leaf_record(id, victim, &leaf, cgroup_id);
    let dir = own_dir("leaf");
    std::fs::write(dir.join("other.json"), record("other", ino + 1)).expect("write");
    let output = ledger_command(&["reap"], Some(&dir), &[]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let spared = victim.is_alive() && leaf.exists();
    std::fs::write(dir.join("own.json"), record("own", ino)).expect("write");
    let control = ledger_command(&["reap"], Some(&dir), &[]);
    let ended = corral_tests::wait_until(Duration::from_secs(2), || !victim.is_alive());
    drop(guard);
    let _ = std::fs::remove_dir(&leaf);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(text.contains("dropped"), "{text}");
    assert!(spared, "a leaf with another cgroup id was acted on");
    assert!(
        ended,
        "control: the record with the leaf's own id did not end it: {}",
        String::from_utf8_lossy(&control.stdout)
    );
}

/// Thaws a v1 freezer cgroup and removes it, also when the test panics.
struct Thaw(PathBuf);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
        let _ = corral_tests::wait_until(Duration::from_secs(5), || {
            std::fs::remove_dir(&self.0).is_ok()
        });
    }
}

/// The start-up sweep never holds up a spawn. Five records of a dead
/// predecessor (this same `corral`) name a process frozen by the cgroup v1
/// freezer, which `SIGKILL` cannot end until thawed, so ending each takes the
/// sweep's full one-second bound (5 s in all). `corral run -- sleep 1` still
/// returns after about a second, and the sweep does run meanwhile (the frozen
/// process has the `SIGKILL` pending).
#[test]
fn a_slow_start_up_sweep_does_not_hold_up_a_spawn() {
    if !is_root() {
        println!("SKIPPED: freezing a process needs root");
        return;
    }
    let freezer = PathBuf::from("/sys/fs/cgroup/freezer");
    if !freezer.join("cgroup.procs").exists() {
        println!("SKIPPED: no cgroup v1 freezer hierarchy here");
        return;
    }
    let frozen = freezer.join(format!("corral-hostile-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir(&frozen) {
        println!("SKIPPED: cannot make a freezer cgroup: {error}");
        return;
    }
    let thaw = Thaw(frozen.clone());
    let (guard, victim) = bystander();
    std::fs::write(frozen.join("cgroup.procs"), victim.pid.to_string()).expect("into freezer");
    std::fs::write(frozen.join("freezer.state"), "FROZEN").expect("freeze");
    let exe = std::fs::canonicalize(common::corral_path()).expect("corral path");
    let dir = own_dir("slow-sweep");
    for n in 0..5 {
        let mut record: serde_json::Value =
            serde_json::from_str(&forged(&format!("slow{n}"), victim)).expect("json");
        record["owner_exe"] = serde_json::json!(exe);
        std::fs::write(dir.join(format!("slow{n}.json")), record.to_string()).expect("write");
    }
    let started = std::time::Instant::now();
    let output = corral()
        .args(["run", "-t", "10", "--", "sleep", "1"])
        .env("CORRAL_LEDGER_DIR", &dir)
        .env_remove("CORRAL_NO_STARTUP_SWEEP")
        .output()
        .expect("corral run");
    let took = started.elapsed();
    let kill_pending = corral_tests::wait_until(Duration::from_secs(3), || {
        let masks = victim.signal_masks();
        ["SigPnd", "ShdPnd"].iter().any(|k| {
            masks
                .get(*k)
                .is_some_and(|m| corral_tests::proc::has_signal(*m, libc::SIGKILL))
        })
    });
    drop(thaw);
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        took < Duration::from_secs(4),
        "the spawn waited for the start-up sweep: {took:?}"
    );
    assert!(kill_pending, "the start-up sweep did not run");
}

/// A member allowed to write its leaf (root here) makes a cgroup below it
/// and moves into it, where the leaf's own `cgroup.procs` no longer lists
/// it. The live cleanup still ends it (`cgroup.kill` reaches the subtree)
/// and removes both cgroups.
#[test]
fn a_member_hiding_in_a_cgroup_below_its_leaf_is_ended_and_nothing_is_left() {
    if !is_root() || own_cgroup().is_none() {
        println!("SKIPPED: needs root and a cgroup v2 mount");
        return;
    }
    let report = scratch("below.json");
    let script = "leaf=$(sed -n 's/^0:://p' /proc/self/cgroup); \
        mount=$(awk '$9 == \"cgroup2\" {print $5; exit}' /proc/self/mountinfo); \
        mkdir \"$mount$leaf/sub\" && echo $$ > \"$mount$leaf/sub/cgroup.procs\" && echo $$; \
        exec sleep 300";
    let output = corral()
        .args([
            "run",
            "--backend",
            "cgroup",
            "-t",
            "1",
            "-k",
            "1",
            "--report",
        ])
        .arg(&report)
        .args(["--", "sh", "-c", script])
        .output()
        .expect("corral run");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let hidden = text
        .lines()
        .next()
        .and_then(|l| l.trim().parse::<i32>().ok());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap_or_default()).unwrap_or_default();
    let _ = std::fs::remove_file(&report);
    let leaf = json["cgroup"].as_str().map(PathBuf::from);
    let alive = hidden.and_then(Proc::of).filter(|p| p.is_alive());
    if let Some(proc) = alive {
        proc.signal(rustix::process::Signal::KILL);
    }
    let left = leaf.as_ref().filter(|l| l.exists()).cloned();
    if let Some(leaf) = &left {
        let _ = std::fs::remove_dir(leaf.join("sub"));
        let _ = std::fs::remove_dir(leaf);
    }
    assert_eq!(output.status.code(), Some(124), "{}", stderr(&output));
    assert!(
        hidden.is_some(),
        "the member did not move below its leaf: {text:?}"
    );
    assert!(alive.is_none(), "the member below the leaf survived");
    assert!(leaf.is_some(), "no cgroup in the report: {json}");
    assert!(left.is_none(), "cgroups left behind: {left:?}");
}

/// The same hiding place after the owner died: `corral reap` finds the
/// member below the recorded leaf, ends it, removes both cgroups and drops
/// the record (it dropped the record and left the process running).
#[test]
fn reap_ends_a_member_hiding_below_a_recorded_leaf() {
    use std::os::unix::fs::MetadataExt;
    let Some(leaf) = test_leaf("below") else {
        return;
    };
    let sub = leaf.join("sub");
    std::fs::create_dir(&sub).expect("a cgroup below the leaf");
    let (guard, member) = bystander();
    std::fs::write(sub.join("cgroup.procs"), member.pid.to_string()).expect("move below");
    let ino = std::fs::metadata(&leaf).expect("leaf").ino();
    let dir = own_dir("below");
    let record = leaf_record("below", member, &leaf, ino);
    std::fs::write(dir.join("below.json"), record).expect("write");
    let output = ledger_command(&["reap"], Some(&dir), &[]);
    let ended = corral_tests::wait_until(Duration::from_secs(2), || !member.is_alive());
    let record_left = dir.join("below.json").exists();
    let cgroups_left = leaf.exists();
    drop(guard);
    let _ = std::fs::remove_dir(&sub);
    let _ = std::fs::remove_dir(&leaf);
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(ended, "the member below the leaf survived: {text}");
    assert!(text.contains(&format!("ended {}", member.pid)), "{text}");
    assert!(!cgroups_left, "the leaf or its child cgroup was left");
    assert!(!record_left, "the record was kept after a clean end");
}

/// A ledger directory another user prepared (as `/tmp/corral-UID` can be)
/// is not used, and `corral run` says so without `-v`: the command still
/// runs, and the weakened owner-death guarantee is not missed.
#[test]
fn a_ledger_directory_prepared_by_another_user_is_reported_by_run() {
    if !is_root() {
        println!("SKIPPED: planting files as another user needs root");
        return;
    }
    let dir = own_dir("prepared");
    chown(&dir, OTHER_UID);
    let output = corral()
        .args(["run", "-t", "10", "--", "true"])
        .env("CORRAL_LEDGER_DIR", &dir)
        .output()
        .expect("corral run");
    let text = stderr(&output);
    let written = std::fs::read_dir(&dir).map(Iterator::count).unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("crash ledger off"), "{text}");
    assert!(text.contains("owned by uid 65534"), "{text}");
    assert_eq!(
        written, 0,
        "a record was written into another user's directory"
    );
}
