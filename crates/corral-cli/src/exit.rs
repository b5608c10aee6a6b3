//! corral's exit status, as `timeout(1)` defines it.
//!
//! | Variant            | Code    | When |
//! |--------------------|---------|------|
//! | `Exited(c)`        | `c`     | the command exited by itself with `c` (with `--preserve-status`, also after a timeout) |
//! | `TimedOut`         | 124     | the time limit passed and the tree was ended, whatever `--signal` was |
//! | `Failed`           | 125     | corral itself failed: bad option or duration, no containment possible |
//! | `CannotInvoke`     | 126     | the command was found but cannot be executed |
//! | `NotFound`         | 127     | the command was not found |
//! | `Signaled(N)`      | 128+N   | the command died of signal N (with `--preserve-status`, also corral's own after a timeout) |
//! | `Interrupted(N)`   | 128+N   | corral received signal N (a dead parent counts as `SIGTERM`) and ended the tree |
//!
//! [`TABLE`] is the same table as `--help` prints it.

use corral::{Exit, Outcome, Signal};

/// How corral exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The command's own exit code.
    Exited(u8),
    /// The time limit passed.
    TimedOut,
    /// corral itself failed.
    Failed,
    /// Found but not executable.
    CannotInvoke,
    /// Not found.
    NotFound,
    /// The command died of this signal.
    Signaled(Signal),
    /// corral received this signal and ended the tree.
    Interrupted(Signal),
}

/// The exit statuses as `corral run --help` lists them.
pub const TABLE: &[(&str, &str)] = &[
    ("N", "the command's own exit status"),
    (
        "124",
        "the time limit passed (whatever --signal was, also after SIGKILL)",
    ),
    (
        "125",
        "corral itself failed: bad option or duration, no containment",
    ),
    ("126", "the command was found but cannot be executed"),
    ("127", "the command was not found"),
    (
        "128+N",
        "the command died of signal N, or corral received signal N",
    ),
];

impl Status {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Exited(code) => code,
            Self::TimedOut => 124,
            Self::Failed => 125,
            Self::CannotInvoke => 126,
            Self::NotFound => 127,
            Self::Signaled(signal) | Self::Interrupted(signal) => signal_code(signal),
        }
    }

    /// The status of a finished run. `received` is the signal corral got (if
    /// any) that made it end the tree.
    pub fn of_run(
        outcome: Outcome,
        leader: Option<Exit>,
        preserve_status: bool,
        received: Option<Signal>,
    ) -> Self {
        match outcome {
            Outcome::Exited { code } => u8::try_from(code).map_or(Self::Failed, Self::Exited),
            Outcome::Signaled { signal } => Self::Signaled(signal),
            Outcome::TimedOut if preserve_status => match leader {
                Some(Exit::Code(code)) => u8::try_from(code).map_or(Self::Failed, Self::Exited),
                Some(Exit::Signal(signal)) => Self::Signaled(signal),
                // Not reaped (stuck past the final bound): nothing to preserve.
                None => Self::TimedOut,
            },
            Outcome::TimedOut => Self::TimedOut,
            Outcome::Cancelled => Self::Interrupted(received.unwrap_or(Signal::TERM)),
            _ => Self::Failed,
        }
    }
}

/// `128 + N`, what a shell reports for a process killed by signal N.
fn signal_code(signal: Signal) -> u8 {
    u8::try_from(128 + signal.number()).unwrap_or(255)
}

/// The table as the text of `--help`.
pub fn help() -> String {
    let mut text = String::from("Exit status (as timeout(1)):\n");
    for (code, meaning) in TABLE {
        text.push_str(&format!("  {code:<6} {meaning}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(code: &str) -> bool {
        TABLE.iter().any(|&(c, _)| c == code)
    }

    #[test]
    fn exited_is_the_commands_own_code() {
        assert_eq!(Status::Exited(0).code(), 0);
        assert_eq!(Status::Exited(3).code(), 3);
        assert_eq!(Status::Exited(255).code(), 255);
        let run = Status::of_run(Outcome::Exited { code: 3 }, None, false, None);
        assert_eq!(run, Status::Exited(3));
        assert!(listed("N"));
    }

    #[test]
    fn timed_out_is_124_whatever_the_leader_died_of() {
        assert_eq!(Status::TimedOut.code(), 124);
        for leader in [
            None,
            Some(Exit::Signal(Signal::TERM)),
            Some(Exit::Signal(Signal::KILL)),
            Some(Exit::Code(0)),
        ] {
            let run = Status::of_run(Outcome::TimedOut, leader, false, None);
            assert_eq!(run, Status::TimedOut, "{leader:?}");
        }
        assert!(listed("124"));
    }

    #[test]
    fn failed_is_125() {
        assert_eq!(Status::Failed.code(), 125);
        let unreaped = Status::of_run(Outcome::Exited { code: -1 }, None, false, None);
        assert_eq!(unreaped, Status::Failed);
        assert!(listed("125"));
    }

    #[test]
    fn cannot_invoke_is_126() {
        assert_eq!(Status::CannotInvoke.code(), 126);
        assert!(listed("126"));
    }

    #[test]
    fn not_found_is_127() {
        assert_eq!(Status::NotFound.code(), 127);
        assert!(listed("127"));
    }

    #[test]
    fn signaled_is_128_plus_n() {
        assert_eq!(Status::Signaled(Signal::KILL).code(), 137);
        assert_eq!(Status::Signaled(Signal::USR1).code(), 138);
        let run = Status::of_run(
            Outcome::Signaled {
                signal: Signal::USR1,
            },
            None,
            false,
            None,
        );
        assert_eq!(run, Status::Signaled(Signal::USR1));
        assert!(listed("128+N"));
    }

    #[test]
    fn interrupted_is_128_plus_the_received_signal() {
        for (signal, code) in [
            (Signal::HUP, 129),
            (Signal::INT, 130),
            (Signal::QUIT, 131),
            (Signal::TERM, 143),
        ] {
            assert_eq!(Status::Interrupted(signal).code(), code);
            let run = Status::of_run(Outcome::Cancelled, None, false, Some(signal));
            assert_eq!(run, Status::Interrupted(signal));
            // --preserve-status does not change it.
            let run = Status::of_run(Outcome::Cancelled, None, true, Some(signal));
            assert_eq!(run, Status::Interrupted(signal));
        }
        assert!(listed("128+N"));
    }

    #[test]
    fn preserve_status_reports_the_leader_after_a_timeout() {
        let run = |leader| Status::of_run(Outcome::TimedOut, leader, true, None);
        assert_eq!(run(Some(Exit::Code(7))), Status::Exited(7));
        assert_eq!(
            run(Some(Exit::Signal(Signal::TERM))),
            Status::Signaled(Signal::TERM)
        );
        assert_eq!(run(Some(Exit::Signal(Signal::KILL))).code(), 137);
        assert_eq!(run(None), Status::TimedOut);
    }

    #[test]
    fn help_lists_every_row() {
        let help = help();
        for (code, meaning) in TABLE {
            assert!(help.contains(code) && help.contains(meaning), "{code}");
        }
    }
}
