//! Durations as GNU `timeout` 9.1 reads them, for the CLI's `corral run`
//! and `corral timeout`: C's `strtod` forms (exponents, hexadecimal floats,
//! `inf`) with one unit character, and the lenient reading that takes
//! those beside corral's own forms ([`corral::duration::parse`]).
//!
//! Only the CLI reads durations this way (a library host gives a
//! `Duration`); the fuzz target `fuzz/fuzz_targets/duration.rs` includes
//! this file by its path, so it uses nothing of the CLI.

use std::time::Duration;

use corral::duration::{DurationError, MAX_SECS, parse};

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

/// [`corral::duration::parse`], and where it refuses, [`parse_gnu`]: every form either
/// accepts (`1m30s`, `300ms`, `2.34e+5d`, `0x1p3`, `inf`). A value above
/// [`MAX_SECS`] is `Duration::MAX` ("no limit"), as in GNU `timeout`.
///
/// # Errors
/// The refusal of [`corral::duration::parse`], which names corral's forms, when neither
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
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
}
