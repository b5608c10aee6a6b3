//! Durations as `timeout(1)` spells them, plus milliseconds and compounds:
//! the parser behind every duration option of `corral` and `corral mcp wrap`.
//!
//! Accepted: a decimal number (fraction allowed: `1.5`, `.5`, `2.`) with an
//! optional unit `s` (the default), `m`, `h` or `d`, as GNU `timeout` takes
//! it; also `ms`, and compounds where every part has a unit (`1m30s`,
//! `1h2m3.5s`). `0` means "no limit" to the caller. Parsing is exact (integer
//! nanoseconds, no floats); a non-zero value below a nanosecond rounds up to
//! one, so it never turns into "no limit". Negative, `nan`, `inf`, exponents,
//! signs, inner spaces and values above [`MAX_SECS`] are rejected, and no
//! input makes the parser panic.
//!
//! ```
//! use std::time::Duration;
//! use corral::duration::{parse, DurationError};
//! assert_eq!(parse("1.5"), Ok(Duration::from_millis(1500)));
//! assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
//! assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
//! assert_eq!(parse("0"), Ok(Duration::ZERO)); // "no limit", for the caller to say
//! assert_eq!(parse("-1"), Err(DurationError::Negative));
//! ```

use std::{fmt, time::Duration};

/// The largest duration accepted, in seconds (`u32::MAX`, about 136 years):
/// far beyond any useful limit, and small enough that adding it to a clock
/// reading can never overflow.
pub const MAX_SECS: u64 = u32::MAX as u64;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Unit spellings and their length in nanoseconds.
const UNITS: &[(&str, u128)] = &[
    ("ms", 1_000_000),
    ("s", NANOS_PER_SEC),
    ("m", 60 * NANOS_PER_SEC),
    ("h", 3_600 * NANOS_PER_SEC),
    ("d", 86_400 * NANOS_PER_SEC),
];

/// Why a duration was rejected. The message does not repeat the input (clap
/// shows it) and says what would be accepted.
///
/// ```
/// use corral::duration::{parse, DurationError};
/// assert_eq!(parse("1m30"), Err(DurationError::MissingUnit));
/// assert_eq!(parse("5y"), Err(DurationError::UnknownUnit("y".into())));
/// assert_eq!(parse("inf"), Err(DurationError::NotFinite));
/// assert_eq!(parse("5y").unwrap_err().to_string(), "unknown unit \"y\": use s, m, h, d or ms");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing but whitespace.
    Empty,
    /// A leading `-`.
    Negative,
    /// `nan`, `inf`, `infinity` in any case.
    NotFinite,
    /// Not a number where one was expected.
    Invalid,
    /// A unit that is not `ms`, `s`, `m`, `h` or `d`.
    UnknownUnit(String),
    /// A compound with a part that has no unit (`1m30`).
    MissingUnit,
    /// More than [`MAX_SECS`].
    TooLarge,
}

const FORMS: &str = "a number with an optional unit s, m, h, d or ms (e.g. 10, 1.5m, 300ms, 1m30s)";

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty duration: give {FORMS}"),
            Self::Negative => write!(f, "negative durations are not allowed: give 0 or more"),
            Self::NotFinite => write!(f, "not a finite number: give {FORMS}"),
            Self::Invalid => write!(f, "not a duration: give {FORMS}"),
            Self::UnknownUnit(unit) => {
                write!(f, "unknown unit {unit:?}: use s, m, h, d or ms")
            }
            Self::MissingUnit => {
                write!(
                    f,
                    "every part of a compound duration needs a unit, e.g. 1m30s"
                )
            }
            Self::TooLarge => write!(f, "too large: the most is {MAX_SECS}s (about 136 years)"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration (see the module documentation).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(corral::duration::parse("2h"), Ok(Duration::from_secs(7200)));
/// assert_eq!(corral::duration::parse(".5d"), Ok(Duration::from_secs(43_200)));
/// assert!(corral::duration::parse("1 s").is_err()); // no inner spaces
/// ```
///
/// # Errors
/// A [`DurationError`] saying what is wrong.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let text = input.trim_matches(|c: char| c.is_ascii_whitespace());
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let lower = text.to_ascii_lowercase();
    if ["nan", "inf", "infinity"].contains(&lower.trim_start_matches('+')) {
        return Err(DurationError::NotFinite);
    }

    let mut rest = text;
    let mut total: u128 = 0;
    let mut parts = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        if number.is_empty() {
            return Err(DurationError::Invalid);
        }
        let unit_nanos = match unit {
            "" if parts == 0 && after.is_empty() => NANOS_PER_SEC,
            "" => return Err(DurationError::MissingUnit),
            _ => match UNITS.iter().find(|&&(name, _)| name == unit) {
                Some(&(_, nanos)) => nanos,
                None if unit.chars().all(|c| c.is_ascii_alphabetic()) => {
                    return Err(DurationError::UnknownUnit(unit.to_owned()));
                }
                None => return Err(DurationError::Invalid),
            },
        };
        let nanos = component(number, unit_nanos)?;
        total = total.checked_add(nanos).ok_or(DurationError::TooLarge)?;
        parts += 1;
        rest = after;
    }
    if total > u128::from(MAX_SECS) * NANOS_PER_SEC {
        return Err(DurationError::TooLarge);
    }
    let secs = u64::try_from(total / NANOS_PER_SEC).map_err(|_| DurationError::TooLarge)?;
    let nanos = u32::try_from(total % NANOS_PER_SEC).map_err(|_| DurationError::TooLarge)?;
    Ok(Duration::new(secs, nanos))
}

