//! `corral mcp guard status|on|off`: the arguments become a
//! [`corral_mcp::guard::Selection`], the library reads and changes the
//! files, and this prints what it found or did.
//!
//! `status` prints one line per entry (or, with `--json`, one document of
//! `"version": 1`); `on` and `off` print one line per entry and per file
//! written (with `--dry-run`, a unified diff of each file instead of
//! writing it). Files left alone are named on stderr, and the exit status
//! is then 1 ([`exit::GUARD`](crate::kit::exit::GUARD)).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Parser as _;
use corral_mcp::guard::{
    self, Action, Done, Listed, Outcome, Places, Problem, Selection, Settings, State,
};
use serde_json::json;

use crate::{
    cli::{Cli, GuardCommand, GuardSelect},
    kit::exit::Status,
};

/// Runs `corral mcp guard COMMAND`.
///
/// # Errors
/// corral itself failed (exit status 125): a bad option, `HOME` unset, no
/// project directory.
pub fn guard(command: GuardCommand) -> anyhow::Result<Status> {
    match command {
        GuardCommand::Status(args) => {
            let (settings, selection) = setup(&args.hosts, &args.servers, args.project.as_deref())?;
            let (listed, problems) = guard::status(&settings, &selection);
            let mut problems = problems;
            problems.extend(unmatched(
                &selection,
                listed.iter().map(|l| l.name.as_str()),
            ));
            if args.json {
                print_json(&settings, &listed, &problems);
            } else {
                print_status(&settings, &listed);
            }
            Ok(finish(&problems))
        }
        GuardCommand::On(args) => {
            check_wrap_options(&args.wrap_options)?;
            let (settings, selection) = select_with(&args.select)?;
            if let Some(warning) = guard::path_warning(&settings.this) {
                say!("warning: this corral, {}, {warning}", settings.this);
            }
            let outcome = guard::change(
                &settings,
                &selection,
                &Action::On(args.wrap_options),
                args.select.dry_run,
            );
            Ok(print_outcome(&selection, outcome, args.select.dry_run))
        }
        GuardCommand::Off(select) => {
            let (settings, selection) = select_with(&select)?;
            let outcome = guard::change(&settings, &selection, &Action::Off, select.dry_run);
            Ok(print_outcome(&selection, outcome, select.dry_run))
        }
    }
}

fn select_with(select: &GuardSelect) -> anyhow::Result<(Settings, Selection)> {
    setup(&select.hosts, &select.servers, select.project.as_deref())
}

fn setup(
    hosts: &[String],
    servers: &[String],
    project: Option<&Path>,
) -> anyhow::Result<(Settings, Selection)> {
    let places = Places::from_env(project).map_err(anyhow::Error::msg)?;
    let this = std::env::current_exe()
        .context("cannot tell where this corral is (/proc/self/exe)")?
        .to_string_lossy()
        .into_owned();
    let settings = Settings {
        state: Settings::state_dir(&places.home),
        places,
        this,
    };
    let selection = Selection {
        // clap checked the names.
        hosts: hosts.iter().filter_map(|id| guard::host(id)).collect(),
        servers: servers.to_vec(),
    };
    Ok((settings, selection))
}

/// The WRAP OPTIONS must be `corral mcp wrap`'s own.
fn check_wrap_options(options: &[String]) -> anyhow::Result<()> {
    if options.iter().any(|o| o == "--") {
        bail!(
            "WRAP OPTIONS hold a `--`: give only corral mcp wrap's options after the first `--`, e.g. -- --kill-after 5s"
        );
    }
    let mut argv = vec!["corral", "mcp", "wrap"];
    argv.extend(options.iter().map(String::as_str));
    argv.extend(["--", "true"]);
    if let Err(error) = Cli::try_parse_from(argv) {
        let line = crate::cli::error_line(&error);
        bail!(
            "WRAP OPTIONS: {}; they are corral mcp wrap's options (see corral mcp wrap --help), e.g. -- --kill-after 5s",
            line.split(';').next().unwrap_or(&line)
        );
    }
    Ok(())
}

