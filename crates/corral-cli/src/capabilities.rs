//! `corral capabilities`: which containment backends and resource limits
//! this machine offers.

use std::io::Write;

use anyhow::Context;

use crate::kit::exit::Status;

/// Prints the probe of every backend to standard output, as a table or as
/// JSON (the library's `Capabilities`, serialised).
///
/// # Errors
/// If standard output cannot be written.
pub fn main(json: bool) -> anyhow::Result<Status> {
    // As `corral run` does, so the answer is the one `run` would get.
    corral::settings::Settings::new().subreaper().apply();
    let capabilities = corral::capabilities();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &capabilities)
            .context("writing the capabilities")?;
        writeln!(out).context("writing the capabilities")?;
        return Ok(Status::Exited(0));
    }
    for status in &capabilities.backends {
        let available = if status.available {
            "available"
        } else {
            "unavailable"
        };
        writeln!(
            out,
            "{:<10} {:<12} {}",
            status.backend.name(),
            available,
            status.detail
        )
        .context("writing the capabilities")?;
    }
    let pidfd = if capabilities.pidfd { "yes" } else { "no" };
    writeln!(
        out,
        "\nauto picks: {}\npidfd:      {pidfd}\nwatchdog:   {}",
        capabilities.auto, capabilities.watchdog
    )
    .context("writing the capabilities")?;
    writeln!(out, "\nlimits (cgroup backend only; see docs/limits.md):")
        .context("writing the capabilities")?;
    for status in &capabilities.limits {
        let controller = status
            .controller
            .map_or_else(|| "cpu.stat".to_owned(), |c| format!("{c} controller"));
        let line = if status.available {
            format!(
                "{:<14} available    ({controller})",
                status.limit.to_string()
            )
        } else {
            format!(
                "{:<14} unavailable  {}",
                status.limit.to_string(),
                status.detail
            )
        };
        writeln!(out, "{line}").context("writing the capabilities")?;
    }
    Ok(Status::Exited(0))
}
