//! `corral::ledger::Record::parse`: ledger files are read from a directory
//! that outlives the process that wrote them and are trusted for nothing.
//!
//! Invariants (from `Record::parse`: "never panics on any input"; rejects
//! "another version, or a value that cannot be right (pid <= 0, an id that
//! is not a plain file name, a cgroup that is not a corral leaf)"):
//! - never panics;
//! - an accepted record has the current version, owner and leader pids above
//!   zero, an id of 1 to 128 characters `[A-Za-z0-9_-]`, and a cgroup (if
//!   any) that is an absolute path without `.`/`..` whose last component
//!   starts with `corral-` but not `corral-probe`;
//! - an accepted record written back as JSON parses to the same record.

#![no_main]

use std::path::Component;

use corral::ledger::Record;
use libfuzzer_sys::fuzz_target;

/// `corral::ledger::record::VERSION` (crate-private): the only version read.
const VERSION: u32 = 1;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = Record::parse(data) else {
        return;
    };
    assert_eq!(record.version, VERSION);
    assert!(record.owner.pid > 0, "owner pid {}", record.owner.pid);
    if let Some(leader) = &record.leader {
        assert!(leader.pid > 0, "leader pid {}", leader.pid);
    }
    assert!(
        !record.id.is_empty() && record.id.len() <= 128,
        "id {:?}",
        record.id
    );
    assert!(
        record
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "id {:?}",
        record.id
    );
    if let Some(cgroup) = &record.cgroup {
        assert!(cgroup.is_absolute(), "{cgroup:?}");
        assert!(
            cgroup
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_))),
            "{cgroup:?}"
        );
        let name = cgroup
            .file_name()
            .and_then(|n| n.to_str())
            .expect("leaf name");
        assert!(
            name.starts_with("corral-") && !name.starts_with("corral-probe"),
            "{cgroup:?}"
        );
    }
    let bytes = serde_json::to_vec(&record).expect("an accepted record serializes");
    assert_eq!(
        Record::parse(&bytes).as_ref(),
        Ok(&record),
        "does not round-trip"
    );
});
