//! Which recorded trees to end: those whose owner is dead. How to end one is
//! the containment layer's (`contain/recorded.rs`): the ledger hands it what
//! the record names.

use std::{
    io,
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde::Serialize;

use super::{Record, Unreadable, boot_id, file_name, load, pid_ns, read_all, store::Store};
use crate::{
    contain::{self, Ended, Named, Rebuilt},
    error::Error,
    identity::{self, ProcessInfo, Stat},
    sys,
};

/// How long ending one recorded tree may take before it is reported as
/// having survivors.
const BOUND: Duration = Duration::from_secs(1);

/// Whether a record's owner still runs ([`Entry::owner`]).
///
/// ```no_run
/// use corral::ledger::{self, Owner};
/// let (entries, _) = ledger::list(&ledger::dir())?;
/// let orphaned = entries.iter().filter(|e| e.owner == Owner::Dead).count();
/// println!("{orphaned} trees whose owner died; `corral reap` ends them");
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// The owner (same pid and start time) is running: the tree is in use.
    Alive,
    /// The owner is gone: the tree, if any of it is left, is orphaned.
    Dead,
    /// The record is from another boot: nothing it names exists any more.
    OtherBoot,
    /// The record is from another PID namespace: its pids cannot be judged
    /// from here, so it is left alone.
    OtherNamespace,
    /// The owner's state could not be read (an error other than "no such
    /// process"): the record is kept and nothing is signalled.
    Unknown,
}

/// A record as `corral ps` shows it ([`list`]).
///
/// ```no_run
/// let (entries, _) = corral::ledger::list(&corral::ledger::dir())?;
/// for entry in entries {
///     println!("{} {:?} {}s {} running: {}", entry.record.id, entry.owner, entry.age_secs,
///              entry.members.len(), entry.record.command);
/// }
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// The record.
    pub record: Record,
    /// Its owner's state.
    pub owner: Owner,
    /// Seconds since the record was created.
    pub age_secs: u64,
    /// The tree's running members, found by identity.
    pub members: Vec<ProcessInfo>,
}

/// What a sweep did (or, dry, would do) with one record.
///
/// ```no_run
/// use corral::ledger::{self, SweepAction};
/// let swept = ledger::sweep(&ledger::dir(), true, |_| true)?;
/// for (record, action) in &swept.actions {
///     if let SweepAction::Killed { members, .. } = action {
///         println!("would kill {} processes of {}", members.len(), record.command);
///     }
/// }
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SweepAction {
    /// The owner is alive: left alone.
    Skipped,
    /// Nothing of the tree was left (or the record is from another boot):
    /// the record was dropped without signalling anything.
    Dropped,
    /// The tree's members were killed (`would_kill` in a dry run).
    Killed {
        /// The members found, by identity.
        members: Vec<ProcessInfo>,
        /// Members still running after the bound.
        survivors: Vec<ProcessInfo>,
    },
}

/// The result of a sweep ([`sweep`]).
///
/// ```no_run
/// let swept = corral::ledger::sweep(&corral::ledger::dir(), true, |_| true)?;
/// assert!(swept.dry_run);
/// println!("{} records, {} unreadable", swept.actions.len(), swept.skipped.len());
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// Whether nothing was signalled or removed.
    pub dry_run: bool,
    /// One action per record.
    pub actions: Vec<(Record, SweepAction)>,
    /// Files skipped as unreadable (with a warning each).
    pub skipped: Vec<Unreadable>,
}

fn owner_state(record: &Record) -> Owner {
    if record.boot_id != boot_id() {
        return Owner::OtherBoot;
    }
    if record.pid_ns.is_some() && record.pid_ns != pid_ns() {
        return Owner::OtherNamespace;
    }
    let read = match identity::read_stat(record.owner.pid) {
        // `/proc` may hide a live process from this reader (`hidepid`): a
        // pidfd tells whether the pid exists at all.
        Err(error)
            if error.kind() == io::ErrorKind::NotFound
                && sys::pidfd_open(record.owner.pid).is_ok() =>
        {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the owner's pid exists but /proc hides it from this reader (hidepid?)",
            ))
        }
        read => read,
    };
    owner_from(read, record)
}

/// The owner's state from what reading its `/proc` entry gave.
fn owner_from(read: io::Result<Stat>, record: &Record) -> Owner {
    match read {
        Ok(stat) if stat.start_time == record.owner.start_time && stat.is_running() => Owner::Alive,
        // Another process has the pid now, or the owner is a zombie.
        Ok(_) => Owner::Dead,
        // Only "no such process" means dead; anything else keeps the record.
        Err(error) if error.kind() == io::ErrorKind::NotFound => Owner::Dead,
        Err(error) => {
            tracing::warn!(id = %record.id, %error, "cannot tell whether a ledger record's owner runs");
            Owner::Unknown
        }
    }
}

