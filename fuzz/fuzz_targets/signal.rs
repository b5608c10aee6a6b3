//! `str::parse::<corral::Signal>()`: `--signal` and friends.
//!
//! Invariants (from `corral::Signal`: "1 to `Signal::MAX`, every signal the
//! Linux kernel knows, so every value can be sent"):
//! - never panics (`parse_or_none` neither);
//! - a parsed signal has a number from 1 to 64 and a name, and `from_number`
//!   agrees;
//! - it round-trips through its printed form (`SIGTERM`), its bare name and
//!   its number; ASCII case does not matter;
//! - a rejection says "unknown signal";
//! - `from_number` accepts exactly 1 to 64.

#![no_main]

use corral::Signal;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let number = i32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        assert_eq!(
            Signal::from_number(number).is_some(),
            (1..=Signal::MAX).contains(&number),
            "{number}"
        );
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Some(signal)) = Signal::parse_or_none(text) {
        assert_eq!(Signal::from_number(signal.number()), Some(signal));
    }
    match text.parse::<Signal>() {
        Ok(signal) => {
            let number = signal.number();
            assert!((1..=Signal::MAX).contains(&number), "{text:?} -> {number}");
            assert_eq!(Signal::from_number(number), Some(signal));
            assert_eq!(signal.to_string(), format!("SIG{}", signal.name()));
            assert_eq!(signal.to_string().parse::<Signal>(), Ok(signal));
            assert_eq!(signal.name().parse::<Signal>(), Ok(signal));
            assert_eq!(number.to_string().parse::<Signal>(), Ok(signal));
            assert_eq!(text.to_ascii_lowercase().parse::<Signal>(), Ok(signal));
            assert_eq!(text.to_ascii_uppercase().parse::<Signal>(), Ok(signal));
        }
        Err(error) => {
            assert!(error.to_string().contains("unknown signal"), "{error}");
        }
    }
});
