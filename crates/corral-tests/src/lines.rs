//! What children print: readiness lines (`ready <pid> <pid>...`, leader
//! first, as the fixtures print them) and lines read on a thread.

use std::{
    io::{BufRead, BufReader, Read},
    sync::mpsc,
    thread,
    time::Duration,
};

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::proc::Proc;

/// How long [`read_ready`] and [`read_ready_blocking`] wait for the
/// readiness line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses a readiness line `ready <pid> <pid>...` (leader first) and reads
/// each process's identity immediately. A pid that is already gone gets
/// `start_time == 0` (see [`Proc`]). `None` if it is not a readiness line.
pub fn try_parse_ready(line: &str) -> Option<Vec<Proc>> {
    let rest = line.trim().strip_prefix("ready")?;
    let pids: Vec<i32> = rest
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if pids.is_empty() {
        return None;
    }
    let identify = |pid| Proc::of(pid).unwrap_or(Proc { pid, start_time: 0 });
    Some(pids.into_iter().map(identify).collect())
}

/// [`try_parse_ready`], for a line that must be a readiness line.
///
/// # Panics
/// If the line is not a readiness line.
pub fn parse_ready(line: &str) -> Vec<Proc> {
    try_parse_ready(line)
        .unwrap_or_else(|| panic!("expected a readiness line `ready <pid>...`, got {line:?}"))
}

/// Reads the readiness line from `reader` (pass `&mut reader` to keep using
/// it afterwards) and parses it with [`parse_ready`].
///
/// # Panics
/// On EOF, a read error, or no complete line within [`READY_TIMEOUT`].
pub async fn read_ready<R: AsyncBufRead + Unpin>(mut reader: R) -> Vec<Proc> {
    let mut line = String::new();
    let read = tokio::time::timeout(READY_TIMEOUT, reader.read_line(&mut line)).await;
    match read {
        Err(_) => panic!("no readiness line within {READY_TIMEOUT:?} (got so far: {line:?})"),
        Ok(Err(err)) => panic!("reading the readiness line: {err}"),
        Ok(Ok(0)) => panic!("EOF before the readiness line"),
        Ok(Ok(_)) => parse_ready(&line),
    }
}

/// Like [`read_ready`], for a blocking reader such as a
/// `BufReader<std::process::ChildStdout>`. The read happens on a helper
/// thread; the reader is handed back for further reads.
///
/// # Panics
/// On EOF, a read error, or no complete line within [`READY_TIMEOUT`] (the
/// helper thread then stays blocked until the pipe closes).
pub fn read_ready_blocking<R: BufRead + Send + 'static>(mut reader: R) -> (Vec<Proc>, R) {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let result = reader.read_line(&mut line);
        let _ = tx.send((result, line, reader));
    });
    match rx.recv_timeout(READY_TIMEOUT) {
        Err(_) => panic!("no readiness line within {READY_TIMEOUT:?}"),
        Ok((Err(err), _, _)) => panic!("reading the readiness line: {err}"),
        Ok((Ok(0), _, _)) => panic!("EOF before the readiness line"),
        Ok((Ok(_), line, reader)) => (parse_ready(&line), reader),
    }
}

/// The lines a child writes (to its standard output, say), read by a thread
/// and each turned into a `T`.
#[derive(Debug)]
pub struct Lines<T = String>(mpsc::Receiver<T>);

impl Lines {
    /// The lines of `output`, as they are.
    pub fn new(output: impl Read + Send + 'static) -> Self {
        Self::parsed(output, |line| line)
    }
}

impl<T: Send + 'static> Lines<T> {
    /// The lines of `output`, each through `parse`.
    pub fn parsed(output: impl Read + Send + 'static, parse: fn(String) -> T) -> Self {
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { break };
                if sender.send(parse(line)).is_err() {
                    break;
                }
            }
        });
        Self(receiver)
    }

    /// The next line, or `None` at end of output or after `limit`.
    pub fn next(&self, limit: Duration) -> Option<T> {
        self.0.recv_timeout(limit).ok()
    }
}

impl<T: Send + std::fmt::Debug + 'static> Lines<T> {
    /// The next `n` lines, each within `limit`, or a panic naming what came.
    pub fn take(&self, n: usize, limit: Duration) -> Vec<T> {
        let mut lines = Vec::new();
        while lines.len() < n {
            match self.next(limit) {
                Some(line) => lines.push(line),
                None => panic!("expected {n} lines within {limit:?}, got {lines:?}"),
            }
        }
        lines
    }
}
