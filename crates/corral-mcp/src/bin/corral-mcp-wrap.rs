//! `corral-mcp-wrap`: `corral mcp wrap` as a stand-alone binary, for tests
//! and benchmarks. Same options; the `corral` command is the real entry
//! point.

use std::{ffi::OsString, io::IsTerminal, path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, ValueEnum};

/// Relay an MCP client (stdin/stdout) to a stdio MCP server run as an owned
/// process tree, and end all of that tree when either side goes.
#[derive(Debug, Parser)]
#[command(name = "corral-mcp-wrap", version, after_help = exit_help())]
struct Args {
    /// After the server's stdin is closed, how long it may take to exit by
    /// itself before its tree gets SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "2s")]
    close_grace: Duration,
    /// From SIGTERM to SIGKILL.
    #[arg(short, long, value_name = "DURATION", value_parser = duration, default_value = "2s")]
    kill_after: Duration,
    /// After SIGKILL, wait at most this long, then exit and report survivors.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "1s")]
    final_bound: Duration,
    /// Drop frames longer than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = corral_mcp::frame::DEFAULT_MAX_FRAME_BYTES,
          value_parser = clap::value_parser!(usize))]
    max_frame_bytes: usize,
    /// How to contain the tree: auto picks cgroup, then subreaper, then group.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    backend: BackendArg,
    /// Write a JSON report to FILE when the relay ends (see docs/mcp.md).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Log lifecycle events to stderr (RUST_LOG overrides the filter).
    #[arg(short, long)]
    verbose: bool,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "SERVER_COMMAND",
          allow_hyphen_values = true)]
    command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BackendArg {
    Auto,
    Cgroup,
    Subreaper,
    Group,
}

fn main() -> ExitCode {
    // Re-entered as the library's owner-death watchdog: kills the server's
    // tree if this relay is killed before it can.
    corral::watchdog::hook();
    // Then: a parent that dies later is noticed against this pid.
    let parent = corral::host::parent_pid();
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(error) if error.exit_code() == 0 => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(corral_mcp::ExitStatus::Failed.code());
        }
    };
    init_logging(args.verbose);
    // This process does nothing but relay and supervise.
    corral::claim_subreaper();
    let mut options = corral_mcp::WrapOptions::new(args.command);
    options.close_grace = args.close_grace;
    options.kill_after = args.kill_after;
    options.final_bound = args.final_bound;
    options.max_frame_bytes = args.max_frame_bytes;
    options.report = args.report;
    options.handle_signals = true;
    options.parent = Some(parent);
    options.backend = match args.backend {
        BackendArg::Auto => corral::BackendChoice::Auto,
        BackendArg::Cgroup => corral::BackendChoice::Only(corral::Backend::Cgroup),
        BackendArg::Subreaper => corral::BackendChoice::Only(corral::Backend::Subreaper),
        BackendArg::Group => corral::BackendChoice::Only(corral::Backend::Group),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("corral mcp: starting the async runtime: {error}");
            return ExitCode::from(corral_mcp::ExitStatus::Failed.code());
        }
    };
    let result = runtime.block_on(corral_mcp::wrap(options));
    // A blocking read of a terminal stdin must not hold the exit.
    runtime.shutdown_background();
    corral::watchdog::shutdown();
    match result {
        Ok(exit) => ExitCode::from(exit.status.code()),
        Err(error) => {
            eprintln!("corral mcp: {}", corral_mcp::error_chain(&error));
            ExitCode::from(error.exit_status().code())
        }
    }
}

fn init_logging(verbose: bool) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => spec,
        _ if verbose => "corral=debug,corral_mcp=debug".to_owned(),
        _ => return,
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::builder().parse_lossy(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// A duration: a decimal number with an optional unit `ms`, `s` (default),
/// `m` or `h`.
fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit {unit:?}: use ms, s, m or h")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| "not a duration: give e.g. 2s, 500ms, 1.5".to_owned())?;
    Duration::try_from_secs_f64(value * scale).map_err(|error| error.to_string())
}

fn exit_help() -> String {
    let mut text = String::from("Exit status:\n");
    for (code, meaning) in corral_mcp::EXIT_TABLE {
        text.push_str(&format!("  {code:<6} {meaning}\n"));
    }
    text
}
