//! Logs of every subcommand go to standard error (standard output belongs to
//! the command, and to MCP frames). A standard error that cannot be written
//! (closed, a reader that went away) drops the lines: logging never ends
//! corral, and so never its tree.

use std::io::{self, Write};

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
        // No colours: every control character of a line is escaped (below),
        // the subscriber's own colour codes too.
        .with_ansi(false)
        .try_init();
}

/// A writer whose failures are dropped writes, and which escapes every
/// control character but newlines and tabs: a logged field may hold what an
/// MCP server or a command said (an error's text, a malformed frame), which
/// must not reach a terminal as escape sequences. The subscriber writes each
/// event whole, in one call.
struct Lossy<W>(W);

impl<W: Write> Write for Lossy<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let _ = self
            .0
            .write_all(crate::text::printable_lines(&text).as_bytes());
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
    fn what_a_server_said_reaches_the_log_escaped() {
        let mut written = Vec::new();
        let mut lossy = Lossy(&mut written);
        let line =
            "server/discover: error -32601: no\u{1b}]0;PWN\u{7}\u{1b}[2K\rfake\u{202e}\tok\n";
        lossy.write_all(line.as_bytes()).expect("written");
        let written = String::from_utf8(written).expect("UTF-8");
        assert!(
            !written
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t' || c == '\u{202e}'),
            "{written:?}"
        );
        assert!(written.ends_with("\tok\n"), "{written:?}");
        assert!(written.contains("\\u{1b}]0;PWN"), "{written:?}");
    }

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