/// `number` (digits with at most one `.`, at least one digit) times
/// `unit_nanos`, in nanoseconds, rounded up.
fn component(number: &str, unit_nanos: u128) -> Result<u128, DurationError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(DurationError::Invalid);
    }
    // 18 fraction digits keep 10^18 * 8.64e13 (a day in ns) well inside u128.
    let (kept, dropped) = fraction.split_at(fraction.len().min(18));
    let mut mantissa: u128 = 0;
    for digit in whole.bytes().chain(kept.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(digit - b'0')))
            .ok_or(DurationError::TooLarge)?;
    }
    let scaled = mantissa
        .checked_mul(unit_nanos)
        .ok_or(DurationError::TooLarge)?;
    let scale = 10u128.pow(kept.len() as u32);
    let inexact = scaled % scale != 0 || dropped.bytes().any(|b| b != b'0');
    Ok(scaled / scale + u128::from(inexact))
}

/// Serialises a duration as fractional seconds.
pub(crate) fn secs<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(input: &str) -> Duration {
        parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"))
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn gnu_timeout_forms() {
        assert_eq!(ok("10"), Duration::from_secs(10));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("0.0s"), Duration::ZERO);
        assert_eq!(ok("1.5"), ms(1500));
        assert_eq!(ok(".5"), ms(500));
        assert_eq!(ok("2."), Duration::from_secs(2));
        assert_eq!(ok("3s"), Duration::from_secs(3));
        assert_eq!(ok("1.5m"), Duration::from_secs(90));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("0.5d"), Duration::from_secs(43_200));
        assert_eq!(ok(" 7 "), Duration::from_secs(7));
    }

    #[test]
    fn milliseconds_and_compounds() {
        assert_eq!(ok("300ms"), ms(300));
        assert_eq!(ok("1.5ms"), Duration::from_micros(1500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1h2m3.5s"), ms(3_723_500));
        assert_eq!(ok("1s500ms"), ms(1500));
        assert_eq!(ok("1d1h"), Duration::from_secs(90_000));
    }

    #[test]
    fn tiny_values_round_up_never_to_zero() {
        assert_eq!(ok("0.0000000001"), Duration::from_nanos(1));
        assert_eq!(ok("0.0000000000000000000000001s"), Duration::from_nanos(1));
        assert_eq!(ok("0.0000000015"), Duration::from_nanos(2));
        assert_eq!(ok("0.000000000000000000000000000"), Duration::ZERO);
    }

    #[test]
    fn limit_is_inclusive() {
        assert_eq!(ok(&MAX_SECS.to_string()), Duration::from_secs(MAX_SECS));
        assert_eq!(
            parse(&format!("{MAX_SECS}.1")),
            Err(DurationError::TooLarge)
        );
    }

    #[test]
    fn rejects_with_a_reason() {
        use DurationError::*;
        let cases: &[(&str, DurationError)] = &[
            ("", Empty),
            ("   ", Empty),
            ("-1", Negative),
            ("-0", Negative),
            ("-1s", Negative),
            ("nan", NotFinite),
            ("NaN", NotFinite),
            ("inf", NotFinite),
            ("+Infinity", NotFinite),
            ("infs", Invalid),
            ("abc", Invalid),
            ("ms", Invalid),
            ("5x", UnknownUnit("x".into())),
            ("5S", UnknownUnit("S".into())),
            ("5 s", Invalid),
            ("1e3", UnknownUnit("e".into())),
            ("+5", Invalid),
            ("0x10", UnknownUnit("x".into())),
            (".", Invalid),
            ("s", Invalid),
            ("1..2", Invalid),
            ("1.2.3", Invalid),
            ("1m30", MissingUnit),
            ("1s2", MissingUnit),
            ("1ms30", MissingUnit),
            ("50000d", TooLarge),
            ("4294967296", TooLarge),
            ("99999999999999999999999999999999999999999999", TooLarge),
            ("١٢", Invalid),
            ("５s", Invalid),
            ("1\0", Invalid),
            ("1s-1s", Invalid),
        ];
        for (input, expected) in cases {
            assert_eq!(parse(input).as_ref(), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn hostile_input_never_panics() {
        let long_digits = "9".repeat(100_000);
        let long_fraction = format!("0.{}1", "0".repeat(100_000));
        let many_parts = "1s".repeat(50_000);
        let inputs = [
            long_digits.as_str(),
            long_fraction.as_str(),
            many_parts.as_str(),
            "ms",
            "1mss",
            "1µs",
            "1\u{202e}s",
            "💣",
            "1h\u{0}",
            "....",
            "9.9.9s",
        ];
        for input in inputs {
            let _ = parse(input);
        }
        assert_eq!(ok(&long_fraction), Duration::from_nanos(1));
        assert_eq!(ok(&many_parts), Duration::from_secs(50_000));
        // Every byte prefix of a valid compound is handled.
        let valid = "1h2m3.25s400ms";
        for end in 0..=valid.len() {
            let _ = parse(&valid[..end]);
        }
    }

    #[test]
    fn messages_name_the_accepted_forms() {
        assert!(DurationError::Invalid.to_string().contains("1m30s"));
        // What 0 means is the option's to say (no limit for `--timeout`,
        // at once for a grace or a run's `timeout`), not the parser's.
        let negative = DurationError::Negative.to_string();
        assert!(negative.contains("give 0 or more"));
        assert!(!negative.contains("no limit"));
        assert!(
            DurationError::UnknownUnit("x".into())
                .to_string()
                .contains("ms")
        );
    }
}
