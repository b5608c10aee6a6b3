//! Logs of every subcommand go to standard error (standard output belongs to
//! the command, and to MCP frames). A standard error that cannot be written
//! (closed, a reader that went away) drops the lines: logging never ends
//! corral, and so never its tree.

use std::io::{self, IsTerminal, Write};

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
        // A failed write never reaches the subscriber, whose report of it
        // (`eprintln!` to the same standard error) would panic.
        .with_writer(|| Lossy(io::stderr()))
        .with_ansi(io::stderr().is_terminal())
        .try_init();
}

/// A writer whose failures are dropped writes.
struct Lossy<W>(W);

impl<W: Write> Write for Lossy<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_dropped() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
        }
        let mut lossy = Lossy(Closed);
        assert!(writeln!(lossy, "a line").is_ok());
        assert!(lossy.flush().is_ok());
    }
}
