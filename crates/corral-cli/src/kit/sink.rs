//! Where a report goes (`--report FILE` or `--report-fd N`), for every
//! subcommand: opened before the command starts, so that a bad path fails
//! early (125) instead of after the run; written once at the end.
//!
//! A regular file is replaced atomically: the report goes to a sibling
//! temporary file (created with `O_EXCL`), which is renamed over the path, so
//! a reader never sees half a report. Where the directory does not allow
//! that, and for anything that is not a regular file (`/dev/stderr`, a FIFO)
//! or a descriptor, the report is written in place, in one `write_all`.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

/// `--report` and `--report-fd`, the same for every supervising subcommand.
#[derive(Debug, Default, Args)]
pub struct ReportArgs {
    /// Write a JSON report to FILE when the command ends, replacing FILE
    /// atomically (see docs/report.md, docs/mcp.md).
    #[arg(long, value_name = "FILE", conflicts_with = "report_fd")]
    pub report: Option<PathBuf>,

    /// Write the JSON report to this open file descriptor instead.
    #[arg(long, value_name = "N")]
    pub report_fd: Option<u32>,
}

/// An open report destination.
#[derive(Debug)]
pub struct Sink {
    /// What to name in messages: the path or the descriptor.
    name: String,
    /// The path to rename over, if it is a regular file.
    replace: Option<PathBuf>,
    /// The destination as opened: written in place if the rename cannot be
    /// done.
    file: File,
}

/// Keeps `--report-fd N` from the command: close-on-exec, set before the
/// watchdog is forked and the command spawned, so nothing but corral can
/// write into the report. Standard input, output and error (0-2) are the
/// command's own streams and are left alone. A descriptor that is not open
/// is left for [`Sink::open`] to refuse.
pub fn keep_from_command(fd: Option<u32>) {
    if let Some(fd) = fd
        .and_then(|fd| i32::try_from(fd).ok())
        .filter(|&fd| fd > 2)
        && let Err(error) = corral::host::close_on_exec(fd)
    {
        tracing::debug!(fd, %error, "cannot set close-on-exec on the report descriptor");
    }
}

impl Sink {
    /// Opens `--report FILE` (created or truncated) or `--report-fd N`.
    ///
    /// # Errors
    /// If the file cannot be created or the descriptor is not open for
    /// writing.
    pub fn open(path: Option<&Path>, fd: Option<u32>) -> anyhow::Result<Option<Self>> {
        if let Some(path) = path {
            let file = File::create(path).with_context(|| {
                format!(
                    "cannot create the report file {} (--report)",
                    path.display()
                )
            })?;
            let regular = file.metadata().is_ok_and(|meta| meta.is_file());
            return Ok(Some(Self {
                name: path.display().to_string(),
                replace: regular.then(|| path.to_owned()),
                file,
            }));
        }
        let Some(fd) = fd else { return Ok(None) };
        // A copy of its own, open on what was handed over: a file, a pipe or
        // a socket (Node.js gives a child's extra pipes as sockets).
        let file = i32::try_from(fd)
            .map_err(|_| std::io::Error::from(rustix::io::Errno::BADF))
            .and_then(corral::host::adopt)
            .and_then(
                |own| match rustix::fs::fcntl_getfl(&own)? & rustix::fs::OFlags::RWMODE {
                    rustix::fs::OFlags::RDONLY => Err(rustix::io::Errno::BADF.into()),
                    _ => Ok(File::from(own)),
                },
            )
            .with_context(|| {
                format!("file descriptor {fd} is not open for writing a report (--report-fd)")
            })?;
        Ok(Some(Self {
            name: format!("file descriptor {fd}"),
            replace: None,
            file,
        }))
    }

    /// Writes `report` as pretty JSON with a final newline.
    ///
    /// # Errors
    /// If it cannot be serialised or written.
    pub fn write(mut self, report: &impl Serialize) -> anyhow::Result<()> {
        let mut text = serde_json::to_vec_pretty(report).context("serialising the report")?;
        text.push(b'\n');
        if let Some(path) = &self.replace
            && replace(path, &text).is_ok()
        {
            return Ok(());
        }
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .with_context(|| format!("cannot write the report to {}", self.name))
    }
}

/// Writes `text` to a new sibling of `path` and renames it over `path`.
fn replace(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".tmp-{}", std::process::id()));
    let temp = PathBuf::from(temp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)?;
    let written = file
        .write_all(text)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Writes the report if one was asked for; a failure is said on standard
/// error but does not change the exit status, which belongs to the command.
pub fn deliver(sink: Option<Sink>, report: &impl Serialize) {
    if let Some(sink) = sink
        && let Err(error) = sink.write(report)
    {
        say!("{error:#}");
    }
}

#[cfg(test)]
mod tests;
