//! `corral-mcp-wrap`: `corral mcp wrap` as a stand-alone binary, for this
//! crate's tests and benchmarks. The `corral` command is the real entry point.

use std::process::ExitCode;

use clap::Parser;

/// Relay an MCP client (stdin/stdout) to a stdio MCP server run as an owned
/// process tree, and end all of that tree when either side goes.
#[derive(Debug, Parser)]
#[command(name = "corral-mcp-wrap", version)]
struct Cli {
    #[command(flatten)]
    args: corral_mcp::cli::WrapArgs,
}

fn main() -> ExitCode {
    // Re-entered as the library's owner-death watchdog: kills the server's
    // tree if this relay is killed before it can.
    corral::watchdog::hook();
    // Then: a parent that dies later is noticed against this pid.
    let parent = corral::host::parent_pid();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if error.exit_code() == 0 => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(corral_mcp::ExitStatus::Failed.code());
        }
    };
    corral_mcp::cli::run(cli.args, parent)
}
