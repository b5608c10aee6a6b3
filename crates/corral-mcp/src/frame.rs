//! Line framing of MCP's stdio transport: newline-delimited JSON-RPC
//! messages, with a cap on the length of one line. Pure: no I/O here (the
//! pumps in `relay` read into a [`Framer`]).
//!
//! A line is split at `\n`; a `\r` before it is dropped (CRLF). A line longer
//! than the cap is never buffered whole: once the pending bytes pass the cap
//! the framer discards them and everything up to the next `\n`, then reports
//! one [`Piece::TooLong`] with the line's full length.
//!
//! ```
//! use corral_mcp::frame::{Framer, Piece};
//!
//! let mut framer = Framer::new(1024);
//! // Input arrives in arbitrary pieces; lines come out whole.
//! framer.push(b"{\"jsonrpc\":\"2.0\",\"id\":1,");
//! assert_eq!(framer.next_piece(), None);
//! framer.push(b"\"method\":\"ping\"}\r\n{\"jsonrpc\"");
//! assert_eq!(
//!     framer.next_piece(),
//!     Some(Piece::Line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"))
//! );
//! assert_eq!(framer.next_piece(), None);
//! // At end of input, the last line without its `\n`.
//! assert_eq!(framer.finish(), Some(Piece::Line(b"{\"jsonrpc\"")));
//! ```

/// The default cap on one frame: 16 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;

/// How much room is made for each read.
pub const READ_CHUNK: usize = 64 << 10;

/// What the framer found in its input.
///
/// ```
/// use corral_mcp::frame::{Framer, Piece};
///
/// let mut framer = Framer::new(4);
/// framer.push(b"0123456789\nok\n");
/// // Never buffered whole: skipped, with its length.
/// assert_eq!(framer.next_piece(), Some(Piece::TooLong { len: 10 }));
/// assert_eq!(framer.next_piece(), Some(Piece::Line(b"ok")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// One complete line, without its `\n` (or `\r\n`).
    Line(&'a [u8]),
    /// A line longer than the cap, skipped; `len` counts its bytes without
    /// the final `\n`.
    TooLong {
        /// The length of the skipped line.
        len: u64,
    },
}

/// Splits a byte stream into lines of at most `max` bytes.
///
/// The buffer holds at most `max + 1` pending bytes plus one read.
///
/// A reader appends to [`Framer::read_buffer`] (no copy), as the relay
/// does, then takes the pieces:
///
/// ```
/// use corral_mcp::frame::{DEFAULT_MAX_FRAME_BYTES, Framer, Piece};
/// use tokio::io::AsyncReadExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let mut input: &[u8] = b"{\"id\":1}\n{\"id\":2}\n";
/// let mut framer = Framer::new(DEFAULT_MAX_FRAME_BYTES);
/// let mut lines = Vec::new();
/// while input.read_buf(framer.read_buffer()).await? > 0 {
///     while let Some(piece) = framer.next_piece() {
///         if let Piece::Line(line) = piece {
///             lines.push(line.to_vec());
///         }
///     }
/// }
/// assert_eq!(framer.finish(), None);
/// assert_eq!(lines, [b"{\"id\":1}".to_vec(), b"{\"id\":2}".to_vec()]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Where the next line starts in `buf`.
    start: usize,
    /// Up to where `buf` is known to hold no `\n` (from `start`).
    scanned: usize,
    max: usize,
    /// While discarding an over-long line: how many bytes were skipped.
    skipping: Option<u64>,
}

impl Framer {
    /// A framer with a cap of `max` bytes per line (at least 1).
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max: max.max(1),
            skipping: None,
        }
    }

    /// Appends input.
    pub fn push(&mut self, data: &[u8]) {
        self.make_room(data.len());
        self.buf.extend_from_slice(data);
    }

    /// The buffer to read into (its spare capacity holds at least
    /// [`READ_CHUNK`] bytes); bytes appended to it are input.
    pub fn read_buffer(&mut self) -> &mut Vec<u8> {
        self.make_room(READ_CHUNK);
        &mut self.buf
    }

    /// Drops consumed bytes and makes room for `extra` more.
    fn make_room(&mut self, extra: usize) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
            self.scanned = 0;
            // Give back the memory of a large frame once it is gone.
            if self.buf.capacity() > 4 * READ_CHUNK {
                self.buf = Vec::new();
            }
        } else if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.reserve(extra);
    }

    /// The next complete line or skipped over-long line, if the input holds
    /// one.
    pub fn next_piece(&mut self) -> Option<Piece<'_>> {
        if let Some(skipped) = self.skipping {
            let pending = &self.buf[self.start..];
            return match find_newline(pending) {
                Some(at) => {
                    self.skipping = None;
                    self.start += at + 1;
                    self.scanned = self.start;
                    Some(Piece::TooLong {
                        len: skipped + at as u64,
                    })
                }
                None => {
                    self.skipping = Some(skipped + pending.len() as u64);
                    self.start = self.buf.len();
                    None
                }
            };
        }
        match find_newline(&self.buf[self.scanned..]) {
            Some(at) => {
                let end = self.scanned + at;
                let begin = self.start;
                self.start = end + 1;
                self.scanned = self.start;
                self.line(begin, end)
            }
            None => {
                self.scanned = self.buf.len();
                let pending = self.buf.len() - self.start;
                // One byte more than the cap may be a `\r` before the `\n`.
                if pending > self.max + 1 {
                    self.skipping = Some(pending as u64);
                    self.start = self.buf.len();
                }
                None
            }
        }
    }

    /// At end of input: the last line if it had no final `\n`, or the
    /// over-long line being skipped.
    pub fn finish(&mut self) -> Option<Piece<'_>> {
        if let Some(skipped) = self.skipping.take() {
            self.start = self.buf.len();
            return Some(Piece::TooLong { len: skipped });
        }
        let (begin, end) = (self.start, self.buf.len());
        self.start = end;
        self.scanned = end;
        if begin == end {
            return None;
        }
        self.line(begin, end)
    }

    fn line(&self, begin: usize, end: usize) -> Option<Piece<'_>> {
        let mut line = &self.buf[begin..end];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        Some(if line.len() > self.max {
            Piece::TooLong {
                len: (end - begin) as u64,
            }
        } else {
            Piece::Line(line)
        })
    }
}

