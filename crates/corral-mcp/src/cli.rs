//! `corral mcp wrap`'s command line, shared by the `corral` command and the
//! `corral-mcp-wrap` test binary (feature `cli`).

use std::{ffi::OsString, io::IsTerminal, path::PathBuf, process::ExitCode, time::Duration};

use clap::Args;

/// Relay an MCP client (stdin/stdout) to a stdio MCP server run as an owned
/// process tree, and end all of that tree when either side goes.
#[derive(Debug, Args)]
#[command(after_help = exit_help())]
pub struct WrapArgs {
    /// After the server's stdin is closed, how long it may take to exit by
    /// itself before its tree gets SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = corral::duration::parse, default_value = "2s")]
    pub close_grace: Duration,
    /// From SIGTERM to SIGKILL.
    #[arg(short, long, value_name = "DURATION", value_parser = corral::duration::parse, default_value = "2s")]
    pub kill_after: Duration,
    /// After SIGKILL, wait at most this long, then exit and report survivors.
    #[arg(long, value_name = "DURATION", value_parser = corral::duration::parse, default_value = "1s")]
    pub final_bound: Duration,
    /// Drop frames longer than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = crate::frame::DEFAULT_MAX_FRAME_BYTES,
          value_parser = clap::value_parser!(usize))]
    pub max_frame_bytes: usize,
    /// How to contain the tree: auto (cgroup, then subreaper, then group),
    /// cgroup, subreaper or group.
    #[arg(long, value_name = "BACKEND", default_value = "auto", value_parser = clap::value_parser!(corral::BackendChoice))]
    pub backend: corral::BackendChoice,
    /// Write a JSON report to FILE when the relay ends (see docs/mcp.md).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Log lifecycle events to stderr (RUST_LOG overrides the filter).
    #[arg(short, long)]
    pub verbose: bool,
    /// The server command and its arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "SERVER_COMMAND",
          allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Runs the relay as a dedicated process: `parent` is this process's parent
/// pid read at start-up (its death counts as SIGTERM). Call
/// `corral::watchdog::hook()` first thing in `main`.
pub fn run(args: WrapArgs, parent: i32) -> ExitCode {
    init_logging(args.verbose);
    // This process does nothing but relay and supervise.
    corral::claim_subreaper();
    let mut options = crate::WrapOptions::new(args.command);
    options.close_grace = args.close_grace;
    options.kill_after = args.kill_after;
    options.final_bound = args.final_bound;
    options.max_frame_bytes = args.max_frame_bytes;
    options.report = args.report;
    options.handle_signals = true;
    options.parent = Some(parent);
    options.backend = args.backend;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("corral mcp: starting the async runtime: {error}");
            return ExitCode::from(crate::ExitStatus::Failed.code());
        }
    };
    let result = runtime.block_on(crate::wrap(options));
    // A blocking read of a terminal stdin must not hold the exit.
    runtime.shutdown_background();
    corral::watchdog::shutdown();
    match result {
        Ok(exit) => ExitCode::from(exit.status.code()),
        Err(error) => {
            eprintln!("corral mcp: {}", crate::error_chain(&error));
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
        .try_init()
        .ok();
}

fn exit_help() -> String {
    let mut text = String::from("Exit status:\n");
    for (code, meaning) in crate::EXIT_TABLE {
        text.push_str(&format!("  {code:<6} {meaning}\n"));
    }
    text
}
