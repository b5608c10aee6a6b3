//! `corral::duration::parse`: every duration option of `corral` and
//! `corral mcp wrap`; and the CLI's GNU readings (`parse_gnu`,
//! `parse_lenient`), included from `crates/corral-cli/src/gnu_duration.rs`
//! (the CLI is a program, not a library).
//!
//! Invariants (from the module documentation):
//! - never panics ("no input makes the parser panic");
//! - a result is at most `MAX_SECS`;
//! - parsing is exact: the result written back as seconds with nine decimals,
//!   or as milliseconds with six, parses to the same value;
//! - a non-zero value never turns into zero ("no limit"): the result is zero
//!   exactly when the input has no non-zero digit;
//! - surrounding ASCII whitespace does not matter;
//! - `parse_gnu` and `parse_lenient` never panic, and `parse_lenient`
//!   agrees with `parse` wherever `parse` accepts.

#![no_main]

use std::time::Duration;

use corral::duration::{MAX_SECS, parse};
use gnu_duration::{parse_gnu, parse_lenient};
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/corral-cli/src/gnu_duration.rs"]
mod gnu_duration;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let result = parse(text);
    let _ = parse_gnu(text);
    if let Ok(duration) = result {
        assert_eq!(parse_lenient(text), Ok(duration), "{text:?}");
    }
    assert_eq!(
        parse(&format!(" \t{text}\n ")),
        result,
        "padding changed the result"
    );
    let Ok(duration) = result else {
        return;
    };
    assert!(
        duration <= Duration::from_secs(MAX_SECS),
        "{text:?} -> {duration:?}"
    );

    let as_secs = format!("{}.{:09}s", duration.as_secs(), duration.subsec_nanos());
    assert_eq!(
        parse(&as_secs),
        Ok(duration),
        "{text:?} -> {duration:?}, but {as_secs:?} does not"
    );
    let nanos = duration.as_nanos();
    let as_millis = format!("{}.{:06}ms", nanos / 1_000_000, nanos % 1_000_000);
    assert_eq!(
        parse(&as_millis),
        Ok(duration),
        "{text:?} -> {duration:?}, but {as_millis:?} does not"
    );

    let non_zero_digit = text.bytes().any(|b| (b'1'..=b'9').contains(&b));
    assert_eq!(
        duration.is_zero(),
        !non_zero_digit,
        "{text:?} -> {duration:?}"
    );
});
