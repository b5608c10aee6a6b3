//! One ledger record: versioned JSON, validated on the way in.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::identity::Identity;
use crate::{backend::Backend, contain::is_corral_leaf};

/// The record format's version; a reader skips any other.
pub const VERSION: u32 = 1;

/// A live tree, as the ledger keeps it (the [`ledger`](crate::ledger)
/// module's example writes one).
///
/// ```no_run
/// let (records, _) = corral::ledger::load(&corral::ledger::dir())?;
/// for record in records {
///     println!("{} owned by {:?}: {:?} {}", record.id, record.owner, record.backend, record.command);
/// }
/// let torn = corral::ledger::Record::parse(br#"{"version": 1, "id": "#);
/// assert!(torn.unwrap_err().contains("torn or corrupt"));
/// # Ok::<(), corral::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Record {
    /// Always [`VERSION`].
    pub version: u32,
    /// Unique per tree: `OWNERPID-STARTTIME-SEQ`; also the file name.
    pub id: String,
    /// The process that owns the tree.
    pub owner: Identity,
    /// The owner's executable, to let a restarted owner find its
    /// predecessor's records.
    pub owner_exe: Option<PathBuf>,
    /// The boot the processes belong to.
    pub boot_id: String,
    /// The PID namespace the pids are numbers in (`pid:[INODE]`); a reader
    /// in another namespace cannot judge them and leaves the record alone.
    #[serde(default)]
    pub pid_ns: Option<String>,
    /// The containment backend.
    pub backend: Backend,
    /// The leader, once spawned.
    pub leader: Option<Identity>,
    /// Members seen while the tree ran (scanned backends), by identity: they
    /// stay findable after losing their link to the leader.
    #[serde(default)]
    pub members: Vec<Identity>,
    /// The leaf cgroup (cgroup backend).
    pub cgroup: Option<PathBuf>,
    /// The leaf's cgroup id (its inode on the cgroup2 mount), checked before
    /// anything is read from, written to or removed in the leaf: a path is a
    /// name that another cgroup may carry later, the id is not.
    #[serde(default)]
    pub cgroup_id: Option<u64>,
    /// The command line, for `corral ps`.
    pub command: String,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
}

impl Record {
    /// Parses and validates a record. Never panics on any input.
    ///
    /// # Errors
    /// A one-line reason: not JSON, another version, or a value that cannot
    /// be right (pid ≤ 0, an id that is not a plain file name, a cgroup that
    /// is not a corral leaf).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let version: serde_json::Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a ledger record (torn or corrupt): {e}"))?;
        match version.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "record version {v}, this corral reads version {VERSION}"
                ));
            }
            None => return Err("no \"version\" field".to_owned()),
        }
        let record: Record =
            serde_json::from_value(version).map_err(|e| format!("bad record: {e}"))?;
        record.validate()?;
        if let (Some(cgroup), None) = (&record.cgroup, record.cgroup_id) {
            return Err(format!(
                "the cgroup {} has no cgroup_id: which cgroup it meant cannot be checked",
                cgroup.display()
            ));
        }
        Ok(record)
    }

    /// The checks every record passes, from a file or from the owner (whose
    /// watchdog hears of a leaf before its `mkdir`, so before it has an id).
    pub(crate) fn validate(&self) -> Result<(), String> {
        let plain = !self.id.is_empty()
            && self.id.len() <= 128
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !plain {
            return Err(format!("bad id {:?}", self.id));
        }
        for identity in std::iter::once(&self.owner)
            .chain(self.leader.as_ref())
            .chain(&self.members)
        {
            if identity.pid <= 0 {
                return Err(format!("bad pid {}", identity.pid));
            }
        }
        if let Some(cgroup) = self.cgroup.as_ref().filter(|c| !is_corral_leaf(c)) {
            return Err(format!("{} is not a corral cgroup leaf", cgroup.display()));
        }
        Ok(())
    }

    /// A record for tests.
    #[cfg(test)]
    pub(crate) fn sample(id: &str) -> Self {
        Self {
            version: VERSION,
            id: id.to_owned(),
            owner: Identity {
                pid: 1,
                start_time: 1,
            },
            owner_exe: None,
            boot_id: "boot".to_owned(),
            pid_ns: None,
            backend: Backend::Group,
            leader: Some(Identity {
                pid: 2,
                start_time: 2,
            }),
            members: Vec::new(),
            cgroup: None,
            cgroup_id: None,
            command: "sleep 1".to_owned(),
            created_at: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let record = Record::sample("abc-1");
        let bytes = serde_json::to_vec(&record).expect("json");
        assert_eq!(Record::parse(&bytes), Ok(record));
    }

    #[test]
    fn rejects_hostile_records() {
        let base = serde_json::to_value(Record::sample("x")).expect("json");
        let cases: Vec<(&str, serde_json::Value)> = vec![
            ("version", serde_json::json!(2)),
            ("id", serde_json::json!("../../etc/passwd")),
            ("id", serde_json::json!("")),
            ("owner", serde_json::json!({"pid": -1, "start_time": 1})),
            ("leader", serde_json::json!({"pid": 0, "start_time": 1})),
            ("members", serde_json::json!([{"pid": -5, "start_time": 1}])),
            (
                "cgroup",
                serde_json::json!("/sys/fs/cgroup/unified/system.slice"),
            ),
            (
                "cgroup",
                serde_json::json!("/sys/fs/cgroup/unified/corral-1/../init.scope"),
            ),
            ("cgroup", serde_json::json!("relative/corral-1")),
            // A leaf without its id: which cgroup it meant cannot be checked.
            (
                "cgroup",
                serde_json::json!("/sys/fs/cgroup/unified/corral-1-0"),
            ),
            ("backend", serde_json::json!("docker")),
        ];
        for (field, value) in cases {
            let mut bad = base.clone();
            bad[field] = value.clone();
            let bytes = serde_json::to_vec(&bad).expect("json");
            assert!(Record::parse(&bytes).is_err(), "{field} = {value} accepted");
        }
        for garbage in [
            &b""[..],
            b"{",
            b"[]",
            b"null",
            b"{\"version\":1}",
            b"\xff\xfe",
        ] {
            assert!(Record::parse(garbage).is_err());
        }
    }
}
