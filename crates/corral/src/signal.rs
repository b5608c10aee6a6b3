//! Signals by number, with their names as `kill -l` and GNU `timeout -s` give them.

use std::{fmt, str::FromStr};

/// A Unix signal, by number: 1 to [`Signal::MAX`], every signal the Linux
/// kernel knows, so every value can be sent.
///
/// Named and numbered as GNU's `kill -l` does (glibc): 1 to 31 by their
/// names, 34 to 64 as `RTMIN`, `RTMIN+N`, `RTMAX-N` and `RTMAX`; 32 and 33
/// (glibc keeps them for its threads, and gives them no name) by number.
///
/// ```
/// use corral::Signal;
/// assert_eq!("TERM".parse::<Signal>()?, Signal::TERM);
/// assert_eq!("sigkill".parse::<Signal>()?.number(), 9);
/// assert_eq!(Signal::from_number(36).map(Signal::name).as_deref(), Some("RTMIN+2"));
/// assert_eq!(Signal::from_number(65), None);
/// assert_eq!(Signal::from_number(32).map(Signal::name).as_deref(), Some("32"));
/// assert_eq!(Signal::from_number(32).and_then(Signal::gnu_name), None);
/// assert_eq!(Signal::TERM.to_string(), "SIGTERM");
/// // As GNU `timeout -s`: `0` is no signal, and 137 is a shell's status for KILL.
/// assert_eq!(Signal::parse_or_none("0")?, None);
/// assert_eq!(Signal::parse_or_none("137")?, Some(Signal::KILL));
/// # Ok::<(), corral::ParseSignalError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

