//! What scenarios `watchdog` and `ledger` share: the `owner` program runs
//! the tree, and is killed.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, Command as StdCommand, Stdio},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use corral::{Backend, ledger};
use corral_tests::proc::Stat;

use crate::{
    Res, fail,
    ledger_sweep::sweep_after_owner,
    note,
    pid_space::Factory,
    procs::{Ident, Lines, children, kill_verified, reap_adopted, wait_until},
    tree::{check_leaves_gone, members_of, tree_script},
    watchdog::watchdog_kills,
};

/// A directory holding a hard link (or copy) of `owner` and, as `fixture`
/// beside it, a script that is the scenario's tree: `owner` runs
/// `<its directory>/fixture ARGS`, so this makes it run `sh` with the two
/// sleepers. Removed on drop.
pub(crate) struct OwnerDir {
    pub(crate) dir: PathBuf,
}

impl OwnerDir {
    pub(crate) fn new(fixture: &Path) -> Res<Self> {
        let here = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let owner = here.with_file_name("owner");
        let dir = unique_temp("owner");
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let made = Self { dir };
        let copy = made.owner();
        if std::fs::hard_link(&owner, &copy).is_err() {
            std::fs::copy(&owner, &copy)
                .map_err(|e| format!("copying {}: {e}", owner.display()))?;
        }
        let script = made.dir.join("fixture");
        let text = format!(
            "#!/bin/sh\n# The PID-reuse tree, in place of the fixture binary.\n{}",
            tree_script(fixture)?
        );
        std::fs::write(&script, text)
            .and_then(|()| {
                std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("{}: {e}", script.display()))?;
        Ok(made)
    }

    pub(crate) fn owner(&self) -> PathBuf {
        self.dir.join("owner")
    }
}

impl Drop for OwnerDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh path under the temporary directory (not created). Pids say
/// little inside a PID namespace, so the name uses the clock.
pub(crate) fn unique_temp(what: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("corral-reuse-{what}-{nanos}"))
}

/// Removes a directory on drop.
pub(crate) struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The owner process and what it printed.
pub(crate) struct Owner {
    pub(crate) child: Child,
    pub(crate) me: Ident,
    pub(crate) watchdog: Option<Ident>,
    pub(crate) leader: Ident,
}

pub(crate) async fn start_owner(
    dir: &OwnerDir,
    ledger_dir: &Path,
    backend: Backend,
    watchdog: bool,
) -> Res<Owner> {
    let mut command = StdCommand::new(dir.owner());
    command.arg(backend.name());
    if !watchdog {
        command.arg("--no-watchdog");
    }
    let mut child = command
        .args(["--grace-ms", "300", "--", "reuse-tree"])
        .env("CORRAL_LEDGER_DIR", ledger_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting owner: {e}"))?;
    let mut out = Lines::new(child.stdout.take().ok_or("owner stdout")?)?;
    let line = match out.line(Duration::from_secs(10), "the owner's line").await {
        Ok(line) => line,
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(error);
        }
    };
    let words: Vec<&str> = line.split_whitespace().collect();
    let pid = |at: usize| words.get(at).and_then(|w| w.parse::<i32>().ok());
    let (Some(&"owner"), Some(me), Some(&"watchdog"), Some(watchdog_pid)) =
        (words.first(), pid(1), words.get(2), pid(3))
    else {
        return fail(format!("unexpected owner line {line:?}"));
    };
    let me = Ident::of(me).ok_or("the owner vanished")?;
    let watchdog = (watchdog_pid != 0)
        .then(|| Ident::of(watchdog_pid).ok_or("the watchdog vanished"))
        .transpose()?;
    let leaders: Vec<Stat> = children(me.pid)
        .into_iter()
        .filter(|s| Some(s.pid) != watchdog.map(|w| w.pid))
        .collect();
    let [leader] = leaders.as_slice() else {
        return fail(format!(
            "the owner should have one child besides its watchdog: {leaders:?}"
        ));
    };
    Ok(Owner {
        child,
        me,
        watchdog,
        leader: Ident {
            pid: leader.pid,
            start: leader.start_time,
        },
    })
}

pub(crate) async fn owner_killed(
    backend: Backend,
    fixture: &Path,
    factory: &mut Factory,
    watchdog: bool,
) -> Res<String> {
    let dir = OwnerDir::new(fixture)?;
    let ledger_dir = TempDir(unique_temp("ledger"));
    let mut owner = start_owner(&dir, &ledger_dir.0, backend, watchdog).await?;
    // Recorded at the spawn, before the owner said it runs.
    let leaves: Vec<PathBuf> = ledger::load(&ledger_dir.0)
        .map(|(records, _)| records.into_iter().filter_map(|r| r.cgroup).collect())
        .unwrap_or_default();
    if backend == Backend::Cgroup && leaves.is_empty() {
        return fail("the owner's record names no leaf");
    }
    if watchdog && owner.watchdog.is_none() {
        return fail("the owner runs without a watchdog");
    }
    let leader = owner.leader;
    let (x, y) = members_of(leader).await?;
    note(format!(
        "owner {}, watchdog {}, tree: leader sh {leader}, members {x} and {y} ({backend})",
        owner.me,
        owner.watchdog.map_or("none".to_owned(), |w| w.to_string())
    ));
    let result = if watchdog {
        watchdog_kills(&mut owner, backend, factory, &ledger_dir.0, (x, y)).await
    } else {
        sweep_after_owner(&mut owner, backend, factory, &ledger_dir.0, (x, y)).await
    };
    // Whatever happened: nothing of the tree stays (by identity), and the
    // owner is reaped.
    for p in [owner.me, leader, x, y] {
        kill_verified(p);
    }
    let _ = wait_until(Duration::from_secs(2), || {
        reap_adopted(&[factory.child.id().try_into().unwrap_or(0)]);
        matches!(owner.child.try_wait(), Ok(Some(_)) | Err(_))
            && ![leader, x, y].iter().any(Ident::is_running)
    })
    .await;
    let leaves_gone = check_leaves_gone(&leaves).await;
    let summary = result?;
    leaves_gone?;
    Ok(summary)
}
