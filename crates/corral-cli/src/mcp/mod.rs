//! `corral mcp wrap`: the arguments become [`corral_mcp::WrapOptions`], the
//! library relays, and what it did ([`corral_mcp::WrapExit`]) becomes the
//! exit status and the report, with the kit.
//!
//! `corral mcp call`, `corral mcp list` and `corral mcp task get|cancel`
//! (the client side) live in `call`: `session` connects, runs one request under the signals and
//! always tears the server's tree down; `output` prints the answer or the
//! JSON envelope.
//!
//! `corral mcp serve` (corral as the server) lives in `serve`.
//!
//! `corral mcp guard` (every host's servers put behind `corral mcp wrap`)
//! lives in `guard`.

mod call;
mod guard;
mod output;
mod report;
mod serve;
mod session;

pub use call::{call, list, task};
pub use guard::guard;
pub use serve::serve;

use std::time::Instant;

use corral_mcp::WrapOptions;

use crate::{
    cli::WrapArgs,
    kit::{
        exit::Status,
        report::tell_leftovers,
        signals::{self, Watch},
        sink::{self, Sink},
        startup,
    },
};

/// Runs the relay as a dedicated supervisor. `parent` is corral's parent pid
/// as read first thing at start-up (its death counts as `SIGTERM`).
///
/// # Errors
/// When corral itself fails before the relay starts (exit status 125).
pub fn wrap(args: WrapArgs, parent: i32) -> anyhow::Result<Status> {
    let sink = startup::supervisor(&args.report, args.verbose)?;
    startup::supervise(relay(args, parent, sink))
}

async fn relay(args: WrapArgs, parent: i32, sink: Option<Sink>) -> anyhow::Result<Status> {
    let started = Instant::now();
    let mut options = WrapOptions::new(args.command.clone());
    options.close_grace = args.tree.close_grace;
    options.kill_after = args.tree.kill_after;
    options.final_bound = args.tree.final_bound;
    options.max_frame_bytes = args.max_frame_bytes;
    options.backend = args.tree.backend;
    options.limits = args.tree.limits.limits();
    let result = match signals::install(&signals::WRAP, parent) {
        Err(error) => Err((Status::Failed, error)),
        Ok(Watch::Armed(watch)) => corral_mcp::wrap(options, watch)
            .await
            .map_err(|error| (status_of(&error), anyhow::Error::new(error))),
        Ok(Watch::ParentGone) => Err((
            Status::Interrupted(corral::Signal::TERM),
            anyhow::anyhow!(
                "the parent process (the MCP client) is already gone; the server was not started"
            ),
        )),
    };
    let (status, report) = match result {
        Ok(exit) => {
            let status = Status::of_wrap(
                exit.ending,
                exit.received,
                exit.finished.outcome,
                exit.finished.leader,
            );
            tell_leftovers(
                &exit.finished.report,
                "of the server ",
                "",
                args.tree.final_bound,
            );
            let report = report::of_exit(&args.command, &exit, status, started.elapsed());
            (status, report)
        }
        Err((status, error)) => {
            let message = format!("{error:#}");
            say!("{message}");
            let report = report::of_error(&args.command, message, status, started.elapsed());
            (status, report)
        }
    };
    sink::deliver(sink, &report);
    Ok(status)
}

/// The exit status of a relay that failed.
fn status_of(error: &corral_mcp::WrapError) -> Status {
    match error {
        corral_mcp::WrapError::Spawn(error) => Status::of_spawn_error(error),
        _ => Status::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_errors_map_to_their_rows() {
        let spawn = |failure| {
            corral_mcp::WrapError::Spawn(corral::Error::Spawn {
                program: "x".into(),
                failure,
                source: std::io::ErrorKind::NotFound.into(),
            })
        };
        assert_eq!(
            status_of(&spawn(corral::SpawnFailure::NotFound)).code(),
            127
        );
        assert_eq!(
            status_of(&spawn(corral::SpawnFailure::NotExecutable)).code(),
            126
        );
        assert_eq!(status_of(&spawn(corral::SpawnFailure::Other)).code(), 125);
        assert_eq!(status_of(&corral_mcp::WrapError::NoCommand).code(), 125);
    }
}