/// Name and number of the classic signals (Linux numbering).
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
    ("POLL", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// Aliases accepted on input, never printed.
const ALIASES: &[(&str, i32)] = &[("IOT", 6), ("CLD", 17), ("IO", 29), ("ALARM", 14)];

/// The first real-time signal a program may use under glibc (`SIGRTMIN`).
const RTMIN: i32 = 34;

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
    /// `SIGUSR2`.
    pub const USR2: Self = Self(12);
    /// `SIGPIPE`.
    pub const PIPE: Self = Self(13);
    /// `SIGALRM`.
    pub const ALRM: Self = Self(14);
    /// `SIGTERM`.
    pub const TERM: Self = Self(15);
    /// `SIGCHLD`: a child stopped, continued or exited.
    pub const CHLD: Self = Self(17);
    /// `SIGCONT`.
    pub const CONT: Self = Self(18);
    /// `SIGSTOP`: stops a process, which no handler can catch or ignore.
    pub const STOP: Self = Self(19);
    /// `SIGTSTP`: a stop asked from the terminal (`Ctrl-Z`).
    pub const TSTP: Self = Self(20);
    /// `SIGTTIN`: a background process read from its terminal (stops it).
    pub const TTIN: Self = Self(21);
    /// `SIGTTOU`: a background process wrote to its terminal, or changed
    /// its settings (stops it).
    pub const TTOU: Self = Self(22);
    /// `SIGXCPU` (a CPU-time limit was reached).
    pub const XCPU: Self = Self(24);
    /// `SIGWINCH`: the terminal's window size changed.
    pub const WINCH: Self = Self(28);

    /// Whether the signal stops its receiver or resumes it (`SIGSTOP`,
    /// `SIGTSTP`, `SIGTTIN`, `SIGTTOU`, `SIGCONT`).
    pub(crate) fn stops_or_resumes(self) -> bool {
        [Self::STOP, Self::TSTP, Self::TTIN, Self::TTOU, Self::CONT].contains(&self)
    }

    /// The highest signal number (`SIGRTMAX` on Linux).
    pub const MAX: i32 = 64;

    /// The signal with this number, if the kernel knows it (1 to
    /// [`Signal::MAX`]).
    pub fn from_number(number: i32) -> Option<Self> {
        (1..=Self::MAX).contains(&number).then_some(Self(number))
    }

    /// The signal's number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The name without the `SIG` prefix, as GNU's `kill -l` prints it:
    /// `TERM`, `RTMIN+2`, `RTMAX-1`; the number for 32 and 33.
    pub fn name(self) -> String {
        self.gnu_name().unwrap_or_else(|| self.0.to_string())
    }

    /// The name as GNU's `sig2str` gives it, if it has one (32 and 33 have
    /// none under glibc).
    pub fn gnu_name(self) -> Option<String> {
        if let Some(&(name, _)) = TABLE.iter().find(|&&(_, n)| n == self.0) {
            return Some(name.to_owned());
        }
        if !(RTMIN..=Self::MAX).contains(&self.0) {
            return None;
        }
        // glibc's split: the lower half counts up from RTMIN, the rest down
        // from RTMAX.
        let (base, name) = if self.0 <= RTMIN + (Self::MAX - RTMIN) / 2 {
            (RTMIN, "RTMIN")
        } else {
            (Self::MAX, "RTMAX")
        };
        Some(match self.0 - base {
            0 => name.to_owned(),
            delta => format!("{name}{delta:+}"),
        })
    }

    /// Parses a signal as GNU's `timeout -s` and `kill -s` do, where `0`
    /// (also `EXIT`) means "no signal": `Ok(None)`.
    ///
    /// A name in any case with or without `SIG` (`term`, `SIGRTMIN+2`,
    /// `RTMAX-1`), or a number; a number above 128 counts as a shell status
    /// (`137` is `KILL`, as in `kill -l 137`). Surrounding spaces are not
    /// allowed, as in GNU.
    ///
    /// # Errors
    /// A name or number the kernel does not know.
    pub fn parse_or_none(input: &str) -> Result<Option<Self>, ParseSignalError> {
        let error = || ParseSignalError {
            input: input.to_owned(),
        };
        let number = if input.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
            if !input.bytes().all(|b| b.is_ascii_digit()) {
                return Err(error());
            }
            let number: i32 = input.parse().map_err(|_| error())?;
            // A shell status, as GNU 9.1 reads one (measured on every
            // number to 1100): 128+N is N, and from 256 on only the low
            // byte counts.
            match number {
                256.. => number & 0xff,
                128.. => number - 128,
                _ => number,
            }
        } else {
            let upper = input.to_ascii_uppercase();
            match by_name(&upper).or_else(|| upper.strip_prefix("SIG").and_then(by_name)) {
                Some(number) => number,
                None => return Err(error()),
            }
        };
        match number {
            0 => Ok(None),
            n => Self::from_number(n).map(Some).ok_or_else(error),
        }
    }
}

/// The number of an upper-case name without `SIG` (0 for `EXIT`).
fn by_name(name: &str) -> Option<i32> {
    if name == "EXIT" {
        return Some(0);
    }
    if let Some(&(_, number)) = TABLE.iter().chain(ALIASES).find(|&&(n, _)| n == name) {
        return Some(number);
    }
    let offset = |rest: &str| -> Option<i32> {
        if rest.is_empty() {
            return Some(0);
        }
        let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 3 {
            return None;
        }
        let value: i32 = digits.parse().ok()?;
        Some(if rest.starts_with('-') { -value } else { value })
    };
    let span = Signal::MAX - RTMIN;
    if let Some(rest) = name.strip_prefix("RTMIN") {
        let n = offset(rest)?;
        return (0..=span).contains(&n).then_some(RTMIN + n);
    }
    if let Some(rest) = name.strip_prefix("RTMAX") {
        let n = offset(rest)?;
        return (-span..=0).contains(&n).then_some(Signal::MAX + n);
    }
    None
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
///
/// ```
/// let error = "SIGNOPE".parse::<corral::Signal>().unwrap_err();
/// assert_eq!(error.input(), "SIGNOPE");
/// assert!(error.to_string().contains("give a name like TERM"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown signal {input:?}: give a name like TERM, SIGKILL, HUP or RTMIN+2, or a number \
     from 1 to 64"
)]
pub struct ParseSignalError {
    input: String,
}