/// A `--server` that matched no entry, as a problem.
fn unmatched<'a>(
    selection: &Selection,
    found: impl Iterator<Item = &'a str> + Clone,
) -> Vec<Problem> {
    selection
        .servers
        .iter()
        .filter(|name| !found.clone().any(|f| f == name.as_str()))
        .map(|name| Problem {
            file: PathBuf::from("--server"),
            message: format!(
                "no entry named {name} in the selected hosts' files; see corral mcp guard status"
            ),
        })
        .collect()
}

fn finish(problems: &[Problem]) -> Status {
    for problem in problems {
        say!("{}: {}", problem.file.display(), problem.message);
    }
    if problems.is_empty() {
        Status::Exited(0)
    } else {
        Status::Exited(1)
    }
}

/// One entry's command line for people: the words joined, each quoted
/// when it holds a space.
fn shown(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if w.is_empty() || w.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("{w:?}")
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a guarded server's ledger is when its host clears the environment
/// (Codex): no `XDG_RUNTIME_DIR` or `CORRAL_LEDGER_DIR` there.
fn cleared_ledger() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        PathBuf::from("/run/corral")
    } else {
        PathBuf::from(format!(
            "/tmp/corral-{}",
            rustix::process::geteuid().as_raw()
        ))
    }
}

