//! `corral ps` and `corral reap`: the crash ledger from the command line.

use std::io::Write;

use anyhow::Context;
use corral::ledger::{self, Owner, SweepAction, Unreadable};

use crate::{cli::LedgerArgs, kit::exit::Status, text::printable};

fn dir(args: &LedgerArgs) -> std::path::PathBuf {
    args.ledger.clone().unwrap_or_else(ledger::dir)
}

fn warn_unreadable(skipped: &[Unreadable]) {
    for file in skipped {
        say!(
            "skipping ledger file {}: {}",
            printable(&file.path.to_string_lossy()),
            printable(&file.reason)
        );
    }
}

fn pids(members: &[corral::ProcessInfo]) -> String {
    let pids: Vec<String> = members.iter().map(|m| m.pid.to_string()).collect();
    if pids.is_empty() {
        "-".to_owned()
    } else {
        pids.join(",")
    }
}

/// Lists the live trees: owner, whether it is alive, age, members, command.
///
/// # Errors
/// If the ledger directory is not trusted (it names the path, its owner and
/// mode, and the fix), or standard output cannot be written.
pub fn ps(args: &LedgerArgs) -> anyhow::Result<Status> {
    let (entries, skipped) = ledger::list(&dir(args))?;
    warn_unreadable(&skipped);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &entries).context("writing the list")?;
        writeln!(out).context("writing the list")?;
        return Ok(Status::Exited(0));
    }
    writeln!(
        out,
        "{:<24} {:>7} {:<10} {:>6} {:<9} {:<16} COMMAND",
        "ID", "OWNER", "STATE", "AGE", "BACKEND", "MEMBERS"
    )
    .context("writing the list")?;
    for entry in &entries {
        let state = match entry.owner {
            Owner::Alive => "alive",
            Owner::Dead => "orphaned",
            Owner::OtherBoot => "stale",
            Owner::OtherNamespace => "elsewhere",
            Owner::Unknown => "unknown",
        };
        writeln!(
            out,
            "{:<24} {:>7} {:<10} {:>5}s {:<9} {:<16} {}",
            entry.record.id,
            entry.record.owner.pid,
            state,
            entry.age_secs,
            entry.record.backend.name(),
            pids(&entry.members),
            printable(&entry.record.command)
        )
        .context("writing the list")?;
    }
    Ok(Status::Exited(0))
}

/// Ends the trees whose owner died; exits 1 if any member survived.
///
/// # Errors
/// If the ledger directory is not trusted (nothing is read or signalled), or
/// standard output cannot be written.
pub fn reap(args: &LedgerArgs, dry_run: bool) -> anyhow::Result<Status> {
    let sweep = ledger::sweep(&dir(args), dry_run, |_| true)?;
    warn_unreadable(&sweep.skipped);
    let survivors = sweep
        .actions
        .iter()
        .any(|(_, action)| matches!(action, SweepAction::Killed { survivors, .. } if !survivors.is_empty()));
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &sweep).context("writing the result")?;
        writeln!(out).context("writing the result")?;
    } else {
        for (record, action) in &sweep.actions {
            let line = match action {
                SweepAction::Skipped => format!(
                    "left alone (owner {} is alive, in another PID namespace, or unreadable)",
                    record.owner.pid
                ),
                SweepAction::Dropped => {
                    "dropped: nothing of it was left, nothing signalled".to_owned()
                }
                SweepAction::Killed { members, .. } if dry_run => {
                    format!("would end {}", pids(members))
                }
                SweepAction::Killed { members, survivors } if survivors.is_empty() => {
                    format!("ended {}", pids(members))
                }
                SweepAction::Killed { survivors, .. } => {
                    format!("SURVIVORS after SIGKILL: {}", pids(survivors))
                }
            };
            // The id is a plain file name (validated); the command line is
            // whatever the record says.
            writeln!(out, "{} {}: {line}", record.id, printable(&record.command))
                .context("writing the result")?;
        }
        if sweep.actions.is_empty() {
            writeln!(
                out,
                "no trees in {}",
                printable(&dir(args).to_string_lossy())
            )
            .context("writing the result")?;
        }
    }
    Ok(Status::Exited(u8::from(survivors)))
}