impl ParseSignalError {
    /// The text that was not a signal.
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl FromStr for Signal {
    type Err = ParseSignalError;

    /// Parses `TERM`, `SIGTERM`, `sigterm`, `15`, `SIG32`, `RTMIN+2` or ` 15 `
    /// (surrounding spaces are ignored); `0` and `EXIT` are refused: they
    /// are no signal (see [`Signal::parse_or_none`]).
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let trimmed = input.trim();
        // `SIG32`, as a nameless signal is printed.
        let numbered = trimmed
            .get(..3)
            .filter(|sig| sig.eq_ignore_ascii_case("SIG"))
            .map(|_| &trimmed[3..])
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        match Self::parse_or_none(numbered.unwrap_or(trimmed)) {
            Ok(Some(signal)) => Ok(signal),
            _ => Err(ParseSignalError {
                input: input.to_owned(),
            }),
        }
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
            "EXIT",
            "65",
            "128",
            "RTMIN-1",
            "RTMAX+1",
            "RTMIN+31",
            "RTMIN+ 2",
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

    #[test]
    fn every_signal_the_kernel_knows_round_trips() {
        assert_eq!(Signal::from_number(0), None);
        assert_eq!(Signal::from_number(65), None);
        for number in 1..=Signal::MAX {
            let signal = Signal::from_number(number).expect("known");
            assert_eq!(signal.to_string().parse::<Signal>(), Ok(signal), "{number}");
            assert_eq!(signal.name().parse::<Signal>(), Ok(signal), "{number}");
            assert_eq!(number.to_string().parse::<Signal>(), Ok(signal));
        }
    }

    /// Names as GNU's `kill -l` (glibc) prints them.
    #[test]
    fn real_time_signals_are_named_as_gnu_does() {
        let name = |n| Signal::from_number(n).map(Signal::name);
        assert_eq!(name(29).as_deref(), Some("POLL"));
        assert_eq!(name(32).as_deref(), Some("32"));
        assert_eq!(Signal::from_number(33).and_then(Signal::gnu_name), None);
        assert_eq!(name(34).as_deref(), Some("RTMIN"));
        assert_eq!(name(36).as_deref(), Some("RTMIN+2"));
        assert_eq!(name(49).as_deref(), Some("RTMIN+15"));
        assert_eq!(name(50).as_deref(), Some("RTMAX-14"));
        assert_eq!(name(63).as_deref(), Some("RTMAX-1"));
        assert_eq!(name(64).as_deref(), Some("RTMAX"));
        let number = |s: &str| s.parse::<Signal>().map(Signal::number);
        assert_eq!(number("RTMIN+2"), Ok(36));
        assert_eq!(number("sigrtmax-1"), Ok(63));
        assert_eq!(number("RTMIN2"), Ok(36));
        assert_eq!(number("RTMAX+0"), Ok(64));
        assert_eq!(number("RTMIN+30"), Ok(64));
        assert_eq!(number("SIGIO"), Ok(29));
    }

    /// GNU's `-s 0` / `-s EXIT`: no signal; numbers above 128 are shell
    /// statuses; no spaces around.
    #[test]
    fn gnu_operands() {
        assert_eq!(Signal::parse_or_none("0"), Ok(None));
        assert_eq!(Signal::parse_or_none("sigexit"), Ok(None));
        assert_eq!(Signal::parse_or_none("137"), Ok(Some(Signal::KILL)));
        assert_eq!(Signal::parse_or_none("265"), Ok(Some(Signal::KILL)));
        assert_eq!(Signal::parse_or_none("128"), Ok(None));
        assert_eq!(Signal::parse_or_none("65536"), Ok(None));
        assert_eq!(
            Signal::parse_or_none("300").map(|s| s.map(Signal::number)),
            Ok(Some(44))
        );
        for refused in ["127", "200", "255", "384", "385", "1000", "2147483648"] {
            assert!(Signal::parse_or_none(refused).is_err(), "{refused}");
        }
        assert!(Signal::parse_or_none(" 15").is_err());
        assert!(Signal::parse_or_none("15x").is_err());
        assert!(Signal::parse_or_none("").is_err());
        assert!(Signal::parse_or_none("99999999999").is_err());
    }
}