fn find_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece the framer yields for `input` fed in chunks of `chunk`
    /// bytes, then at end of input.
    fn pieces(max: usize, input: &[u8], chunk: usize) -> Vec<Result<Vec<u8>, u64>> {
        let mut framer = Framer::new(max);
        let mut out = Vec::new();
        let mut take = |piece: Piece<'_>| match piece {
            Piece::Line(line) => out.push(Ok(line.to_vec())),
            Piece::TooLong { len } => out.push(Err(len)),
        };
        for part in input.chunks(chunk.max(1)) {
            framer.push(part);
            while let Some(piece) = framer.next_piece() {
                take(piece);
            }
        }
        if let Some(piece) = framer.finish() {
            take(piece);
        }
        out
    }

    fn lines(items: &[&str]) -> Vec<Result<Vec<u8>, u64>> {
        items.iter().map(|s| Ok(s.as_bytes().to_vec())).collect()
    }

    #[test]
    fn splits_joined_lines_whatever_the_chunking() {
        let input = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n";
        for chunk in 1..=input.len() {
            assert_eq!(
                pieces(1024, input, chunk),
                lines(&["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn strips_crlf_but_keeps_inner_carriage_returns() {
        let input = b"one\r\ntwo\n\rthree\r\n";
        assert_eq!(pieces(64, input, 3), lines(&["one", "two", "\rthree"]));
    }

    #[test]
    fn a_last_line_without_newline_is_yielded_at_end_of_input() {
        assert_eq!(pieces(64, b"one\ntwo", 2), lines(&["one", "two"]));
        assert_eq!(pieces(64, b"", 2), lines(&[]));
    }

    #[test]
    fn empty_lines_are_yielded_as_empty() {
        assert_eq!(pieces(64, b"\n\r\nx\n", 1), lines(&["", "", "x"]));
    }

    #[test]
    fn a_line_of_exactly_the_cap_passes_one_more_is_too_long() {
        let max = 8;
        let ok = b"12345678\n12345678\r\n";
        assert_eq!(pieces(max, ok, 1), lines(&["12345678", "12345678"]));
        assert_eq!(
            pieces(max, b"123456789\nok\n", 1),
            vec![Err(9), Ok(b"ok".to_vec())]
        );
        assert_eq!(
            pieces(max, b"123456789\nok\n", 100),
            vec![Err(9), Ok(b"ok".to_vec())]
        );
    }

    /// Found by `fuzz/fuzz_targets/mcp_frame.rs`: the `\r` of an over-long
    /// CRLF line was counted when the line came in several reads (skipped
    /// while pending) and not when it came in one read.
    #[test]
    fn an_over_long_crlf_line_has_one_length_whatever_the_chunking() {
        let input = b"123456789\r\nok\n";
        for chunk in [1, 5, 10, 11, 100] {
            assert_eq!(
                pieces(8, input, chunk),
                vec![Err(10), Ok(b"ok".to_vec())],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_over_long_line_is_skipped_to_the_next_newline_and_relaying_goes_on() {
        let mut input = b"before\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend(b"\nafter\n");
        for chunk in [1, 7, 64, 4096] {
            assert_eq!(
                pieces(100, &input, chunk),
                vec![Ok(b"before".to_vec()), Err(1000), Ok(b"after".to_vec())],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_over_long_last_line_without_newline_is_reported_at_end_of_input() {
        let input = vec![b'x'; 500];
        assert_eq!(pieces(100, &input, 64), vec![Err(500)]);
    }

    #[test]
    fn a_20_mib_line_is_skipped_without_buffering_it_whole() {
        let mut framer = Framer::new(DEFAULT_MAX_FRAME_BYTES);
        let block = vec![b'y'; READ_CHUNK];
        let total = 20 << 20;
        let mut most_buffered = 0;
        let mut fed = 0;
        while fed < total {
            framer.read_buffer().extend_from_slice(&block);
            fed += block.len();
            assert_eq!(framer.next_piece(), None);
            most_buffered = most_buffered.max(framer.buf.len() - framer.start);
        }
        framer.push(b"\n{\"next\":1}\n");
        assert_eq!(
            framer.next_piece(),
            Some(Piece::TooLong { len: total as u64 })
        );
        assert_eq!(framer.next_piece(), Some(Piece::Line(b"{\"next\":1}")));
        assert!(
            most_buffered <= DEFAULT_MAX_FRAME_BYTES + 1 + READ_CHUNK,
            "buffered {most_buffered} bytes"
        );
        // The memory of the skipped line is given back.
        framer.read_buffer();
        assert!(framer.buf.capacity() <= 4 * READ_CHUNK + READ_CHUNK);
    }

    #[test]
    fn invalid_utf8_is_framed_as_bytes() {
        assert_eq!(
            pieces(64, b"\xff\xfe\n{}\n", 1),
            vec![Ok(vec![0xff, 0xfe]), Ok(b"{}".to_vec())]
        );
    }
}
