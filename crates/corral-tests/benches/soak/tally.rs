//! Running totals of the soak and the measurements at its quiet points.

use std::{collections::BTreeMap, time::Duration};

use crate::DRAIN;

/// Failure messages printed in full (the rest are counted).
const SHOWN: usize = 20;

/// Running totals.
#[derive(Debug, Default)]
pub struct Tally {
    pub done: usize,
    pub by_backend: BTreeMap<&'static str, usize>,
    pub by_cancel: BTreeMap<&'static str, usize>,
    pub by_mode: BTreeMap<&'static str, usize>,
    pub ends: BTreeMap<&'static str, usize>,
    pub escalated: usize,
    /// The largest lateness beyond timeout + grace + final bound + drain.
    pub overrun_max: Duration,
    pub overrun_over_1s: usize,
    /// Calls more than 1 s late, by fixture and backend.
    pub late: BTreeMap<String, usize>,
    pub holes: usize,
    pub leaked: usize,
    pub survivors: usize,
    pub zombies_reaped: usize,
    pub subreaper_flag_cleared: usize,
    pub failures: usize,
    pub shown: Vec<String>,
}

impl Tally {
    pub fn fail(&mut self, message: String) {
        self.failures += 1;
        if self.shown.len() < SHOWN {
            self.shown.push(message);
        }
    }

    /// Prints what ran and how: counts, lateness, documented escapes.
    pub fn print_summary(&self, elapsed: Duration) {
        let list = |map: &BTreeMap<&str, usize>| {
            map.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "duration: {:.1} s ({:.1} invocations/s)",
            elapsed.as_secs_f64(),
            self.done as f64 / elapsed.as_secs_f64()
        );
        println!("by backend: {}", list(&self.by_backend));
        println!("by cancellation: {}", list(&self.by_cancel));
        println!("by fixture: {}", list(&self.by_mode));
        println!(
            "ends: {}; escalated to SIGKILL: {}",
            list(&self.ends),
            self.escalated
        );
        println!(
            "lateness beyond timeout + grace + final bound + {} ms drain: max {} ms, {} calls over 1 s",
            DRAIN.as_millis(),
            self.overrun_max.as_millis(),
            self.overrun_over_1s
        );
        if !self.late.is_empty() {
            let mut late: Vec<(&String, &usize)> = self.late.iter().collect();
            late.sort_by(|a, b| b.1.cmp(a.1));
            let late: Vec<String> = late.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!("  calls over 1 s late: {}", late.join(", "));
        }
        println!(
            "documented process-group escapes (orphans in a session of their own; killed by the soak): {}",
            self.holes
        );
        println!(
            "zombies reaped (orphans adopted as subreaper): {}",
            self.zombies_reaped
        );
        if self.subreaper_flag_cleared > 0 {
            println!(
                "the library cleared this process's child-subreaper flag {} times (re-set each time)",
                self.subreaper_flag_cleared
            );
        }
    }
}

/// Measurements at a quiet point.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub done: usize,
    /// Resident memory after `malloc_trim(0)`: what is allocated, not what
    /// the allocator keeps of freed memory.
    pub rss_kib: u64,
    pub rss_untrimmed_kib: u64,
    /// The anonymous part of `rss_kib` (heap and stacks).
    pub anon_kib: u64,
    /// Live heap memory (allocated and not freed).
    pub heap_kib: u64,
    pub fds: usize,
    pub tasks: usize,
}
