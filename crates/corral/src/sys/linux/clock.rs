//! The boot clock in the unit of a process's start time.
//!
//! # References
//! - <https://man7.org/linux/man-pages/man2/clock_gettime.2.html>
//! - <https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html> (field 22)

/// Now, in clock ticks since boot (`CLOCK_BOOTTIME` over `sysconf(_SC_CLK_TCK)`):
/// the clock and the unit of `/proc/PID/stat` field 22, so a process forked
/// after this call has a start time no earlier than its result. 0 if the
/// clock cannot be read (then no process is judged younger than now).
///
/// # References
/// - <https://man7.org/linux/man-pages/man2/clock_gettime.2.html>
/// - <https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html>
pub(crate) fn boot_ticks() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through a pointer to a
    // live local; `sysconf` takes no pointers.
    let (rc, hz) = unsafe {
        (
            libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now),
            libc::sysconf(libc::_SC_CLK_TCK),
        )
    };
    if rc != 0 || hz <= 0 {
        return 0;
    }
    let hz = hz as u64;
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    secs * hz + nanos * hz / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process started now has a start time of now, give or take the
    /// truncation of both to whole ticks.
    #[test]
    fn a_new_process_starts_no_earlier_than_now() {
        let before = boot_ticks();
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let start = crate::identity::read_stat(child.id() as i32).map(|s| s.start_time);
        let after = boot_ticks();
        let _ = child.wait();
        let start = start.expect("stat of the child");
        assert!(
            before <= start && start <= after,
            "{before} <= {start} <= {after}"
        );
    }
}
