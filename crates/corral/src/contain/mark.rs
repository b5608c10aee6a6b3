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
//! be signalled by that user anyway. A verdict holds for the process read
//! (its identity) while its tree is ended: one that was marked and wholly
//! the user's, then runs a set-user-id program, is still ended (it was the
//! tree's, and its real uid still lets the user signal it).
//!
//! What escapes it: a process that cleared or rewrote its environment
//! (`env -i`, an `execve` with a new one, a `setproctitle` that writes over
//! it, as PostgreSQL and nginx do), one running as another user, and, for
//! an ender that is not root, one that is not dumpable: its environment is
//! closed even to its own user (`ssh-agent` makes itself so, as does every
//! set-group-id program), so it cannot be read.

use std::{
    ffi::{OsStr, OsString},
    fs::File,
    io::{self, Read as _},
    os::fd::OwnedFd,
};

use crate::{
    identity::{self, Stat},
    sys::dirfd,
};

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
///
/// Every read goes through one descriptor of `/proc/PID`, opened first and
/// checked to be the process `stat` names (its start time): the directory
/// stays that process's, and reads through it fail once it is gone, so the
/// uids and the environment read are its own even if the pid is reused
/// meanwhile. A verdict is never about a process other than the one judged.
pub(crate) fn marked(stat: &Stat, id: &str, uid: u32) -> bool {
    let Ok(proc) = dirfd::open_dir_at(None, OsStr::new(&format!("/proc/{}", stat.pid))) else {
        return false;
    };
    // The directory's owner is the process's effective uid (dumpable or
    // not, as `ps` reads it): another user's process costs no read.
    if dirfd::meta(&proc).is_ok_and(|meta| meta.uid != uid) {
        return false;
    }
    let is_judged = read_at(&proc, "stat", 4096).is_ok_and(|text| {
        identity::parse_stat(&String::from_utf8_lossy(&text))
            .is_some_and(|now| now.start_time == stat.start_time && now.is_running())
    });
    if !is_judged {
        return false;
    }
    let is_wholly = read_at(&proc, "status", 64 << 10)
        .is_ok_and(|status| wholly(&String::from_utf8_lossy(&status), uid));
    is_wholly && read_at(&proc, "environ", MAX_ENVIRON).is_ok_and(|environ| carries(&environ, id))
}

/// At most the first `cap` bytes of `name` in the process directory `proc`.
fn read_at(proc: &OwnedFd, name: &str, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::from(dirfd::open_file_at(proc, OsStr::new(name))?)
        .take(cap)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
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

    /// A running process of this user that carries the mark is marked, by
    /// its identity only: the same pid with another start time (the pid
    /// reused since the walk that read it) is not, nor another tree's id,
    /// another user, or a process without the mark.
    #[test]
    fn a_marked_process_is_judged_by_its_identity() {
        use std::{
            io::BufRead as _,
            process::{Child, Command, Stdio},
        };
        let id = format!("{}-1-{}", std::process::id(), line!());
        // Ready once it has printed: its environment is its own by then,
        // and it waits on its input until the test is done.
        let start = |mark: Option<&str>| -> (Child, Stat) {
            let mut command = Command::new("/bin/sh");
            command
                .args(["-c", "echo ready; read line"])
                .env_remove(VARIABLE)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            if let Some(mark) = mark {
                command.env(VARIABLE, mark);
            }
            let mut child = command.spawn().expect("spawn sh");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().expect("stdout"))
                .read_line(&mut line)
                .expect("its first line");
            assert_eq!(line, "ready\n");
            let pid = i32::try_from(child.id()).expect("a pid");
            let stat = identity::read_stat(pid).expect("its stat");
            (child, stat)
        };
        let (mut marked_child, stat) = start(Some(&format!("1-2-3:{id}")));
        let (mut unmarked_child, unmarked) = start(None);
        let uid = crate::sys::geteuid();
        let verdicts = [
            marked(&stat, &id, uid),
            marked(&stat, "1-2-3", uid),
            !marked(&stat, &format!("{id}0"), uid),
            !marked(&stat, &id, uid.wrapping_add(1)),
            !marked(&unmarked, &id, uid),
            !marked(
                &Stat {
                    start_time: stat.start_time + 1,
                    ..stat.clone()
                },
                &id,
                uid,
            ),
        ];
        for child in [&mut marked_child, &mut unmarked_child] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(
            verdicts, [true; 6],
            "marked, an outer mark, not another id, not another user, not \
             unmarked, not another process with the pid"
        );
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
