//! Logs of every subcommand go to standard error (standard output belongs to
//! the command, and to MCP frames).

use std::io::IsTerminal;

/// The filter of `-v`: the library's and the MCP relay's debug events.
const VERBOSE: &str = "corral=debug,corral_mcp=debug";

/// Installs a subscriber writing to standard error: `RUST_LOG` if set, else
/// [`VERBOSE`] with `-v`, else none at all (which keeps start-up cheap).
pub fn init(verbose: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec,
        _ if verbose => VERBOSE.to_owned(),
        _ => return,
    };
    let filter = tracing_subscriber::EnvFilter::builder().parse_lossy(filter);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
