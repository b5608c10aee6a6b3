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

/// Parses a duration as GNU `timeout` 9.1 does: what C's `strtod` reads
/// (leading whitespace, a sign, decimals with an exponent such as
/// `2.34e+5`, hexadecimal floats such as `0x1p3`, `inf`, `infinity`), then
/// at most one unit character `s`, `m`, `h` or `d`, and nothing else.
///
/// GNU's saturation: a value above [`MAX_SECS`] (`inf` too) is
/// `Duration::MAX`, which every corral deadline treats as "no limit"; a
/// value that underflows to zero (`1e-10000`) is zero ("no limit" as well);
/// any other value below a nanosecond is one nanosecond. Negative values
/// (but `-0`), `nan` and trailing text are refused. Never panics.
///
/// # Errors
/// [`DurationError::Invalid`], [`DurationError::Negative`],
/// [`DurationError::NotFinite`] (`nan`) or [`DurationError::Empty`].
pub fn parse_gnu(input: &str) -> Result<Duration, DurationError> {
    let (value, used) = strtod(input);
    if used == 0 {
        return Err(if input.trim().is_empty() {
            DurationError::Empty
        } else {
            DurationError::Invalid
        });
    }
    if value.is_nan() {
        return Err(DurationError::NotFinite);
    }
    if value < 0.0 {
        return Err(DurationError::Negative);
    }
    let scale = match &input.as_bytes()[used..] {
        [] | [b's'] => 1.0,
        [b'm'] => 60.0,
        [b'h'] => 3_600.0,
        [b'd'] => 86_400.0,
        _ => return Err(DurationError::Invalid),
    };
    Ok(saturate(value * scale))
}

/// [`parse`], and where it refuses, [`parse_gnu`]: every form either
/// accepts (`1m30s`, `300ms`, `2.34e+5d`, `0x1p3`, `inf`). A value above
/// [`MAX_SECS`] is `Duration::MAX` ("no limit"), as in GNU `timeout`.
///
/// # Errors
/// The refusal of [`parse`], which names corral's forms, when neither
/// accepts.
pub fn parse_lenient(input: &str) -> Result<Duration, DurationError> {
    match parse(input) {
        Ok(duration) => Ok(duration),
        Err(DurationError::TooLarge) => Ok(Duration::MAX),
        Err(error) => parse_gnu(input).map_err(|_| error),
    }
}

/// Seconds as a duration: zero stays zero, a positive value below a
/// nanosecond is one, anything above [`MAX_SECS`] is `Duration::MAX`.
fn saturate(secs: f64) -> Duration {
    if secs <= 0.0 {
        return Duration::ZERO;
    }
    if secs > MAX_SECS as f64 {
        return Duration::MAX;
    }
    let duration = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
    duration.max(Duration::from_nanos(1))
}

