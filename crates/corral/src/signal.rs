use std::{fmt, str::FromStr};

/// A Unix signal, by number. Only signals with a name on Linux can be built
/// from outside input, so every value can be sent.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

/// Name and number of every signal corral accepts (Linux numbering).
const TABLE: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// The real-time signals as GNU's `kill -l` names them, from `SIGRTMIN` (34
/// with glibc, which keeps 32 and 33 for itself) to `SIGRTMAX` (64).
const REALTIME: [&str; 31] = [
    "RTMIN", "RTMIN+1", "RTMIN+2", "RTMIN+3", "RTMIN+4", "RTMIN+5", "RTMIN+6", "RTMIN+7",
    "RTMIN+8", "RTMIN+9", "RTMIN+10", "RTMIN+11", "RTMIN+12", "RTMIN+13", "RTMIN+14", "RTMIN+15",
    "RTMAX-14", "RTMAX-13", "RTMAX-12", "RTMAX-11", "RTMAX-10", "RTMAX-9", "RTMAX-8", "RTMAX-7",
    "RTMAX-6", "RTMAX-5", "RTMAX-4", "RTMAX-3", "RTMAX-2", "RTMAX-1", "RTMAX",
];
/// The number of [`REALTIME`]'s first entry.
const RTMIN: i32 = 34;

/// Aliases accepted on input, never printed.
const ALIASES: &[(&str, i32)] = &[("IOT", 6), ("CLD", 17), ("POLL", 29), ("ALARM", 14)];

impl Signal {
    /// `SIGHUP`.
    pub const HUP: Self = Self(1);
    /// `SIGINT`.
    pub const INT: Self = Self(2);
    /// `SIGQUIT`.
    pub const QUIT: Self = Self(3);
    /// `SIGKILL`.
    pub const KILL: Self = Self(9);
    /// `SIGUSR1`.
    pub const USR1: Self = Self(10);
    /// `SIGPIPE`.
    pub const PIPE: Self = Self(13);
    /// `SIGALRM`.
    pub const ALRM: Self = Self(14);
    /// `SIGTERM`.
    pub const TERM: Self = Self(15);
    /// `SIGCONT`.
    pub const CONT: Self = Self(18);

    /// The signal with this number, if it has a name.
    pub fn from_number(number: i32) -> Option<Self> {
        (TABLE.iter().any(|&(_, n)| n == number) || realtime(number).is_some())
            .then_some(Self(number))
    }

    /// The signal's number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The name without the `SIG` prefix, e.g. `TERM`.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|&&(_, n)| n == self.0)
            .map(|&(name, _)| name)
            .or_else(|| realtime(self.0))
            .unwrap_or("?")
    }
}

/// The name of real-time signal `number`, if it is one.
fn realtime(number: i32) -> Option<&'static str> {
    let index = usize::try_from(number.checked_sub(RTMIN)?).ok()?;
    REALTIME.get(index).copied()
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SIG{}", self.name())
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SIG{}", self.name())
    }
}

/// A signal name or number that corral does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown signal {input:?}: give a name like TERM, SIGKILL or HUP, or a number from 1 to 31"
)]
pub struct ParseSignalError {
    input: String,
}

impl FromStr for Signal {
    type Err = ParseSignalError;

    /// Parses `TERM`, `SIGTERM`, `sigterm` or `15`.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = || ParseSignalError {
            input: input.to_owned(),
        };
        let trimmed = input.trim();
        if trimmed.bytes().all(|b| b.is_ascii_digit()) && !trimmed.is_empty() {
            let number: i32 = trimmed.parse().map_err(|_| error())?;
            return Self::from_number(number).ok_or_else(error);
        }
        let upper = trimmed.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        TABLE
            .iter()
            .chain(ALIASES)
            .find(|&&(n, _)| n == name)
            .map(|&(_, number)| Self(number))
            .ok_or_else(error)
    }
}

impl serde::Serialize for Signal {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_and_without_prefix_and_numbers() {
        for input in ["TERM", "SIGTERM", "sigterm", "term", "15", " 15 "] {
            assert_eq!(input.parse::<Signal>(), Ok(Signal::TERM), "{input}");
        }
        assert_eq!("KILL".parse::<Signal>(), Ok(Signal::KILL));
        assert_eq!("SIGIOT".parse::<Signal>().map(Signal::number), Ok(6));
    }

    #[test]
    fn rejects_unknown_and_out_of_range() {
        for input in [
            "",
            "SIG",
            "TERMX",
            "0",
            "32",
            "-1",
            "99999999999999999999",
            "+15",
            "1.5",
        ] {
            let error = input.parse::<Signal>().expect_err(input);
            assert!(error.to_string().contains("unknown signal"), "{error}");
        }
    }

    #[test]
    fn every_table_entry_round_trips() {
        for &(name, number) in TABLE {
            let signal = Signal::from_number(number).expect("in table");
            assert_eq!(signal.name(), name);
            assert_eq!(signal.to_string().parse::<Signal>(), Ok(signal));
        }
    }
}
