//! The watchdog process itself: reads what to watch from standard input (the
//! owner's socket) until end-of-file, which means the owner is gone; then kills
//! every tree it still knows of, removes their ledger records, and exits.
//!
//! Nothing read is trusted: a message that does not parse, names a record
//! that does not validate, or refers to a tree it was not told of is skipped
//! with one line on standard error, never acted on.

use std::{
    collections::{HashMap, HashSet},
    io::{BufRead, BufReader},
    path::PathBuf,
};

use super::protocol::Message;
use crate::{
    identity::Identity,
    ledger::{self, Record},
    signal::Signal,
    sys,
};

/// The longest line read; a longer one is skipped (the record's command line
/// is the only long part, and `ARG_MAX` is 2 MiB by default).
const MAX_LINE: usize = 8 << 20;
/// Members kept per tree at most; more are skipped (logged).
const MAX_MEMBERS: usize = 1 << 16;

/// The watchdog as its own program: the owner's socket is standard input.
pub(super) fn run() -> ! {
    // Blocks no signal: its owner cleared the mask before `exec`
    // (`sys::exec_unblocked`).
    watch(std::io::stdin().lock())
}

/// The watchdog as a fork of the owner: leaves the owner's process group
/// (a terminal's Ctrl-C must not reach it) and its standard output.
pub(super) fn run_forked(socket: std::os::unix::net::UnixStream) -> ! {
    // Blocks nothing (the owner's SIGRTMAX included): it reads no signal.
    sys::unblock_all();
    let _ = sys::own_process_group();
    let _ = sys::stdout_to_null();
    watch(socket)
}

/// One tree the helper was told of.
#[derive(Debug)]
struct Tree {
    record: Record,
    ledger: PathBuf,
    members: HashSet<Identity>,
}

/// Every tree the helper was told of, by record id.
#[derive(Debug, Default)]
struct Trees(HashMap<String, Tree>);

impl Trees {
    /// Applies one line from the owner; `Err` says why it was skipped.
    fn apply(&mut self, line: &[u8]) -> Result<(), String> {
        let message = serde_json::from_slice::<Message>(line).map_err(|e| e.to_string())?;
        match message {
            Message::Watch { record, ledger } => {
                record.validate()?;
                if !ledger.is_absolute() {
                    return Err(format!("ledger {} is not absolute", ledger.display()));
                }
                let members = checked(&record.members)?;
                if members.len() > MAX_MEMBERS {
                    return Err(format!("{} members, over {MAX_MEMBERS}", members.len()));
                }
                let tree = Tree {
                    record: *record,
                    ledger,
                    members,
                };
                self.0.insert(tree.record.id.clone(), tree);
            }
            Message::Members { id, added, removed } => {
                let tree = self.0.get_mut(&id).ok_or("members of an unknown tree")?;
                let (added, removed) = (checked(&added)?, checked(&removed)?);
                tree.members.retain(|m| !removed.contains(m));
                let room = MAX_MEMBERS.saturating_sub(tree.members.len());
                if added.len() > room {
                    return Err(format!("{} members, over {MAX_MEMBERS}", added.len()));
                }
                tree.members.extend(added);
            }
            Message::Forget { id } => {
                self.0.remove(&id);
            }
            Message::Reset => self.0.clear(),
        }
        Ok(())
    }
}

/// The identities, if every pid is positive.
fn checked(members: &[Identity]) -> Result<HashSet<Identity>, String> {
    match members.iter().find(|m| m.pid <= 0) {
        Some(bad) => Err(format!("bad member pid {}", bad.pid)),
        None => Ok(members.iter().copied().collect()),
    }
}

/// Reads one line into `line` (without its newline). `None` at end of input
/// (or on a read error); `Some(false)` for a line over `max`, which is
/// skipped whole.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> Option<bool> {
    line.clear();
    let mut too_long = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok([]) => return (!line.is_empty() || too_long).then_some(!too_long),
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (&buffer[..end], end + 1),
            None => (buffer, buffer.len()),
        };
        let complete = done > chunk.len();
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        input.consume(done);
        if complete {
            return Some(!too_long);
        }
    }
}

