//! `corral`: run a command as an owned process tree and end all of it on
//! time. A drop-in for `timeout(1)`; see `corral run --help`.

#![forbid(unsafe_code)]

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
mod generate;
mod getopt;
mod gnu_duration;
mod kit;
mod ledger;
mod mcp;
mod run;
mod text;
mod timeout;
mod user;

use std::process::ExitCode;

use clap::Parser;

use crate::{
    cli::{Cli, Command, McpCommand},
    kit::{exit::Status, startup},
};

fn main() -> ExitCode {
    let parent = startup::begin();
    if let Some(name) = timeout::invoked_as() {
        return timeout::main(name, parent);
    }
    let args = match run::gnu::rewrite(std::env::args_os().collect()) {
        Ok(args) => args,
        Err(message) => {
            say!("{message}");
            return ExitCode::from(Status::Failed.code());
        }
    };
    // `corral run`: the watchdog is forked before the argument parse grows
    // the heap, and `run` is parsed alone (BENCHMARKS.md section 3).
    let running = args.get(1).is_some_and(|first| first == "run");
    if running {
        run::prepare();
    }
    if let Some(run) = cli::run_alone(&args) {
        return startup::exit_code(run::main(&run, parent));
    }
    if running {
        // The whole parse answers (an error, --help): no tree, no watchdog.
        corral::watchdog::shutdown();
    }
    let cli = match Cli::try_parse_from(args) {
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
    startup::exit_code(match cli.command {
        Command::Run(args) => run::main(&args, parent),
        Command::Mcp {
            command: McpCommand::Wrap(args),
        } => mcp::wrap(args, parent),
        Command::Mcp {
            command: McpCommand::Call(args),
        } => mcp::call(args, parent),
        Command::Mcp {
            command: McpCommand::List(args),
        } => mcp::list(args, parent),
        Command::Mcp {
            command: McpCommand::Serve(args),
        } => mcp::serve(args, parent),
        Command::Mcp {
            command: McpCommand::Task(command),
        } => mcp::task(command, parent),
        Command::Mcp {
            command: McpCommand::Guard(command),
        } => mcp::guard(command),
        Command::Capabilities { json } => capabilities::main(json),
        Command::Ps(args) => ledger::ps(&args),
        Command::Reap {
            dry_run,
            ledger: args,
        } => ledger::reap(&args, dry_run),
        Command::Completions { shell } => cli::completions(shell),
        Command::Generate { what, dir } => generate::main(what, &dir),
    })
}
