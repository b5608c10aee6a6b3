//! A rate limit for the relay's notes on standard error. Pure.
//!
//! A server that prints its logs on standard output produces a malformed
//! frame per log line; one note each would turn the relay's standard error
//! into a copy of that flood. At most [`NOTES_PER_SECOND`] notes are written
//! per one-second window; the rest are counted, and the count is written
//! with the first note of a later window. The report's `dropped` counters
//! stay exact either way.

use std::time::{Duration, Instant};

/// Notes written per one-second window at most.
pub const NOTES_PER_SECOND: u32 = 10;

const WINDOW: Duration = Duration::from_secs(1);

/// Whether a note may be written now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Write it.
    Write {
        /// How many notes were held back since the last one written (say
        /// so first).
        suppressed: u64,
    },
    /// Hold it back (counted).
    Suppress,
}

/// The limiter's state: the current window and what it let through.
#[derive(Debug, Clone, Default)]
pub struct NoteLimit {
    window: Option<Instant>,
    written: u32,
    suppressed: u64,
}

impl NoteLimit {
    /// Asks whether a note may be written at `now`.
    pub fn admit(&mut self, now: Instant) -> Admit {
        let fresh = self
            .window
            .is_none_or(|start| now.saturating_duration_since(start) >= WINDOW);
        if fresh {
            self.window = Some(now);
            self.written = 0;
        }
        if self.written >= NOTES_PER_SECOND {
            self.suppressed += 1;
            return Admit::Suppress;
        }
        self.written += 1;
        Admit::Write {
            suppressed: std::mem::take(&mut self.suppressed),
        }
    }

    #[cfg(test)]
    /// Notes held back and not yet mentioned.
    pub fn suppressed(&self) -> u64 {
        self.suppressed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_rate_and_the_rest_counted() {
        let t0 = Instant::now();
        let mut limit = NoteLimit::default();
        let written = (0..1000)
            .filter(|i| limit.admit(t0 + Duration::from_micros(*i)) != Admit::Suppress)
            .count();
        assert_eq!(written, NOTES_PER_SECOND as usize);
        assert_eq!(limit.suppressed(), 1000 - u64::from(NOTES_PER_SECOND));
        // The next window says how many were held back, once.
        let later = t0 + WINDOW + Duration::from_millis(1);
        assert_eq!(
            limit.admit(later),
            Admit::Write {
                suppressed: 1000 - u64::from(NOTES_PER_SECOND)
            }
        );
        assert_eq!(limit.admit(later), Admit::Write { suppressed: 0 });
    }

    #[test]
    fn a_trickle_is_never_suppressed() {
        let t0 = Instant::now();
        let mut limit = NoteLimit::default();
        for i in 0..100 {
            let now = t0 + Duration::from_millis(200) * i;
            assert_eq!(limit.admit(now), Admit::Write { suppressed: 0 });
        }
    }
}
