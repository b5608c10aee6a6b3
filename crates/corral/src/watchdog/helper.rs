//! The watchdog process itself: reads what to watch from standard input (the
//! owner's socket) until end-of-file, which means the owner is gone; then kills
//! every tree it still knows of, removes their ledger records, and exits.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
};

use super::Message;
use crate::{Signal, ledger, sys};

/// The watchdog as its own program: the owner's socket is standard input.
pub(super) fn run() -> ! {
    watch(std::io::stdin().lock())
}

/// The watchdog as a fork of the owner: leaves the owner's process group
/// (a terminal's Ctrl-C must not reach it) and its standard output.
pub(super) fn run_forked(socket: std::os::unix::net::UnixStream) -> ! {
    let _ = sys::own_process_group();
    let _ = sys::stdout_to_null();
    watch(socket)
}

fn watch(input: impl std::io::Read) -> ! {
    // The owner's terminal may hang up or be interrupted together with the
    // owner; the watchdog must outlive both to do its job.
    for signal in [Signal::HUP, Signal::INT, Signal::QUIT, Signal::PIPE] {
        let _ = sys::ignore(signal);
    }
    let mut watched: HashMap<String, Message> = HashMap::new();
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        match serde_json::from_slice::<Message>(&line) {
            Ok(Message::Forget { id }) => {
                watched.remove(&id);
            }
            Ok(message @ Message::Watch { .. }) => {
                if let Message::Watch { record, .. } = &message {
                    watched.insert(record.id.clone(), message);
                }
            }
            Err(error) => eprintln!("corral watchdog: ignoring a bad message: {error}"),
        }
    }
    // The owner is gone (or shut us down with nothing left to watch).
    for message in watched.values() {
        if let Message::Watch {
            record,
            ledger: dir,
        } = message
        {
            let action = ledger::terminate(record);
            // Kept when members survive or the tree could not be judged
            // (`Skipped`): `corral reap` can retry.
            let done = match &action {
                ledger::SweepAction::Dropped => true,
                ledger::SweepAction::Killed { survivors, .. } => survivors.is_empty(),
                ledger::SweepAction::Skipped => false,
            };
            if done {
                let _ = ledger::remove_in(dir, &record.id);
            } else {
                eprintln!(
                    "corral watchdog: tree {} has survivors after SIGKILL: {action:?}",
                    record.id
                );
            }
        }
    }
    std::process::exit(0);
}