/// What the record names, for the containment layer to rebuild: nothing of
/// a record from another boot or PID namespace is named at all.
fn named(record: &Record) -> Option<Named<'_>> {
    if record.boot_id != boot_id() || (record.pid_ns.is_some() && record.pid_ns != pid_ns()) {
        return None;
    }
    Some(Named {
        backend: record.backend,
        leader: record.leader,
        members: &record.members,
        cgroup: record
            .cgroup
            .as_deref()
            .map(|path| (path, record.cgroup_id)),
        id: &record.id,
    })
}

/// The running members of the recorded tree, found by identity only (see
/// `contain/recorded.rs`); `Err` when its cgroup cannot be judged from here.
fn members_of(record: &Record) -> Result<Vec<ProcessInfo>, String> {
    named(record).map_or(Ok(Vec::new()), |named| contain::running_members(&named))
}

/// Kills the recorded tree with the same tree code a live supervision uses
/// (`cgroup.kill`, or `SIGKILL` to each member by identity), waits up to a
/// second for it to empty, and removes its cgroup leaf. Used by the watchdog
/// when the owner dies, and by [`sweep`]. `Skipped` when the tree cannot be
/// judged from here or its leaf cannot be removed: the record is kept.
pub fn terminate(record: &Record) -> SweepAction {
    let Some(named) = named(record) else {
        return SweepAction::Dropped;
    };
    match contain::rebuild(&named) {
        Rebuilt::Gone => SweepAction::Dropped,
        Rebuilt::Unknown(reason) => {
            tracing::warn!(id = %record.id, %reason, "a recorded tree cannot be judged: kept");
            SweepAction::Skipped
        }
        Rebuilt::Unverified(leaf) if leaf.remove_if_empty() => SweepAction::Dropped,
        Rebuilt::Unverified(_) => SweepAction::Skipped,
        Rebuilt::Tree(mut tree) => {
            let Ended {
                members,
                survivors,
                removed,
            } = tree.end_now(BOUND);
            if members.is_empty() && removed && named.cgroup.is_none() {
                return SweepAction::Dropped;
            }
            if survivors.is_empty() && !removed {
                tracing::warn!(id = %record.id, "a recorded leaf could not be removed: kept");
                return SweepAction::Skipped;
            }
            SweepAction::Killed { members, survivors }
        }
    }
}

/// Ends every recorded tree whose owner is dead and drops its record; with
/// `dry_run`, only says what it would do. `only` narrows the sweep (the
/// library's start-up sweep passes records of its own executable).
///
/// # Errors
/// [`Error::LedgerRefused`] if the directory is not trusted: nothing was
/// read or signalled.
pub fn sweep(dir: &Path, dry_run: bool, only: impl Fn(&Record) -> bool) -> Result<Sweep, Error> {
    let Some(store) = Store::open(dir, false)? else {
        return Ok(Sweep {
            dry_run,
            actions: Vec::new(),
            skipped: Vec::new(),
        });
    };
    let (records, skipped) = read_all(&store)?;
    for unreadable in &skipped {
        tracing::warn!(path = %unreadable.path.display(), reason = %unreadable.reason, "skipping ledger file");
    }
    let mut actions = Vec::new();
    for record in records.into_iter().filter(|r| only(r)) {
        let action = match owner_state(&record) {
            Owner::Alive | Owner::OtherNamespace | Owner::Unknown => SweepAction::Skipped,
            Owner::OtherBoot => SweepAction::Dropped,
            Owner::Dead if dry_run => match members_of(&record) {
                Ok(found) if found.is_empty() => SweepAction::Dropped,
                Ok(found) => SweepAction::Killed {
                    members: found,
                    survivors: Vec::new(),
                },
                Err(_) => SweepAction::Skipped,
            },
            Owner::Dead => terminate(&record),
        };
        let done = match &action {
            SweepAction::Dropped => true,
            SweepAction::Killed { survivors, .. } => survivors.is_empty(),
            SweepAction::Skipped => false,
        };
        if done && !dry_run {
            store
                .remove(&file_name(&record.id))
                .unwrap_or_else(|error| {
                    tracing::warn!(id = %record.id, %error, "could not remove a ledger record");
                });
        }
        actions.push((record, action));
    }
    Ok(Sweep {
        dry_run,
        actions,
        skipped,
    })
}

