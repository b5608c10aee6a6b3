//! The tree's mark: a variable in its environment naming the tree, the
//! ledger record's id appended to the marks corral itself carries (an outer
//! corral's trees, so a nested tree carries both). Every process the tree
//! starts inherits it, double-forked daemons and `setsid` children included,
//! unless it clears or rewrites its environment.
//!
//! What it is for: a scanned tree whose owner died is rebuilt from its record
//! (`orphaned.rs`), which names the members the owner's walks had found. A
//! process orphaned since the last walk (adopted by init once its subreaper,
//! the owner, was killed) has no link left to any of them; it still carries
//! the mark. So a process is a member of a recorded tree, too, when it carries
//! the tree's id and is wholly the user's that ends it (real, effective, saved
//! and file-system uid): another user's process, and a set-user-id program
//! started by the user, are never ended by a mark, whatever they carry. A
//! process of the same user that copies the mark asks to be ended, and could
//! be signalled by that user anyway.

use std::{ffi::OsString, io::Read as _};

use crate::identity::Stat;

/// The variable.
pub const VARIABLE: &str = "CORRAL_TREES";

/// Separates the trees in the value.
const SEPARATOR: u8 = b':';

/// The longest environment read (the kernel bounds it by the stack limit);
/// the mark is looked for in this much of it.
const MAX_ENVIRON: u64 = 8 << 20;

/// The value tree `id` gives its command: the marks this process carries,
/// then `id`.
pub(crate) fn value(id: &str) -> OsString {
    joined(std::env::var_os(VARIABLE), id)
}

/// `outer` (the marks carried), then `id`.
fn joined(outer: Option<OsString>, id: &str) -> OsString {
    let mut value = outer.unwrap_or_default();
    if !value.is_empty() {
        value.push(":");
    }
    value.push(id);
    value
}

/// Whether `environ` (`/proc/PID/environ`: `KEY=VALUE` entries separated by
/// NUL bytes) carries tree `id` in the mark.
pub(crate) fn carries(environ: &[u8], id: &str) -> bool {
    let prefix = [VARIABLE.as_bytes(), b"="].concat();
    environ
        .split(|&b| b == 0)
        .filter_map(|entry| entry.strip_prefix(prefix.as_slice()))
        .any(|value| {
            value
                .split(|&b| b == SEPARATOR)
                .any(|tree| tree == id.as_bytes())
        })
}

/// Whether every uid of `status` (`/proc/PID/status`) is `uid`.
fn wholly(status: &str, uid: u32) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .is_some_and(|uids| {
            let uids: Vec<&str> = uids.split_whitespace().collect();
            uids.len() == 4 && uids.iter().all(|u| u.parse() == Ok(uid))
        })
}

/// Whether the running process `stat` is wholly `uid`'s and carries tree
/// `id`. Anything unreadable (gone, another user's) is not.
pub(crate) fn marked(stat: &Stat, id: &str, uid: u32) -> bool {
    let proc = format!("/proc/{}", stat.pid);
    let Ok(status) = std::fs::read_to_string(format!("{proc}/status")) else {
        return false;
    };
    if !wholly(&status, uid) {
        return false;
    }
    let mut environ = Vec::new();
    std::fs::File::open(format!("{proc}/environ"))
        .and_then(|file| file.take(MAX_ENVIRON).read_to_end(&mut environ))
        .is_ok_and(|_| carries(&environ, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_names_whole_trees_only() {
        let environ = b"PATH=/bin\0CORRAL_TREES=1-2-3:40-50-6\0HOME=/\0";
        assert!(carries(environ, "1-2-3"));
        assert!(carries(environ, "40-50-6"));
        assert!(!carries(environ, "1-2"), "a prefix of a tree");
        assert!(!carries(environ, "0-50-6"), "a suffix of a tree");
        assert!(
            !carries(b"XCORRAL_TREES=1-2-3\0", "1-2-3"),
            "another variable"
        );
        assert!(!carries(b"PATH=CORRAL_TREES=1-2-3\0", "1-2-3"));
        assert!(carries(b"A=1\0CORRAL_TREES=1-2-3", "1-2-3"), "no final NUL");
        assert!(!carries(b"", "1-2-3"));
    }

    #[test]
    fn only_a_process_wholly_of_the_user_is_ended_by_its_mark() {
        let status = |uids: &str| format!("Name:\tx\nUid:\t{uids}\nGid:\t0\t0\t0\t0\n");
        assert!(wholly(&status("1000\t1000\t1000\t1000"), 1000));
        // A set-user-id program the user started: its real uid is the user's.
        assert!(!wholly(&status("1000\t0\t0\t0"), 0));
        assert!(!wholly(&status("1000\t0\t0\t0"), 1000));
        assert!(!wholly(&status("1001\t1001\t1001\t1001"), 1000));
        assert!(!wholly("Name:\tx\n", 0), "no Uid line");
        assert!(!wholly(&status("0\t0"), 0), "a torn line");
    }

    #[test]
    fn a_nested_tree_carries_the_outer_marks() {
        let environ =
            |value: OsString| [VARIABLE.as_bytes(), b"=", value.as_encoded_bytes()].concat();
        let nested = environ(joined(Some("1-2-3".into()), "4-5-6"));
        assert!(carries(&nested, "1-2-3") && carries(&nested, "4-5-6"));
        assert_eq!(joined(None, "4-5-6"), "4-5-6");
        assert_eq!(joined(Some("".into()), "4-5-6"), "4-5-6");
    }
}