fn print_status(settings: &Settings, listed: &[Listed]) {
    let mut file: Option<&Path> = None;
    let mut out = String::new();
    for entry in listed {
        if file != Some(entry.file.as_path()) {
            file = Some(&entry.file);
            out.push_str(&format!("{} ({})\n", entry.file.display(), entry.host));
        }
        let what = match &entry.state {
            State::Remote => String::from("(remote)"),
            State::Invalid(why) => format!("({why})"),
            State::Wrapped(by) => format!("behind {by}: {}", shown(&entry.argv)),
            State::Guarded(guard) | State::OtherCorral(guard) => shown(&guard.inner),
            State::Unguarded => shown(&entry.argv),
        };
        let mut line = format!(
            "  {:<8} {:<13} {}  {what}",
            entry.scope.name(),
            entry.state.name(),
            entry.name
        );
        if !entry.env.is_empty() {
            line.push_str(&format!("  [env: {}]", entry.env.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
        if let State::Guarded(guard) | State::OtherCorral(guard) = &entry.state {
            if matches!(entry.state, State::OtherCorral(_)) {
                out.push_str(&format!("    guarded by {}\n", guard.corral));
            }
            if let Some(warning) = guard::path_warning(&guard.corral) {
                say!(
                    "warning: {} {}: the corral it names, {}, {warning}",
                    entry.file.display(),
                    entry.name,
                    guard.corral
                );
            }
        }
    }
    if listed.is_empty() {
        out.push_str("no MCP server entries in the known hosts' files\n");
    }
    let here = corral::ledger::dir();
    let cleared = cleared_ledger();
    out.push_str(&format!(
        "\nThis corral: {}\nBackups: {}\nLedger of guarded servers: {} (under a cleared environment, as Codex starts servers: {}; pass CORRAL_LEDGER_DIR through env_vars to choose)\n",
        settings.this,
        settings.backups().display(),
        here.display(),
        cleared.display()
    ));
    print(&out);
}

fn print_json(settings: &Settings, listed: &[Listed], problems: &[Problem]) {
    let entries: Vec<_> = listed
        .iter()
        .map(|entry| {
            let guard = match &entry.state {
                State::Guarded(guard) | State::OtherCorral(guard) => json!({
                    "corral": guard.corral,
                    "options": guard.options,
                    "server": guard.inner,
                    "warning": guard::path_warning(&guard.corral),
                }),
                _ => serde_json::Value::Null,
            };
            json!({
                "host": entry.host,
                "file": entry.file,
                "scope": entry.scope.name(),
                "name": entry.name,
                "state": entry.state.name(),
                "command": entry.argv,
                "env": entry.env,
                "cwd": entry.cwd,
                "wrapper": match &entry.state { State::Wrapped(by) => Some(by.as_str()), _ => None },
                "invalid": match &entry.state { State::Invalid(why) => Some(why.as_str()), _ => None },
                "guard": guard,
            })
        })
        .collect();
    let document = json!({
        "version": 1,
        "corral": settings.this,
        "corral_warning": guard::path_warning(&settings.this),
        "project": settings.places.project,
        "backups": settings.backups(),
        "ledger": {
            "here": corral::ledger::dir(),
            "cleared_environment": cleared_ledger(),
        },
        "entries": entries,
        "problems": problems.iter().map(|p| json!({"file": p.file, "message": p.message})).collect::<Vec<_>>(),
    });
    print(&format!(
        "{}\n",
        serde_json::to_string_pretty(&document).unwrap_or_default()
    ));
}

fn print_outcome(selection: &Selection, outcome: Outcome, dry_run: bool) -> Status {
    let mut out = String::new();
    if dry_run {
        for written in &outcome.files {
            let name = written.file.display().to_string();
            out.push_str(
                &similar::TextDiff::from_lines(&written.shown.0, &written.shown.1)
                    .unified_diff()
                    .context_radius(3)
                    .header(&name, &name)
                    .to_string(),
            );
        }
    }
    for changed in &outcome.entries {
        let (verb, why) = match (&changed.done, dry_run) {
            (Done::Guarded, false) => ("guarded", None),
            (Done::Guarded, true) => ("would guard", None),
            (Done::Unguarded, false) => ("unguarded", None),
            (Done::Unguarded, true) => ("would unguard", None),
            (Done::Left(why), _) => ("left", Some(why)),
        };
        out.push_str(&format!(
            "{verb} {} {} {} ({})",
            changed.host,
            changed.scope.name(),
            changed.name,
            changed.file.display()
        ));
        if let Some(why) = why {
            out.push_str(&format!(": {why}"));
        }
        out.push('\n');
    }
    for written in outcome.files.iter().filter(|w| w.backup.is_some()) {
        out.push_str(&format!(
            "wrote {} (its original bytes: {})\n",
            written.file.display(),
            written.backup.as_deref().unwrap_or(Path::new("")).display()
        ));
    }
    if outcome.entries.is_empty() {
        out.push_str("no MCP server entries matched\n");
    }
    print(&out);
    let mut problems = outcome.problems;
    problems.extend(unmatched(
        selection,
        outcome.entries.iter().map(|c| c.name.as_str()),
    ));
    finish(&problems)
}

/// Writes to standard output; a closed one is not an error worth more
/// than the exit status.
fn print(text: &str) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_options_are_checked_as_corral_mcp_wrap_parses_them() {
        assert!(check_wrap_options(&[]).is_ok());
        assert!(check_wrap_options(&["--kill-after".into(), "5s".into()]).is_ok());
        let error = check_wrap_options(&["--kill-afterr".into()]).expect_err("unknown");
        assert!(
            error.to_string().contains("corral mcp wrap --help"),
            "{error}"
        );
        assert!(check_wrap_options(&["--".into()]).is_err());
    }

    #[test]
    fn every_exit_row_is_reachable() {
        assert_eq!(finish(&[]).code(), 0);
        let problem = Problem {
            file: PathBuf::from("/x"),
            message: String::from("left alone"),
        };
        assert_eq!(finish(&[problem]).code(), 1);
        assert_eq!(Status::Failed.code(), 125);
        assert_eq!(
            crate::kit::exit::GUARD
                .rows
                .iter()
                .map(|(code, _)| *code)
                .collect::<Vec<_>>(),
            ["0", "1", "125"]
        );
    }
}
