//! A server-sent events parser (the `text/event-stream` body of a
//! streamable HTTP answer), pure: bytes in, events out.
//!
//! Events are split on blank lines; `data:` lines are joined with `\n`;
//! `event:` and `id:` are kept; the last `id:` seen (even on an event
//! without data, such as a server's priming event) and the last `retry:`
//! (digits only, in milliseconds) are remembered for a resumption
//! ([`Parser::last_event_id`], [`Parser::retry`]); unknown fields and
//! comment lines (starting with `:`) are ignored; lines may end in LF, CRLF
//! or CR. An
//! event larger than the cap is dropped whole and reported as
//! [`Item::TooLong`], and its bytes are never buffered past the cap.
//!
//! # References
//! <https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Event {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: Vec<u8>,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// What the parser yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A complete event with at least one `data:` line.
    Event(Event),
    /// An event over the cap, dropped; `len` is its size in bytes (its
    /// lines without their endings).
    TooLong { len: usize },
}

/// The parser's state between chunks.
#[derive(Debug)]
pub(crate) struct Parser {
    max_event_bytes: usize,
    /// The line being read (never more than the cap).
    line: Vec<u8>,
    /// The event being read.
    event: Event,
    has_data: bool,
    /// Bytes of the event so far, lines without their endings.
    size: usize,
    /// Bytes of the current line (kept or not).
    line_len: usize,
    /// The last byte was a CR (an LF right after it ends nothing).
    after_cr: bool,
    /// The last event id seen, kept across events.
    last_event_id: Option<String>,
    /// The last reconnection time the server set.
    retry: Option<std::time::Duration>,
}

impl Parser {
    /// A parser dropping events over `max_event_bytes`.
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Self {
            max_event_bytes,
            line: Vec::new(),
            event: Event::default(),
            has_data: false,
            size: 0,
            line_len: 0,
            after_cr: false,
            last_event_id: None,
            retry: None,
        }
    }

    /// A parser for the stream that resumes this one: nothing of a
    /// half-read event, the last event id and the reconnection time kept.
    pub(crate) fn resumed(&self) -> Self {
        let mut next = Self::new(self.max_event_bytes);
        next.last_event_id.clone_from(&self.last_event_id);
        next.retry = self.retry;
        next
    }

    /// The last event id the stream gave (`Last-Event-ID` of a
    /// resumption), if any.
    pub(crate) fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The reconnection time the stream set last (`retry:`), if any.
    pub(crate) fn retry(&self) -> Option<std::time::Duration> {
        self.retry
    }

    /// Feeds `bytes`; the events they complete, in order.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<Item> {
        let mut items = Vec::new();
        let mut rest = bytes;
        while let Some(&first) = rest.first() {
            if self.after_cr && first == b'\n' {
                self.after_cr = false;
                rest = &rest[1..];
                continue;
            }
            self.after_cr = false;
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.push(&rest[..end]);
                    self.after_cr = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    if let Some(item) = self.end_line() {
                        items.push(item);
                    }
                }
                None => {
                    self.push(rest);
                    rest = &[];
                }
            }
        }
        items
    }

    fn over(&self) -> bool {
        self.size > self.max_event_bytes
    }

    /// Appends to the current line, keeping nothing once over the cap.
    fn push(&mut self, bytes: &[u8]) {
        self.size += bytes.len();
        self.line_len += bytes.len();
        if self.over() {
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    /// A line ended: a blank one ends the event.
    fn end_line(&mut self) -> Option<Item> {
        let len = std::mem::take(&mut self.line_len);
        let line = std::mem::take(&mut self.line);
        if len == 0 {
            return self.dispatch();
        }
        if !self.over() {
            self.field(&line);
        }
        None
    }

    fn field(&mut self, line: &[u8]) {
        if line.first() == Some(&b':') {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.event.data.push(b'\n');
                }
                self.event.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event.event = Some(String::from_utf8_lossy(value).into_owned()),
            // An id with a NUL is ignored, as the specification says.
            b"id" if !value.contains(&0) => {
                let id = String::from_utf8_lossy(value).into_owned();
                self.last_event_id = Some(id.clone());
                self.event.id = Some(id);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Some(ms) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|digits| digits.parse().ok())
                {
                    self.retry = Some(std::time::Duration::from_millis(ms));
                }
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<Item> {
        let event = std::mem::take(&mut self.event);
        let has_data = std::mem::replace(&mut self.has_data, false);
        let size = std::mem::take(&mut self.size);
        if size > self.max_event_bytes {
            Some(Item::TooLong { len: size })
        } else {
            has_data.then_some(Item::Event(event))
        }
    }
}

#[cfg(test)]
mod tests;