/// Every record with its owner's state and its live members.
///
/// # Errors
/// [`Error::LedgerRefused`] if the directory is not trusted.
pub fn list(dir: &Path) -> Result<(Vec<Entry>, Vec<Unreadable>), Error> {
    let (records, skipped) = load(dir)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let entries = records
        .into_iter()
        .map(|record| Entry {
            owner: owner_state(&record),
            age_secs: now.saturating_sub(record.created_at),
            members: members_of(&record).unwrap_or_default(),
            record,
        })
        .collect();
    Ok((entries, skipped))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::backend::Backend;

    /// A record of this boot and PID namespace.
    fn local_record(id: &str, backend: Backend) -> Record {
        let mut record = Record::sample(id);
        record.boot_id = boot_id();
        record.pid_ns = pid_ns();
        record.backend = backend;
        record
    }

    /// A record naming a "cgroup" outside the cgroup mount (a directory
    /// anyone could fill with a `cgroup.procs` that lists other processes)
    /// has no members, even when its name looks like a corral leaf.
    #[test]
    fn a_leaf_outside_the_cgroup_mount_has_no_members() {
        let fake = std::env::temp_dir()
            .join(format!("corral-sweep-test-{}", std::process::id()))
            .join("corral-1-0");
        fs::create_dir_all(&fake).expect("fake leaf");
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let listed = fs::write(fake.join("cgroup.procs"), format!("{}\n", bystander.id()));
        let mut record = local_record("fake", Backend::Cgroup);
        record.cgroup = Some(fake.clone());
        let members = members_of(&record);
        let _ = bystander.kill();
        let _ = bystander.wait();
        let _ = fs::remove_dir_all(fake.parent().expect("parent"));
        listed.expect("cgroup.procs written");
        assert!(
            members.as_ref().is_ok_and(Vec::is_empty),
            "a fake leaf's listing was believed: {members:?}"
        );
    }

    /// Ending a record whose "cgroup" lies outside the cgroup mount touches
    /// nothing there: no `cgroup.kill` written, no directory removed.
    #[test]
    fn ending_a_fake_leaf_outside_the_mount_touches_nothing() {
        let fake = std::env::temp_dir()
            .join(format!("corral-sweep-test-end-{}", std::process::id()))
            .join("corral-1-0");
        fs::create_dir_all(&fake).expect("fake leaf");
        let mut record = local_record("fake-end", Backend::Cgroup);
        record.cgroup = Some(fake.clone());
        let action = terminate(&record);
        let untouched = fake.exists() && !fake.join("cgroup.kill").exists();
        let _ = fs::remove_dir_all(fake.parent().expect("parent"));
        assert!(matches!(action, SweepAction::Dropped), "{action:?}");
        assert!(
            untouched,
            "a directory outside the cgroup mount was touched"
        );
    }

    /// Only "no such process" makes an owner dead: any other error reading
    /// its `/proc` entry (no permission, a torn read) keeps the record.
    #[test]
    fn only_no_such_process_means_the_owner_is_dead() {
        let record = local_record("owner", Backend::Group);
        let gone = io::Error::new(io::ErrorKind::NotFound, "gone");
        assert_eq!(owner_from(Err(gone), &record), Owner::Dead);
        for error in [
            io::Error::from_raw_os_error(libc::EACCES),
            io::Error::new(io::ErrorKind::InvalidData, "torn"),
            io::Error::from_raw_os_error(libc::EIO),
        ] {
            assert_eq!(owner_from(Err(error), &record), Owner::Unknown);
        }
        let mut stat = Stat {
            pid: record.owner.pid,
            comm: "owner".to_owned(),
            state: 'S',
            ppid: 1,
            pgid: record.owner.pid,
            sid: record.owner.pid,
            threads: 1,
            start_time: record.owner.start_time,
        };
        assert_eq!(owner_from(Ok(stat.clone()), &record), Owner::Alive);
        stat.start_time += 1;
        assert_eq!(owner_from(Ok(stat), &record), Owner::Dead);
    }

    /// A group tree's members include its group's processes that are not
    /// the leader's descendants (nor recorded), while the leader's identity
    /// holds; processes of other groups are not members.
    #[test]
    fn group_members_found_by_the_leaders_group() {
        use std::os::unix::process::CommandExt;
        let spawn = |group: i32| {
            std::process::Command::new("sleep")
                .arg("30")
                .process_group(group)
                .spawn()
                .expect("spawn sleep")
        };
        let mut leader = spawn(0);
        let leader_pid = leader.id() as i32;
        let mut member = spawn(leader_pid);
        let mut other = spawn(0);
        let stat = |pid: u32| identity::read_stat(pid as i32).expect("stat");
        let mut record = local_record("group", Backend::Group);
        record.leader = Some(crate::identity::Identity {
            pid: leader_pid,
            start_time: stat(leader.id()).start_time,
        });
        let (member_pid, other_pid) = (member.id() as i32, other.id() as i32);
        let mut found: Vec<i32> = members_of(&record)
            .unwrap_or_default()
            .iter()
            .map(|s| s.pid)
            .collect();
        for child in [&mut leader, &mut member, &mut other] {
            let _ = child.kill();
            let _ = child.wait();
        }
        found.sort_unstable();
        let mut expected = vec![leader_pid, member_pid];
        expected.sort_unstable();
        assert_eq!(
            found, expected,
            "another group's {other_pid} or a group member missed"
        );
    }
}
