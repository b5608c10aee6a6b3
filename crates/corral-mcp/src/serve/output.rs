//! Bounded capture of a command's output streams, as plain data.
//!
//! - [`HeadTail`]: the first and the last bytes of a stream, for the answer
//!   to a foreground run (a build's first error and its summary both show).
//! - [`Ring`]: the last bytes of a stream addressed by absolute offsets, for
//!   reading a background run's output piece by piece.
//! - [`last_lines`]: a short tail for progress messages.

use std::collections::VecDeque;

/// Keeps the first half and the last half of `cap` bytes of a stream;
/// counts what was dropped between.
///
/// Memory stays at `cap` bytes (plus the two buffers' headers) however much
/// is pushed, and each push costs time in proportion to its length.
#[derive(Debug, Clone)]
pub struct HeadTail {
    /// The first `head_cap` bytes seen.
    head: Vec<u8>,
    head_cap: usize,
    /// The last at most `tail_cap` bytes seen after the head filled.
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
}

impl HeadTail {
    /// Keeps `cap / 2` bytes at the head and the rest at the tail; `cap` 0
    /// keeps nothing (and counts everything as dropped).
    #[must_use]
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        let tail_cap = cap - head_cap;
        Self {
            head: Vec::new(),
            head_cap,
            tail: VecDeque::new(),
            tail_cap,
            total: 0,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, mut data: &[u8]) {
        self.total = self.total.saturating_add(data.len() as u64);
        let room = self.head_cap - self.head.len();
        let into_head = room.min(data.len());
        self.head.extend_from_slice(&data[..into_head]);
        data = &data[into_head..];
        if data.len() >= self.tail_cap {
            // Only the last `tail_cap` bytes of this chunk survive.
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
        } else {
            // Make room first, so the buffer never grows past `tail_cap`.
            let excess = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
            self.tail.extend(data);
        }
    }

    /// Bytes seen.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes seen but not kept.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// The head, then (only if bytes were dropped) a line
    /// `[corral: N bytes dropped here]`, then the tail, as lossy UTF-8: a
    /// character split at the cut shows as U+FFFD.
    #[must_use]
    pub fn text(&self) -> String {
        let (front, back) = self.tail.as_slices();
        let dropped = self.dropped();
        if dropped == 0 {
            // Head and tail are contiguous: a character across the seam is whole.
            let mut all = Vec::with_capacity(self.head.len() + self.tail.len());
            all.extend_from_slice(&self.head);
            all.extend_from_slice(front);
            all.extend_from_slice(back);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(front);
        tail.extend_from_slice(back);
        format!(
            "{}\n[corral: {dropped} bytes dropped here]\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        )
    }
}

/// The last `cap` bytes of a stream, addressed by absolute offsets (for
/// reading a background run's output since an offset).
#[derive(Debug, Clone)]
pub struct Ring {
    buf: VecDeque<u8>,
    cap: usize,
    /// Offset just after the last byte pushed.
    end: u64,
}

/// A piece of a [`Ring`], as [`Ring::read`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Where `data` starts: the larger of the asked offset and the oldest
    /// offset still kept, at most [`Ring::end`].
    pub offset: u64,
    /// At most `max` bytes.
    pub data: Vec<u8>,
    /// The offset to ask for next (`offset + data.len()`).
    pub next: u64,
    /// Bytes between the asked offset and `offset` that were already
    /// dropped from the ring.
    pub skipped: u64,
}

impl Ring {
    /// A ring that keeps the last `cap` bytes (0: none, only the offsets).
    #[must_use]
    pub fn new(cap: usize) -> Self {
        Self {
            buf: VecDeque::new(),
            cap,
            end: 0,
        }
    }

    /// Takes the next bytes of the stream, dropping the oldest beyond `cap`.
    pub fn push(&mut self, data: &[u8]) {
        self.end = self.end.saturating_add(data.len() as u64);
        if data.len() >= self.cap {
            self.buf.clear();
            self.buf.extend(&data[data.len() - self.cap..]);
        } else {
            let excess = (self.buf.len() + data.len()).saturating_sub(self.cap);
            self.buf.drain(..excess);
            self.buf.extend(data);
        }
    }

    #[cfg(test)]
    /// The offset just after the last byte pushed.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Up to `max` bytes from `offset` on. An offset older than the ring
    /// keeps starts at the oldest byte kept (and says how many were
    /// skipped); an offset past the end reads nothing, at the end.
    #[must_use]
    pub fn read(&self, offset: u64, max: usize) -> Chunk {
        let start = self.end - self.buf.len() as u64;
        let from = offset.clamp(start, self.end);
        let skipped = from.saturating_sub(offset);
        // `from - start` <= buf.len(), a usize.
        let index = usize::try_from(from - start).unwrap_or(self.buf.len());
        let len = (self.buf.len() - index).min(max);
        let data: Vec<u8> = self.buf.range(index..index + len).copied().collect();
        Chunk {
            offset: from,
            next: from + data.len() as u64,
            data,
            skipped,
        }
    }
}

/// The last `lines` lines of `data` (the last one may be partial; a final
/// newline ends the last line and is not kept), at most `max_bytes` bytes of
/// text (cut at the front, on a character boundary), as lossy UTF-8, for
/// progress messages.
#[must_use]
pub fn last_lines(data: &[u8], lines: usize, max_bytes: usize) -> String {
    if lines == 0 || max_bytes == 0 {
        return String::new();
    }
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    let mut start = 0;
    let mut seen = 0;
    for (at, &byte) in data.iter().enumerate().rev() {
        if byte == b'\n' {
            seen += 1;
            if seen == lines {
                start = at + 1;
                break;
            }
        }
    }
    let mut kept = &data[start..];
    if kept.len() > max_bytes {
        kept = &kept[kept.len() - max_bytes..];
        // Start on a character, not inside one (at most three continuation bytes).
        let continuation = kept
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count();
        kept = &kept[continuation..];
    }
    let text = String::from_utf8_lossy(kept);
    if text.len() <= max_bytes {
        return text.into_owned();
    }
    // Replacement characters made it longer: cut again, on a boundary.
    let mut cut = text.len() - max_bytes;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text[cut..].to_owned()
}

#[cfg(test)]
mod tests;