fn watch(input: impl std::io::Read) -> ! {
    // The owner's terminal may hang up or be interrupted together with the
    // owner; the watchdog must outlive both to do its job.
    for signal in [Signal::HUP, Signal::INT, Signal::QUIT, Signal::PIPE] {
        let _ = sys::ignore(signal);
    }
    let mut trees = Trees::default();
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    while let Some(fits) = read_line(&mut input, &mut line, MAX_LINE) {
        let applied = if fits {
            trees.apply(&line)
        } else {
            Err(format!("a line over {MAX_LINE} bytes"))
        };
        if let Err(error) = applied {
            say(format_args!("ignoring a bad message: {error}"));
        }
    }
    // The owner is gone (or shut us down with nothing left to watch).
    for tree in trees.0.into_values() {
        let mut record = tree.record;
        record.members = tree.members.into_iter().collect();
        let action = ledger::terminate(&record);
        // Kept when members survive or the tree could not be judged
        // (`Skipped`): `corral reap` can retry.
        let done = match &action {
            ledger::SweepAction::Dropped => true,
            ledger::SweepAction::Killed { survivors, .. } => survivors.is_empty(),
            ledger::SweepAction::Skipped => false,
        };
        if done {
            let _ = ledger::remove_in(&tree.ledger, &record.id);
        } else {
            say(format_args!(
                "tree {} has survivors after SIGKILL: {action:?}",
                record.id
            ));
        }
    }
    std::process::exit(0);
}

/// One line on standard error; a closed one (the terminal gone, a reader
/// that stopped) is not fatal: the line is dropped.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "corral watchdog: {line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch_line(record: serde_json::Value, ledger: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"watch": {"record": record, "ledger": ledger}}))
            .expect("json")
    }

    fn sample() -> serde_json::Value {
        serde_json::to_value(Record::sample("tree-1")).expect("json")
    }

    /// Messages a hostile or broken writer could send: each is skipped with
    /// a reason, none is stored, none panics; a good one still applies.
    #[test]
    fn hostile_messages_are_skipped() {
        let mut trees = Trees::default();
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for (field, value) in [
            ("id", serde_json::json!("../../etc/passwd")),
            ("id", serde_json::json!("")),
            ("id", serde_json::json!("a/b")),
            ("owner", serde_json::json!({"pid": -1, "start_time": 1})),
            ("leader", serde_json::json!({"pid": 0, "start_time": 1})),
            ("members", serde_json::json!([{"pid": -5, "start_time": 1}])),
            (
                "cgroup",
                serde_json::json!("/sys/fs/cgroup/unified/init.scope"),
            ),
            ("cgroup", serde_json::json!("/sys/fs/cgroup/corral-1/../x")),
        ] {
            let mut record = sample();
            record[field] = value;
            cases.push(watch_line(record, "/run/corral"));
        }
        cases.push(watch_line(sample(), "relative/ledger"));
        cases.push(br#"{"members":{"id":"nope","added":[{"pid":1,"start_time":1}]}}"#.to_vec());
        cases.push(b"{\"watch\":".to_vec());
        cases.push(b"\xff\xfe".to_vec());
        cases.push(b"[]".to_vec());
        cases.push(br#"{"launch":{"program":"/bin/sh"}}"#.to_vec());
        for case in &cases {
            assert!(
                trees.apply(case).is_err(),
                "accepted {}",
                String::from_utf8_lossy(case)
            );
        }
        assert!(trees.0.is_empty(), "stored: {:?}", trees.0.keys());
        trees
            .apply(&watch_line(sample(), "/run/corral"))
            .expect("a good message applies");
        let bad_member = br#"{"members":{"id":"tree-1","added":[{"pid":0,"start_time":1}]}}"#;
        assert!(trees.apply(bad_member).is_err());
        assert!(trees.0["tree-1"].members.is_empty());
    }

    #[test]
    fn member_changes_apply_and_reset_forgets_all() {
        let mut trees = Trees::default();
        trees
            .apply(&watch_line(sample(), "/run/corral"))
            .expect("watch");
        let add = br#"{"members":{"id":"tree-1","added":[{"pid":7,"start_time":1},{"pid":8,"start_time":1}]}}"#;
        trees.apply(add).expect("added");
        let remove = br#"{"members":{"id":"tree-1","removed":[{"pid":7,"start_time":1}]}}"#;
        trees.apply(remove).expect("removed");
        let members: Vec<i32> = trees.0["tree-1"].members.iter().map(|m| m.pid).collect();
        assert_eq!(members, [8]);
        trees.apply(br#""reset""#).expect("reset");
        assert!(trees.0.is_empty());
    }

    #[test]
    fn over_long_lines_are_skipped_whole() {
        let input = format!("{}\nshort\n{}", "x".repeat(100), "y".repeat(5));
        let mut reader = BufReader::with_capacity(7, input.as_bytes());
        let mut line = Vec::new();
        assert_eq!(read_line(&mut reader, &mut line, 10), Some(false));
        assert_eq!(read_line(&mut reader, &mut line, 10), Some(true));
        assert_eq!(line, b"short");
        assert_eq!(read_line(&mut reader, &mut line, 10), Some(true));
        assert_eq!(line, b"yyyyy");
        assert_eq!(read_line(&mut reader, &mut line, 10), None);
    }
}