/// What C's `strtod` reads at the start of `input` (in the C locale): the
/// value and how many bytes it used, `(0.0, 0)` if no number starts there.
fn strtod(input: &str) -> (f64, usize) {
    let bytes = input.as_bytes();
    let mut i = bytes
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(bytes.len());
    let negative = bytes.get(i) == Some(&b'-');
    if matches!(bytes.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let signed = |value: f64| if negative { -value } else { value };
    let rest = &bytes[i..];
    let starts = |word: &str| {
        rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
    };
    if starts("infinity") {
        return (signed(f64::INFINITY), i + 8);
    }
    if starts("inf") {
        return (signed(f64::INFINITY), i + 3);
    }
    if starts("nan") {
        let mut end = i + 3;
        if bytes.get(end) == Some(&b'(') {
            let inner = bytes[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if bytes.get(end + 1 + inner) == Some(&b')') {
                end += inner + 2;
            }
        }
        return (f64::NAN, end);
    }
    let hex_digit_at = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
    if starts("0x")
        && (hex_digit_at(i + 2) || (bytes.get(i + 2) == Some(&b'.') && hex_digit_at(i + 3)))
    {
        let (value, end) = hex_float(bytes, i + 2);
        return (signed(value), end);
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let whole = digits(i);
    let mut end = i + whole;
    let mut fraction = 0;
    if bytes.get(end) == Some(&b'.') {
        fraction = digits(end + 1);
        if whole + fraction > 0 {
            end += 1 + fraction;
        }
    }
    if whole + fraction == 0 {
        return (0.0, 0);
    }
    let mantissa = &input[i..end];
    let mut exponent: i64 = 0;
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign_len = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let count = digits(end + 1 + sign_len);
        if count > 0 {
            let text = &input[end + 1 + sign_len..end + 1 + sign_len + count];
            // Clamped: beyond ±99999 every value is zero or infinite anyway.
            exponent = text.parse::<i64>().unwrap_or(i64::MAX).min(99_999);
            if bytes[end + 1] == b'-' {
                exponent = -exponent;
            }
            end += 1 + sign_len + count;
        }
    }
    let value = format!("{mantissa}e{exponent}")
        .parse::<f64>()
        .unwrap_or(0.0);
    (signed(value), end)
}

/// A hexadecimal float's value after `0x`, from `start`: hex digits with an
/// optional `.`, then an optional binary exponent `p[+-]N`; and where it
/// ends.
fn hex_float(bytes: &[u8], start: usize) -> (f64, usize) {
    let mut mantissa: u64 = 0;
    let mut exponent: i64 = 0;
    let mut end = start;
    let mut seen_point = false;
    while let Some(&b) = bytes.get(end) {
        if b == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(digit) = char::from(b).to_digit(16) {
            if mantissa >> 60 == 0 {
                mantissa = mantissa * 16 + u64::from(digit);
                if seen_point {
                    exponent -= 4;
                }
            } else if !seen_point {
                // Digits past 64 bits only scale the value.
                exponent += 4;
            }
        } else {
            break;
        }
        end += 1;
    }
    if matches!(bytes.get(end), Some(b'p' | b'P')) {
        let sign_len = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let from = end + 1 + sign_len;
        let count = bytes[from.min(bytes.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if count > 0 {
            let mut power: i64 = 0;
            for &b in &bytes[from..from + count] {
                power = (power * 10 + i64::from(b - b'0')).min(99_999);
            }
            exponent += if bytes[end + 1] == b'-' {
                -power
            } else {
                power
            };
            end = from + count;
        }
    }
    if mantissa == 0 {
        return (0.0, end);
    }
    // In two halves, so a large mantissa with a small power does not
    // underflow to zero on the way.
    let exponent = i32::try_from(exponent.clamp(-5_000, 5_000)).unwrap_or(0);
    let half = exponent / 2;
    let value = mantissa as f64 * 2f64.powi(half) * 2f64.powi(exponent - half);
    (value, end)
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

    fn gnu(input: &str) -> Duration {
        parse_gnu(input).unwrap_or_else(|e| panic!("{input:?}: {e}"))
    }

    /// What GNU `timeout` 9.1 accepts, with its values.
    #[test]
    fn gnu_forms() {
        assert_eq!(gnu("10"), Duration::from_secs(10));
        assert_eq!(gnu("2.34e+5d"), Duration::MAX, "beyond 2^32 s");
        assert_eq!(gnu("2.34e+2d"), Duration::from_secs(20_217_600));
        assert_eq!(gnu("1.5e0s"), ms(1500));
        assert_eq!(gnu("0x1p3"), Duration::from_secs(8));
        assert_eq!(gnu("0x1p-1"), ms(500));
        assert_eq!(gnu("0x.8"), ms(500));
        assert_eq!(gnu("0X10m"), Duration::from_secs(960));
        assert_eq!(gnu("+1"), Duration::from_secs(1));
        assert_eq!(gnu(" \t1"), Duration::from_secs(1));
        assert_eq!(gnu("-0"), Duration::ZERO);
        assert_eq!(gnu(".5"), ms(500));
        assert_eq!(gnu("2."), Duration::from_secs(2));
        assert_eq!(gnu("1e-10000"), Duration::ZERO, "underflow: no limit");
        assert_eq!(gnu("1e-300"), Duration::from_nanos(1));
        assert_eq!(gnu("inf"), Duration::MAX);
        assert_eq!(gnu("INFINITYd"), Duration::MAX);
        assert_eq!(gnu("infs"), Duration::MAX);
        assert_eq!(gnu("1e400"), Duration::MAX);
        assert_eq!(gnu("4294967296"), Duration::MAX);
        assert_eq!(gnu("4294967295"), Duration::from_secs(MAX_SECS));
        assert_eq!(gnu("1e99999999999999999999999"), Duration::MAX);
        assert_eq!(gnu("0x1p99999999999999999999"), Duration::MAX);
        assert_eq!(gnu(&format!("0x{}", "f".repeat(40))), Duration::MAX);
    }

    #[test]
    fn gnu_refusals() {
        use DurationError::*;
        for (input, expected) in [
            ("", Empty),
            ("  ", Empty),
            ("x", Invalid),
            ("1ms", Invalid),
            ("1m30s", Invalid),
            ("1 ", Invalid),
            ("1e", Invalid),
            ("0x", Invalid),
            ("1x", Invalid),
            ("1S", Invalid),
            ("1s\0", Invalid),
            (".", Invalid),
            ("-1", Negative),
            ("-inf", Negative),
            ("nan", NotFinite),
            ("nan(123)", NotFinite),
            ("1µ", Invalid),
        ] {
            assert_eq!(parse_gnu(input), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn lenient_takes_both_and_saturates() {
        assert_eq!(parse_lenient("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_lenient("300ms"), Ok(ms(300)));
        assert_eq!(parse_lenient("0x1p3"), Ok(Duration::from_secs(8)));
        assert_eq!(parse_lenient("1e3"), Ok(Duration::from_secs(1000)));
        assert_eq!(parse_lenient("50000d"), Ok(Duration::MAX));
        assert_eq!(parse_lenient("inf"), Ok(Duration::MAX));
        assert_eq!(
            parse_lenient("5x"),
            Err(DurationError::UnknownUnit("x".into()))
        );
        assert_eq!(parse_lenient("nan"), Err(DurationError::NotFinite));
    }

    #[test]
    fn gnu_hostile_input_never_panics() {
        let long = "9".repeat(100_000);
        let long_hex = format!("0x{}", "f".repeat(100_000));
        let long_fraction = format!("0x.{}p+", "0".repeat(100_000));
        for input in [long.as_str(), long_hex.as_str(), long_fraction.as_str()] {
            let _ = parse_gnu(input);
        }
        let valid = "  -0x1.8p+3d";
        for end in 0..=valid.len() {
            let _ = parse_gnu(&valid[..end]);
        }
        for input in [
            "0x.",
            "0x.p1",
            "1e+",
            "1e-",
            "nan(",
            "+",
            "-",
            "\u{3000}1",
            "💣",
        ] {
            let _ = parse_gnu(input);
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
