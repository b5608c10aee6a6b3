//! `corral`: run a command as an owned process tree and end all of it on
//! time. A drop-in for `timeout(1)`; see `corral run --help`.

/// Writes one line starting `corral: ` to standard error. Never panics: a
/// closed standard error must not crash corral while it owns a tree.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "corral: {}", format_args!($($arg)*));
    }};
}

mod capabilities;
mod cli;
mod exit;
mod ledger;
mod report;
mod run;
mod signals;
mod text;
mod user;

use std::{io::IsTerminal, process::ExitCode};

use clap::Parser;

use crate::{
    cli::{Cli, Command, McpCommand},
    exit::Status,
};

fn main() -> ExitCode {
    // Started as our own watchdog (`corral __corral-watchdog`): runs it and
    // never returns. Otherwise records that this executable is the watchdog
    // that ends the tree if corral itself is killed.
    corral::watchdog::hook();
    // A parent that dies later is noticed against this pid.
    let parent = corral::host::parent_pid();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if error.exit_code() == 0 => {
            // --help, --version.
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            say!("{}", cli::error_line(&error));
            return ExitCode::from(Status::Failed.code());
        }
    };
    let result = match cli.command {
        Command::Mcp {
            command: McpCommand::Wrap(args),
        } => {
            start_watchdog();
            return corral_mcp::cli::run(args, parent);
        }
        Command::Run(args) => {
            // Before the watchdog fork and the spawn: the command must not
            // inherit the report's descriptor.
            report::keep_from_command(args.report_fd);
            start_watchdog();
            init_logging(args.verbose);
            run::main(&args, parent)
        }
        Command::Capabilities { json } => capabilities::main(json),
        Command::Ps(args) => ledger::ps(&args),
        Command::Reap {
            dry_run,
            ledger: args,
        } => ledger::reap(&args, dry_run),
        Command::Completions { shell } => cli::completions(shell),
    };
    match result {
        Ok(status) => ExitCode::from(status.code()),
        Err(error) => {
            say!("{error:#}");
            ExitCode::from(Status::Failed.code())
        }
    }
}

/// Starts the owner-death watchdog by forking, while corral is still
/// single-threaded: much cheaper than executing a second copy of corral. If
/// that fails, the first spawn executes one instead.
fn start_watchdog() {
    if let Err(reason) = corral::watchdog::fork_now() {
        tracing::debug!(%reason, "watchdog not forked early");
    }
}

/// Logs go to standard error: `corral=debug` with `-v`, `RUST_LOG` if set,
/// nothing otherwise (no subscriber at all, which keeps start-up cheap).
fn init_logging(verbose: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec,
        _ if verbose => "corral=debug".to_owned(),
        _ => return,
    };
    let filter = tracing_subscriber::EnvFilter::builder().parse_lossy(filter);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
